//! The oracle against hand-worked cases, finite differences and its own
//! definitions (unit tests: they reach its private helpers).

use super::*;
use approx::assert_relative_eq;
use ndarray::{array, Array1};
use proptest::prelude::*;

/// Deterministic values in [-1, 1) from a 64-bit LCG (Knuth's MMIX constants).
fn series(seed: u64, n: usize, d: usize) -> Array2<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    Array2::from_shape_simple_fn((n, d), || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    })
}

/// Strictly increasing timestamps, steps in [0.1, 2.1).
fn times(seed: u64, n: usize) -> Array1<f64> {
    let mut t = 0.0;
    series(seed, n, 1)
        .iter()
        .map(|u| {
            t += 1.1 + u;
            t
        })
        .collect()
}

fn col(v: &[f64]) -> Array2<f64> {
    Array2::from_shape_vec((v.len(), 1), v.to_vec()).unwrap()
}

fn twed_uniform(a: &Array2<f64>, b: &Array2<f64>, nu: f64, lambda: f64, p: f64) -> f64 {
    let ta = Array1::from_iter((1..=a.nrows()).map(|i| i as f64));
    let tb = Array1::from_iter((1..=b.nrows()).map(|j| j as f64));
    twed(a.view(), ta.view(), b.view(), tb.view(), nu, lambda, p)
}

// ---------------------------------------------------------------- DTW

#[test]
fn dtw_by_hand() {
    // a = [0, 1, 2], b = [0, 2]; squared costs (rows a_i, columns b_j):
    //   a=0: 0 4 | a=1: 1 1 | a=2: 4 0
    // C11 = 0, C12 = 4 + 0 = 4, C21 = 1 + 0 = 1, C22 = 1 + min(0, 4, 1) = 1,
    // C31 = 4 + 1 = 5, C32 = 0 + min(C21, C22, C31) = 0 + 1 = 1.
    let (a, b) = (col(&[0.0, 1.0, 2.0]), col(&[0.0, 2.0]));
    assert_eq!(dtw(a.view(), b.view(), None), 1.0);
    // Band 0, n = 3, m = 2: j in [i - 1, i], so the 0-based cells (0, 1)
    // and (2, 0) are +inf: C12 = C31 = inf, C11 = 0, C21 = 1,
    // C22 = 1 + min(0, inf, 1) = 1, C32 = 0 + min(1, 1, inf) = 1.
    assert_eq!(dtw(a.view(), b.view(), Some(0)), 1.0);

    // A band that matters: a = [0, 0, 5], b = [0, 5, 5, 5]. Unbanded, the
    // path a0-b0, a1-b0, a2-b1, a2-b2, a2-b3 costs 0.
    let (a, b) = (col(&[0.0, 0.0, 5.0]), col(&[0.0, 5.0, 5.0, 5.0]));
    assert_eq!(dtw(a.view(), b.view(), None), 0.0);
    // Band 0, n = 3 < m = 4: j in [i, i + 1]; allowed costs
    // (0,0)=0 (0,1)=25 (1,1)=25 (1,2)=25 (2,2)=0 (2,3)=0.
    // C11 = 0, C12 = 25, C22 = 25 + min(0, 25, inf) = 25,
    // C23 = 25 + min(25, inf, 25) = 50, C33 = 0 + min(25, 50, inf) = 25,
    // C34 = 0 + min(50, inf, 25) = 25.
    assert_eq!(dtw(a.view(), b.view(), Some(0)), 25.0);
    // The transposed pair gets the transposed mask.
    assert_eq!(dtw(b.view(), a.view(), Some(0)), 25.0);
    // Band 1 allows (1, 0), hence the zero-cost path.
    assert_eq!(dtw(a.view(), b.view(), Some(1)), 0.0);

    // 2-D: a = [(0,0), (1,2)], b = [(0,1), (2,2)]; costs
    // a0b0 = 0+1 = 1, a0b1 = 4+4 = 8, a1b0 = 1+1 = 2, a1b1 = 1+0 = 1.
    // C11 = 1, C12 = 9, C21 = 3, C22 = 1 + min(1, 9, 3) = 2.
    let a = array![[0.0, 0.0], [1.0, 2.0]];
    let b = array![[0.0, 1.0], [2.0, 2.0]];
    assert_eq!(dtw(a.view(), b.view(), None), 2.0);

    let x = series(1, 9, 3);
    assert_eq!(dtw(x.view(), x.view(), None), 0.0);
}

