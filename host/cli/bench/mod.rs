//! `timewarp bench`: times a measure on generated data (or a file's
//! series) where `timewarp distance` would compute it, with the GPU kernel
//! variant it would choose; other variants and the CPU when asked for.

mod case;
mod probe;
mod report;
mod request;
mod search;
mod timing;

use super::{print, progress_bar, ptx_build, ComputeArgs, Failure, MetricKind};
use case::{bench_case, CaseContext};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use indicatif::ProgressBar;
use report::{json, setup_lines, share_lines, table_line, Mode, Row};
use request::{cases, request, Request};
use std::time::Duration;
use timewarp::gpu::{self, Gpu};
use timewarp::{Dtw, GpuSet, Metric, Precision, SeriesSet, Variant};

pub const EXAMPLES: &str = "\
Examples:
  # Each measure at the default sizes, where and how `timewarp distance` computes it
  timewarp bench

  # DTW and TWED at length 1024, 512 series per batch, against the CPU, as JSON
  timewarp bench --metric dtw,twed --lengths 1024 --count 512 --with-cpu --json

  # cuTWED's single pair: one random N(0,1) pair of each length, f64
  timewarp bench --metric twed --data normal --queries 1 --count 1 --lengths 65536,262144

  # The same pair with every GPU variant, skipping those that would take over 20 s a run
  timewarp bench --metric twed --data normal --queries 1 --count 1 --lengths 65536 --variant all --limit-seconds 20

  # One pair of length 65536 with TWED: the anti-diagonal variants against tiled
  timewarp bench --metric twed --data normal --queries 1 --count 1 --lengths 65536 --variant diagonal,diagonal-launches,tiled

  # Cold start: a 4096 pair's first call (kernel load, allocations) against the later ones
  timewarp bench --metric twed --data normal --queries 1 --count 1 --lengths 4096 --repeats 20

  # cuTWED's batch: all pairs of a file's series (upper triangle, computed once)
  timewarp bench --metric twed --file tests/data/synthetic_control.csv

  # The Soft-DTW loss workload: 1024 pairs (x_k, y_k) of length 128, value and gradient
  timewarp bench --metric soft-dtw --paired --gradient --count 1024 --lengths 128 --precision f32

  # The same with both batches already on the GPU, as in a training loop (uploaded before the timed runs)
  timewarp bench --metric soft-dtw --paired --gradient --count 1024 --lengths 128 --precision f32 --resident

  # cuDTW++'s workload: one CBF query against 2^20 CBF series, f32, streamed from ordinary memory
  timewarp bench --metric dtw --queries 1 --count 1048576 --lengths 127 --precision f32 --device gpu

  # The same with the series in page-locked memory, copied to the GPU straight from there
  timewarp bench --metric dtw --queries 1 --count 1048576 --lengths 127 --precision f32 --device gpu --pinned-input

  # The same with the references already on the GPU (uploaded before the timed runs)
  timewarp bench --metric dtw --queries 1 --count 1048576 --lengths 127 --precision f32 --device gpu --resident

  # DTW with a Sakoe-Chiba band of 10% of the length (cells outside are not computed)
  timewarp bench --metric dtw --lengths 4096 --count 64 --precision f32 --band 0.1

  # DTW on GPUs 0 and 1 only (default: every usable GPU), with each GPU's share
  timewarp bench --metric dtw --lengths 512 --count 4096 --device gpu --gpus 0,1

Each case computes Q query series against N reference series (Q*N pairs of
length x length cells; Q = N unless --queries says otherwise), or every pair
of a file's series once (--file), from host arrays to host matrix, and
reports the median time of the timed runs. Cases whose series and results
cannot fit this machine's memory are refused before any work.

