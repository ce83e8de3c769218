//! The column driver's gradient (`warp_gradient`, the GPU's
//! `warp_gradient` kernels) on emulated warps against the oracle's
//! Soft-DTW value and gradients: warps of 4 and 32 lanes, stripes of 1, 2
//! and 4 columns, series `b` of one lane's stripe up to the whole warp's
//! (the seed of the backward pass in a stripe's last cell or inside it),
//! unequal lengths, multivariate samples (the gradient with respect to `a`
//! added to memory lane after lane), bands of radius 0 and 2, and the
//! launch of several pairs of different lengths as the kernels run it;
//! and the same pairs cut into panels, a warp each, running at once
//! (`panels_gradient`): one panel to four, the last one full or not.
//! Tolerances as the stencil driver's tests (`drivers::stencil`).

use crate::common::driver::Pair;
use crate::common::error_scale;
use crate::common::hardware::{run_numbered_warps, run_warp, Shared};
use ndarray::Array2;
use std::ptr::null_mut;
use timewarp::{oracle, Metric, SoftDtw};
use timewarp_kernels::drivers::columns::gradient::{panels_store_len, store_len, warp_gradient};
use timewarp_kernels::launch::pairs::{
    panel_gradient_workspace, GradientBuffers, PairsLaunch, StencilLaunch,
};
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
                    // Without b's gradient, a's is the same, bit for bit
                    // (one band and gamma: the launch does not depend on
                    // them).
                    if band.is_none() && gamma == 1.0 {
                        let (_, alone, untouched) = in_warp::<N, S>(&params, &pair, false);
                        assert_eq!(alone, ga, "{context}: grad a depends on asking for b's");
                        assert!(untouched.iter().all(|&g| g == 0.0));
                    }
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
    // The warp's whole width (128 columns) and one short of it, b of a
    // few lanes, a of one row, a longer than b.
    check::<32, 4>(&[(40, 128), (33, 127), (7, 100), (1, 128), (130, 33)], 1400);
}

/// The values and gradients of `pairs` (equal dims) by the gradient
/// launch of `WARPS` emulated warps a pair (`N` lanes, `S` columns each),
/// as the host launches the `warp_gradient` (one warp) and
/// `panels_gradient` kernels: every warp at once, each pair's store at its
/// own offset, the borders between its panels in a zeroed workspace sized
/// for the longest `a`, the gradients at the series' offsets. Checks that
/// nothing is written past the store or the workspace.
fn launched<const N: usize, const S: usize, const WARPS: usize>(
    pairs: &[Pair],
    params: SoftDtwParams<f64>,
    with_b: bool,
) -> (Vec<f64>, Vec<Array2<f64>>, Vec<Array2<f64>>) {
    let dims = pairs[0].a.ncols();
    let concat = |side: fn(&Pair) -> &Array2<f64>| {
        let values: Vec<f64> = pairs.iter().flat_map(|p| side(p).iter().copied()).collect();
        let mut offsets = vec![0u64];
        for p in pairs {
            offsets.push(offsets.last().unwrap() + side(p).nrows() as u64);
        }
        (values, offsets)
    };
    let (xs, x_offsets) = concat(|p| &p.a);
    let (ys, y_offsets) = concat(|p| &p.b);
    let mut store_offsets = vec![0u64];
    for p in pairs {
        let (n, m) = (p.a.nrows(), p.b.nrows());
        let len = panels_store_len(n, m, N * S, S);
        store_offsets.push(store_offsets.last().unwrap() + len as u64);
    }
    let store_len = *store_offsets.last().unwrap() as usize;
    let mut store = vec![f64::NAN; store_len + GUARD];
    let longest = pairs.iter().map(|p| p.a.nrows()).max().unwrap();
    let borders = if WARPS > 1 {
        panel_gradient_workspace::<f64>(longest, dims, WARPS)
    } else {
        0
    };
    let workspace_len = borders * pairs.len();
    let mut workspace = vec![0.0f64; workspace_len + GUARD];
    let mut out = vec![f64::NAN; pairs.len()];
    let mut fault = 0u32;
    let (mut grad_x, mut grad_y) = (vec![0.0; xs.len()], vec![0.0; ys.len()]);
    let set = |values: &[f64], offsets: &[u64]| SetRef {
        values: values.as_ptr(),
        offsets: offsets.as_ptr(),
        times: std::ptr::null(),
        count: pairs.len() as u64,
        dims: dims as u64,
        uniform_len: 0,
        uniform_first: 0,
    };
    let launch = StencilLaunch {
        pairs: PairsLaunch {
            a: set(&xs, &x_offsets),
            b: set(&ys, &y_offsets),
            params,
            out: out.as_mut_ptr(),
            workspace: workspace.as_mut_ptr(),
            row_len: borders as u64,
            first_pair: 0,
            pair_count: pairs.len() as u64,
            numbering: Numbering::Paired,
        },
        ring_len: 1,
        gradient: GradientBuffers {
            store: store.as_mut_ptr(),
            store_offsets: store_offsets.as_ptr(),
            grad_a: grad_x.as_mut_ptr(),
            grad_b: if with_b {
                grad_y.as_mut_ptr()
            } else {
                null_mut()
            },
            rings: null_mut(),
            alignment: null_mut(),
            fault: &mut fault,
        },
    };
    let launch = Shared(launch);
    run_numbered_warps::<N, _>(WARPS * pairs.len(), |warp, index| {
        let launch = launch.get();
        // Every b fits WARPS panels of N lanes x S; the store, the zeroed
        // workspace and the gradients as above; all warps run at once, as
        // the warps of one block.
        if dims == 1 {
            // SAFETY: as said above.
            unsafe { launch.run_gradient_in_panels::<_, S, WARPS, true>(warp, index as u64) }
        } else {
            // SAFETY: as said above.
            unsafe { launch.run_gradient_in_panels::<_, S, WARPS, false>(warp, index as u64) }
        }
    });
    assert_eq!(fault, 0, "no wait of the panels gave up");
    assert!(
        store[store_len..].iter().all(|v| v.is_nan()),
        "the launch wrote past its store"
    );
    assert!(
        workspace[workspace_len..].iter().all(|&v| v == 0.0),
        "the launch wrote past its workspace"
    );
    let split = |values: &[f64], offsets: &[u64]| -> Vec<Array2<f64>> {
        offsets
            .windows(2)
            .map(|w| {
                let (start, end) = (w[0] as usize * dims, w[1] as usize * dims);
                Array2::from_shape_vec(((w[1] - w[0]) as usize, dims), values[start..end].to_vec())
                    .unwrap()
            })
            .collect()
    };
    (out, split(&grad_x, &x_offsets), split(&grad_y, &y_offsets))
}

