//! Soft-DTW of paired batches (`soft_dtw_pairs`, `soft_dtw_pairs_gradient`)
//! on every backend against the oracle: values and gradients (with respect
//! to both series) on lengths 1, 2, 33, 128 and 1000 (4096 on the GPU
//! only), unequal lengths, dims 1 and 3, gamma in {1e-3, 0.1, 1, 10}, bands;
//! the divergence (0 for a series with itself, its gradient against finite
//! differences of the oracle's divergence); the gradient against finite
//! differences of the backend's own values; stability with gamma 1e-3 and
//! costs of 1e4; chunked batches; the errors of bad input. Resident sets
//! (`soft_dtw_pairs_resident`, `soft_dtw_pairs_gradient_resident`) give
//! the host batches' results bit for bit (the same kernels on the same
//! pairs; on the CPU, the same code), in chunks too, with their own errors.
//!
//! Tolerances. Values: `crate::common::tolerance` of `crate::common::error_scale` (f64:
//! 1e-12 of the scale; f32: `4 (n + m)(d + 2) u`), plus for f32 the fast
//! `ex2`/`lg2` soft-min of the GPU, `(n + m) gamma 2^-19` (derived in
//! docs/algorithms.md; it also holds, with room, for the CPU's exact
//! functions). Gradients: `64 u (scale / gamma + 2 (n + m))` of the largest
//! entry, as tests/soft_dtw_gradient.rs derives. GPU tests skip without a
//! GPU and fail without one under `REQUIRE_GPU=1`; the value scenarios run
//! on each GPU variant (`stencil`, `warp`, `tiled`, and the default).

use crate::common::*;
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;
use timewarp::internals as runtime;
use timewarp::{
    oracle, soft_dtw_gradient, soft_dtw_pairs, soft_dtw_pairs_gradient,
    soft_dtw_pairs_gradient_resident, soft_dtw_pairs_resident, upload, ComputeOptions, Device,
    Error, Float, Metric, SeriesSet, SoftDtw, Variant,
};

/// Extra f32 error of the GPU's fast soft-min: per cell at most
/// `gamma 2^-19` (docs/algorithms.md), on a path of at most `n + m` cells.
fn fast_math_bound<T: Float>(n: usize, m: usize, gamma: f64) -> f64 {
    if T::NAME == "f32" {
        (n + m) as f64 * gamma * 2f64.powi(-19)
    } else {
        0.0
    }
}

pub(crate) fn metric(gamma: f64, band: Option<usize>) -> SoftDtw {
    let soft = SoftDtw::new(gamma).unwrap();
    band.map_or(soft, |r| soft.with_band(r))
}

/// Paired batches with the given (len_x, len_y) pairs.
pub(crate) fn batches(
    seed: u64,
    shapes: &[(usize, usize)],
    dims: usize,
    scale: f64,
) -> (SeriesSet<f64>, SeriesSet<f64>) {
    let mut rng = rng(seed);
    let xs: Vec<usize> = shapes.iter().map(|s| s.0).collect();
    let ys: Vec<usize> = shapes.iter().map(|s| s.1).collect();
    (
        random_set(&mut rng, &xs, dims, scale),
        random_set(&mut rng, &ys, dims, scale),
    )
}

/// Values of `x` against `y` in precision `T` compared with the oracle on
/// the rounded inputs.
pub(crate) fn check_values<T: Float>(
    options: &ComputeOptions,
    x: &SeriesSet<f64>,
    y: &SeriesSet<f64>,
    soft: SoftDtw,
    context: &str,
) {
    let (x, y) = (x.cast::<T>().unwrap(), y.cast::<T>().unwrap());
    let got = soft_dtw_pairs(&x, &y, soft, options).unwrap();
    let (x, y) = (x.cast::<f64>().unwrap(), y.cast::<f64>().unwrap());
    let metric: Metric = soft.into();
    // The oracle's pairs on all threads: long ones take a while each.
    (0..x.len()).into_par_iter().for_each(|k| {
        let (a, b) = (x.series(k), y.series(k));
        let t = x.timestamps(k);
        let expected = oracle_pair(a, &t, b, &y.timestamps(k), metric);
        let (n, m) = (a.nrows(), b.nrows());
        let paths = if soft.is_divergence() { 2 } else { 1 };
        let bound = tolerance::<T>(n, m, a.ncols()) * error_scale(a, b, expected, metric)
            + paths as f64 * fast_math_bound::<T>(n, m, soft.gamma());
        let actual = got[k].to_f64();
        assert!(
            (actual - expected).abs() <= bound,
            "{context}: {soft:?} {} pair {k}, {n} x {m} x {}: got {actual:e}, oracle {expected:e}, |diff| {:e} > {bound:e}",
            T::NAME,
            a.ncols(),
            (actual - expected).abs()
        );
    });
}

const GAMMAS: [f64; 4] = [1e-3, 0.1, 1.0, 10.0];

fn values_short_and_unequal(options: ComputeOptions) {
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (33, 33),
        (33, 17),
        (5, 33),
        (128, 128),
        (128, 90),
    ];
    for dims in [1, 3] {
        let (x, y) = batches(10 + dims as u64, &shapes, dims, 1.0);
        for gamma in GAMMAS {
            for band in [None, Some(0), Some(5)] {
                let soft = metric(gamma, band);
                let context = format!("short pairs, dims {dims}");
                check_values::<f64>(&options, &x, &y, soft, &context);
                check_values::<f32>(&options, &x, &y, soft, &context);
            }
        }
    }
}

fn values_length_1000(options: ComputeOptions) {
    let shapes = [(1000, 1000), (1000, 33), (2, 1000)];
    for dims in [1, 3] {
        let (x, y) = batches(20 + dims as u64, &shapes, dims, 1.0);
        for (gamma, band) in [(1e-3, None), (0.1, Some(40)), (1.0, None), (10.0, Some(3))] {
            let soft = metric(gamma, band);
            let context = format!("length 1000, dims {dims}");
            check_values::<f64>(&options, &x, &y, soft, &context);
            check_values::<f32>(&options, &x, &y, soft, &context);
        }
    }
}