Where: --device auto (the default) is what `timewarp distance` picks, the
GPUs when there is a usable one, else the CPU; on a GPU, each case is timed
with the kernel variant the library chooses for its shapes (named in the
backend column, e.g. gpu:tiled). --variant names others to time instead,
or `all` for every variant that computes the workload: before timing one
that is not the default, probes (the case with shorter series, then fewer
queries, run twice) estimate one run's time from the cells, and a variant
over --limit-seconds is skipped with the estimate on stderr, as is one that
cannot take the case's shapes. --with-cpu times the CPU too (skipped in the
same way), and the speedup column is the CPU's time over the row's, both
measured in this run (no speedup column, and null in JSON, when the CPU alone
is timed); the CPU times only its first `timed` queries (about
a second's worth) and scales the time to all Q. Each case prints a line on
stderr when it starts.

GCUPS: cells per second / 1e9. first ms: the case's first call on that GPU
backend in this process (the warm-up), which pays what later calls do not
(loading the kernel's module, allocating the pipeline's buffers); after the
table, when a GPU was timed, the process's one-time setup is listed (the driver's start, each
GPU's context, each kernel's module load, streams, pinned buffers; with
--json on stderr). The table's first line, and every JSON record
(ptx_rustc, ptx_toolchain, ptx_target, ptx_hash), name the build of the GPU
kernels (see `timewarp info`); the table's header names the GPUs used, and
when several shared a row, lines under it give each one's pairs, the time
it spent computing them and its rate (JSON: gpu_shares).

mode: streamed, the GPU's times include every transfer (references and
queries in, distances out), from ordinary memory through pinned staging
buffers, or with --pinned-input from page-locked memory straight to the
GPU (SeriesSet::into_page_locked, done before the timed runs); resident
(--resident), the references were uploaded once before the timed runs,
which include the queries' upload, the kernels and the distances' copy
back; with --paired --resident both batches (x_k and y_k) were uploaded
once, and the timed runs (soft_dtw_pairs_resident,
soft_dtw_pairs_gradient_resident) include only the outputs' allocation,
the kernels and the results' copy back.";

/// Timed runs of one case stop early once they have taken this long.
const REPEAT_BUDGET: Duration = Duration::from_secs(2);
/// How long one timed CPU run should take (see [`time`]).
const CPU_RUN_TARGET: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DataKind {
    /// Cylinder-Bell-Funnel (Saito 1994), univariate
    Cbf,
    /// Every value from N(0, 1), univariate
    Normal,
}

/// One item of `--variant`: a variant, or `all`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum VariantItem {
    All,
    One(Variant),
}

/// `all` or one of [`Variant::ALL`]; anything else is clap's usage error,
/// which lists them.
fn variant_item_parser() -> impl TypedValueParser<Value = VariantItem> {
    let names = std::iter::once("all").chain(Variant::ALL.map(Variant::name));
    PossibleValuesParser::new(names).map(|name| match name.parse() {
        Ok(variant) => VariantItem::One(variant),
        Err(_) => VariantItem::All,
    })
}

