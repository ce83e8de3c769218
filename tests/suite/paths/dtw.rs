//! DTW paths: the library against the oracle's traceback, validity, cost,
//! and Hirschberg against the full matrix.

use super::{pair_series, rng, SHAPES};
use crate::common::tolerance;
use ndarray::{Array2, ArrayView2};
use timewarp::internals::{hirschberg, CpuLastColumn, DtwPair};
use timewarp::{distance, dtw_path, oracle, ComputeOptions, Device, Dtw, Float};

fn cpu() -> ComputeOptions {
    ComputeOptions::on(Device::Cpu)
}

/// Starts at (0, 0), ends at (n - 1, m - 1), each step (1, 0), (0, 1) or
/// (1, 1), every cell within the band (`oracle`'s definition).
pub fn assert_valid_path(path: &[(usize, usize)], n: usize, m: usize, band: Option<usize>) {
    assert_eq!(path.first(), Some(&(0, 0)), "{path:?}");
    assert_eq!(path.last(), Some(&(n - 1, m - 1)), "{path:?}");
    for pair in path.windows(2) {
        let ((i, j), (k, l)) = (pair[0], pair[1]);
        assert!(
            k >= i && l >= j && matches!((k - i, l - j), (1, 0) | (0, 1) | (1, 1)),
            "step {:?} -> {:?}",
            pair[0],
            pair[1]
        );
    }
    if let Some(r) = band {
        for &(i, j) in path {
            let lower = i <= j + r + n.saturating_sub(m);
            let upper = j <= i + r + m.saturating_sub(n);
            assert!(lower && upper, "({i}, {j}) outside band {r} of {n} x {m}");
        }
    }
}

/// The path's cost recomputed in f64 from the samples.
pub fn path_cost(path: &[(usize, usize)], x: ArrayView2<f64>, y: ArrayView2<f64>) -> f64 {
    path.iter()
        .map(|&(i, j)| {
            x.row(i)
                .iter()
                .zip(y.row(j))
                .map(|(u, v)| (u - v) * (u - v))
                .sum::<f64>()
        })
        .sum()
}

/// f64: the oracle's path exactly; f32 (whose rounding may pick another
/// of two nearly equal paths): a valid path whose exact cost is the
/// oracle's value within the tolerance. Both: the value is `distance`'s
/// within the tolerance of CPU against oracle (`common::tolerance`: the
/// two add the same non-negative terms in other orders and roundings).
fn check_dtw<T: Float>(seed: u64) {
    let mut rng = rng(seed);
    for (n, m, dims) in SHAPES {
        for band in [None, Some(0), Some(1), Some(5)] {
            let (x, xf) = pair_series::<T>(&mut rng, n, dims);
            let (y, yf) = pair_series::<T>(&mut rng, m, dims);
            let dtw = band.map_or_else(Dtw::new, Dtw::with_band);
            let got = dtw_path(x.view(), y.view(), dtw, &cpu()).unwrap();
            let (expected_path, expected) = oracle::dtw_path(xf.view(), yf.view(), band);
            let context = format!("{} {n} x {m} x {dims}, band {band:?}", T::NAME);
            assert_valid_path(&got.path, n, m, band);
            let bound = tolerance::<T>(n, m, dims) * expected.max(f64::MIN_POSITIVE);
            let cost = path_cost(&got.path, xf.view(), yf.view());
            assert!(
                (cost - expected).abs() <= bound,
                "{context}: cost {cost} vs {expected}"
            );
            if T::NAME == "f64" {
                assert_eq!(got.path, expected_path, "{context}");
            }
            let library = distance(x.view(), y.view(), dtw.into()).unwrap();
            let diff = (got.value.to_f64() - library.to_f64()).abs();
            assert!(
                diff <= 2.0 * bound,
                "{context}: value {} vs distance {library}",
                got.value
            );
        }
    }
}

#[test]
fn dtw_paths_match_the_oracle_f64() {
    check_dtw::<f64>(1);
}

#[test]
fn dtw_paths_match_the_oracle_f32() {
    check_dtw::<f32>(2);
}

/// Hirschberg with leaves of `leaf` cells against the full-matrix
/// traceback (the oracle's), down to single rows and columns with leaf 1.
#[test]
fn hirschberg_matches_the_full_matrix() {
    let mut rng = rng(3);
    let shapes = [
        (1, 300),
        (300, 1),
        (2, 257),
        (257, 2),
        (3, 3),
        (101, 67),
        (250, 300),
    ];
    for (n, m) in shapes {
        let (x, _) = pair_series::<f64>(&mut rng, n, 1);
        let (y, _) = pair_series::<f64>(&mut rng, m, 1);
        let (expected_path, expected) = oracle::dtw_path(x.view(), y.view(), None);
        let pair = DtwPair::new(x.view(), y.view()).unwrap();
        for leaf in [1, 16, 4096] {
            let got = hirschberg(&pair, &CpuLastColumn::new(&pair), leaf).unwrap();
            assert_eq!(got.path, expected_path, "{n} x {m}, leaf {leaf}");
            let diff = (got.value - expected).abs();
            assert!(
                diff <= 1e-12 * expected,
                "{n} x {m}: {} vs {expected}",
                got.value
            );
        }
    }
    // Multivariate and f32: a valid path of the optimal cost.
    let (x, xf) = pair_series::<f32>(&mut rng, 120, 3);
    let (y, yf) = pair_series::<f32>(&mut rng, 90, 3);
    let pair = DtwPair::new(x.view(), y.view()).unwrap();
    let got = hirschberg(&pair, &CpuLastColumn::new(&pair), 8).unwrap();
    assert_valid_path(&got.path, 120, 90, None);
    let expected = oracle::dtw(xf.view(), yf.view(), None);
    let cost = path_cost(&got.path, xf.view(), yf.view());
    assert!((cost - expected).abs() <= tolerance::<f32>(120, 90, 3) * expected);
}

#[test]
fn bad_pairs_are_errors() {
    let empty = Array2::<f64>::zeros((0, 1));
    let one = Array2::<f64>::zeros((3, 1));
    let two_dims = Array2::<f64>::zeros((3, 2));
    assert!(dtw_path(empty.view(), one.view(), Dtw::new(), &cpu()).is_err());
    let error = dtw_path(one.view(), two_dims.view(), Dtw::new(), &cpu()).unwrap_err();
    assert!(error.to_string().contains("dimension"), "{error}");
    let mut nan = one.clone();
    nan[[1, 0]] = f64::NAN;
    assert!(dtw_path(nan.view(), one.view(), Dtw::new(), &cpu()).is_err());
    // A band whose cells do not fit the workspace is refused, not allocated.
    let long = Array2::<f64>::zeros((40_000, 1));
    let error = dtw_path(long.view(), long.view(), Dtw::with_band(30_000), &cpu()).unwrap_err();
    assert!(error.to_string().contains("narrow the band"), "{error}");
    // f32 overflow is an error, not a path.
    let huge = Array2::from_elem((4, 1), 1e30f32);
    let zero = Array2::from_elem((4, 1), -1e30f32);
    let error = dtw_path(huge.view(), zero.view(), Dtw::new(), &cpu()).unwrap_err();
    assert!(error.to_string().contains("overflowed"), "{error}");
}
