//! `timewarp bench`: times each measure on each backend and GPU kernel
//! variant on generated data, against the CPU measured in the same run.

use super::{
    check_variants_apply, print, progress_bar, resolve_backend, variant_parser, ComputeArgs,
    Failure, MetricKind,
};
use std::time::{Duration, Instant};
use timewarp::data::{cbf, random_normal};
use timewarp::gpu::LOCAL_MAX_LEN;
use timewarp::{
    distance_matrix, ComputeOptions, Device, Float, Metric, Precision, SeriesSet, GPU_VARIANTS,
};

pub const EXAMPLES: &str = "\
Examples:
  # Every measure and backend at the default sizes
  timewarp bench

  # DTW and TWED at length 1024, 512 series per batch, GPU variants only, as JSON
  timewarp bench --metric dtw,twed --lengths 1024 --count 512 --device gpu --json

  # One pair of length 65536 with TWED: the anti-diagonal variants against tiled
  timewarp bench --metric twed --lengths 65536 --count 1 --device gpu --variant diagonal,diagonal-launches,tiled

Each case computes N query series against N reference series (N*N pairs,
N*N*length^2 cells) and reports the median time of the timed runs. The CPU
times only its first `timed` queries (about a second's worth) and scales the
time to all N. GCUPS: cells per second / 1e9. speedup: the CPU's time over
the backend's, both measured in this run. Without --variant every GPU variant
is timed but diagonal and diagonal-launches (which compute a batch pair after
pair, a barrier or a launch per anti-diagonal: name them to time them), and
local only up to length 1024 (its rows are a fixed array).";

/// GPU variants timed only when `--variant` names them: they compute a
/// batch pair after pair, `n + m` barriers or launches each, which would
/// dominate a default run.
const ONLY_WHEN_NAMED: [&str; 2] = ["diagonal", "diagonal-launches"];

/// Timed runs of one case stop early once they have taken this long.
const REPEAT_BUDGET: Duration = Duration::from_secs(2);
/// How long one timed CPU run should take (see [`time`]).
const CPU_RUN_TARGET: Duration = Duration::from_secs(1);

/// How long a case takes, and how many of its queries were timed.
struct Timing {
    seconds: f64,
    queries_timed: usize,
}

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
    /// Queries and references per case [default: 256 when a GPU is timed, 64 otherwise]
    #[arg(long, value_name = "N")]
    count: Option<usize>,
    /// Generated data (seeded: the same on every run)
    #[arg(long, value_enum, default_value_t = DataKind::Cbf)]
    data: DataKind,
    #[command(flatten)]
    compute: ComputeArgs,
    /// GPU kernel variants to time, comma-separated [default: all but
    /// diagonal and diagonal-launches]
    #[arg(long, value_name = "NAMES", value_delimiter = ',', value_parser = variant_parser())]
    variant: Vec<&'static str>,
    /// Timed runs after one warm-up, of which the median is reported (fewer
    /// once a case's timed runs pass 2 s)
    #[arg(long, value_name = "R", default_value_t = 5)]
    repeats: usize,
    /// Print a JSON array instead of a table
    #[arg(long)]
    json: bool,
}

/// One timed case.
struct Row {
    metric: MetricKind,
    length: usize,
    count: usize,
    precision: &'static str,
    backend: String,
    timing: Timing,
    speedup_vs_cpu: Option<f64>,
}

