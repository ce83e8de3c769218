//! `timewarp bench`: times each measure on each backend and GPU kernel
//! variant on generated data, against the CPU measured in the same run.

mod report;

use super::{
    check_variants_apply, print, progress_bar, ptx_build, resolve_backend, variant_parser,
    ComputeArgs, Failure, MetricKind,
};
use report::{json, median, table_line, Mode, Row, Timing};
use std::time::{Duration, Instant};
use timewarp::data::{cbf, random_normal};
use timewarp::formats;
use timewarp::gpu::{self, Gpu};
use timewarp::{
    distance_matrix, distance_matrix_resident, soft_dtw_pairs, soft_dtw_pairs_gradient,
    soft_dtw_pairs_gradient_resident, soft_dtw_pairs_resident, upload, ComputeOptions, Device, Dtw,
    Float, GpuSet, Metric, Precision, SeriesSet, Variant,
};

pub const EXAMPLES: &str = "\
Examples:
  # Every measure and backend at the default sizes
  timewarp bench

  # DTW and TWED at length 1024, 512 series per batch, GPU variants only, as JSON
  timewarp bench --metric dtw,twed --lengths 1024 --count 512 --device gpu --json

  # cuTWED's single pair: one random N(0,1) pair of each length, f64
  timewarp bench --metric twed --data normal --queries 1 --count 1 --lengths 65536,262144 --device gpu

  # cuTWED's batch: all pairs of a file's series (upper triangle, computed once)
  timewarp bench --metric twed --file tests/data/synthetic_control.csv --device gpu

  # One pair of length 65536 with TWED: the anti-diagonal variants against tiled
  timewarp bench --metric twed --data normal --queries 1 --count 1 --lengths 65536 --device gpu --variant diagonal,diagonal-launches,tiled

  # The Soft-DTW loss workload: 1024 pairs (x_k, y_k) of length 128, value and gradient
  timewarp bench --metric soft-dtw --paired --gradient --count 1024 --lengths 128 --precision f32 --device gpu

  # The same with both batches already on the GPU, as in a training loop (uploaded before the timed runs)
  timewarp bench --metric soft-dtw --paired --gradient --count 1024 --lengths 128 --precision f32 --device gpu --resident

  # cuDTW++'s workload: one CBF query against 2^20 CBF series, f32
  timewarp bench --metric dtw --queries 1 --count 1048576 --lengths 127 --precision f32 --device gpu

  # DTW with a Sakoe-Chiba band of 10% of the length (cells outside are not computed)
  timewarp bench --metric dtw --lengths 4096 --count 64 --precision f32 --device gpu --band 0.1

  # The same with the references already on the GPU (uploaded before the timed runs)
  timewarp bench --metric dtw --queries 1 --count 1048576 --lengths 127 --precision f32 --device gpu --resident

  # DTW on GPUs 0 and 1 only (default: every usable GPU), with each GPU's share
  timewarp bench --metric dtw --lengths 512 --count 4096 --device gpu --gpus 0,1

Each case computes Q query series against N reference series (Q*N pairs of
length x length cells; Q = N unless --queries says otherwise), or every pair
of a file's series once (--file), from host arrays to host matrix, and
reports the median time of the timed runs. The CPU times only its first
`timed` queries (about a second's worth) and scales the time to all Q.
GCUPS: cells per second / 1e9. speedup: the CPU's time over the backend's,
both measured in this run. The table's first line, and every JSON record
(ptx_rustc, ptx_toolchain, ptx_target, ptx_hash), name the build of the GPU
kernels (see `timewarp info`); the table's header names the GPUs used, and
with several, its last lines give each GPU's share of the pairs the pair
kernels computed, which is its share of the throughput. Without --variant every GPU variant is timed
but those that compute a batch pair after pair (tiled, tiled-launches,
diagonal, diagonal-launches: name them to time them), and local only up to
length 1024 (its rows are a fixed array). mode: streamed, the GPU's times
include every transfer (references and queries in, distances out); resident
(--resident), the references were uploaded once before the timed runs, which
include the queries' upload, the kernels and the distances' copy back; with
--paired --resident both batches (x_k and y_k) were uploaded once, and the
timed runs (soft_dtw_pairs_resident, soft_dtw_pairs_gradient_resident)
include only the outputs' allocation, the kernels and the results' copy
back.";

/// Whether a GPU variant is timed only when `--variant` names it: those that
/// compute a batch pair after pair, which would dominate a default run.
fn only_when_named(variant: Variant) -> bool {
    variant.is_pair_by_pair()
}

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
    /// GPU kernel variants to time, comma-separated [default: all but the
    /// pair-after-pair ones: tiled, tiled-launches, diagonal, diagonal-launches]
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = variant_parser())]
    variant: Vec<Variant>,
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
    /// Print a JSON array instead of a table
    #[arg(long)]
    json: bool,
    /// Soft-DTW of paired batches instead of all pairs: query k against
    /// reference k (the training-loss workload; --queries does not apply)
    #[arg(long)]
    paired: bool,
    /// With --paired: the value and its gradient with respect to the queries
    #[arg(long, requires = "paired")]
    gradient: bool,
    /// A Sakoe-Chiba band of radius F times each case's length (DTW and
    /// Soft-DTW; GCUPS still count every cell of the full matrices)
    #[arg(long, value_name = "F")]
    band: Option<f64>,
}