#[derive(clap::Args)]
pub struct Args {
    /// Measures to time, repeatable or comma-separated [default: all three]
    #[arg(long, value_enum, value_delimiter = ',')]
    metric: Vec<MetricKind>,
    /// Series lengths, comma-separated
    #[arg(long, value_delimiter = ',', default_values_t = [128, 512])]
    lengths: Vec<usize>,
    /// References per case [default: 256 when a GPU is timed, 64 otherwise]
    #[arg(long, value_name = "N")]
    count: Option<usize>,
    /// Queries per case [default: as many as references]
    #[arg(long, value_name = "Q")]
    queries: Option<usize>,
    /// Every pair of this file's series instead of generated data (any
    /// input format; --lengths, --count and --queries do not apply)
    #[arg(long, value_name = "FILE")]
    file: Option<std::path::PathBuf>,
    /// Generated data (seeded: the same on every run)
    #[arg(long, value_enum, default_value_t = DataKind::Cbf)]
    data: DataKind,
    #[command(flatten)]
    compute: ComputeArgs,
    /// GPU kernel variants to time instead of the one the library chooses,
    /// comma-separated, or `all` for every one that computes the workload
    /// (those estimated over --limit-seconds skipped)
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = variant_item_parser())]
    variant: Vec<VariantItem>,
    /// With --variant all and --with-cpu: skip a backend that is not the
    /// default choice when one run of a case is estimated (by timed probes)
    /// to take longer than this many seconds
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    limit_seconds: f64,
    /// Time the CPU backend too, the reference of the speedup column (by
    /// default a GPU alone is timed when there is one)
    #[arg(long)]
    with_cpu: bool,
    /// Timed runs after one warm-up, of which the median is reported (fewer
    /// once a case's timed runs pass 2 s)
    #[arg(long, value_name = "R", default_value_t = 5)]
    repeats: usize,
    /// Upload the references to the GPU once, before the timed runs, and
    /// time the queries against them (default: every run streams both);
    /// with --paired, upload both batches once and time the resident
    /// paired functions
    #[arg(long)]
    resident: bool,
    /// Keep the batches in page-locked host memory (allocated before the
    /// timed runs), which the GPU copies straight from, instead of ordinary
    /// memory staged through pinned buffers
    #[arg(long)]
    pinned_input: bool,
    /// Print a JSON array instead of a table
    #[arg(long)]
    json: bool,
    /// Soft-DTW of paired batches instead of all pairs: query k against
    /// reference k (the training-loss workload; --queries does not apply)
    #[arg(long)]
    paired: bool,
    /// With --paired: the value and its gradient with respect to the queries
    /// (--variant: warp or stencil)
    #[arg(long, requires = "paired")]
    gradient: bool,
    /// A Sakoe-Chiba band of radius F times each case's length (DTW and
    /// Soft-DTW; GCUPS still count every cell of the full matrices)
    #[arg(long, value_name = "F")]
    band: Option<f64>,
    /// Subsequence search instead of distances (the UCR Suite's workload):
    /// a query of each --lengths searched in a random walk of --count
    /// points (default 10^6) with the band --band (a fraction of the query,
    /// default 0.05) on --device; prints the time, the points a second and
    /// the pruning rates
    #[arg(long)]
    search: bool,
}

/// Which GPU variants a run times.
#[derive(Clone, PartialEq, Eq)]
enum Variants {
    /// The one the library chooses for each case.
    Default,
    /// Those named, in [`Variant::ALL`]'s order.
    Named(Vec<Variant>),
    /// Every one that computes the workload.
    All,
}

impl Variants {
    fn of(items: &[VariantItem]) -> Variants {
        if items.is_empty() {
            return Variants::Default;
        }
        if items.contains(&VariantItem::All) {
            return Variants::All;
        }
        let named = Variant::ALL
            .into_iter()
            .filter(|v| items.contains(&VariantItem::One(*v)))
            .collect();
        Variants::Named(named)
    }
}

/// The variants that compute `mode` (`resident`: against a resident set),
/// in [`Variant::ALL`]'s order.
fn variants_for(mode: Mode, resident: bool) -> Vec<Variant> {
    Variant::ALL
        .into_iter()
        .filter(|v| match (mode, resident) {
            (Mode::Matrix, false) => true,
            (Mode::Matrix, true) => v.reads_resident_sets(),
            (Mode::Paired, _) => matches!(v, Variant::Stencil | Variant::Warp | Variant::Tiled),
            (Mode::PairedGradient, _) => matches!(v, Variant::Stencil | Variant::Warp),
        })
        .collect()
}

/// The measure with its default parameters and a band of `radius`.
fn with_band(metric: Metric, radius: Option<usize>) -> Metric {
    match (metric, radius) {
        (Metric::Dtw(_), Some(r)) => Dtw::with_band(r).into(),
        (Metric::SoftDtw(soft), Some(r)) => soft.with_band(r).into(),
        (metric, _) => metric,
    }
}

impl Plan {
    /// Whether the CPU is timed as the reference of a GPU: the speedup
    /// column compares them.
    fn compares(&self) -> bool {
        self.cpu && self.gpu.is_some()
    }
}

/// A case's data: queries against references, or a set against itself.
pub struct Case {
    queries: SeriesSet<f64>,
    references: Option<SeriesSet<f64>>,
    mode: Mode,
}