/// Soft-min is shifted by the smallest argument: with gamma 1e-3 and costs
/// of about 1e4 nothing overflows, and the value is within
/// `gamma (n + m) ln 3` below DTW (the DTW limit is kept).
fn stable_for_small_gamma_and_large_costs(options: ComputeOptions) {
    let (x, y) = batches(30, &[(50, 40), (7, 9), (64, 64)], 2, 70.0);
    let soft = metric(1e-3, None);
    check_values::<f64>(&options, &x, &y, soft, "costs of 1e4");
    check_values::<f32>(&options, &x, &y, soft, "costs of 1e4");
    let values = soft_dtw_pairs(&x, &y, soft, &options).unwrap();
    for k in 0..x.len() {
        let (a, b) = (x.series(k), y.series(k));
        let dtw = oracle::dtw(a, b, None);
        let slack = 1e-3 * (a.nrows() + b.nrows()) as f64 * 3f64.ln();
        let largest_cost = (0..a.nrows())
            .flat_map(|i| (0..b.nrows()).map(move |j| (i, j)))
            .map(|(i, j)| (&a.row(i) - &b.row(j)).mapv(|v| v * v).sum())
            .fold(0.0f64, f64::max);
        assert!(
            largest_cost > 1e4,
            "the test wants costs of 1e4, got {largest_cost}"
        );
        assert!(
            values[k] <= dtw * (1.0 + 1e-12) && values[k] >= dtw - slack - 1e-12 * dtw,
            "pair {k}: soft {} vs DTW {dtw}",
            values[k]
        );
    }
}

fn divergence_values(options: ComputeOptions) {
    let (x, y) = batches(40, &[(1, 1), (17, 33), (40, 12), (128, 128)], 2, 1.0);
    for (gamma, band) in [(0.1, None), (1.0, Some(3)), (10.0, None)] {
        let soft = metric(gamma, band).divergence();
        check_values::<f64>(&options, &x, &y, soft, "divergence");
        check_values::<f32>(&options, &x, &y, soft, "divergence");
        for set in [&x, &y] {
            let itself = soft_dtw_pairs(set, set, soft, &options).unwrap();
            assert!(itself.iter().all(|&v| v == 0.0), "D(x, x) = {itself:?}");
            let itself = soft_dtw_pairs(
                &set.cast::<f32>().unwrap(),
                &set.cast().unwrap(),
                soft,
                &options,
            )
            .unwrap();
            assert!(itself.iter().all(|&v| v == 0.0), "f32 D(x, x) = {itself:?}");
        }
    }
}

/// Gradients of `x` against `y` in precision `T` (both series) against the
/// oracle on the rounded inputs.
pub(crate) fn check_gradients<T: Float>(
    options: &ComputeOptions,
    x: &SeriesSet<f64>,
    y: &SeriesSet<f64>,
    gamma: f64,
    band: Option<usize>,
    context: &str,
) {
    let soft = metric(gamma, band);
    let (xt, yt) = (x.cast::<T>().unwrap(), y.cast::<T>().unwrap());
    let got = soft_dtw_pairs_gradient(&xt, &yt, soft, options, true).unwrap();
    let without_y = soft_dtw_pairs_gradient(&xt, &yt, soft, options, false).unwrap();
    assert!(without_y.grad_y.is_none());
    assert_eq!(
        without_y.grad_x, got.grad_x,
        "{context}: grad x depends on asking for grad y"
    );
    let grad_y = got.grad_y.as_ref().expect("grad y was asked for");
    let (x, y) = (xt.cast::<f64>().unwrap(), yt.cast::<f64>().unwrap());
    (0..grad_y.len()).into_par_iter().for_each(|k| {
        let grad_y = &grad_y.series(k);
        let (a, b) = (x.series(k), y.series(k));
        let (n, m) = (a.nrows(), b.nrows());
        let (value, ga) = oracle::soft_dtw_with_gradient_banded(a, b, gamma, band);
        let (_, gb) = oracle::soft_dtw_with_gradient_banded(b, a, gamma, band);
        let scale = error_scale(a, b, value, soft.into());
        let value_bound =
            tolerance::<T>(n, m, a.ncols()) * scale + fast_math_bound::<T>(n, m, gamma);
        let here = format!(
            "{context}: {} pair {k}, {n} x {m} x {}, gamma {gamma}, band {band:?}",
            T::NAME,
            a.ncols()
        );
        assert!(
            (got.values[k].to_f64() - value).abs() <= value_bound,
            "{here}: value {} vs oracle {value}",
            got.values[k]
        );
        assert_eq!(got.values[k], without_y.values[k]);
        let largest = ga
            .iter()
            .chain(gb.iter())
            .fold(0.0f64, |s, g| s.max(g.abs()));
        let bound = 64.0 * T::UNIT_ROUNDOFF * (scale / gamma + 2.0 * (n + m) as f64) * largest;
        assert_eq!(got.grad_x.series(k).dim(), (n, a.ncols()));
        assert_eq!(grad_y.dim(), (m, a.ncols()));
        for (which, mine, theirs) in [("x", &got.grad_x.series(k), &ga), ("y", grad_y, &gb)] {
            for ((index, g), e) in mine.indexed_iter().zip(theirs.iter()) {
                assert!(
                    (g.to_f64() - e).abs() <= bound,
                    "{here}: grad {which}{index:?} {g} vs oracle {e}, bound {bound:e}"
                );
            }
        }
    });
}

fn gradients_short_and_unequal(options: ComputeOptions) {
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (33, 33),
        (33, 17),
        (9, 33),
        (128, 100),
    ];
    for dims in [1, 3] {
        let (x, y) = batches(50 + dims as u64, &shapes, dims, 1.0);
        for gamma in GAMMAS {
            for band in [None, Some(0), Some(4)] {
                let context = format!("short pairs, dims {dims}");
                check_gradients::<f64>(&options, &x, &y, gamma, band, &context);
                check_gradients::<f32>(&options, &x, &y, gamma, band, &context);
            }
        }
    }
}

fn gradients_length_1000(options: ComputeOptions) {
    let (x, y) = batches(60, &[(1000, 1000), (1000, 40)], 1, 1.0);
    for (gamma, band) in [(0.1, None), (1.0, Some(30))] {
        check_gradients::<f64>(&options, &x, &y, gamma, band, "length 1000");
        check_gradients::<f32>(&options, &x, &y, gamma, band, "length 1000");
    }
}

