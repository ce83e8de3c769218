//! The oracle's alignments: full-matrix tracebacks of DTW and TWED, and
//! Soft-DTW's expected alignment matrix.
//!
//! Every traceback walks back from the last cell over the full `(n+1) x
//! (m+1)` matrix of accumulated costs and, on exact ties between the
//! predecessors' totals, prefers the diagonal step, then the step from the
//! row above (`(i-1, j)`, a sample of the first series repeated or
//! deleted), then the step from the column to the left (`(i, j-1)`). This is
//! the tie rule of the whole crate (docs/algorithms.md, "Paths").
//!
//! Paths are in 0-based sample indices: `(i, j)` pairs sample `i` of `a`
//! with sample `j` of `b`.

use super::{
    in_sakoe_chiba_band, lp_distance, soft_dtw_forward, sq_euclidean, with_virtual_origin, INF,
};
use ndarray::{s, Array2, ArrayView1, ArrayView2};

/// The step of a TWED edit path that reaches a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwedStep {
    /// `a_i` and `b_j` are matched (the diagonal step).
    Match,
    /// `a_i` is deleted (the step from the row above).
    DeleteA,
    /// `b_j` is deleted (the step from the column to the left).
    DeleteB,
}

/// The predecessor the tie rule picks among the three totals reaching a
/// cell: the diagonal's on a tie with either other, then the upper one's.
/// 0: diagonal, 1: from the row above, 2: from the column to the left.
fn preferred(diagonal: f64, up: f64, left: f64) -> usize {
    if diagonal <= up && diagonal <= left {
        0
    } else if up <= left {
        1
    } else {
        2
    }
}

/// DTW's optimal warping path by full-matrix traceback, and its value
/// (equal to [`super::dtw`]'s): the cells `(i, j)` from `(0, 0)` to
/// `(n-1, m-1)`, each step to `(i+1, j+1)`, `(i+1, j)` or `(i, j+1)`, all
/// within the band. Ties as the module says.
pub fn dtw_path(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    band: Option<usize>,
) -> (Vec<(usize, usize)>, f64) {
    super::check_pair(&a, &b);
    let (n, m) = (a.nrows(), b.nrows());
    let mut c = Array2::from_elem((n + 1, m + 1), INF);
    c[[0, 0]] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            if band.is_some_and(|r| !in_sakoe_chiba_band(i - 1, j - 1, n, m, r)) {
                continue;
            }
            let best = c[[i - 1, j - 1]].min(c[[i - 1, j]]).min(c[[i, j - 1]]);
            c[[i, j]] = sq_euclidean(a.row(i - 1), b.row(j - 1)) + best;
        }
    }
    let mut path = vec![(n - 1, m - 1)];
    let (mut i, mut j) = (n, m);
    while (i, j) != (1, 1) {
        (i, j) = match preferred(c[[i - 1, j - 1]], c[[i - 1, j]], c[[i, j - 1]]) {
            0 => (i - 1, j - 1),
            1 => (i - 1, j),
            _ => (i, j - 1),
        };
        path.push((i - 1, j - 1));
    }
    path.reverse();
    (path, c[[n, m]])
}

