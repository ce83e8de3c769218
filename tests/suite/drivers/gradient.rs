//! The column driver's gradient (`warp_gradient`, the GPU's
//! `warp_gradient` kernels) on emulated warps against the oracle's
//! Soft-DTW value and gradients: warps of 4 and 32 lanes, stripes of 1, 2
//! and 4 columns, series `b` of one lane's stripe up to the whole warp's
//! (the seed of the backward pass in a stripe's last cell or inside it),
//! unequal lengths, multivariate samples (the gradient with respect to `a`
//! added to memory lane after lane), bands of radius 0 and 2, and the
//! launch of several pairs of different lengths as the kernels run it.
//! Tolerances as the stencil driver's tests (`drivers::stencil`).

use crate::common::driver::Pair;
use crate::common::error_scale;
use crate::common::hardware::{run_warp, Shared};
use ndarray::Array2;
use std::ptr::null_mut;
use timewarp::{oracle, Metric, SoftDtw};
use timewarp_kernels::drivers::columns::gradient::{store_len, warp_gradient};
use timewarp_kernels::launch::pairs::{GradientBuffers, PairsLaunch, StencilLaunch};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{SetRef, SoftDtwParams};

/// Slots past the store that must stay NaN.
const GUARD: usize = 16;

/// The value and gradients with respect to `a` and (if `with_b`) `b` by
/// one emulated warp of `N` lanes, `S` columns a lane.
fn in_warp<const N: usize, const S: usize>(
    params: &SoftDtwParams<f64>,
    pair: &Pair,
    with_b: bool,
) -> (f64, Array2<f64>, Array2<f64>) {
    let (a, b) = pair.series();
    let len = store_len(a.len, b.len, S);
    let mut store = vec![f64::NAN; len + GUARD];
    let mut grad_a = Array2::<f64>::zeros(pair.a.raw_dim());
    let mut grad_b = Array2::<f64>::zeros(pair.b.raw_dim());
    let grad_b_ptr = if with_b {
        grad_b.as_mut_ptr()
    } else {
        null_mut()
    };
    let pointers = Shared((a, b, store.as_mut_ptr(), grad_a.as_mut_ptr(), grad_b_ptr));
    let value = run_warp::<N, _>(|warp| {
        let (a, b, store, grad_a, grad_b) = pointers.get();
        // SAFETY: b fits the warp's stripes (the callers' shapes); the
        // store holds `store_len` values, the gradients the series' shapes.
        unsafe { warp_gradient::<f64, _, _, S>(warp, params, &a, &b, store, grad_a, grad_b) }
    });
    assert!(
        store[len..].iter().all(|v| v.is_nan()),
        "the driver wrote past its store"
    );
    (value, grad_a, grad_b)
}

/// The oracle's value, gradients and their error bound for `pair`.
fn expected(
    pair: &Pair,
    gamma: f64,
    band: Option<usize>,
) -> (f64, f64, Array2<f64>, Array2<f64>, f64) {
    let (a, b) = (pair.a.view(), pair.b.view());
    let (value, grad_a) = oracle::soft_dtw_with_gradient_banded(a, b, gamma, band);
    let (_, grad_b) = oracle::soft_dtw_with_gradient_banded(b, a, gamma, band);
    let metric: Metric = SoftDtw::new(gamma).unwrap().into();
    let scale = error_scale(a, b, value, metric);
    let largest = grad_a
        .iter()
        .chain(grad_b.iter())
        .fold(0.0f64, |s, g| s.max(g.abs()));
    let (n, m) = (a.nrows(), b.nrows());
    // As the stencil driver's tests: 64 u (scale / gamma + 2 (n + m)).
    let bound = 64.0 * f64::EPSILON / 2.0 * (scale / gamma + 2.0 * (n + m) as f64) * largest;
    (value, scale, grad_a, grad_b, bound)
}

fn assert_gradient(
    context: &str,
    which: &str,
    got: &Array2<f64>,
    oracle: &Array2<f64>,
    bound: f64,
) {
    for ((index, g), e) in got.indexed_iter().zip(oracle.iter()) {
        assert!(
            (g - e).abs() <= bound,
            "{context}: grad {which}{index:?} {g} vs oracle {e}, bound {bound:e}"
        );
    }
}

/// Every shape of `shapes` (`b` at most `N * S`) on the `N`-lane warp
/// with `S` columns a lane, against the oracle.
fn check<const N: usize, const S: usize>(shapes: &[(usize, usize)], seed: u64) {
    for (k, &(n, m)) in shapes.iter().enumerate() {
        assert!(m <= N * S);
        for dims in [1, 3] {
            let pair = Pair::random(seed + 10 * k as u64 + dims as u64, n, m, dims);
            for band in [None, Some(0), Some(2)] {
                for gamma in [0.1, 1.0] {
                    let params = SoftDtwParams::new(gamma).with_band(band);
                    let (value, scale, grad_a, grad_b, bound) = expected(&pair, gamma, band);
                    let context = format!(
                        "{n} x {m}, dims {dims}, band {band:?}, gamma {gamma}, {N} lanes x {S}"
                    );
                    let (got, ga, gb) = in_warp::<N, S>(&params, &pair, true);
                    assert!(
                        (got - value).abs() <= 1e-12 * scale,
                        "{context}: value {got} vs {value}"
                    );
                    assert_gradient(&context, "a", &ga, &grad_a, bound);
                    assert_gradient(&context, "b", &gb, &grad_b, bound);
                    // Without b's gradient, a's is the same, bit for bit.
                    let (_, alone, untouched) = in_warp::<N, S>(&params, &pair, false);
                    assert_eq!(alone, ga, "{context}: grad a depends on asking for b's");
                    assert!(untouched.iter().all(|&g| g == 0.0));
                }
            }
        }
    }
}