#[test]
fn dtw_band_properties() {
    for (seed, n, m, d) in [(2, 8, 8, 1), (3, 7, 11, 3), (4, 12, 5, 2), (5, 1, 6, 1)] {
        let (a, b) = (series(seed, n, d), series(seed + 100, m, d));
        let full = dtw(a.view(), b.view(), None);
        assert_eq!(dtw(a.view(), b.view(), Some(n.max(m))), full);
        assert_eq!(dtw(a.view(), b.view(), Some(usize::MAX)), full);
        let mut prev = INF;
        for r in 0..=n.max(m) {
            let v = dtw(a.view(), b.view(), Some(r));
            assert!(v.is_finite() && v <= prev, "band {r}: {v} > {prev}");
            assert!(v >= full);
            prev = v;
        }
        if n == m {
            // Band 0 with equal lengths: only the diagonal path.
            let euclid: f64 = (0..n).map(|i| sq_euclidean(a.row(i), b.row(i))).sum();
            assert_relative_eq!(
                dtw(a.view(), b.view(), Some(0)),
                euclid,
                max_relative = 1e-12
            );
        }
    }
}

// --------------------------------------------------------------- TWED

#[test]
fn twed_by_hand() {
    // Length 1: D11 = D00 + |a1 - b1| + dist(0, 0) + nu (|ta1 - tb1| + |0 - 0|)
    // (both deletions read the +inf boundary): |3 - (-1)| + 0.5 |1 - 4| = 5.5.
    let v = twed(
        col(&[3.0]).view(),
        array![1.0].view(),
        col(&[-1.0]).view(),
        array![4.0].view(),
        0.5,
        7.0,
        2.0,
    );
    assert_eq!(v, 5.5);

    // [1, 2] vs [1, 3] at times 1, 2; nu = 0.5, lambda = 1 (a0 = b0 = 0 at 0).
    // D11 = 0 + |1-1| + |0-0| + 0.5 (0 + 0) = 0
    // D12 = del_b: D11 + |3-1| + 0.5 (2-1) + 1 = 3.5   (match, del_a: inf)
    // D21 = del_a: D11 + |2-1| + 0.5 (2-1) + 1 = 2.5   (match, del_b: inf)
    // D22 = min(match D11 + |2-3| + |1-1| + 0.5 (0 + 0) = 1,
    //           del_a D12 + |2-1| + 0.5 + 1 = 6, del_b D21 + |3-1| + 0.5 + 1 = 6) = 1
    let (a, b) = (col(&[1.0, 2.0]), col(&[1.0, 3.0]));
    assert_eq!(twed_uniform(&a, &b, 0.5, 1.0, 2.0), 1.0);

    // Non-uniform times: a = [1, 9, 2] at [0.5, 1, 2.5], b = [1, 2] at [1, 2],
    // nu = 0.5, lambda = 1.
    // D11 = |1-1| + 0 + 0.5 (|0.5-1| + 0) = 0.25
    // D12 = del_b: 0.25 + |2-1| + 0.5 (2-1) + 1 = 2.75
    // D21 = del_a: 0.25 + |9-1| + 0.5 (1-0.5) + 1 = 9.5
    // D22 = min(match 0.25 + |9-2| + |1-1| + 0.5 (|1-2| + |0.5-1|) = 8,
    //           del_a 2.75 + 8 + 0.25 + 1 = 12, del_b 9.5 + 1 + 0.5 + 1 = 12) = 8
    // D31 = del_a: 9.5 + |2-9| + 0.5 (2.5-1) + 1 = 18.25
    // D32 = min(match 9.5 + |2-2| + |9-1| + 0.5 (|2.5-2| + |1-1|) = 17.75,
    //           del_a 8 + |2-9| + 0.75 + 1 = 16.75, del_b 18.25 + 1 + 0.5 + 1 = 20.75)
    //     = 16.75
    let v = twed(
        col(&[1.0, 9.0, 2.0]).view(),
        array![0.5, 1.0, 2.5].view(),
        col(&[1.0, 2.0]).view(),
        array![1.0, 2.0].view(),
        0.5,
        1.0,
        2.0,
    );
    assert_eq!(v, 16.75);

    // Multivariate length 1: dist is the Lp norm of a1 - b1 = (1, 2, -2);
    // plus nu |1 - 3| = 0.25 * 2 = 0.5.
    let (a, b) = (array![[1.0, 2.0, -2.0]], array![[0.0, 0.0, 0.0]]);
    let t = |p| {
        twed(
            a.view(),
            array![1.0].view(),
            b.view(),
            array![3.0].view(),
            0.25,
            1.0,
            p,
        )
    };
    assert_eq!(t(1.0), 1.0 + 2.0 + 2.0 + 0.5);
    assert_relative_eq!(t(2.0), 3.0 + 0.5, max_relative = 1e-15); // sqrt(1 + 4 + 4)
    assert_relative_eq!(t(3.0), 17f64.cbrt() + 0.5, max_relative = 1e-15); // (1 + 8 + 8)^(1/3)
}