/// The gradient against central differences of the backend's own f64
/// values, and the divergence's gradient against central differences of
/// the oracle's divergence.
fn gradients_match_finite_differences(options: ComputeOptions) {
    let h = 1e-6;
    let (x, y) = batches(70, &[(6, 8), (5, 5), (1, 4)], 2, 1.0);
    for (gamma, band) in [(0.1, None), (1.0, Some(1)), (10.0, None)] {
        for divergence in [false, true] {
            let soft = if divergence {
                metric(gamma, band).divergence()
            } else {
                metric(gamma, band)
            };
            let got = soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap();
            for k in 0..x.len() {
                let (a, b) = (x.series(k).to_owned(), y.series(k).to_owned());
                let value = |a: &Array2<f64>, b: &Array2<f64>| {
                    if divergence {
                        // The oracle's divergence: an independent check of
                        // the symmetric-gradient shortcut the library takes.
                        oracle::soft_dtw_divergence(a.view(), b.view(), gamma, band)
                    } else {
                        let pair = |s: &Array2<f64>| SeriesSet::from_series([s.view()]).unwrap();
                        soft_dtw_pairs(&pair(a), &pair(b), soft, &options).unwrap()[0]
                    }
                };
                for (which, gradient) in [
                    ("x", &got.grad_x.series(k)),
                    ("y", &got.grad_y.as_ref().unwrap().series(k)),
                ] {
                    for ((i, d), &g) in gradient.indexed_iter() {
                        let (mut plus, mut minus) =
                            ((a.clone(), b.clone()), (a.clone(), b.clone()));
                        if which == "x" {
                            plus.0[[i, d]] += h;
                            minus.0[[i, d]] -= h;
                        } else {
                            plus.1[[i, d]] += h;
                            minus.1[[i, d]] -= h;
                        }
                        let fd = (value(&plus.0, &plus.1) - value(&minus.0, &minus.1)) / (2.0 * h);
                        assert!(
                            (fd - g).abs() <= 1e-6 * g.abs().max(1.0),
                            "{soft:?} pair {k} grad {which}[{i}][{d}]: {g} vs finite difference {fd}"
                        );
                    }
                }
            }
        }
    }
}

fn divergence_gradient_of_itself_is_zero(options: ComputeOptions) {
    let (x, _) = batches(80, &[(12, 12), (30, 30)], 3, 1.0);
    let soft = metric(0.5, Some(4)).divergence();
    let got = soft_dtw_pairs_gradient(&x, &x, soft, &options, true).unwrap();
    assert!(got.values.iter().all(|&v| v == 0.0));
    // grad x: the gradient of sdtw(x, x) with respect to its first
    // argument minus the same pair's, computed alike: exactly 0.
    for g in &got.grad_x {
        assert!(g.iter().all(|&v| v == 0.0), "{g}");
    }
    // grad y: with respect to the second argument minus the first, equal
    // by symmetry up to the order of roundings.
    let plain = soft_dtw_pairs_gradient(&x, &x, metric(0.5, Some(4)), &options, false).unwrap();
    for (g, scale) in got.grad_y.as_ref().unwrap().iter().zip(&plain.grad_x) {
        let largest = scale.iter().fold(0.0f64, |s, v| s.max(v.abs()));
        assert!(
            g.iter().all(|&v| v.abs() <= 1e-12 * largest.max(1.0)),
            "{g}"
        );
    }
}

/// Tiny memory budgets cut the batch into many chunks; the results are the
/// same as in one piece.
fn chunked_equals_whole(options: ComputeOptions) {
    let lengths_x: Vec<usize> = (0..40).map(|k| 1 + (k * 7) % 45).collect();
    let lengths_y: Vec<usize> = (0..40).map(|k| 2 + (k * 5) % 60).collect();
    let shapes: Vec<_> = lengths_x.into_iter().zip(lengths_y).collect();
    let (x, y) = batches(90, &shapes, 2, 1.0);
    let tight = ComputeOptions {
        gpu_memory_budget: Some(40 * 1024),
        ..options
    };
    let soft = metric(0.5, None);
    assert_eq!(
        soft_dtw_pairs(&x, &y, soft, &options).unwrap(),
        soft_dtw_pairs(&x, &y, soft, &tight).unwrap()
    );
    assert_eq!(
        soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap(),
        soft_dtw_pairs_gradient(&x, &y, soft, &tight, true).unwrap()
    );
    if options.device == Device::Gpu {
        let too_small = ComputeOptions {
            gpu_memory_budget: Some(256),
            ..options
        };
        let error = soft_dtw_pairs_gradient(&x, &y, soft, &too_small, false).unwrap_err();
        assert!(error.to_string().contains("device memory"), "{error}");
    }
}

fn bad_input_is_an_error(options: ComputeOptions) {
    let (x, y) = batches(95, &[(3, 4), (5, 6)], 2, 1.0);
    let one = x.slice(0..1);
    let soft = metric(1.0, None);
    let error = soft_dtw_pairs(&x, &one, soft, &options).unwrap_err();
    assert!(matches!(error, Error::InvalidInput(_)), "{error}");
    assert!(error.to_string().contains("as many series"), "{error}");
    let error = soft_dtw_pairs_gradient(&one, &x, soft, &options, true).unwrap_err();
    assert!(matches!(error, Error::InvalidInput(_)), "{error}");
    let (_, flat) = batches(96, &[(3, 4), (5, 6)], 1, 1.0);
    let error = soft_dtw_pairs(&x, &flat, soft, &options).unwrap_err();
    assert!(
        matches!(
            error,
            Error::DimensionMismatch {
                first: 2,
                second: 1
            }
        ),
        "{error}"
    );
    let error = soft_dtw_pairs_gradient(&x, &flat, soft, &options, false).unwrap_err();
    assert!(matches!(error, Error::DimensionMismatch { .. }), "{error}");
    // A gamma whose f32 reciprocal overflows.
    let (x32, y32) = (x.cast::<f32>().unwrap(), y.cast::<f32>().unwrap());
    let error = soft_dtw_pairs(&x32, &y32, metric(1e-40, None), &options).unwrap_err();
    assert!(
        matches!(error, Error::InvalidParameter { name: "gamma", .. }),
        "{error}"
    );
    // (A variant's name that does not parse: `catalogue::variants_parse_their_own_names_only`.)
    if options.device == Device::Gpu {
        let naive = ComputeOptions {
            gpu_variant: Some(Variant::Naive),
            ..options
        };
        let error = soft_dtw_pairs(&x, &y, soft, &naive).unwrap_err();
        assert!(error.to_string().contains("naive"), "{error}");
    }
}