impl Case {
    /// Cells of all its pairs (each pair of a set against itself once).
    fn cells(&self) -> f64 {
        fn lengths(s: &SeriesSet<f64>) -> impl Iterator<Item = f64> + '_ {
            (0..s.len()).map(move |k| s.series_len(k) as f64)
        }
        match &self.references {
            Some(r) if self.mode != Mode::Matrix => lengths(&self.queries)
                .zip(lengths(r))
                .map(|(n, m)| n * m)
                .sum(),
            Some(r) => lengths(&self.queries).sum::<f64>() * lengths(r).sum::<f64>(),
            None => {
                let total: f64 = lengths(&self.queries).sum();
                let squares: f64 = lengths(&self.queries).map(|n| n * n).sum();
                (total * total + squares) / 2.0
            }
        }
    }

    /// Pairs of one run.
    fn pairs(&self) -> f64 {
        let q = self.queries.len() as f64;
        match (&self.references, self.mode) {
            (Some(r), Mode::Matrix) => q * r.len() as f64,
            (Some(_), _) => q,
            (None, _) => q * (q + 1.0) / 2.0,
        }
    }
}

/// What a run times, beside the cases: where, which variants, how.
struct Plan {
    /// The CPU is timed.
    cpu: bool,
    /// The CPU is timed though a GPU is the default (`--with-cpu`).
    cpu_is_extra: bool,
    /// The GPUs are timed, and which.
    gpu: Option<GpuSet>,
    variants: Variants,
    resident: bool,
    pinned_input: bool,
    repeats: usize,
    limit_seconds: f64,
    precision: Precision,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.search {
        return search::run(&args);
    }
    let request = request(&args)?;
    let cases = cases(&args, &request)?;
    let plan = &request.plan;
    // Opened here, so that no case's first call pays for it.
    let used = match plan.gpu {
        Some(gpus) => Gpu::select(gpus)?,
        None => Vec::new(),
    };
    let bar = progress_bar((request.metrics.len() * cases.len()) as u64);
    if !args.json {
        print(&(header(plan, &used) + &table_line(None, plan.compares())))?;
    }
    let rows = time_cases(&args, &request, &cases, &used, &bar)?;
    bar.finish_and_clear();
    // The setup of the GPUs timed; without one there is nothing to list
    // (a driver looked for and not found is no setup).
    let setup = match used.is_empty() {
        true => String::new(),
        false => setup_lines(&gpu::setup_steps()),
    };
    if args.json {
        print(&json(&rows))?;
        eprint!("{setup}");
        Ok(())
    } else {
        print(&setup)
    }
}

/// The table's first lines: the build, the GPUs used, the memory the
/// batches are in when it is not the default.
fn header(plan: &Plan, used: &[&'static Gpu]) -> String {
    let mut header = format!(
        "# timewarp {}, kernel build: {}\n",
        env!("CARGO_PKG_VERSION"),
        ptx_build()
    );
    if !used.is_empty() {
        let names: Vec<String> = used.iter().map(|g| g.name()).collect();
        header += &format!("# GPUs used: {}\n", names.join(", "));
    }
    if plan.pinned_input {
        header += "# batches in page-locked host memory (--pinned-input)\n";
    }
    header
}

/// The rows of every case with every measure, each shown (without
/// `--json`) as soon as it is measured.
fn time_cases(
    args: &Args,
    request: &Request,
    cases: &[(usize, Case)],
    used: &[&'static Gpu],
    bar: &ProgressBar,
) -> Result<Vec<Row>, Failure> {
    let plan = &request.plan;
    let mut rows = Vec::new();
    for (length, case) in cases {
        for &metric in &request.metrics {
            let band = args.band.map(|f| (f * *length as f64).round() as usize);
            let measure = with_band(metric.with_defaults()?, band);
            let show = |row: &Row| {
                if args.json {
                    return Ok(());
                }
                bar.suspend(|| print(&(table_line(Some(row), plan.compares()) + &share_lines(row))))
            };
            let context = CaseContext {
                case,
                metric,
                measure,
                length: *length,
                band,
                used,
                say: &|line: &str| bar.suspend(|| eprintln!("{line}")),
                show: &show,
            };
            rows.extend(match plan.precision {
                Precision::F32 => bench_case::<f32>(plan, &context)?,
                Precision::F64 => bench_case::<f64>(plan, &context)?,
            });
            bar.inc(1);
        }
    }
    Ok(rows)
}