#[test]
fn twed_symmetry_identity_triangle() {
    // TWED is a metric for nu >= 0, lambda >= 0, an Lp norm with p >= 1 and
    // increasing timestamps (Marteau 2009); nu > 0 here, so distinct
    // series are at a positive distance.
    for (seed, d, p) in [(10, 1, 1.0), (20, 3, 2.0), (30, 2, 3.0)] {
        let s: Vec<_> = [(0, 6), (1, 9), (2, 4)]
            .iter()
            .map(|&(k, n)| (series(seed + k, n, d), times(seed + 50 + k, n)))
            .collect();
        let tw = |x: usize, y: usize| {
            twed(
                s[x].0.view(),
                s[x].1.view(),
                s[y].0.view(),
                s[y].1.view(),
                0.3,
                0.7,
                p,
            )
        };
        for x in 0..3 {
            assert_eq!(tw(x, x), 0.0);
            for y in 0..3 {
                assert_relative_eq!(tw(x, y), tw(y, x), max_relative = 1e-12);
                if x != y {
                    assert!(tw(x, y) > 0.0);
                }
                for z in 0..3 {
                    assert!(
                        tw(x, z) <= tw(x, y) + tw(y, z) + 1e-12,
                        "triangle {x} {y} {z}"
                    );
                }
            }
        }
    }
}

// ----------------------------------------------------------- Soft-DTW

#[test]
fn soft_dtw_by_hand() {
    // Length 1: R11 = delta + softmin(0, inf, inf) = delta - gamma ln(1 + 0 + 0)
    // = delta = (1-3)^2 + (2-0)^2 = 8, for every gamma; the gradient is
    // E11 * 2 (a1 - b1) with E11 = 1.
    let (a, b) = (array![[1.0, 2.0]], array![[3.0, 0.0]]);
    for gamma in [0.01, 1.0, 100.0] {
        assert_eq!(soft_dtw(a.view(), b.view(), gamma), 8.0);
        let (v, g) = soft_dtw_with_gradient(a.view(), b.view(), gamma);
        assert_eq!(v, 8.0);
        assert_eq!(g, array![[-4.0, 4.0]]);
    }

    // a = b = [0, 1]: delta = [[0, 1], [1, 0]].
    // R11 = 0, R12 = 1 + softmin(inf, inf, 0) = 1, R21 = 1,
    // R22 = 0 + softmin(0, 1, 1) = -gamma ln(1 + 2 exp(-1/gamma)).
    let x = col(&[0.0, 1.0]);
    for gamma in [0.1f64, 1.0, 10.0] {
        let expected = -gamma * (1.0 + 2.0 * (-1.0 / gamma).exp()).ln();
        assert_relative_eq!(
            soft_dtw(x.view(), x.view(), gamma),
            expected,
            max_relative = 1e-14
        );
    }
}

