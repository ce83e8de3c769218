//! `timewarp bench`: times each measure on each backend and GPU kernel
//! variant on generated data, against the CPU measured in the same run.

use super::{print, progress_bar, resolve_backend, ComputeArgs, Failure, MetricKind};
use std::time::{Duration, Instant};
use timewarp::data::{cbf, random_normal};
use timewarp::{
    distance_matrix, ComputeOptions, Device, Float, Metric, Precision, SeriesSet,
    GPU_VARIANTS,
};

pub const EXAMPLES: &str = "\
Examples:
  # Every measure and backend at the default sizes
  timewarp bench

  # DTW and TWED at length 1024, 512 series per batch, GPU variants only, as JSON
  timewarp bench --metric dtw,twed --lengths 1024 --count 512 --device gpu --json

Each case computes a batch of N query series against N reference series
(N*N pairs, N*N*length^2 cells). GCUPS: cells per second / 1e9. speedup: the
CPU's time over the backend's, both measured in this run.";

/// Timed runs of one case stop early once they have taken this long.
const REPEAT_BUDGET: Duration = Duration::from_secs(2);

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
    /// Series per batch [default: 256 when a GPU is timed, 64 on the CPU only]
    #[arg(long, value_name = "N")]
    count: Option<usize>,
    /// Generated data (seeded: the same on every run)
    #[arg(long, value_enum, default_value_t = DataKind::Cbf)]
    data: DataKind,
    #[command(flatten)]
    compute: ComputeArgs,
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
    seconds: f64,
    speedup_vs_cpu: Option<f64>,
}

impl Row {
    fn gcups(&self) -> f64 {
        let cells = (self.count * self.length) as f64;
        cells * cells / self.seconds / 1e9
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.lengths.contains(&0) || args.count == Some(0) || args.repeats == 0 {
        return Err(Failure::usage("--lengths, --count and --repeats must be at least 1"));
    }
    let metrics = if args.metric.is_empty() {
        MetricKind::ALL.to_vec()
    } else {
        args.metric.clone()
    };
    let backends = backends(args.compute.device)?;
    let timing_gpu = backends.iter().any(|(name, _)| name != "cpu");
    // A CPU alone takes minutes at the GPU's batch size.
    let count = args.count.unwrap_or(if timing_gpu { 256 } else { 64 });
    eprintln!(
        "bench: {} data, {count} x {count} series per case, {}, median of up to {} runs after a warm-up",
        if args.data == DataKind::Cbf { "CBF" } else { "normal" },
        args.compute.precision_name(),
        args.repeats
    );
    let bar = progress_bar((metrics.len() * args.lengths.len() * backends.len()) as u64);
    let mut rows = Vec::new();
    for &length in &args.lengths {
        let (queries, references) = match args.data {
            DataKind::Cbf => (cbf(count, length, 1).0, cbf(count, length, 2).0),
            DataKind::Normal => (random_normal(count, length, 1, 1), random_normal(count, length, 1, 2)),
        };
        for &metric in &metrics {
            let mut cpu_seconds = None;
            for (backend, options) in &backends {
                let seconds = match args.compute.precision {
                    Precision::F32 => time::<f32>(&queries, &references, metric, options, args.repeats)?,
                    Precision::F64 => time::<f64>(&queries, &references, metric, options, args.repeats)?,
                };
                if backend == "cpu" {
                    cpu_seconds = Some(seconds);
                }
                rows.push(Row {
                    metric,
                    length,
                    count,
                    precision: args.compute.precision_name(),
                    backend: backend.clone(),
                    seconds,
                    speedup_vs_cpu: cpu_seconds.map(|cpu| cpu / seconds),
                });
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    print(&if args.json { json(&rows) } else { table(&rows) })
}

/// The backends `--device` includes, named as in the output: `cpu` first
/// (the reference), then `gpu:<variant>` for every kernel variant.
fn backends(device: Device) -> Result<Vec<(String, ComputeOptions)>, Failure> {
    let mut backends = Vec::new();
    if device != Device::Gpu {
        backends.push(("cpu".to_string(), ComputeOptions::on(Device::Cpu)));
    }
    if device != Device::Cpu && resolve_backend(device)?.is_gpu() {
        backends.extend(GPU_VARIANTS.iter().map(|&variant| {
            let options = ComputeOptions {
                gpu_variant: Some(variant),
                ..ComputeOptions::on(Device::Gpu)
            };
            (format!("gpu:{variant}"), options)
        }));
    }
    Ok(backends)
}

/// Median seconds of the timed runs of one case, after a warm-up run.
fn time<T: Float>(
    queries: &SeriesSet<f64>,
    references: &SeriesSet<f64>,
    metric: MetricKind,
    options: &ComputeOptions,
    repeats: usize,
) -> Result<f64, Failure> {
    let (queries, references) = (queries.cast::<T>()?, references.cast::<T>()?);
    let metric: Metric = metric.with_defaults()?;
    let run = || distance_matrix(&queries, Some(&references), metric, options);
    run()?;
    let mut seconds = Vec::with_capacity(repeats);
    let start = Instant::now();
    while seconds.len() < repeats && (seconds.is_empty() || start.elapsed() < REPEAT_BUDGET) {
        let run_start = Instant::now();
        run()?;
        seconds.push(run_start.elapsed().as_secs_f64());
    }
    seconds.sort_by(f64::total_cmp);
    let middle = seconds.len() / 2;
    Ok(if seconds.len() % 2 == 1 {
        seconds[middle]
    } else {
        (seconds[middle - 1] + seconds[middle]) / 2.0
    })
}

fn table(rows: &[Row]) -> String {
    let line = |cells: [&str; 8]| {
        format!(
            "{:<9} {:>6} {:>6}  {:<9} {:<12} {:>10} {:>9} {:>8}\n",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7]
        )
    };
    let mut text = line(["metric", "length", "count", "precision", "backend", "seconds", "GCUPS", "speedup"]);
    for row in rows {
        text += &line([
            row.metric.name(),
            &row.length.to_string(),
            &row.count.to_string(),
            row.precision,
            &row.backend,
            &format!("{:.4}", row.seconds),
            &format!("{:.3}", row.gcups()),
            &row.speedup_vs_cpu.map_or("-".into(), |s| format!("{s:.2}x")),
        ]);
    }
    text
}

/// The rows as a JSON array of objects; unmeasurable numbers are null.
fn json(rows: &[Row]) -> String {
    let number = |v: f64| if v.is_finite() { v.to_string() } else { "null".into() };
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            format!(
                "  {{\"metric\": \"{}\", \"length\": {}, \"count\": {}, \"precision\": \"{}\", \
                 \"backend\": \"{}\", \"seconds\": {}, \"gcups\": {}, \"speedup_vs_cpu\": {}}}",
                row.metric.name(),
                row.length,
                row.count,
                row.precision,
                row.backend,
                number(row.seconds),
                number(row.gcups()),
                row.speedup_vs_cpu.map_or("null".into(), number),
            )
        })
        .collect();
    format!("[\n{}\n]\n", objects.join(",\n"))
}