/// TWED's optimal edit path by full-matrix traceback, with the same matrix,
/// padding (the virtual sample 0 at time 0) and costs as [`super::twed`],
/// and its value: each step with the 0-based cell `(i, j)` it reaches and
/// its cost. The first step is always the match of `a_0` with `b_0` (the
/// boundary is +inf off the origin), the last reaches `(n-1, m-1)`, and the
/// costs add up to the value. Ties as the module says.
#[allow(clippy::too_many_arguments)]
pub fn twed_path(
    a: ArrayView2<f64>,
    ta: ArrayView1<f64>,
    b: ArrayView2<f64>,
    tb: ArrayView1<f64>,
    nu: f64,
    lambda: f64,
    degree: f64,
) -> (Vec<(TwedStep, usize, usize, f64)>, f64) {
    super::check_pair(&a, &b);
    assert_eq!(
        ta.len(),
        a.nrows(),
        "oracle::twed_path: one time per sample of a"
    );
    assert_eq!(
        tb.len(),
        b.nrows(),
        "oracle::twed_path: one time per sample of b"
    );
    let (n, m) = (a.nrows(), b.nrows());
    let (a, ta) = with_virtual_origin(a, ta);
    let (b, tb) = with_virtual_origin(b, tb);
    let dist = |u: ArrayView1<f64>, v: ArrayView1<f64>| lp_distance(u, v, degree);
    let match_cost = |i: usize, j: usize| {
        dist(a.row(i), b.row(j))
            + dist(a.row(i - 1), b.row(j - 1))
            + nu * ((ta[i] - tb[j]).abs() + (ta[i - 1] - tb[j - 1]).abs())
    };
    let delete_a_cost = |i: usize| dist(a.row(i), a.row(i - 1)) + nu * (ta[i] - ta[i - 1]) + lambda;
    let delete_b_cost = |j: usize| dist(b.row(j), b.row(j - 1)) + nu * (tb[j] - tb[j - 1]) + lambda;

    let mut d = Array2::from_elem((n + 1, m + 1), INF);
    d[[0, 0]] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            d[[i, j]] = (d[[i - 1, j - 1]] + match_cost(i, j))
                .min(d[[i - 1, j]] + delete_a_cost(i))
                .min(d[[i, j - 1]] + delete_b_cost(j));
        }
    }
    let mut steps = Vec::new();
    let (mut i, mut j) = (n, m);
    while (i, j) != (0, 0) {
        let totals = (
            d[[i - 1, j - 1]] + match_cost(i, j),
            d[[i - 1, j]] + delete_a_cost(i),
            d[[i, j - 1]] + delete_b_cost(j),
        );
        let (step, cost, previous) = match preferred(totals.0, totals.1, totals.2) {
            0 => (TwedStep::Match, match_cost(i, j), (i - 1, j - 1)),
            1 => (TwedStep::DeleteA, delete_a_cost(i), (i - 1, j)),
            _ => (TwedStep::DeleteB, delete_b_cost(j), (i, j - 1)),
        };
        steps.push((step, i - 1, j - 1, cost));
        (i, j) = previous;
    }
    steps.reverse();
    (steps, d[[n, m]])
}

/// Soft-DTW's expected alignment `E` (`n x m`, `E[i][j]` the derivative of
/// the value with respect to the cost `||a_i - b_j||^2`, so between 0 and
/// one) and the value, by the backward recursion of Cuturi & Blondel 2017,
/// Algorithm 2 (written out at [`super::soft_dtw_with_gradient`]), with an
/// optional Sakoe-Chiba band: `E` is 0 outside it.
pub fn soft_dtw_alignment(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    gamma: f64,
    band: Option<usize>,
) -> (Array2<f64>, f64) {
    let (delta, r) = soft_dtw_forward(a, b, gamma, band);
    let (n, m) = (a.nrows(), b.nrows());
    let value = r[[n, m]];
    let inside =
        |i: usize, j: usize| band.is_none_or(|w| in_sakoe_chiba_band(i - 1, j - 1, n, m, w));

    let mut rx = Array2::from_elem((n + 2, m + 2), f64::NEG_INFINITY);
    for i in 1..=n {
        for j in 1..=m {
            if inside(i, j) {
                rx[[i, j]] = r[[i, j]];
            }
        }
    }
    rx[[n + 1, m + 1]] = value;
    let mut dx = Array2::<f64>::zeros((n + 2, m + 2));
    dx.slice_mut(s![1..=n, 1..=m]).assign(&delta);
    // Weight of the step (i, j) -> (i2, j2). The interior R[i][j] in the
    // band is finite, so the only infinities are the -inf borders and
    // out-of-band cells, whose weight is exp(-inf) = 0; they are handled
    // explicitly to keep inf arithmetic out.
    let weight = |i2: usize, j2: usize, i: usize, j: usize| {
        if rx[[i2, j2]] == f64::NEG_INFINITY {
            0.0
        } else {
            ((rx[[i2, j2]] - rx[[i, j]] - dx[[i2, j2]]) / gamma).exp()
        }
    };
    let mut e = Array2::<f64>::zeros((n + 2, m + 2));
    e[[n + 1, m + 1]] = 1.0;
    for i in (1..=n).rev() {
        for j in (1..=m).rev() {
            if !inside(i, j) {
                continue; // E stays 0
            }
            e[[i, j]] = e[[i + 1, j]] * weight(i + 1, j, i, j)
                + e[[i, j + 1]] * weight(i, j + 1, i, j)
                + e[[i + 1, j + 1]] * weight(i + 1, j + 1, i, j);
        }
    }
    (e.slice(s![1..=n, 1..=m]).to_owned(), value)
}