/// The Soft-DTW divergence and band through `distance_matrix` (A x B and a
/// batch against itself).
fn matrices_with_band_and_divergence(options: ComputeOptions) {
    let mut rng = rng(97);
    let a = random_set(&mut rng, &[1, 5, 17, 40], 2, 1.0);
    let b = random_set(&mut rng, &[3, 17, 33], 2, 1.0);
    for soft in [
        metric(0.5, Some(2)),
        metric(1.0, None).divergence(),
        metric(0.1, Some(4)).divergence(),
    ] {
        let metric: Metric = soft.into();
        for (a, b) in [(&a, &b), (&a, &a)] {
            let got = timewarp::distance_matrix(a, Some(b), metric, &options).unwrap();
            assert_matches_oracle(&got, a, b, metric, "matrix");
            let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
            let got = timewarp::distance_matrix(&a32, Some(&b32), metric, &options).unwrap();
            assert_matches_oracle(&got, &a32, &b32, metric, "matrix f32");
        }
        let itself = timewarp::distance_matrix(&a, None, metric, &options).unwrap();
        assert_matches_oracle(&itself, &a, &a, metric, "self-matrix");
        if soft.is_divergence() {
            for i in 0..a.len() {
                assert!(
                    itself[[i, i]].abs() <= 1e-12,
                    "D(a_{i}, a_{i}) = {}",
                    itself[[i, i]]
                );
            }
        }
    }
}

fn batches_4096() -> (SeriesSet<f64>, SeriesSet<f64>) {
    batches(99, &[(4096, 4096), (4096, 1000), (300, 4096)], 1, 1.0)
}

/// GPU only: values of pairs of 4096 (the oracle is 16M cells).
fn length_4096(options: ComputeOptions) {
    let (x, y) = batches_4096();
    check_values::<f64>(&options, &x, &y, metric(0.1, None), "length 4096");
    check_values::<f32>(&options, &x, &y, metric(0.1, None), "length 4096");
    check_values::<f32>(&options, &x, &y, metric(1.0, Some(100)), "length 4096");
}

/// GPU only: gradients of pairs of 4096 (one kernel, whatever the
/// forward variant).
fn gradients_length_4096(options: ComputeOptions) {
    let (x, y) = batches_4096();
    let (x, y) = (x.slice(0..2), y.slice(0..2));
    check_gradients::<f64>(&options, &x, &y, 1.0, None, "length 4096");
    check_gradients::<f32>(&options, &x, &y, 0.1, Some(64), "length 4096");
}

/// GPU only: the column driver's gradient in each of its shapes (the
/// narrowest stripe that covers the longest series `y` of the call): one
/// warp of 4 columns a lane up to 128 samples, then 4 warps' panels of 4
/// columns a lane (2 to 4 panels, the last full or not) up to 512, and of
/// 8 up to 1,024; multivariate, and in a band. And 600 pairs up to 512
/// samples, more than the panels of 4 warps may take (their warps would
/// fill over half of an H100 or H200), which go to one warp a pair of 16
/// columns a lane.
fn gradients_warp_stripes(options: ComputeOptions) {
    let many: Vec<(usize, usize)> = (0..600).map(|k| (3 + k % 11, 257 + k % 256)).collect();
    let (x, y) = batches(150, &many, 1, 1.0);
    check_gradients::<f32>(&options, &x, &y, 1.0, None, "600 pairs up to 512");
    check_gradients::<f64>(&options, &x, &y, 0.1, Some(30), "600 pairs up to 512");
    let calls: [&[(usize, usize)]; 4] = [
        &[(100, 128), (130, 7)],
        &[(200, 256), (250, 200), (64, 129)],
        &[(512, 512), (300, 400), (5, 511)],
        &[(40, 1024), (700, 600), (3, 513)],
    ];
    for (k, shapes) in calls.into_iter().enumerate() {
        for dims in [1, 2] {
            let (x, y) = batches(110 + 10 * k as u64 + dims as u64, shapes, dims, 1.0);
            for (gamma, band) in [(0.1, None), (1.0, Some(20))] {
                let context = format!("warp stripes, call {k}, dims {dims}");
                check_gradients::<f64>(&options, &x, &y, gamma, band, &context);
                check_gradients::<f32>(&options, &x, &y, gamma, band, &context);
            }
        }
    }
}

/// GPU only: the divergence's gradient where its three launches take
/// panels of different counts (`x` with `y`, `x` with itself, `y` with
/// itself: 2 to 6 panels of 4 warps' 8 columns a lane, one workspace of
/// borders sized for the longest series and zeroed before each launch),
/// against the oracle: the gradient of `S(x, y) - (S(x, x) + S(y, y)) / 2`
/// with respect to `x` is `grad_x S(x, y) - grad_x S(x, x)` (`S(x, x)` is
/// symmetric), and likewise for `y`.
fn divergence_gradients_in_panels(options: ComputeOptions) {
    let (x, y) = batches(140, &[(300, 700), (1000, 150), (513, 514)], 1, 1.0);
    let gamma = 1.0;
    let soft = metric(gamma, None).divergence();
    let got = soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap();
    let grad_y = got.grad_y.as_ref().expect("grad y was asked for");
    for (k, grad_y) in grad_y.iter().enumerate() {
        let (a, b) = (x.series(k), y.series(k));
        let gradient = |p: ArrayView2<f64>, q: ArrayView2<f64>| {
            oracle::soft_dtw_with_gradient_banded(p, q, gamma, None)
        };
        let ((value, ga), (_, gb)) = (gradient(a, b), gradient(b, a));
        let ((_, gaa), (_, gbb)) = (gradient(a, a), gradient(b, b));
        let expected_value = oracle::soft_dtw_divergence(a, b, gamma, None);
        let (n, m) = (a.nrows(), b.nrows());
        let scale = error_scale(a, b, value, metric(gamma, None).into());
        let here = format!("divergence in panels, pair {k}, {n} x {m}");
        assert!(
            (got.values[k] - expected_value).abs() <= 1e-9 * scale,
            "{here}: value {} vs oracle {expected_value}",
            got.values[k]
        );
        let largest = [&ga, &gb, &gaa, &gbb]
            .iter()
            .flat_map(|g| g.iter())
            .fold(0.0f64, |s, g| s.max(g.abs()));
        // Two gradients' bounds (as `check_gradients`'), the longest pair's.
        let longest = 2 * n.max(m);
        let bound =
            2.0 * 64.0 * f64::EPSILON / 2.0 * (scale / gamma + 2.0 * longest as f64) * largest;
        for (which, mine, first, second) in [
            ("x", &got.grad_x.series(k), &ga, &gaa),
            ("y", &grad_y, &gb, &gbb),
        ] {
            for ((index, g), (e, s)) in mine.indexed_iter().zip(first.iter().zip(second.iter())) {
                let expected = e - s;
                assert!(
                    (g - expected).abs() <= bound,
                    "{here}: grad {which}{index:?} {g} vs oracle {expected}, bound {bound:e}"
                );
            }
        }
    }
}

