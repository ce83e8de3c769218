//! The command line: argument parsing, the options the commands share, and
//! the conventions they all follow. Every failure is one line on stderr,
//! `timewarp: <problem>`, with exit status 2 for bad input or usage and 1
//! for a failing GPU; nothing panics, and the output files (`--out`,
//! `--plot`) are written only when all of them can be.

mod align;
mod bench;
mod distance;
mod info;
mod knn;
mod matrix;
mod memory;
mod output;
mod plot;
mod search;
mod target;

pub use target::{describe, options_for, Target};

pub use output::{
    check_output_path, counted, print, print_csv, progress_bar, set_fraction_done, work_bar,
    Outputs,
};

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand, ValueEnum};
use ndarray::Array2;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;
use timewarp::formats::{self, Dataset};
use timewarp::gpu;
use timewarp::{
    Backend, Device, Dtw, Error, Float, GpuSet, Metric, Precision, SeriesSet, SoftDtw, Twed,
    Variant,
};

const INPUT_FORMATS: &str = "\
Input formats, by extension:
  .ts          sktime/aeon format (UCR/UEA archives): labels, multivariate, unequal lengths
  .tsv, .txt   UCR format: one univariate series per line, the class label first
  .csv         one univariate series per line, values only (no labels)
  .npy         float64 or float32 array, series x time or series x time x dims

Outputs (--out, --plot): written to temporary files beside them and renamed into
place only when all are written, so a run that fails leaves none; a symbolic
link is written where it points. A run too large for this machine's memory is
refused before any work (exit status 2). More in docs/cli.md.";

#[derive(Parser)]
#[command(
    name = "timewarp",
    version,
    about = "Elastic time-series distances (DTW, Soft-DTW, TWED) on NVIDIA GPUs or the CPU",
    after_help = INPUT_FORMATS,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The distance of every series of A (rows) to every series of B
    /// (columns), or of A to itself
    #[command(after_help = distance::EXAMPLES)]
    Distance(distance::Args),
    /// k-nearest-neighbour classification of a test set by a training set
    #[command(after_help = knn::EXAMPLES)]
    Knn(knn::Args),
    /// The alignment of two series: DTW's warping path, TWED's edit path
    /// or Soft-DTW's expected alignment, as CSV and as a plot
    #[command(after_help = align::EXAMPLES)]
    Align(align::Args),
    /// The best places of a query in a long series (DTW, UCR Suite cascade)
    #[command(after_help = search::EXAMPLES)]
    Search(search::Args),
    /// Version, GPUs and kernels found, CPU threads
    #[command(after_help = info::EXAMPLES)]
    Info(info::Args),
    /// Times the measures where and how `distance` computes them (or with
    /// the variants named), on generated data or a file's series
    #[command(after_help = bench::EXAMPLES)]
    Bench(bench::Args),
}

/// Parses the command line, runs the command and reports a failure.
pub fn main() -> ExitCode {
    // Usage errors and --help exit here, with clap's status (2 or 0).
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Distance(args) => distance::run(args),
        Command::Knn(args) => knn::run(args),
        Command::Align(args) => align::run(args),
        Command::Search(args) => search::run(args),
        Command::Info(args) => info::run(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // One line, whatever the message holds.
            let message = failure.message.replace(['\r', '\n'], " ");
            eprintln!("timewarp: {message}");
            ExitCode::from(failure.status)
        }
    }
}

/// Why a command failed, and its exit status.
#[derive(Debug)]
pub struct Failure {
    message: String,
    status: u8,
}

impl Failure {
    /// Bad input, parameters or usage: exit status 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            status: 2,
        }
    }

    /// The computation itself failed: exit status 1.
    pub fn runtime(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            status: 1,
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        match error {
            Error::GpuUnavailable(_) => Self::runtime(error.to_string()),
            _ if error.is_gpu_failure() => Self::runtime(error.to_string()),
            _ => Self::usage(error.to_string()),
        }
    }
}

