//! One long pair on the CPU, on all of rayon's threads (the wavefront over
//! tiles) and in a pool of one thread (the pair's one-core route): DTW,
//! TWED and Soft-DTW of two random walks, the best of a few runs each.
//!
//! `cargo run --release --example long_pair -- [length] [runs] [metric]`
//! (`dtw`, `twed` or `soft_dtw`; all three by default)
//! (docs/benchmarks.md records the figures).

use timewarp::ndarray::Array2;
use timewarp::{Dtw, Metric, SoftDtw, Twed};

/// A random walk of `len` steps in [-0.5, 0.5) from a linear congruential
/// sequence (no dependency for the example).
fn walk(len: usize, seed: u64) -> Array2<f64> {
    let mut state = seed;
    let mut position = 0.0;
    Array2::from_shape_fn((len, 1), |_| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        position += (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
        position
    })
}

fn best(runs: usize, mut run: impl FnMut() -> f64) -> (f64, f64) {
    let mut seconds = f64::INFINITY;
    let mut value = 0.0;
    for _ in 0..runs {
        let start = std::time::Instant::now();
        value = run();
        seconds = seconds.min(start.elapsed().as_secs_f64());
    }
    (seconds, value)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let length: usize = args.next().map_or(30_000, |a| a.parse().expect("a length"));
    let runs: usize = args
        .next()
        .map_or(3, |a| a.parse().expect("a count of runs"));
    let only = args.next();
    let (x, y) = (walk(length, 1), walk(length, 2));
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a pool of one thread");
    let metrics = [
        ("dtw", Metric::Dtw(Dtw::new())),
        (
            "twed",
            Metric::Twed(Twed::new(0.001, 1.0, 2.0).expect("valid")),
        ),
        (
            "soft_dtw",
            Metric::SoftDtw(SoftDtw::new(1.0).expect("valid")),
        ),
    ];
    let threads = rayon::current_num_threads();
    for (name, metric) in metrics {
        if only.as_deref().is_some_and(|only| only != name) {
            continue;
        }
        let distance = || timewarp::distance(x.view(), y.view(), metric).expect("a value");
        let (all, value) = best(runs, distance);
        let (one, one_value) = best(runs, || one_thread.install(distance));
        assert_eq!(
            value.to_bits(),
            one_value.to_bits(),
            "{name}: the same value"
        );
        println!(
            "{name} {length}: {threads} threads {all:.3} s, one thread {one:.3} s, {:.2}x",
            one / all
        );
    }
}