/// GPU only: the gradient's variants: `warp` for series `y` past its widest
/// stripe, and a variant that computes no gradient, are errors before any
/// work; `stencil` and `warp` give the oracle's gradients.
fn gradient_variants(options: ComputeOptions) {
    let soft = metric(1.0, None);
    let with = |variant| ComputeOptions {
        gpu_variant: Some(variant),
        ..options
    };
    let (x, y) = batches(130, &[(20, 1100)], 1, 1.0);
    let error = soft_dtw_pairs_gradient(&x, &y, soft, &with(Variant::Warp), true)
        .expect_err("the warp gradient of a series of 1100");
    assert!(error.to_string().contains("up to 1024 samples"), "{error}");
    check_gradients::<f64>(&with(Variant::Stencil), &x, &y, 1.0, None, "stencil, 1100");
    let (x, y) = batches(131, &[(20, 30)], 1, 1.0);
    let error = soft_dtw_pairs_gradient(&x, &y, soft, &with(Variant::Tiled), true)
        .expect_err("the tiled variant's gradient");
    assert!(
        error.to_string().contains("computes no gradient"),
        "{error}"
    );
    for variant in [Variant::Warp, Variant::Stencil] {
        let chosen = timewarp::soft_dtw_pairs_gradient_variant(&x, &y, soft, &with(variant));
        assert_eq!(chosen.unwrap(), variant);
    }
    let default = timewarp::soft_dtw_pairs_gradient_variant(&x, &y, soft, &options);
    assert_eq!(default.unwrap(), Variant::Warp);
}

/// GPU only: a pair whose six gradient anti-diagonals (6 x 4901 f64 =
/// 235 KB) exceed an H100/H200 block's shared memory (227 KiB), so the
/// gradient kernel keeps them in global memory.
fn gradient_beyond_shared_memory(options: ComputeOptions) {
    let (x, y) = batches(98, &[(5000, 4900)], 1, 1.0);
    check_gradients::<f64>(&options, &x, &y, 1.0, None, "rings in global memory");
}

/// Both batches uploaded for `options` (asserting where they live).
fn uploaded<T: Float>(
    options: &ComputeOptions,
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
) -> (timewarp::ResidentSet<T>, timewarp::ResidentSet<T>) {
    let (rx, ry) = (upload(x, options).unwrap(), upload(y, options).unwrap());
    let on_gpu = options.device == Device::Gpu;
    assert_eq!((rx.on_gpu(), ry.on_gpu()), (on_gpu, on_gpu));
    (rx, ry)
}

/// Resident values and gradients of `x` against `y` (and of `x` against
/// itself) in precision `T` equal the host batches', bit for bit.
fn check_resident<T: Float>(
    options: &ComputeOptions,
    x: &SeriesSet<f64>,
    y: &SeriesSet<f64>,
    context: &str,
) {
    let (x, y) = (x.cast::<T>().unwrap(), y.cast::<T>().unwrap());
    let (rx, ry) = uploaded(options, &x, &y);
    for soft in [
        metric(0.1, None),
        metric(1.0, Some(5)),
        metric(0.5, None).divergence(),
        metric(1.0, Some(3)).divergence(),
    ] {
        let here = format!("{context}: {soft:?} {}", T::NAME);
        let expected = soft_dtw_pairs(&x, &y, soft, options).unwrap();
        let got = soft_dtw_pairs_resident(&rx, &ry, soft, options).unwrap();
        assert_eq!(got, expected, "{here}: values");
        let itself = soft_dtw_pairs_resident(&rx, &rx, soft, options).unwrap();
        assert_eq!(
            itself,
            soft_dtw_pairs(&x, &x, soft, options).unwrap(),
            "{here}: x against itself"
        );
        if soft.is_divergence() {
            assert!(itself.iter().all(|&v| v == T::ZERO), "{here}: D(x, x)");
        }
        // The gradient's variants are the warp and the stencil driver's.
        if matches!(
            options.gpu_variant,
            None | Some(Variant::Warp) | Some(Variant::Stencil)
        ) {
            for with_y in [false, true] {
                let expected = soft_dtw_pairs_gradient(&x, &y, soft, options, with_y).unwrap();
                let got =
                    soft_dtw_pairs_gradient_resident(&rx, &ry, soft, options, with_y).unwrap();
                assert_eq!(got, expected, "{here}: gradients, with y {with_y}");
            }
        }
    }
}

/// Resident sets against the host batches: unequal lengths (1 to 200),
/// dims 1 and 3, f64 and f32, bands, the divergence.
fn resident_equals_host(options: ComputeOptions) {
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (33, 33),
        (33, 17),
        (5, 33),
        (128, 90),
        (40, 200),
    ];
    for dims in [1, 3] {
        let (x, y) = batches(200 + dims as u64, &shapes, dims, 1.0);
        let context = format!("resident, dims {dims}");
        check_resident::<f64>(&options, &x, &y, &context);
        check_resident::<f32>(&options, &x, &y, &context);
    }
    // A resident set as both sides of every pair.
    let (x, _) = batches(210, &[(7, 7), (50, 50)], 2, 1.0);
    let (rx, _) = uploaded(&options, &x, &x);
    let soft = metric(0.3, Some(4));
    assert_eq!(
        soft_dtw_pairs_resident(&rx, &rx, soft, &options).unwrap(),
        soft_dtw_pairs(&x, &x, soft, &options).unwrap()
    );
}

