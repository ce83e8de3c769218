//! Helpers shared by the integration tests: random batches, the oracle's
//! matrix, tolerances, and the GPU gate.
#![allow(dead_code)]

pub mod driver;
pub mod emulator;
pub mod grid;

use ndarray::{Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use timewarp::{gpu, oracle, Float, Metric, SeriesSet};

/// Whether GPU tests should run. Without a usable GPU they print why and
/// skip, unless `REQUIRE_GPU=1` (set on the GPU machine), where that fails.
pub fn gpu_available(test: &str) -> bool {
    match gpu::Gpu::get() {
        Ok(_) => true,
        Err(reason) => {
            if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("{test}: REQUIRE_GPU=1 but {reason}");
            }
            skip(test, &reason.to_string());
            false
        }
    }
}

/// Say on the terminal that `test` skipped and why. libtest captures
/// `eprintln!` of passing tests; the stderr handle itself is not captured,
/// so this shows in a plain `cargo test`.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{test}: skipped, {reason}");
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// One random series, `length x dims`, N(0, scale^2).
pub fn random_series(rng: &mut StdRng, length: usize, dims: usize, scale: f64) -> Array2<f64> {
    Array2::from_shape_fn((length, dims), |_| {
        scale * rng.sample::<f64, _>(StandardNormal)
    })
}

/// A batch of random series of the given lengths.
pub fn random_set(rng: &mut StdRng, lengths: &[usize], dims: usize, scale: f64) -> SeriesSet<f64> {
    let series: Vec<_> = lengths
        .iter()
        .map(|&n| random_series(rng, n, dims, scale))
        .collect();
    SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap()
}

/// Random increasing timestamps for every series of `set`.
pub fn with_random_timestamps(rng: &mut StdRng, set: SeriesSet<f64>) -> SeriesSet<f64> {
    let times: Vec<ndarray::Array1<f64>> = (0..set.len())
        .map(|k| {
            let mut t = rng.random_range(0.0..3.0);
            (0..set.series_len(k))
                .map(|_| {
                    t += rng.random_range(0.1..2.0);
                    t
                })
                .collect()
        })
        .collect();
    set.with_timestamps(times.iter().map(|t| t.view())).unwrap()
}

/// The oracle's value for one pair.
pub fn oracle_pair(
    a: ArrayView2<f64>,
    ta: &ndarray::Array1<f64>,
    b: ArrayView2<f64>,
    tb: &ndarray::Array1<f64>,
    metric: Metric,
) -> f64 {
    match metric {
        Metric::Dtw(m) => oracle::dtw(a, b, m.band()),
        Metric::SoftDtw(m) if m.is_divergence() => {
            oracle::soft_dtw_divergence(a, b, m.gamma(), m.band())
        }
        Metric::SoftDtw(m) => oracle::soft_dtw_banded(a, b, m.gamma(), m.band()),
        Metric::Twed(m) => oracle::twed(a, ta.view(), b, tb.view(), m.nu(), m.lambda(), m.degree()),
    }
}

/// Magnitude of the terms a pair's value accumulates, the scale of its
/// rounding error. DTW and TWED add only non-negative terms, so it is the
/// value itself; Soft-DTW adds costs (bounded by the DTW value on the best
/// path) and soft-min corrections in [-gamma ln 3, 0] per cell of the path.
pub fn error_scale(a: ArrayView2<f64>, b: ArrayView2<f64>, value: f64, metric: Metric) -> f64 {
    match metric {
        Metric::SoftDtw(m) => {
            // The divergence adds the terms of sdtw(a, a) and sdtw(b, b)
            // (whose DTW is 0), on paths of 2 n and 2 m cells.
            let (n, k) = (a.nrows() as f64, b.nrows() as f64);
            let paths = if m.is_divergence() {
                2.0 * (n + k)
            } else {
                n + k
            };
            oracle::dtw(a, b, m.band()) + m.gamma() * paths * 3f64.ln() + value.abs()
        }
        _ => value.abs(),
    }
}

/// Allowed relative error (of [`error_scale`]) for a pair of lengths `n`,
/// `m` with `dims` dimensions, in precision `T`.
///
/// f64: 1e-12. The oracle and the kernels round differently (summation
/// order, libm vs std for exp/ln), but each cell adds O(dims) roundings of
/// relative size u = 1.1e-16 to a sum no larger than the scale, so a path
/// of n + m cells is off by at most about 4 (n + m)(dims + 2) u, which is
/// under 1e-12 for n + m up to 2000 and dims <= 3 in the statistical
/// (square-root) sense that rounding errors actually accumulate in; the
/// worst case is checked for f32 below.
///
/// f32: the same first-order worst-case bound, 4 (n + m)(dims + 2) u with
/// u = 6e-8, since f32 runs show the worst case far more readily. The
/// oracle runs on the f32-rounded inputs, so input rounding is not counted.
pub fn tolerance<T: Float>(n: usize, m: usize, dims: usize) -> f64 {
    if T::NAME == "f64" {
        1e-12
    } else {
        4.0 * (n + m) as f64 * (dims + 2) as f64 * T::UNIT_ROUNDOFF
    }
}

/// Assert that `got` (computed in precision `T` from `a` and `b` rounded to
/// `T`) matches the oracle on the rounded inputs within [`tolerance`].
pub fn assert_matches_oracle<T: Float>(
    got: &Array2<T>,
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    metric: Metric,
    context: &str,
) {
    let (a, b) = (a.cast::<f64>().unwrap(), b.cast::<f64>().unwrap());
    assert_eq!(got.dim(), (a.len(), b.len()), "{context}: shape");
    for i in 0..a.len() {
        for j in 0..b.len() {
            let (x, y) = (a.series(i), b.series(j));
            let expected = oracle_pair(x, &a.timestamps(i), y, &b.timestamps(j), metric);
            let actual = got[[i, j]].to_f64();
            let scale = error_scale(x, y, expected, metric);
            let bound = tolerance::<T>(x.nrows(), y.nrows(), x.ncols()) * scale;
            assert!(
                (actual - expected).abs() <= bound,
                "{context}: {metric:?} {} pair ({i}, {j}), lengths {} and {}, dims {}: got {actual:e}, oracle {expected:e}, |diff| {:e} > bound {bound:e}",
                T::NAME,
                x.nrows(),
                y.nrows(),
                x.ncols(),
                (actual - expected).abs()
            );
        }
    }
}