#[test]
fn soft_dtw_gradient_matches_finite_differences() {
    let h = 1e-6;
    for gamma in [0.01, 0.1, 1.0, 10.0] {
        for (seed, n, m, d) in [(40, 5, 7, 1), (41, 6, 4, 3), (42, 1, 3, 1)] {
            let (a, b) = (series(seed, n, d), series(seed + 7, m, d));
            let (value, grad) = soft_dtw_with_gradient(a.view(), b.view(), gamma);
            assert_eq!(value, soft_dtw(a.view(), b.view(), gamma));
            let scale = grad.iter().fold(0.0f64, |s, g| s.max(g.abs()));
            for ((i, k), &g) in grad.indexed_iter() {
                let (mut plus, mut minus) = (a.clone(), a.clone());
                plus[[i, k]] += h;
                minus[[i, k]] -= h;
                let fd = (soft_dtw(plus.view(), b.view(), gamma)
                    - soft_dtw(minus.view(), b.view(), gamma))
                    / (2.0 * h);
                assert!(
                    (fd - g).abs() <= 1e-6 * scale.max(1.0),
                    "gamma {gamma}, {n}x{m}x{d}, ({i},{k}): analytic {g}, fd {fd}"
                );
            }
        }
    }
}

#[test]
fn soft_dtw_band() {
    // A band as wide as the series changes nothing; a narrower one can
    // only remove alignments: with gamma -> 0 each banded value tends to
    // the banded DTW, which is never below the unbanded DTW. The
    // gradient with a band matches finite differences, and the band is
    // symmetric.
    let h = 1e-6;
    for (seed, n, m, d) in [(80, 6, 9, 1), (81, 8, 5, 2), (82, 7, 7, 1)] {
        let (a, b) = (series(seed, n, d), series(seed + 9, m, d));
        let full = soft_dtw(a.view(), b.view(), 0.5);
        assert_eq!(
            soft_dtw_banded(a.view(), b.view(), 0.5, Some(n.max(m))),
            full
        );
        for w in [0, 1, 2] {
            let banded = soft_dtw_banded(a.view(), b.view(), 0.5, Some(w));
            assert!(banded.is_finite());
            assert_relative_eq!(
                banded,
                soft_dtw_banded(b.view(), a.view(), 0.5, Some(w)),
                max_relative = 1e-14
            );
            let hard = dtw(a.view(), b.view(), Some(w));
            let gap = hard - soft_dtw_banded(a.view(), b.view(), 1e-3, Some(w));
            assert!(gap >= 0.0 && gap <= 1e-3 * (n + m) as f64 * 3f64.ln());
            let (value, grad) = soft_dtw_with_gradient_banded(a.view(), b.view(), 0.5, Some(w));
            assert_eq!(value, banded);
            for ((i, k), &g) in grad.indexed_iter() {
                let (mut plus, mut minus) = (a.clone(), a.clone());
                plus[[i, k]] += h;
                minus[[i, k]] -= h;
                let fd = (soft_dtw_banded(plus.view(), b.view(), 0.5, Some(w))
                    - soft_dtw_banded(minus.view(), b.view(), 0.5, Some(w)))
                    / (2.0 * h);
                assert!(
                    (fd - g).abs() <= 1e-6 * g.abs().max(1.0),
                    "band {w}: {g} vs {fd}"
                );
            }
        }
        // The divergence of a series with itself is exactly 0.
        assert_eq!(soft_dtw_divergence(a.view(), a.view(), 0.5, Some(1)), 0.0);
    }
}