/// Memory budgets that cut the resident batch into many chunks (the
/// budget bounds what the call allocates besides the resident sets) give
/// the host batches' results in one piece; one too small for the outputs
/// is an error.
fn resident_chunked_equals_whole(options: ComputeOptions) {
    let lengths_x: Vec<usize> = (0..40).map(|k| 1 + (k * 7) % 45).collect();
    let lengths_y: Vec<usize> = (0..40).map(|k| 2 + (k * 5) % 60).collect();
    let shapes: Vec<_> = lengths_x.into_iter().zip(lengths_y).collect();
    let (x, y) = batches(220, &shapes, 2, 1.0);
    let (rx, ry) = uploaded(&options, &x, &y);
    let budget = |bytes| ComputeOptions {
        gpu_memory_budget: Some(bytes),
        ..options
    };
    for soft in [metric(0.5, None), metric(0.5, Some(6)).divergence()] {
        // Values: a few pairs a chunk.
        assert_eq!(
            soft_dtw_pairs_resident(&rx, &ry, soft, &budget(256)).unwrap(),
            soft_dtw_pairs(&x, &y, soft, &options).unwrap(),
            "{soft:?}"
        );
        if options.gpu_variant.is_some() {
            continue;
        }
        // Gradients: the outputs (about 70 KB) and a few cost matrices a
        // chunk (of the divergence's three launches, up to 90 KB a pair).
        assert_eq!(
            soft_dtw_pairs_gradient_resident(&rx, &ry, soft, &budget(192 << 10), true).unwrap(),
            soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap(),
            "{soft:?}"
        );
        if options.device == Device::Gpu {
            let error = soft_dtw_pairs_gradient_resident(&rx, &ry, soft, &budget(4 << 10), false)
                .unwrap_err();
            assert!(error.to_string().contains("device memory"), "{error}");
            // Less than one output value (a pair a chunk still takes one).
            let error = soft_dtw_pairs_resident(&rx, &ry, soft, &budget(4)).unwrap_err();
            assert!(error.to_string().contains("device memory"), "{error}");
        }
    }
}

/// The errors of resident paired sets: counts and dims that differ, a
/// gamma that does not fit, a device that disagrees with where the sets
/// live; on a GPU also sets in different places and a matrix-only variant.
fn resident_errors(options: ComputeOptions) {
    let (x, y) = batches(230, &[(3, 4), (5, 6)], 2, 1.0);
    let (_, flat) = batches(231, &[(3, 4), (5, 6)], 1, 1.0);
    let (rx, ry) = uploaded(&options, &x, &y);
    let one = upload(&x.slice(0..1), &options).unwrap();
    let flat = upload(&flat, &options).unwrap();
    let soft = metric(1.0, None);
    for error in [
        soft_dtw_pairs_resident(&rx, &one, soft, &options).unwrap_err(),
        soft_dtw_pairs_gradient_resident(&one, &ry, soft.divergence(), &options, true).unwrap_err(),
    ] {
        assert!(matches!(error, Error::InvalidInput(_)), "{error}");
        assert!(error.to_string().contains("as many series"), "{error}");
    }
    for error in [
        soft_dtw_pairs_resident(&rx, &flat, soft, &options).unwrap_err(),
        soft_dtw_pairs_gradient_resident(&rx, &flat, soft, &options, false).unwrap_err(),
    ] {
        assert!(
            matches!(
                error,
                Error::DimensionMismatch {
                    first: 2,
                    second: 1
                }
            ),
            "{error}"
        );
    }
    let (x32, y32) = uploaded(
        &options,
        &x.cast::<f32>().unwrap(),
        &y.cast::<f32>().unwrap(),
    );
    let error = soft_dtw_pairs_resident(&x32, &y32, metric(1e-40, None), &options).unwrap_err();
    assert!(
        matches!(error, Error::InvalidParameter { name: "gamma", .. }),
        "{error}"
    );
    // Sets uploaded for one device, options asking for the other.
    let (other, lives) = match options.device {
        Device::Gpu => (Device::Cpu, "GPU memory"),
        _ => (Device::Gpu, "host memory"),
    };
    let elsewhere = ComputeOptions {
        device: other,
        ..options
    };
    for error in [
        soft_dtw_pairs_resident(&rx, &ry, soft, &elsewhere).unwrap_err(),
        soft_dtw_pairs_gradient_resident(&rx, &ry, soft, &elsewhere, true).unwrap_err(),
    ] {
        assert!(matches!(error, Error::InvalidInput(_)), "{error}");
        assert!(error.to_string().contains(lives), "{error}");
    }
    if options.device != Device::Gpu {
        return;
    }
    // One set on the GPU, the other on the CPU: with any device.
    let on_cpu = upload(&y, &ComputeOptions::on(Device::Cpu)).unwrap();
    for device in [Device::Auto, Device::Gpu, Device::Cpu] {
        let options = ComputeOptions { device, ..options };
        for error in [
            soft_dtw_pairs_resident(&rx, &on_cpu, soft, &options).unwrap_err(),
            soft_dtw_pairs_gradient_resident(&on_cpu, &rx, soft, &options, false).unwrap_err(),
        ] {
            assert!(matches!(error, Error::InvalidInput(_)), "{error}");
            assert!(error.to_string().contains("same place"), "{error}");
        }
    }
    let naive = ComputeOptions {
        gpu_variant: Some(Variant::Naive),
        ..options
    };
    let error = soft_dtw_pairs_resident(&rx, &ry, soft, &naive).unwrap_err();
    assert!(error.to_string().contains("naive"), "{error}");
}

/// GPU only: long pairs, where the default takes the tiled kernel (values)
/// and the gradient keeps its rings in global memory, resident == host.
fn resident_long_pairs(options: ComputeOptions) {
    let (x, y) = batches(240, &[(3000, 2500)], 1, 1.0);
    let (rx, ry) = uploaded(&options, &x, &y);
    for soft in [metric(0.1, None), metric(1.0, Some(200)).divergence()] {
        assert_eq!(
            soft_dtw_pairs_resident(&rx, &ry, soft, &options).unwrap(),
            soft_dtw_pairs(&x, &y, soft, &options).unwrap(),
            "{soft:?}"
        );
    }
    let (x, y) = batches(241, &[(5000, 4900)], 1, 1.0);
    let (rx, ry) = uploaded(&options, &x, &y);
    let soft = metric(1.0, None);
    assert_eq!(
        soft_dtw_pairs_gradient_resident(&rx, &ry, soft, &options, true).unwrap(),
        soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap()
    );
}