/// The measures, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MetricKind {
    Dtw,
    SoftDtw,
    Twed,
}

impl MetricKind {
    pub const ALL: [MetricKind; 3] = [MetricKind::Dtw, MetricKind::SoftDtw, MetricKind::Twed];

    /// The command-line name: `dtw`, `soft-dtw` or `twed`.
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Dtw => "dtw",
            MetricKind::SoftDtw => "soft-dtw",
            MetricKind::Twed => "twed",
        }
    }

    /// The measure with its default parameters.
    pub fn with_defaults(self) -> Result<Metric, Failure> {
        MetricArgs::new(self).metric()
    }
}

/// The measure and its parameters (`distance` and `knn`).
#[derive(clap::Args)]
pub struct MetricArgs {
    /// The measure
    #[arg(long, value_enum)]
    metric: MetricKind,
    /// Soft-DTW smoothing, > 0 (soft-dtw only) [default: 1.0]
    #[arg(long, value_name = "G", allow_negative_numbers = true)]
    gamma: Option<f64>,
    /// TWED stiffness, >= 0 (twed only) [default: 0.001]
    #[arg(long, value_name = "NU", allow_negative_numbers = true)]
    nu: Option<f64>,
    /// TWED deletion penalty, >= 0 (twed only) [default: 1.0]
    #[arg(long, value_name = "L", allow_negative_numbers = true)]
    lambda: Option<f64>,
    /// TWED: the Lp norm between samples, >= 1 (twed only) [default: 2]
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    degree: Option<f64>,
    /// Sakoe-Chiba band radius in samples, >= 0 (dtw and soft-dtw) [default: no band]
    #[arg(long, value_name = "W", allow_negative_numbers = true, value_parser = band_radius)]
    band: Option<usize>,
}

/// A band radius: a whole number of samples, >= 0 (a negative one gets this
/// message, not clap's hint to write `-- -3`).
fn band_radius(text: &str) -> Result<usize, String> {
    match text.trim().parse::<i64>() {
        Ok(radius) if radius >= 0 => Ok(radius as usize),
        Ok(radius) => Err(format!("the band radius must be >= 0, not {radius}")),
        Err(_) => Err(format!("{text:?} is not a whole number of samples")),
    }
}

impl MetricArgs {
    fn new(metric: MetricKind) -> Self {
        Self {
            metric,
            gamma: None,
            nu: None,
            lambda: None,
            degree: None,
            band: None,
        }
    }

    /// The measure; a parameter of another measure is an error rather than
    /// silently ignored, and values out of range are the library's errors.
    pub fn metric(&self) -> Result<Metric, Failure> {
        use MetricKind::{Dtw as D, SoftDtw as S, Twed as T};
        let parameters: [(&str, bool, &[MetricKind]); 5] = [
            ("gamma", self.gamma.is_some(), &[S]),
            ("nu", self.nu.is_some(), &[T]),
            ("lambda", self.lambda.is_some(), &[T]),
            ("degree", self.degree.is_some(), &[T]),
            ("band", self.band.is_some(), &[D, S]),
        ];
        for (flag, given, owners) in parameters {
            if given && !owners.contains(&self.metric) {
                let names: Vec<_> = owners.iter().map(|owner| owner.name()).collect();
                return Err(Failure::usage(format!(
                    "--{flag} applies only to --metric {}, not {}",
                    names.join(" or "),
                    self.metric.name()
                )));
            }
        }
        Ok(match self.metric {
            MetricKind::Dtw => self.band.map_or_else(Dtw::new, Dtw::with_band).into(),
            MetricKind::SoftDtw => {
                let soft = SoftDtw::new(self.gamma.unwrap_or(1.0))?;
                self.band
                    .map_or(soft, |radius| soft.with_band(radius))
                    .into()
            }
            MetricKind::Twed => {
                let defaults = Twed::default();
                Twed::new(
                    self.nu.unwrap_or(defaults.nu()),
                    self.lambda.unwrap_or(defaults.lambda()),
                    self.degree.unwrap_or(defaults.degree()),
                )?
                .into()
            }
        })
    }
}