#[test]
fn soft_dtw_tends_to_dtw() {
    // softmin_gamma <= min (the log-sum is >= ln 1) and >= min - gamma ln 3
    // per cell, and each path to (n, m) has at most n + m - 1 cells, so
    // dtw - gamma (n + m) ln 3 <= soft_dtw <= dtw. The upper bound also
    // holds exactly in floating point: the two recursions add the same
    // delta to a value that is never larger, and rounding is monotone.
    for (seed, n, m, d) in [(60, 7, 9, 1), (61, 10, 6, 3)] {
        // Scaled down so that competing paths differ by about gamma at the
        // smallest gamma: otherwise exp(-difference / gamma) underflows
        // and the gap is exactly 0 already at gamma = 0.01.
        let (a, b) = (series(seed, n, d) * 0.05, series(seed + 3, m, d) * 0.05);
        let hard = dtw(a.view(), b.view(), None);
        let mut prev_gap = INF;
        for gamma in [1.0, 0.1, 0.01, 0.001] {
            let soft = soft_dtw(a.view(), b.view(), gamma);
            let gap = hard - soft;
            assert!(soft <= hard, "gamma {gamma}: soft {soft} > dtw {hard}");
            assert!(
                gap <= gamma * (n + m) as f64 * 3f64.ln(),
                "gamma {gamma}: gap {gap}"
            );
            assert!(
                gap > 0.0 && gap < prev_gap,
                "gamma {gamma}: gap {gap} did not shrink"
            );
            prev_gap = gap;
        }
    }
}

// ------------------------------------------------------------ scaling

#[test]
fn extreme_scales() {
    let (a, b) = (series(70, 8, 3), series(71, 6, 3));
    let (ta, tb) = (times(72, 8), times(73, 6));
    let dtw1 = dtw(a.view(), b.view(), None);
    for s in [1e100, 1e-100] {
        let (sa, sb) = (&a * s, &b * s);
        assert_relative_eq!(
            dtw(sa.view(), sb.view(), None) / (s * s),
            dtw1,
            max_relative = 1e-12
        );
        for p in [1.0, 2.0] {
            let t1 = twed(a.view(), ta.view(), b.view(), tb.view(), 0.0, 0.0, p);
            let ts = twed(sa.view(), ta.view(), sb.view(), tb.view(), 0.0, 0.0, p);
            assert!(t1 > 0.0);
            assert_relative_eq!(ts / s, t1, max_relative = 1e-12);
        }
    }
}

// ---------------------------------------------------------- proptests

fn arb_series(d: usize) -> impl Strategy<Value = Array2<f64>> {
    (1usize..6).prop_flat_map(move |n| {
        prop::collection::vec(-10.0f64..10.0, n * d)
            .prop_map(move |v| Array2::from_shape_vec((n, d), v).unwrap())
    })
}

fn arb_timed(d: usize) -> impl Strategy<Value = (Array2<f64>, Array1<f64>)> {
    arb_series(d).prop_flat_map(|x| {
        let n = x.nrows();
        prop::collection::vec(0.01f64..3.0, n).prop_map(move |steps| {
            let mut t = 0.0;
            let ts = steps
                .iter()
                .map(|s| {
                    t += s;
                    t
                })
                .collect();
            (x.clone(), ts)
        })
    })
}