#[test]
fn narrow_warps_match_the_oracle() {
    // 4 lanes: b of one sample, within one stripe, one lane short of the
    // warp, the whole warp (the seed past the stripe) and one column short
    // of it (the seed inside the last lane's stripe).
    let shapes = [
        (1, 1),
        (5, 1),
        (1, 4),
        (2, 3),
        (9, 8),
        (13, 6),
        (6, 15),
        (16, 16),
        (3, 16),
    ];
    check::<4, 4>(&shapes, 1100);
    check::<4, 2>(&[(1, 1), (7, 8), (8, 7), (12, 5)], 1200);
    check::<4, 1>(&[(1, 1), (6, 4), (4, 3), (2, 4)], 1300);
}

#[test]
fn a_full_warp_matches_the_oracle() {
    check::<32, 4>(
        &[(40, 128), (128, 127), (7, 100), (1, 128), (130, 33)],
        1400,
    );
}

#[test]
fn the_warp_gradient_launch_matches_the_oracle() {
    // Three pairs of different lengths in one launch, a warp each, each
    // with its store at its own offset and its gradients at its series'
    // offsets: as the host launches the `warp_gradient` kernels.
    let shapes = [(9, 16), (3, 5), (20, 11)];
    let gamma = 0.5;
    let pairs: Vec<Pair> = shapes
        .iter()
        .enumerate()
        .map(|(k, &(n, m))| Pair::random(1500 + k as u64, n, m, 1))
        .collect();
    let concat = |side: fn(&Pair) -> &Array2<f64>| {
        let values: Vec<f64> = pairs.iter().flat_map(|p| side(p).iter().copied()).collect();
        let mut offsets = vec![0u64];
        for p in &pairs {
            offsets.push(offsets.last().unwrap() + side(p).nrows() as u64);
        }
        (values, offsets)
    };
    let (xs, x_offsets) = concat(|p| &p.a);
    let (ys, y_offsets) = concat(|p| &p.b);
    let mut store_offsets = vec![0u64];
    for &(n, m) in &shapes {
        store_offsets.push(store_offsets.last().unwrap() + store_len(n, m, 4) as u64);
    }
    let mut store = vec![f64::NAN; *store_offsets.last().unwrap() as usize];
    let mut out = vec![f64::NAN; shapes.len()];
    let (mut grad_x, mut grad_y) = (vec![0.0; xs.len()], vec![0.0; ys.len()]);
    let set = |values: &[f64], offsets: &[u64]| SetRef {
        values: values.as_ptr(),
        offsets: offsets.as_ptr(),
        times: std::ptr::null(),
        count: shapes.len() as u64,
        dims: 1,
    };
    let params = SoftDtwParams::new(gamma);
    let launch = StencilLaunch {
        pairs: PairsLaunch {
            a: set(&xs, &x_offsets),
            b: set(&ys, &y_offsets),
            params,
            out: out.as_mut_ptr(),
            workspace: null_mut(),
            row_len: 1,
            first_pair: 0,
            pair_count: shapes.len() as u64,
            numbering: Numbering::Paired,
        },
        ring_len: 1,
        gradient: GradientBuffers {
            store: store.as_mut_ptr(),
            store_offsets: store_offsets.as_ptr(),
            grad_a: grad_x.as_mut_ptr(),
            grad_b: grad_y.as_mut_ptr(),
            rings: null_mut(),
            alignment: null_mut(),
        },
    };
    let launch = Shared(launch);
    for index in 0..shapes.len() as u64 {
        run_warp::<4, _>(|warp| {
            let launch = launch.get();
            // SAFETY: every b fits 4 lanes x 4; the buffers as above.
            unsafe { launch.run_gradient_in_warp::<_, 4, true>(warp, index) }
        });
    }
    for (k, pair) in pairs.iter().enumerate() {
        let (value, scale, grad_a, grad_b, bound) = expected(pair, gamma, None);
        let context = format!("pair {k}");
        assert!((out[k] - value).abs() <= 1e-12 * scale, "{context}: value");
        let (x0, x1) = (x_offsets[k] as usize, x_offsets[k + 1] as usize);
        let (y0, y1) = (y_offsets[k] as usize, y_offsets[k + 1] as usize);
        let ga = Array2::from_shape_vec((x1 - x0, 1), grad_x[x0..x1].to_vec()).unwrap();
        let gb = Array2::from_shape_vec((y1 - y0, 1), grad_y[y0..y1].to_vec()).unwrap();
        assert_gradient(&context, "a", &ga, &grad_a, bound);
        assert_gradient(&context, "b", &gb, &grad_b, bound);
    }
}