/// Where and in which precision to compute (every command that computes).
#[derive(clap::Args)]
pub struct ComputeArgs {
    /// Where to compute: gpu, the GPUs of --gpus; auto, the same when they
    /// can be used, else the CPU; cpu
    ///
    /// With gpu, a GPU of --gpus that is missing or unusable (for all: no
    /// usable GPU) is an error, exit status 1; auto computes on the CPU
    /// instead, with a warning on stderr saying why.
    #[arg(long, default_value = "auto", value_parser = device_parser())]
    device: Device,
    /// Floating-point precision of the computation
    #[arg(long, default_value = "f64", value_parser = precision_parser())]
    precision: Precision,
    /// The GPUs to compute on: all (every usable one) or ordinals, e.g. 0,1
    /// (--device says what happens when they cannot be used) [default: all]
    #[arg(long, value_name = "LIST", value_parser = target::gpus_parser)]
    gpus: Option<GpuSet>,
}

/// `--variant` of `distance` and `knn`.
#[derive(clap::Args)]
pub struct VariantArg {
    /// The GPU kernel variant [default: chosen from the shapes of the data]
    #[arg(long, value_name = "NAME", value_parser = variant_parser())]
    variant: Option<Variant>,
}

impl VariantArg {
    /// The variant for computing on `device`: it names a GPU kernel, so
    /// with `--device cpu` it is a usage error (with `auto` and no GPU the
    /// CPU fallback ignores it).
    pub fn for_device(&self, device: Device) -> Result<Option<Variant>, Failure> {
        check_variants_apply(self.variant.is_some(), device)?;
        Ok(self.variant)
    }
}

/// A usage error when `--variant` was given with `--device cpu`.
pub fn check_variants_apply(given: bool, device: Device) -> Result<(), Failure> {
    if given && device == Device::Cpu {
        return Err(Failure::usage(
            "--variant selects a GPU kernel; it does not apply to --device cpu",
        ));
    }
    Ok(())
}

/// One of [`Variant::ALL`]; anything else is clap's usage error, which
/// lists them.
pub fn variant_parser() -> impl TypedValueParser<Value = Variant> {
    PossibleValuesParser::new(Variant::ALL.map(Variant::name))
        .map(|name| name.parse().unwrap_or(Variant::Warp))
}

fn device_parser() -> impl TypedValueParser<Value = Device> {
    PossibleValuesParser::new(["auto", "cpu", "gpu"]).map(|name| match name.as_str() {
        "cpu" => Device::Cpu,
        "gpu" => Device::Gpu,
        _ => Device::Auto,
    })
}

fn precision_parser() -> impl TypedValueParser<Value = Precision> {
    PossibleValuesParser::new(["f32", "f64"]).map(|name| match name.as_str() {
        "f32" => Precision::F32,
        _ => Precision::F64,
    })
}

impl ComputeArgs {
    /// Where `--device` and `--gpus` compute here ([`resolve`]), decided
    /// before any work.
    pub fn backend(&self) -> Result<Target, Failure> {
        resolve(self.device, self.gpus()?)
    }

    /// The GPUs `--gpus` names (default: all); a usage error with
    /// `--device cpu`.
    pub fn gpus(&self) -> Result<GpuSet, Failure> {
        if self.gpus.is_some() && self.device == Device::Cpu {
            return Err(Failure::usage(
                "--gpus selects GPUs; it does not apply to --device cpu",
            ));
        }
        Ok(self.gpus.unwrap_or_default())
    }

    /// Bytes of one value in the precision: 4 or 8.
    pub fn precision_bytes(&self) -> usize {
        match self.precision {
            Precision::F32 => size_of::<f32>(),
            Precision::F64 => size_of::<f64>(),
        }
    }