/// Host batches large enough that their upload is staged by several
/// threads and copied in several pieces (over 256 KiB; the values of the
/// first, without a divergence, stream instead: `streamed_host_batches`):
/// 1024 pairs of 128 samples (no offsets copied: every series of one
/// length), and 600 pairs
/// of 1 to 300 samples of 3 values (offsets and values staged apart). The
/// values against the oracle, and values and gradients against resident
/// sets (uploaded another way), bit for bit, in f32 and f64.
fn large_host_batches(options: ComputeOptions) {
    let uniform: Vec<(usize, usize)> = vec![(128, 128); 1024];
    let (x, y) = batches(250, &uniform, 1, 1.0);
    check_values::<f32>(&options, &x, &y, metric(0.1, None), "1024 x 128");
    check_resident::<f32>(&options, &x, &y, "1024 x 128");
    check_resident::<f64>(&options, &x, &y, "1024 x 128");
    let unequal: Vec<(usize, usize)> = (0..600)
        .map(|k| (1 + (k * 37) % 300, 1 + (k * 53) % 300))
        .collect();
    let (x, y) = batches(251, &unequal, 3, 1.0);
    check_values::<f64>(&options, &x, &y, metric(1.0, None), "600 unequal x 3");
    check_resident::<f64>(&options, &x, &y, "600 unequal x 3");
}

/// GPU only: host batches in ordinary memory that the streamed kernel
/// computes while the host writes them (1 to 2 MiB of series), each call
/// counted as streamed (`timewarp::internals::this_thread_streamed_calls`):
/// 1024 pairs of 128 and 2048 of 64 (1 MiB in f32, 2 MiB in f64), 700 of
/// 1 to 128 samples of 2 values (offsets, short and long series; in f64
/// only). In f32 and f64, the values against the oracle and against
/// resident sets (copied first, the ordinary kernel), bit for bit; and the
/// pairs that do not stream, likewise: the unequal ones in f32 (too few
/// bytes), 600 of 129 (two panels), 300 of 40. Then the faults: a host
/// that stops midway gets its error back and the next call works, and
/// warps that give up waiting for a stalled host leave the call to the
/// ordinary way, with the same values.
fn streamed_host_batches(options: ComputeOptions) {
    // Streaming is one GPU's path (on several the pairs are spread).
    let options = options.with_gpus(timewarp::GpuSet::one(0).unwrap());
    let unequal: Vec<(usize, usize)> = (0..700)
        .map(|k| (1 + (k * 37) % 128, 1 + (k * 53) % 128))
        .collect();
    // Whether the call streams in f32 and in f64.
    let cases = [
        ("1024 x 128", vec![(128, 128); 1024], 1, [true, true]),
        ("2048 x 64", vec![(64, 64); 2048], 1, [true, true]),
        ("700 unequal x 2", unequal, 2, [false, true]),
        ("600 x 129", vec![(129, 129); 600], 1, [false, false]),
        ("300 x 40", vec![(40, 40); 300], 1, [false, false]),
    ];
    for (k, (context, shapes, dims, [in_f32, in_f64])) in cases.iter().enumerate() {
        let (x, y) = batches(260 + k as u64, shapes, *dims, 1.0);
        let soft = metric(0.5, None);
        streamed_equals_resident::<f32>(&options, (&x, &y), soft, *in_f32, context);
        streamed_equals_resident::<f64>(&options, (&x, &y), soft, *in_f64, context);
        check_values::<f32>(&options, &x, &y, soft, context);
        check_values::<f64>(&options, &x, &y, soft, context);
    }
    let (x, y) = batches(270, &[(128, 128); 1024], 1, 1.0);
    let (x, y) = (x.cast::<f32>().unwrap(), y.cast::<f32>().unwrap());
    let soft = metric(1.0, None);
    runtime::inject_streamed_fault(runtime::StreamedFault::FailAfterFirstChunk);
    let error = soft_dtw_pairs(&x, &y, soft, &options).unwrap_err();
    assert!(error.to_string().contains("injected fault"), "{error}");
    let (rx, ry) = uploaded(&options, &x, &y);
    let expected = soft_dtw_pairs_resident(&rx, &ry, soft, &options).unwrap();
    let before = runtime::this_thread_streamed_calls();
    assert_eq!(soft_dtw_pairs(&x, &y, soft, &options).unwrap(), expected);
    assert_eq!(runtime::this_thread_streamed_calls(), before + 1);
    runtime::inject_streamed_fault(runtime::StreamedFault::StallBeforeLastChunk);
    let fallbacks = timewarp::gpu::streamed_fallbacks();
    assert_eq!(soft_dtw_pairs(&x, &y, soft, &options).unwrap(), expected);
    assert_eq!(
        runtime::this_thread_streamed_calls(),
        before + 1,
        "the kernel gave up, the call did not stream"
    );
    // Other threads' calls may fall back too, never fewer.
    assert!(
        timewarp::gpu::streamed_fallbacks() > fallbacks,
        "the fallback is counted"
    );
}

/// The values of host batches `x` and `y` in precision `T`, streamed (or,
/// unless `streams`, not), equal the values of resident sets of them, bit
/// for bit.
fn streamed_equals_resident<T: Float>(
    options: &ComputeOptions,
    (x, y): (&SeriesSet<f64>, &SeriesSet<f64>),
    soft: SoftDtw,
    streams: bool,
    context: &str,
) {
    let (x, y) = (x.cast::<T>().unwrap(), y.cast::<T>().unwrap());
    let before = runtime::this_thread_streamed_calls();
    let got = soft_dtw_pairs(&x, &y, soft, options).unwrap();
    let here = format!("{context} {}", T::NAME);
    let streamed = runtime::this_thread_streamed_calls() - before;
    assert_eq!(streamed, u64::from(streams), "{here}: streamed calls");
    let (rx, ry) = uploaded(options, &x, &y);
    let expected = soft_dtw_pairs_resident(&rx, &ry, soft, options).unwrap();
    assert_eq!(got, expected, "{here}: values");
}