/// The measure with its default parameters and a band of `radius`.
fn with_band(metric: Metric, radius: Option<usize>) -> Metric {
    match (metric, radius) {
        (Metric::Dtw(_), Some(r)) => Dtw::with_band(r).into(),
        (Metric::SoftDtw(soft), Some(r)) => soft.with_band(r).into(),
        (metric, _) => metric,
    }
}

/// A case's data: queries against references, or a set against itself.
struct Case {
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
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.lengths.contains(&0) || args.count == Some(0) || args.repeats == 0 {
        return Err(Failure::usage(
            "--lengths, --count and --repeats must be at least 1",
        ));
    }
    let metrics = if args.metric.is_empty() {
        MetricKind::ALL.to_vec()
    } else {
        args.metric.clone()
    };
    check_variants_apply(!args.variant.is_empty(), args.compute.device)?;
    let mode = match (args.paired, args.gradient) {
        (false, _) => Mode::Matrix,
        (true, false) => Mode::Paired,
        (true, true) => Mode::PairedGradient,
    };
    if mode != Mode::Matrix
        && (metrics.iter().any(|&m| m != MetricKind::SoftDtw) || args.file.is_some())
    {
        return Err(Failure::usage(
            "--paired times Soft-DTW on generated data: use --metric soft-dtw and no --file",
        ));
    }
    // Paired batches run on the variants that compute them.
    let variants: &[Variant] = match (mode, args.variant.is_empty()) {
        (Mode::Matrix, _) | (_, false) => &args.variant,
        _ => &[Variant::Warp, Variant::Stencil],
    };
    let gpus = args.compute.gpus()?;
    let backends = backends(args.compute.device, gpus, variants)?;
    let used = gpus_used(&backends, gpus);
    let pairs_before: Vec<u64> = used.iter().map(|g| g.pairs_computed()).collect();
    let timing_gpu = backends.iter().any(|(name, _)| name != "cpu");
    if args.resident && args.file.is_some() {
        return Err(Failure::usage(
            "--resident times queries against references; --file times a set against itself",
        ));
    }
    if args.resident && !timing_gpu {
        return Err(Failure::usage(
            "--resident keeps the references on a GPU: it needs --device gpu, or auto with a usable GPU",
        ));
    }
    let count = args.count.unwrap_or(if timing_gpu { 256 } else { 64 });
    let queries = if mode == Mode::Matrix {
        args.queries.unwrap_or(count)
    } else {
        count
    };
    if queries == 0 {
        return Err(Failure::usage("--queries must be at least 1"));
    }
    if let Some(fraction) = args.band {
        if !(fraction >= 0.0 && fraction.is_finite()) {
            return Err(Failure::usage("--band must be a finite fraction >= 0"));
        }
        if metrics.contains(&MetricKind::Twed) {
            return Err(Failure::usage(
                "--band applies to --metric dtw and soft-dtw (TWED has no band)",
            ));
        }
    }
    let precision = args.compute.precision_name();
    let cases: Vec<(usize, Case)> = match &args.file {
        Some(path) => {
            let set = formats::read_dataset(path)?.to_series_set::<f64>()?;
            eprintln!(
                "bench: every pair of the {} series of {} once, {precision}, median of up to {} after a warm-up",
                set.len(),
                path.display(),
                super::counted(args.repeats, "run", "runs")
            );
            vec![(
                set.max_len(),
                Case {
                    queries: set,
                    references: None,
                    mode,
                },
            )]
        }
        None => {
            eprintln!(
                "bench: {} data, {} x {} per case, {precision}, \
                 median of up to {} after a warm-up; the CPU times about a second's worth of queries and scales up",
                if args.data == DataKind::Cbf { "CBF" } else { "normal" },
                super::counted(queries, "query", "queries"),
                super::counted(count, "reference", "references"),
                super::counted(args.repeats, "run", "runs")
            );
            args.lengths
                .iter()
                .map(|&length| {
                    let (q, r) = match args.data {
                        DataKind::Cbf => (cbf(queries, length, 1).0, cbf(count, length, 2).0),
                        DataKind::Normal => (
                            random_normal(queries, length, 1, 1),
                            random_normal(count, length, 1, 2),
                        ),
                    };
                    (
                        length,
                        Case {
                            queries: q,
                            references: Some(r),
                            mode,
                        },
                    )
                })
                .collect()
        }
    };
    let bar = progress_bar((metrics.len() * cases.len() * backends.len()) as u64);
    let mut rows = Vec::new();
    // The table grows a row at a time, so a long run shows what it has.
    if !args.json {
        print(&format!(
            "# timewarp {}, kernel build: {}\n",
            env!("CARGO_PKG_VERSION"),
            ptx_build()
        ))?;
        if !used.is_empty() {
            let names: Vec<String> = used.iter().map(|g| g.name()).collect();
            print(&format!("# GPUs used: {}\n", names.join(", ")))?;
        }
        print(&table_line(None))?;
    }
    for (length, case) in &cases {
        for &metric in &metrics {
            let mut cpu_seconds = None;
            for (backend, options) in &backends {
                let local_too_long =
                    options.gpu_variant == Some(Variant::Local) && *length > gpu::local_max_len();
                if local_too_long && args.variant.is_empty() {
                    bar.inc(1);
                    continue;
                }
                let resident = args.resident && options.device == Device::Gpu;
                let band = args.band.map(|f| (f * *length as f64).round() as usize);
                let measure = with_band(metric.with_defaults()?, band);
                let timing = match args.compute.precision {
                    Precision::F32 => time::<f32>(case, measure, options, resident, args.repeats)?,
                    Precision::F64 => time::<f64>(case, measure, options, resident, args.repeats)?,
                };
                if backend == "cpu" {
                    cpu_seconds = Some(timing.seconds);
                }
                rows.push(Row {
                    metric,
                    workload: mode,
                    length: *length,
                    queries: case.queries.len(),
                    count: case
                        .references
                        .as_ref()
                        .map_or(case.queries.len(), |r| r.len()),
                    cells: case.cells(),
                    precision,
                    backend: backend.clone(),
                    mode: match (options.device, resident) {
                        (Device::Gpu, true) => Some("resident"),
                        (Device::Gpu, false) => Some("streamed"),
                        _ => None,
                    },
                    band,
                    speedup_vs_cpu: cpu_seconds.map(|cpu| cpu / timing.seconds),
                    timing,
                });
                if !args.json {
                    bar.suspend(|| print(&table_line(rows.last())))?;
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    if args.json {
        print(&json(&rows))?;
    }
    report_gpu_shares(&used, &pairs_before, args.json)
}

/// The GPUs the GPU backends compute on (none without one).
fn gpus_used(backends: &[(String, ComputeOptions)], gpus: GpuSet) -> Vec<&'static Gpu> {
    if backends
        .iter()
        .all(|(_, options)| options.device != Device::Gpu)
    {
        return Vec::new();
    }
    Gpu::select(gpus).unwrap_or_default()
}

/// Each GPU's share of the pairs the pair kernels computed in the run, and
/// so of its throughput (on stderr with --json, which keeps stdout JSON).
fn report_gpu_shares(used: &[&'static Gpu], before: &[u64], json: bool) -> Result<(), Failure> {
    let pairs: Vec<u64> = used
        .iter()
        .zip(before)
        .map(|(gpu, before)| gpu.pairs_computed() - before)
        .collect();
    let total: u64 = pairs.iter().sum();
    if used.len() < 2 || total == 0 {
        return Ok(());
    }
    let mut lines = String::new();
    for (gpu, pairs) in used.iter().zip(&pairs) {
        lines += &format!(
            "# {}: {pairs} pairs of the pair kernels, {:.1}% of the GPUs' throughput\n",
            gpu.name(),
            100.0 * *pairs as f64 / total as f64
        );
    }
    if json {
        eprint!("{lines}");
        Ok(())
    } else {
        print(&lines)
    }
}

/// The backends `--device` includes, named as in the output: `cpu` first
/// (the reference), then `gpu:<variant>` for every kernel variant named
/// (none named: every variant but those [`only_when_named`]).
fn backends(
    device: Device,
    gpus: GpuSet,
    named: &[Variant],
) -> Result<Vec<(String, ComputeOptions)>, Failure> {
    let mut backends = Vec::new();
    if device != Device::Gpu {
        backends.push(("cpu".to_string(), ComputeOptions::on(Device::Cpu)));
    }
    let variants: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| match named {
            [] => !only_when_named(*v),
            _ => named.contains(v),
        })
        .collect();
    if !gpus.is_all() && device != Device::Cpu {
        // A GPU of --gpus that does not exist is an error before any work.
        timewarp::Backend::resolve_on(Device::Gpu, gpus)?;
    }
    if device != Device::Cpu && resolve_backend(device)?.is_gpu() {
        backends.extend(variants.into_iter().map(|variant| {
            let options = ComputeOptions {
                gpu_variant: Some(variant),
                ..ComputeOptions::on(Device::Gpu).with_gpus(gpus)
            };
            (format!("gpu:{variant}"), options)
        }));
    }
    Ok(backends)
}

/// A case's time for all of its pairs: the median of the timed runs after
/// a warm-up. The CPU, often a hundred times slower, times only as many
/// queries as take about a second and scales that up: its time is
/// proportional to the pairs (all queries meet all references). With
/// `resident`, the references are uploaded first, untimed, and for paired
/// batches the queries too (a GPU times every query).
fn time<T: Float>(
    case: &Case,
    metric: Metric,
    options: &ComputeOptions,
    resident: bool,
    repeats: usize,
) -> Result<Timing, Failure> {
    let queries = case.queries.cast::<T>()?;
    let references = case
        .references
        .as_ref()
        .map(|r| r.cast::<T>())
        .transpose()?;
    let uploaded = match (&references, resident, case.mode) {
        (Some(references), true, Mode::Matrix) => Some(upload(references, options)?),
        _ => None,
    };
    // Paired and resident: query k against reference k, both batches on
    // the device before the timed runs.
    let uploaded_pairs = match (&references, resident, case.mode) {
        (Some(references), true, Mode::Paired | Mode::PairedGradient) => Some((
            upload(&queries, options)?,
            upload(&references.slice(0..queries.len()), options)?,
        )),
        _ => None,
    };
    let run = |queries: &SeriesSet<T>| -> Result<Duration, Failure> {
        let start = Instant::now();
        match (case.mode, metric, &references, &uploaded) {
            (Mode::Matrix, _, _, Some(database)) => {
                distance_matrix_resident(queries, database, metric, options)?;
            }
            (Mode::Matrix, ..) => {
                distance_matrix(queries, references.as_ref(), metric, options)?;
            }
            (mode, Metric::SoftDtw(soft), Some(references), _) => match &uploaded_pairs {
                Some((x, y)) => {
                    assert_eq!(x.len(), queries.len(), "a GPU times every query");
                    if mode == Mode::Paired {
                        soft_dtw_pairs_resident(x, y, soft, options)?;
                    } else {
                        soft_dtw_pairs_gradient_resident(x, y, soft, options, false)?;
                    }
                }
                None => {
                    // Query k against reference k: the first as many references.
                    let paired = references.slice(0..queries.len());
                    if mode == Mode::Paired {
                        soft_dtw_pairs(queries, &paired, soft, options)?;
                    } else {
                        soft_dtw_pairs_gradient(queries, &paired, soft, options, false)?;
                    }
                }
            },
            _ => unreachable!("run() allows --paired only for Soft-DTW on generated data"),
        }
        Ok(start.elapsed())
    };
    let count = queries.len();
    // A set against itself is timed whole: its pairs are not proportional
    // to a slice of it.
    let timed = if options.device == Device::Cpu && references.is_some() {
        // The warm-up: one query, to size the sample.
        let one = run(&queries.slice(0..1))?.as_secs_f64();
        ((CPU_RUN_TARGET.as_secs_f64() / one) as usize).clamp(1, count)
    } else {
        run(&queries)?;
        count
    };
    let sample = queries.slice(0..timed);
    let mut seconds = Vec::with_capacity(repeats);
    let start = Instant::now();
    while seconds.len() < repeats && (seconds.is_empty() || start.elapsed() < REPEAT_BUDGET) {
        seconds.push(run(&sample)?.as_secs_f64());
    }
    Ok(Timing {
        seconds: median(&mut seconds) * count as f64 / timed as f64,
        queries_timed: timed,
    })
}
