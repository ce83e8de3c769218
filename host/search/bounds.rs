//! Lower bounds of banded DTW (squared Euclidean local cost), as the UCR
//! Suite uses them (Rakthanmanon et al., KDD 2012, section 4), and the
//! envelopes they need. The search computes the same sums inline on
//! normalised-on-the-fly candidates (`super::scan`); these functions, on
//! series given whole, are its reference and are public for users and
//! tests.
//!
//! With `q`, `c` of length `m`, radius `r`, `D = DTW_r(q, c)`:
//! - LB_Kim (first and last points): every warping path holds the cells
//!   `(0, 0)` and `(m-1, m-1)`, distinct for `m >= 2`, so
//!   `||q_0 - c_0||^2 + ||q_{m-1} - c_{m-1}||^2 <= D`.
//! - LB_Keogh (Keogh and Ratanamahatana 2005): every sample `c_i` is
//!   matched to at least one `q_j` with `|i - j| <= r`, which lies in the
//!   envelope `[L_i, U_i]` of `q` (the min and max of `q` over
//!   `[i - r, i + r]`, per dimension), so `sum_i dist(c_i, [L_i, U_i])^2
//!   <= D`. Swapping the roles bounds it with `c`'s envelope. An envelope
//!   over a wider window (more samples) is wider: the bound stays valid,
//!   which lets the search take the data's envelope over the whole series.

use ndarray::ArrayView2;
use std::collections::VecDeque;

/// The envelope of `x` (`rows x dims`, row-major) for radius `r`: per
/// sample and dimension, the min (`lower`) and max (`upper`) of `x` over
/// samples `[i - r, i + r]` clipped to the series. A monotone deque makes
/// it O(rows) whatever `r` (Lemire, "Streaming maximum-minimum filter
/// using no more than three comparisons per element", 2006).
pub(crate) fn sliding_envelope(
    x: &[f64],
    dims: usize,
    r: usize,
    lower: &mut Vec<f64>,
    upper: &mut Vec<f64>,
    deque: &mut VecDeque<usize>,
) {
    let rows = x.len() / dims;
    lower.clear();
    lower.resize(x.len(), 0.0);
    upper.clear();
    upper.resize(x.len(), 0.0);
    for k in 0..dims {
        let at = |p: usize| x[p * dims + k];
        for (out, keeps) in [
            (
                &mut *upper,
                (|a: f64, b: f64| a >= b) as fn(f64, f64) -> bool,
            ),
            (&mut *lower, |a: f64, b: f64| a <= b),
        ] {
            // The deque holds indices of decreasing (for max) values; the
            // window of sample i is [i - r, i + r].
            deque.clear();
            let mut next = 0;
            for i in 0..rows {
                while next < rows && next <= i + r {
                    while deque.back().is_some_and(|&b| !keeps(at(b), at(next))) {
                        deque.pop_back();
                    }
                    deque.push_back(next);
                    next += 1;
                }
                while deque.front().is_some_and(|&f| f + r < i) {
                    deque.pop_front();
                }
                out[i * dims + k] = at(*deque.front().expect("the window holds sample i"));
            }
        }
    }
}

/// The squared distance from `v` to the interval `[lo, up]` (the
/// kernels' own, so that the CPU's bounds and the GPU's are one formula).
pub(crate) use timewarp_kernels::launch::search::outside;

/// The envelope of `x` (`n x dims`) for radius `r`: `(lower, upper)`, each
/// `n x dims` row-major.
pub fn envelope(x: ArrayView2<f64>, r: usize) -> (Vec<f64>, Vec<f64>) {
    let rows: Vec<f64> = x.iter().copied().collect();
    let (mut lower, mut upper) = (Vec::new(), Vec::new());
    sliding_envelope(
        &rows,
        x.ncols(),
        r,
        &mut lower,
        &mut upper,
        &mut VecDeque::new(),
    );
    (lower, upper)
}

/// LB_Kim of two series of one length `m >= 2` (`m x dims`): the cost of
/// their first and last samples, a lower bound of their DTW cost for any
/// band.
pub fn lb_kim(a: ArrayView2<f64>, b: ArrayView2<f64>) -> f64 {
    let m = a.nrows();
    assert!(
        m >= 2 && b.dim() == a.dim(),
        "lb_kim takes two series of one shape, m >= 2"
    );
    let cost = |i: usize| -> f64 {
        a.row(i)
            .iter()
            .zip(b.row(i))
            .map(|(x, y)| (x - y) * (x - y))
            .sum()
    };
    cost(0) + cost(m - 1)
}

/// LB_Keogh of `c` against the envelope of `q` for radius `r` (both
/// `m x dims`): a lower bound of their banded DTW cost. `lb_keogh(q, c, r)`
/// is the bound the other way.
pub fn lb_keogh(c: ArrayView2<f64>, q: ArrayView2<f64>, r: usize) -> f64 {
    assert_eq!(c.dim(), q.dim(), "lb_keogh takes two series of one shape");
    let (lower, upper) = envelope(q, r);
    c.iter()
        .enumerate()
        .map(|(at, &v)| outside(v, lower[at], upper[at]))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deque_envelope_is_the_window_min_and_max() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0];
        for r in 0..12 {
            let (mut lower, mut upper) = (Vec::new(), Vec::new());
            sliding_envelope(&x, 1, r, &mut lower, &mut upper, &mut VecDeque::new());
            for i in 0..x.len() {
                let window = &x[i.saturating_sub(r)..(i + r + 1).min(x.len())];
                assert_eq!(
                    upper[i],
                    window.iter().cloned().fold(f64::MIN, f64::max),
                    "r {r} i {i}"
                );
                assert_eq!(
                    lower[i],
                    window.iter().cloned().fold(f64::MAX, f64::min),
                    "r {r} i {i}"
                );
            }
        }
    }
}