fn config() -> ProptestConfig {
    // No regression files: this module must not write into the source tree.
    ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn prop_dtw((a, b) in (1usize..4).prop_flat_map(|d| (arb_series(d), arb_series(d))),
                r in 0usize..6) {
        let full = dtw(a.view(), b.view(), None);
        prop_assert_eq!(dtw(a.view(), a.view(), None), 0.0);
        prop_assert!((full - dtw(b.view(), a.view(), None)).abs() <= 1e-12 * full);
        let banded = dtw(a.view(), b.view(), Some(r));
        prop_assert!(full <= banded && banded <= dtw(a.view(), b.view(), Some(r.saturating_sub(1))));
        prop_assert_eq!(banded, dtw(b.view(), a.view(), Some(r)));
    }

    #[test]
    fn prop_twed_metric(((a, ta), (b, tb), (c, tc)) in
                            (1usize..4).prop_flat_map(|d| (arb_timed(d), arb_timed(d), arb_timed(d))),
                        nu in 0.0f64..2.0,
                        lambda in 0.0f64..2.0,
                        p in prop::sample::select(vec![1.0, 2.0, 3.0])) {
        let tw = |x: &Array2<f64>, tx: &Array1<f64>, y: &Array2<f64>, ty: &Array1<f64>| {
            twed(x.view(), tx.view(), y.view(), ty.view(), nu, lambda, p)
        };
        let ab = tw(&a, &ta, &b, &tb);
        prop_assert_eq!(tw(&a, &ta, &a, &ta), 0.0);
        prop_assert!((ab - tw(&b, &tb, &a, &ta)).abs() <= 1e-12 * ab);
        let (bc, ac) = (tw(&b, &tb, &c, &tc), tw(&a, &ta, &c, &tc));
        prop_assert!(ac <= ab + bc + 1e-12 * (ab + bc), "{} > {} + {}", ac, ab, bc);
    }
}

// ---------------------------------------------------------------- paths

#[test]
fn dtw_path_by_hand() {
    // The matrix of dtw_by_hand: C11 = 0, C12 = 4, C21 = 1, C22 = 1,
    // C31 = 5, C32 = 1. From (3, 2) the predecessors are C21 = 1 (diagonal),
    // C22 = 1 (above) and C31 = 5 (left): a tie, and the diagonal wins, to
    // (2, 1); from there only C11 (above) is finite. Both (0,0) (1,0) (2,1)
    // and (0,0) (1,1) (2,1) cost 1; the tie rule picks the first.
    let (a, b) = (col(&[0.0, 1.0, 2.0]), col(&[0.0, 2.0]));
    let (path, value) = dtw_path(a.view(), b.view(), None);
    assert_eq!(path, vec![(0, 0), (1, 0), (2, 1)]);
    assert_eq!(value, 1.0);

    // 3 x 3: a = [0, 1, 2], b = [0, 0, 2]; costs by rows
    //   a=0: 0 0 4 | a=1: 1 1 1 | a=2: 4 4 0
    // C11 = 0, C12 = 0, C13 = 4; C21 = 1, C22 = 1 + min(0, 0, 1) = 1,
    // C23 = 1 + min(0, 4, 1) = 1; C31 = 5, C32 = 4 + min(1, 1, 5) = 5,
    // C33 = 0 + min(C22 = 1, C23 = 1, C32 = 5) = 1: diagonal and above tie,
    // the diagonal wins; from (2, 2): C11 = 0, C12 = 0, C21 = 1: diagonal
    // and above tie again, so (1, 1), then (1, 1) is the origin.
    let (a, b) = (col(&[0.0, 1.0, 2.0]), col(&[0.0, 0.0, 2.0]));
    let (path, value) = dtw_path(a.view(), b.view(), None);
    assert_eq!(path, vec![(0, 0), (1, 1), (2, 2)]);
    assert_eq!(value, 1.0);

    // dtw_by_hand's second pair. Band 0 (j in [i, i + 1]): C11 = 0,
    // C12 = 25, C22 = 25, C23 = 50, C33 = 25, C34 = 25. From (3, 4): left
    // (C33 = 25 against C23 = 50); from (3, 3) and (2, 2): diagonal.
    // Unbanded, the zero-cost path repeats a_0 and then b_1 .. b_3 meet a_2.
    let (a, b) = (col(&[0.0, 0.0, 5.0]), col(&[0.0, 5.0, 5.0, 5.0]));
    let (path, value) = dtw_path(a.view(), b.view(), Some(0));
    assert_eq!(path, vec![(0, 0), (1, 1), (2, 2), (2, 3)]);
    assert_eq!(value, 25.0);
    let (path, value) = dtw_path(a.view(), b.view(), None);
    assert_eq!(path, vec![(0, 0), (1, 0), (2, 1), (2, 2), (2, 3)]);
    assert_eq!(value, 0.0);
}