impl Row {
    fn gcups(&self) -> f64 {
        let cells = (self.count * self.length) as f64;
        cells * cells / self.timing.seconds / 1e9
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
    let backends = backends(args.compute.device, &args.variant)?;
    let timing_gpu = backends.iter().any(|(name, _)| name != "cpu");
    let count = args.count.unwrap_or(if timing_gpu { 256 } else { 64 });
    let precision = args.compute.precision_name();
    eprintln!(
        "bench: {} data, {count} queries x {count} references per case, {precision}, \
         median of up to {} runs after a warm-up; the CPU times about a second's worth of queries and scales up",
        if args.data == DataKind::Cbf { "CBF" } else { "normal" },
        args.repeats
    );
    let bar = progress_bar((metrics.len() * args.lengths.len() * backends.len()) as u64);
    let mut rows = Vec::new();
    for &length in &args.lengths {
        let (queries, references) = match args.data {
            DataKind::Cbf => (cbf(count, length, 1).0, cbf(count, length, 2).0),
            DataKind::Normal => (
                random_normal(count, length, 1, 1),
                random_normal(count, length, 1, 2),
            ),
        };
        for &metric in &metrics {
            let mut cpu_seconds = None;
            for (backend, options) in &backends {
                let local_too_long = options.gpu_variant == Some("local") && length > LOCAL_MAX_LEN;
                if local_too_long && args.variant.is_empty() {
                    bar.inc(1);
                    continue;
                }
                let timing = match args.compute.precision {
                    Precision::F32 => {
                        time::<f32>(&queries, &references, metric, options, args.repeats)?
                    }
                    Precision::F64 => {
                        time::<f64>(&queries, &references, metric, options, args.repeats)?
                    }
                };
                if backend == "cpu" {
                    cpu_seconds = Some(timing.seconds);
                }
                rows.push(Row {
                    metric,
                    length,
                    count,
                    precision,
                    backend: backend.clone(),
                    speedup_vs_cpu: cpu_seconds.map(|cpu| cpu / timing.seconds),
                    timing,
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    print(&if args.json { json(&rows) } else { table(&rows) })
}

/// The backends `--device` includes, named as in the output: `cpu` first
/// (the reference), then `gpu:<variant>` for every kernel variant named
/// (none named: every variant but [`ONLY_WHEN_NAMED`]).
fn backends(
    device: Device,
    named: &[&'static str],
) -> Result<Vec<(String, ComputeOptions)>, Failure> {
    let mut backends = Vec::new();
    if device != Device::Gpu {
        backends.push(("cpu".to_string(), ComputeOptions::on(Device::Cpu)));
    }
    let variants: Vec<&'static str> = if named.is_empty() {
        GPU_VARIANTS
            .iter()
            .copied()
            .filter(|v| !ONLY_WHEN_NAMED.contains(v))
            .collect()
    } else {
        GPU_VARIANTS
            .iter()
            .copied()
            .filter(|v| named.contains(v))
            .collect()
    };
    if device != Device::Cpu && resolve_backend(device)?.is_gpu() {
        backends.extend(variants.into_iter().map(|variant| {
            let options = ComputeOptions {
                gpu_variant: Some(variant),
                ..ComputeOptions::on(Device::Gpu)
            };
            (format!("gpu:{variant}"), options)
        }));
    }
    Ok(backends)
}

/// A case's time for all of its pairs: the median of the timed runs after
/// a warm-up. The CPU, often a hundred times slower, times only as many
/// queries as take about a second and scales that up: its time is
/// proportional to the pairs (all queries meet all references).
fn time<T: Float>(
    queries: &SeriesSet<f64>,
    references: &SeriesSet<f64>,
    metric: MetricKind,
    options: &ComputeOptions,
    repeats: usize,
) -> Result<Timing, Failure> {
    let (queries, references) = (queries.cast::<T>()?, references.cast::<T>()?);
    let metric: Metric = metric.with_defaults()?;
    let run = |queries: &SeriesSet<T>| -> Result<Duration, Failure> {
        let start = Instant::now();
        distance_matrix(queries, Some(&references), metric, options)?;
        Ok(start.elapsed())
    };
    let count = queries.len();
    let timed = if options.device == Device::Cpu {
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

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

fn table(rows: &[Row]) -> String {
    let line = |cells: [&str; 9]| {
        format!(
            "{:<9} {:>6} {:>6} {:>6}  {:<9}  {:<12} {:>10} {:>9} {:>8}\n",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            cells[5],
            cells[6],
            cells[7],
            cells[8]
        )
    };
    let mut text = line([
        "metric",
        "length",
        "count",
        "timed",
        "precision",
        "backend",
        "seconds",
        "GCUPS",
        "speedup",
    ]);
    for row in rows {
        text += &line([
            row.metric.name(),
            &row.length.to_string(),
            &row.count.to_string(),
            &row.timing.queries_timed.to_string(),
            row.precision,
            &row.backend,
            &format!("{:.4}", row.timing.seconds),
            &format!("{:.3}", row.gcups()),
            &row.speedup_vs_cpu
                .map_or("-".into(), |s| format!("{s:.2}x")),
        ]);
    }
    text
}

/// The rows as a JSON array of objects; unmeasurable numbers are null.
fn json(rows: &[Row]) -> String {
    let number = |v: f64| {
        if v.is_finite() {
            v.to_string()
        } else {
            "null".into()
        }
    };
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            format!(
                "  {{\"metric\": \"{}\", \"length\": {}, \"count\": {}, \"queries_timed\": {}, \
                 \"precision\": \"{}\", \"backend\": \"{}\", \"seconds\": {}, \"gcups\": {}, \
                 \"speedup_vs_cpu\": {}}}",
                row.metric.name(),
                row.length,
                row.count,
                row.timing.queries_timed,
                row.precision,
                row.backend,
                number(row.timing.seconds),
                number(row.gcups()),
                row.speedup_vs_cpu.map_or("null".into(), number),
            )
        })
        .collect();
    format!("[\n{}\n]\n", objects.join(",\n"))
}