    /// `f32` or `f64`.
    pub fn precision_name(&self) -> &'static str {
        match self.precision {
            Precision::F32 => f32::NAME,
            Precision::F64 => f64::NAME,
        }
    }
}

/// Where to compute, one rule for every command and every `--gpus`: `cpu`
/// is the CPU; `gpu` is the GPUs of `gpus`, and a failure when one listed
/// (for `all`: every one) is missing or unusable; `auto` is the same GPUs
/// when they can be used, else the CPU, with one line on stderr saying why.
pub fn resolve(device: Device, gpus: GpuSet) -> Result<Target, Failure> {
    if device == Device::Cpu {
        return Ok(Target::CPU);
    }
    let why_not = match gpu::kernels_build_error() {
        Some(reason) => kernels_missing(reason),
        None => match Backend::resolve_on(Device::Gpu, gpus) {
            Ok(backend) => return Ok(Target { backend, gpus }),
            Err(error) if device == Device::Gpu => return Err(error.into()),
            Err(error) => format!("no usable GPU ({})", gpu_unavailable_reason(error)),
        },
    };
    if device == Device::Gpu {
        return Err(Failure::runtime(format!("no usable GPU: {why_not}")));
    }
    eprintln!("timewarp: {why_not}; computing on the CPU");
    Ok(Target::CPU)
}

/// One line: this build has no GPU kernels, and why. `reason` is the build's
/// (its first line says what went wrong; `timewarp info` prints it all).
pub fn kernels_missing(reason: &str) -> String {
    let why = reason.lines().map(str::trim).find(|l| !l.is_empty());
    format!(
        "this build has no GPU kernels ({}); `timewarp info` says more",
        why.unwrap_or("no reason recorded")
    )
}

/// The build of the embedded PTX in one line, for `info` and `bench`: the
/// compiler and its pinned toolchain, the target, the hash of the PTX.
pub fn ptx_build() -> String {
    match (gpu::ptx_rustc_version(), gpu::ptx_hash()) {
        (Some(rustc), Some(hash)) => format!(
            "{rustc} [{}], target {}, PTX hash {hash}",
            gpu::ptx_toolchain().unwrap_or("toolchain unknown"),
            gpu::ptx_target()
        ),
        _ => "none (CPU-only build)".into(),
    }
}

/// The reason inside an `Error::GpuUnavailable`, without its prefix.
pub fn gpu_unavailable_reason(error: Error) -> String {
    match error {
        Error::GpuUnavailable(reason) => reason,
        other => other.to_string(),
    }
}

/// A data file, read.
pub struct Input {
    pub path: PathBuf,
    pub data: Dataset,
}

impl Input {
    pub fn load(path: &Path) -> Result<Input, Failure> {
        Ok(Input {
            path: path.to_path_buf(),
            data: formats::read_dataset(path)?,
        })
    }

    /// The series in precision `T`; problems name the file.
    pub fn series<T: Float>(&self) -> Result<SeriesSet<T>, Failure> {
        self.data
            .to_series_set()
            .map_err(|e| Failure::usage(format!("{}: {e}", self.path.display())))
    }

    /// The class labels, which `.csv` and `.npy` files lack.
    pub fn labels(&self) -> Result<&[String], Failure> {
        self.data.labels.as_deref().ok_or_else(|| {
            Failure::usage(format!(
                "{}: no class labels (knn needs a .ts file with labels, or .tsv/.txt)",
                self.path.display()
            ))
        })
    }

    /// An error unless `other`'s samples have as many dimensions as ours.
    pub fn check_same_dims(&self, other: &Input) -> Result<(), Failure> {
        let (ours, theirs) = (self.data.dims(), other.data.dims());
        if ours == theirs {
            return Ok(());
        }
        Err(Failure::usage(format!(
            "{}: {} per sample, but {} has {ours}",
            other.path.display(),
            counted(theirs, "dimension", "dimensions"),
            self.path.display()
        )))
    }
}