macro_rules! cpu_and_gpu {
    ($module:ident, $variant:expr, [$($scenario:ident),* $(,)?]) => {
        mod $module {
            use timewarp::{Variant, ComputeOptions, Device};
            $( #[test] fn $scenario() {
                let variant: Option<Variant> = $variant;
                let test = concat!(stringify!($module), "::", stringify!($scenario));
                if let Some(_timed) = crate::common::on_gpu(test) {
                    super::$scenario(ComputeOptions { gpu_variant: variant, ..ComputeOptions::on(Device::Gpu) });
                }
            } )*
        }
    };
}

mod cpu {
    use timewarp::{ComputeOptions, Device};
    macro_rules! on_cpu {
        ($($scenario:ident),* $(,)?) => {
            $( #[test] fn $scenario() { super::$scenario(ComputeOptions::on(Device::Cpu)); } )*
        };
    }
    on_cpu!(
        values_short_and_unequal,
        values_length_1000,
        stable_for_small_gamma_and_large_costs,
        divergence_values,
        gradients_short_and_unequal,
        gradients_length_1000,
        gradients_match_finite_differences,
        divergence_gradient_of_itself_is_zero,
        chunked_equals_whole,
        bad_input_is_an_error,
        matrices_with_band_and_divergence,
        resident_equals_host,
        resident_chunked_equals_whole,
        resident_errors,
    );
}

// The default GPU variant: every scenario, and the long pairs.
cpu_and_gpu!(
    gpu,
    None,
    [
        values_short_and_unequal,
        values_length_1000,
        stable_for_small_gamma_and_large_costs,
        divergence_values,
        gradients_short_and_unequal,
        gradients_length_1000,
        gradients_match_finite_differences,
        divergence_gradient_of_itself_is_zero,
        chunked_equals_whole,
        bad_input_is_an_error,
        matrices_with_band_and_divergence,
        length_4096,
        gradients_length_4096,
        gradients_warp_stripes,
        divergence_gradients_in_panels,
        gradient_variants,
        gradient_beyond_shared_memory,
        resident_equals_host,
        resident_chunked_equals_whole,
        resident_errors,
        resident_long_pairs,
        large_host_batches,
        streamed_host_batches,
    ]
);
// Each variant on the value scenarios, and its gradient (stencil, warp).
cpu_and_gpu!(
    gpu_stencil,
    Some(Variant::Stencil),
    [
        gradients_short_and_unequal,
        divergence_gradient_of_itself_is_zero,
        values_short_and_unequal,
        values_length_1000,
        stable_for_small_gamma_and_large_costs,
        divergence_values,
        chunked_equals_whole,
        matrices_with_band_and_divergence,
        length_4096,
        resident_equals_host,
        resident_chunked_equals_whole,
    ]
);
cpu_and_gpu!(
    gpu_warp,
    Some(Variant::Warp),
    [
        gradients_short_and_unequal,
        values_short_and_unequal,
        values_length_1000,
        stable_for_small_gamma_and_large_costs,
        divergence_values,
        chunked_equals_whole,
        matrices_with_band_and_divergence,
        resident_equals_host,
        resident_chunked_equals_whole,
        large_host_batches,
        streamed_host_batches,
    ]
);
cpu_and_gpu!(
    gpu_tiled,
    Some(Variant::Tiled),
    [
        values_short_and_unequal,
        stable_for_small_gamma_and_large_costs,
        divergence_values,
        resident_equals_host,
    ]
);

/// The library's Soft-DTW value and gradient of one pair
/// (`soft_dtw_gradient`, on the CPU) against the oracle's.
fn single_pair_gradient<T: Float>(
    length_x: usize,
    length_y: usize,
    dims: usize,
    gamma: f64,
    seed: u64,
) {
    let mut rng = rng(seed);
    let x = random_series(&mut rng, length_x, dims, 1.0).mapv(T::from_f64);
    let y = random_series(&mut rng, length_y, dims, 1.0).mapv(T::from_f64);
    let (value, gradient) =
        soft_dtw_gradient(x.view(), y.view(), SoftDtw::new(gamma).unwrap()).unwrap();
    let (x64, y64) = (x.mapv(|v| v.to_f64()), y.mapv(|v| v.to_f64()));
    let (expected, expected_gradient) =
        oracle::soft_dtw_with_gradient(x64.view(), y64.view(), gamma);
    let metric: Metric = SoftDtw::new(gamma).unwrap().into();
    let scale = error_scale(x64.view(), y64.view(), expected, metric);
    let value_bound = tolerance::<T>(length_x, length_y, dims) * scale;
    assert!(
        (value.to_f64() - expected).abs() <= value_bound,
        "{}: value {value} vs oracle {expected}, bound {value_bound:e}",
        T::NAME
    );
    // The backward pass weighs each step by exp((R' - R - cost) / gamma): a
    // rounding error of u |R| in the cost matrix (|R| <= scale) becomes a
    // relative error of u |R| / gamma in a weight, and E multiplies such
    // weights along paths of n + m steps. So each entry is off by at most
    // about u (scale / gamma + 2 (n + m)) relative to the largest entry; 64
    // covers the constant of the few roundings per step (the same bound as
    // the oracle module's tests, with T's u).
    let largest = expected_gradient.iter().fold(0.0f64, |m, g| m.max(g.abs()));
    let gradient_bound =
        64.0 * T::UNIT_ROUNDOFF * (scale / gamma + 2.0 * (length_x + length_y) as f64) * largest;
    for (got, want) in gradient.iter().zip(expected_gradient.iter()) {
        assert!(
            (got.to_f64() - want).abs() <= gradient_bound,
            "{} gamma {gamma}: gradient {got} vs oracle {want}, bound {gradient_bound:e}",
            T::NAME
        );
    }
}

#[test]
fn single_pair_gradient_matches_the_oracle() {
    for (n, m, dims, gamma) in [
        (1, 1, 1, 1.0),
        (5, 9, 1, 0.1),
        (17, 11, 3, 1.0),
        (40, 40, 2, 0.01),
        (30, 12, 1, 10.0),
    ] {
        single_pair_gradient::<f64>(n, m, dims, gamma, 11);
        single_pair_gradient::<f32>(n, m, dims, gamma, 12);
    }
}