/// `pairs` by the launch of `WARPS` warps a pair against the oracle, with
/// and without `b`'s gradient (`a`'s the same bits either way).
fn check_launch<const N: usize, const S: usize, const WARPS: usize>(
    pairs: &[Pair],
    gamma: f64,
    band: Option<usize>,
) {
    let params = SoftDtwParams::new(gamma).with_band(band);
    let (values, grads_a, grads_b) = launched::<N, S, WARPS>(pairs, params, true);
    for (k, pair) in pairs.iter().enumerate() {
        let (value, scale, grad_a, grad_b, bound) = expected(pair, gamma, band);
        let (n, m, dims) = (pair.a.nrows(), pair.b.nrows(), pair.a.ncols());
        let context = format!(
            "pair {k}: {n} x {m}, dims {dims}, band {band:?}, gamma {gamma}, {WARPS} warps of \
             {N} lanes x {S}"
        );
        assert!(
            (values[k] - value).abs() <= 1e-12 * scale,
            "{context}: value {} vs {value}",
            values[k]
        );
        assert_gradient(&context, "a", &grads_a[k], &grad_a, bound);
        assert_gradient(&context, "b", &grads_b[k], &grad_b, bound);
    }
    let (_, alone, untouched) = launched::<N, S, WARPS>(pairs, params, false);
    assert_eq!(alone, grads_a, "grad a depends on asking for b's");
    assert!(untouched.iter().all(|g| g.iter().all(|&v| v == 0.0)));
}

#[test]
fn the_warp_gradient_launch_matches_the_oracle() {
    // Three pairs of different lengths in one launch, a warp each.
    let pairs: Vec<Pair> = [(9, 16), (3, 5), (20, 11)]
        .iter()
        .enumerate()
        .map(|(k, &(n, m))| Pair::random(1500 + k as u64, n, m, 1))
        .collect();
    check_launch::<4, 4, 1>(&pairs, 0.5, None);
}

#[test]
fn the_panels_gradient_launch_matches_the_oracle() {
    // Panels of 4 lanes x 2 columns, up to 4 a pair: one panel (the other
    // warps idle), one and a bit, a full last panel, all four, one column
    // short of them; each launch with pairs of several lengths, `a` shorter
    // and longer than `b`, so that the borders' stride is the longest
    // `a`'s; univariate and multivariate; no band and bands of 0 and 2.
    let shapes = [
        (6, 5),
        (9, 8),
        (13, 11),
        (5, 16),
        (20, 32),
        (31, 29),
        (1, 32),
        (32, 1),
    ];
    for dims in [1, 3] {
        let pairs: Vec<Pair> = shapes
            .iter()
            .enumerate()
            .map(|(k, &(n, m))| Pair::random(1600 + 10 * k as u64 + dims as u64, n, m, dims))
            .collect();
        for band in [None, Some(0), Some(2)] {
            for gamma in [0.1, 1.0] {
                check_launch::<4, 2, 4>(&pairs, gamma, band);
            }
        }
    }
    // Two warps a pair, and a full warp's lanes.
    let pairs = [Pair::random(1700, 40, 32, 2), Pair::random(1701, 70, 25, 2)];
    check_launch::<4, 4, 2>(&pairs, 0.5, None);
    let pairs = [
        Pair::random(1702, 50, 200, 1),
        Pair::random(1703, 33, 129, 1),
    ];
    check_launch::<32, 2, 4>(&pairs, 0.5, Some(7));
}