/// The matrix of `a`'s series (rows) against `b`'s (or `a`'s own) on
/// `backend` (with GPU kernel `variant`, or the default one), with its
/// timing on stderr.
pub fn compute_matrix<T: Float>(
    a: &Input,
    b: Option<&Input>,
    metric: Metric,
    target: Target,
    variant: Option<Variant>,
) -> Result<Array2<T>, Failure> {
    let a_set = a.series::<T>()?;
    let b_set = b.map(Input::series::<T>).transpose()?;
    let start = Instant::now();
    let matrix = matrix::compute(&a_set, b_set.as_ref(), metric, target, variant)?;
    let pairs = match b_set {
        Some(_) => matrix.len(),
        None => a_set.len() * (a_set.len() + 1) / 2,
    };
    let variant = match (target.backend, variant) {
        (Backend::Gpu(_), Some(name)) => format!(", {name}"),
        _ => String::new(),
    };
    eprintln!(
        "computed {} in {} ms on {} ({}{variant})",
        counted(pairs, "distance", "distances"),
        three_significant_digits(start.elapsed().as_secs_f64() * 1e3),
        describe(target),
        T::NAME
    );
    Ok(matrix)
}

/// `value` (>= 0) with three significant digits: `0.0123`, `1.23`,
/// `12.3`, `123`, `1235` (no exponent: whole numbers keep every digit).
pub fn three_significant_digits(value: f64) -> String {
    if value.is_nan() || value <= 0.0 || value.is_infinite() {
        return format!("{value}");
    }
    // Digits after the point that leave three significant ones, decided
    // on the rounded value (9.996 is 10.0, not 10.00).
    let mut decimals = (2 - value.log10().floor() as i64).max(0);
    let rounded: f64 = format!("{value:.*}", decimals as usize)
        .parse()
        .unwrap_or(value);
    if rounded > 0.0 {
        decimals = (2 - rounded.log10().floor() as i64).max(0);
    }
    format!("{value:.*}", decimals as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_missing_is_one_line_with_the_first_line_of_the_reason() {
        let reason = "the pinned kernel toolchain nightly-2026-05-20 is not installed, and \
                      `rustup toolchain install` failed: error: could not download\n\
                      error: details\nmore details";
        let line = kernels_missing(reason);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            line.starts_with("this build has no GPU kernels ("),
            "{line}"
        );
        assert!(
            line.contains("nightly-2026-05-20 is not installed"),
            "{line}"
        );
        assert!(!line.contains("more details"), "{line}");
        assert!(kernels_missing("").contains("no reason recorded"));
        assert!(kernels_missing("\n  \nwhy").contains("(why)"));
    }

    #[test]
    fn a_cpu_only_build_says_so_for_auto_and_gpu() {
        let Some(reason) = gpu::kernels_build_error() else {
            return; // a build with kernels: nothing to check here
        };
        for gpus in [GpuSet::all(), "0,1".parse().unwrap()] {
            let auto = resolve(Device::Auto, gpus).unwrap();
            assert!(!auto.is_gpu());
            let failure = resolve(Device::Gpu, gpus).err().unwrap();
            assert_eq!(failure.status, 1);
            assert!(failure.message.contains(&kernels_missing(reason)));
        }
    }

    #[test]
    fn timings_have_three_significant_digits() {
        assert_eq!(three_significant_digits(0.012345), "0.0123");
        assert_eq!(three_significant_digits(0.5), "0.500");
        assert_eq!(three_significant_digits(1.0), "1.00");
        assert_eq!(three_significant_digits(1.2345), "1.23");
        assert_eq!(three_significant_digits(12.345), "12.3");
        assert_eq!(three_significant_digits(123.45), "123");
        assert_eq!(three_significant_digits(4321.0), "4321");
        // Rounding up to the next power of ten keeps three digits.
        assert_eq!(three_significant_digits(9.996), "10.0");
        assert_eq!(three_significant_digits(0.99996), "1.00");
        assert_eq!(three_significant_digits(0.0), "0");
    }
}