#[test]
fn dtw_path_agrees_with_the_value_on_random_pairs() {
    for (seed, n, m, band) in [(1, 7, 5, None), (2, 9, 9, Some(1)), (3, 1, 6, None)] {
        let (a, b) = (series(seed, n, 2), series(seed + 50, m, 2));
        let (path, value) = dtw_path(a.view(), b.view(), band);
        assert_eq!(value, dtw(a.view(), b.view(), band));
        let cost: f64 = path
            .iter()
            .map(|&(i, j)| sq_euclidean(a.row(i), b.row(j)))
            .sum();
        assert_relative_eq!(cost, value, max_relative = 1e-14);
        assert_eq!(path[0], (0, 0));
        assert_eq!(*path.last().unwrap(), (n - 1, m - 1));
    }
}

#[test]
fn twed_path_by_hand() {
    // a = [1, 2], b = [1], nu = 0, lambda = 1, degree 1; padded a = [0, 1, 2],
    // b = [0, 1]. D11 = |1 - 1| + |0 - 0| = 0; D21 = min(match from D10 =
    // inf, delete a_2 from D11: 0 + |2 - 1| + 1 = 2, delete from D20 = inf).
    let (a, b) = (col(&[1.0, 2.0]), col(&[1.0]));
    let (ta, tb) = (Array1::from(vec![1.0, 2.0]), Array1::from(vec![1.0]));
    let (steps, value) = twed_path(a.view(), ta.view(), b.view(), tb.view(), 0.0, 1.0, 1.0);
    assert_eq!(
        steps,
        vec![(TwedStep::Match, 0, 0, 0.0), (TwedStep::DeleteA, 1, 0, 2.0)]
    );
    assert_eq!(value, 2.0);

    // Random pairs: the costs add up to twed's value.
    let (a, b) = (series(4, 8, 2), series(5, 6, 2));
    let (ta, tb) = (times(6, 8), times(7, 6));
    let (steps, value) = twed_path(a.view(), ta.view(), b.view(), tb.view(), 0.1, 0.5, 2.0);
    let expected = twed(a.view(), ta.view(), b.view(), tb.view(), 0.1, 0.5, 2.0);
    // The same terms, added in another order.
    assert_relative_eq!(value, expected, max_relative = 1e-14);
    let total: f64 = steps.iter().map(|s| s.3).sum();
    assert_relative_eq!(total, value, max_relative = 1e-13);
    assert_eq!(
        (steps[0].0, steps[0].1, steps[0].2),
        (TwedStep::Match, 0, 0)
    );
    assert_eq!(steps.last().map(|s| (s.1, s.2)), Some((7, 5)));
}

#[test]
fn soft_dtw_alignment_by_hand_and_at_small_gamma() {
    // One cell: every alignment passes through it.
    let (e, value) = soft_dtw_alignment(col(&[1.0]).view(), col(&[3.0]).view(), 1.0, None);
    assert_eq!(e, array![[1.0]]);
    assert_eq!(value, 4.0);
    // As gamma goes to 0, E tends to the indicator of the DTW path.
    let (a, b) = (series(8, 9, 1), series(9, 7, 1));
    let (e, _) = soft_dtw_alignment(a.view(), b.view(), 1e-4, None);
    let (path, _) = dtw_path(a.view(), b.view(), None);
    for ((i, j), &w) in e.indexed_iter() {
        let on_path = path.contains(&(i, j));
        assert!(
            (w - f64::from(u8::from(on_path))).abs() < 1e-6,
            "E[{i}][{j}] = {w}"
        );
    }
}
