//! `bench --search`: the UCR Suite's workload, a query searched in a long
//! random walk (docs/benchmarks.md, "Subsequence search against the UCR
//! Suite"). For each query length of `--lengths`, a query from a walk of
//! its own is searched in a walk of `--count` points (default 10^6), both
//! seeded, with the band `--band` (a fraction of the query, default 0.05),
//! on `--device`; one warm-up, then up to `--repeats` timed searches (fewer
//! once they pass 2 s), the median reported with the points a second and
//! the pruning rates.

use super::{print, Args, Failure};
use ndarray::Array2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::time::{Duration, Instant};
use timewarp::gpu::Gpu;
use timewarp::search::{auto_gpu_samples, subsequences, Band, SearchOptions, SearchResult};
use timewarp::Device;

/// Points of the walk searched when `--count` is not given.
const DEFAULT_POINTS: usize = 1_000_000;
/// The band when `--band` is not given: the UCR Suite's example's 5%.
const DEFAULT_BAND: f64 = 0.05;
/// Timed searches stop once they have taken this long together.
const REPEAT_BUDGET: Duration = Duration::from_secs(2);

/// One query length's result.
struct SearchRow {
    length: usize,
    device: &'static str,
    seconds: f64,
    result: SearchResult,
}

/// A seeded random walk of `n` points (N(0, 1) steps).
fn walk(rng: &mut StdRng, n: usize) -> Vec<f64> {
    let mut value = 0.0;
    (0..n)
        .map(|_| {
            value += rng.sample::<f64, _>(StandardNormal);
            value
        })
        .collect()
}

/// The options `bench` takes with `--search`, refused otherwise.
fn check_args(args: &Args) -> Result<(), Failure> {
    let distances_only = args.file.is_some()
        || args.paired
        || args.resident
        || args.pinned_input
        || args.with_cpu
        || !args.variant.is_empty()
        || !args.metric.is_empty()
        || args.queries.is_some();
    if distances_only {
        return Err(Failure::usage(
            "--search times DTW subsequence search on a generated walk: it takes --lengths \
             (the queries), --count (the walk's points), --band, --device, --repeats and \
             --json",
        ));
    }
    Ok(())
}

/// Where `device` searches `points` points: `Auto` as the library decides.
fn device_name(device: Device, points: usize) -> &'static str {
    match device {
        Device::Cpu => "cpu",
        Device::Gpu => "gpu",
        Device::Auto if points >= auto_gpu_samples() && Gpu::get().is_ok() => "gpu",
        Device::Auto => "cpu",
    }
}

/// Runs `bench --search`.
pub fn run(args: &Args) -> Result<(), Failure> {
    check_args(args)?;
    let points = args.count.unwrap_or(DEFAULT_POINTS);
    let band = args.band.unwrap_or(DEFAULT_BAND);
    let device = args.compute.device;
    let mut rng = StdRng::seed_from_u64(46);
    let series = walk(&mut rng, points);
    let options = SearchOptions::default()
        .with_band(Band::Fraction(band))
        .on(device);
    let mut rows = Vec::new();
    for &length in &args.lengths {
        let query =
            Array2::from_shape_vec((length, 1), walk(&mut rng, length)).expect("length x 1 values");
        // The warm-up: opens the GPU and loads its kernels, if any.
        let mut result = subsequences(query.view(), &series[..], &options)?;
        let mut seconds = Vec::new();
        let started = Instant::now();
        while seconds.len() < args.repeats.max(1)
            && (seconds.is_empty() || started.elapsed() < REPEAT_BUDGET)
        {
            let start = Instant::now();
            result = subsequences(query.view(), &series[..], &options)?;
            seconds.push(start.elapsed().as_secs_f64());
        }
        seconds.sort_by(f64::total_cmp);
        rows.push(SearchRow {
            length,
            device: device_name(device, points),
            seconds: seconds[seconds.len() / 2],
            result,
        });
    }
    let text = match args.json {
        true => json(&rows, points, band),
        false => table(&rows, points, band),
    };
    print(&text)
}

/// The fraction of the candidates that reached a DTW.
fn dtw_share(result: &SearchResult) -> f64 {
    result.stats.dtw as f64 / result.stats.candidates.max(1) as f64
}

fn table(rows: &[SearchRow], points: usize, band: f64) -> String {
    let mut text = format!(
        "bench --search: a random walk of {points} points, band {band}, k 1\n\
         {:>6} | {:>6} | {:>10} | {:>12} | {:>17} | {:>12} | {:>10}\n",
        "query", "device", "seconds", "points/s", "pruned before DTW", "DTW computed", "best start"
    );
    for row in rows {
        let best = row.result.matches.first().map_or(0, |m| m.start);
        text += &format!(
            "{:>6} | {:>6} | {:>10.4} | {:>12.3e} | {:>16.2}% | {:>11.2}% | {:>10}\n",
            row.length,
            row.device,
            row.seconds,
            points as f64 / row.seconds,
            100.0 * row.result.stats.pruned_before_dtw(),
            100.0 * dtw_share(&row.result),
            best
        );
    }
    text
}

fn json(rows: &[SearchRow], points: usize, band: f64) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|row| {
            let stats = &row.result.stats;
            let best = row.result.matches.first();
            format!(
                "{{\"query_length\": {}, \"points\": {points}, \"band\": {band}, \"radius\": {}, \
                 \"device\": \"{}\", \"seconds\": {}, \"points_per_second\": {}, \
                 \"candidates\": {}, \"kim\": {}, \"keogh_query\": {}, \"keogh_data\": {}, \
                 \"dtw\": {}, \"abandoned\": {}, \"best_start\": {}, \"best_distance\": {}}}",
                row.length,
                row.result.radius,
                row.device,
                row.seconds,
                points as f64 / row.seconds,
                stats.candidates,
                stats.kim,
                stats.keogh_query,
                stats.keogh_data,
                stats.dtw,
                stats.abandoned,
                best.map_or(0, |m| m.start),
                best.map_or(0.0, |m| m.distance),
            )
        })
        .collect();
    format!("[{}]\n", items.join(",\n "))
}
