//! The fast CPU backend: the kernels' own recurrences with two rolling rows
//! per pair (linear memory), pairs spread over threads with rayon.

use crate::{Float, SeriesSet};
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;
use timewarp_kernels::launch::{tile_pairs, triangle_pair};
use timewarp_kernels::soft_dtw::soft_dtw_cell;
use timewarp_kernels::{pair_value, Recurrence, RowPair, Series};

/// Pairs handed to a rayon task at once: enough to amortise scheduling for
/// short series, few enough to balance long ones.
const PAIRS_PER_TASK: usize = 16;

/// Every series of `a` against every series of `b` (or of `a` itself, upper
/// triangle computed once, when `b` is `None`).
pub(crate) fn matrix<T: Float, R: Recurrence<T> + Sync>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    measure: &R,
) -> Array2<T> {
    let triangle = b.is_none();
    let b = b.unwrap_or(a);
    let (a_ref, b_ref) = (a.host_ref(), b.host_ref());
    let row_len = b.max_len() + 1;
    let columns = b.len() as u64;
    let pairs = tile_pairs(a.len() as u64, columns, triangle);
    let pair = |k: u64| {
        if triangle {
            triangle_pair(k, columns)
        } else {
            (k / columns, k % columns)
        }
    };
    let values: Vec<T> = (0..pairs as usize)
        .into_par_iter()
        .with_min_len(PAIRS_PER_TASK)
        .map_init(
            || vec![T::ZERO; 2 * row_len],
            |rows, k| {
                let (i, j) = pair(k as u64);
                let rows = RowPair {
                    base: rows.as_mut_ptr(),
                    len: row_len,
                    stride: 1,
                };
                // SAFETY: i and j index the batches, which outlive this call;
                // `rows` holds two rows of the longest series of b plus one.
                unsafe {
                    pair_value(
                        measure,
                        &a_ref.series(i as usize),
                        &b_ref.series(j as usize),
                        rows,
                    )
                }
            },
        )
        .collect();
    let mut out = Array2::from_elem((a.len(), b.len()), T::ZERO);
    for (k, value) in values.into_iter().enumerate() {
        let (i, j) = pair(k as u64);
        out[[i as usize, j as usize]] = value;
        if triangle {
            out[[j as usize, i as usize]] = value;
        }
    }
    out
}

/// A host `Series` over a contiguous `length x dims` view.
fn series_of<T: Float>(x: &ArrayView2<T>) -> Series<T> {
    Series {
        values: x.as_ptr(),
        times: std::ptr::null(),
        len: x.nrows(),
        dims: x.ncols(),
    }
}

/// Soft-DTW value and gradient with respect to `x` (Cuturi & Blondel 2017,
/// Algorithm 2): the full cost matrix forward with the kernels' cell update,
/// then the expected-alignment matrix E backward. Both views must be in
/// standard (row-major, contiguous) layout.
pub(crate) fn soft_dtw_gradient<T: Float>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    gamma: T,
) -> (T, Array2<T>) {
    let (n, m, dims) = (x.nrows(), y.nrows(), x.ncols());
    let (xs, ys) = (series_of(&x), series_of(&y));
    // SAFETY: indices below stay within the views' rows.
    let cost = |i: usize, j: usize| unsafe { xs.squared_distance(i, &ys, j) };
    // r[i][j] for 0 <= i <= n + 1, 0 <= j <= m + 1; row n + 1 and column
    // m + 1 are the backward pass's boundary.
    let mut r = Array2::from_elem((n + 2, m + 2), T::INFINITY);
    r[[0, 0]] = T::ZERO;
    for i in 1..=n {
        for j in 1..=m {
            r[[i, j]] = soft_dtw_cell(
                gamma,
                cost(i - 1, j - 1),
                r[[i - 1, j - 1]],
                r[[i - 1, j]],
                r[[i, j - 1]],
            );
        }
    }
    let value = r[[n, m]];
    // e[i][j]: how much cell (i, j) weighs in the soft alignment.
    let mut e = Array2::from_elem((n + 2, m + 2), T::ZERO);
    e[[n + 1, m + 1]] = T::ONE;
    // Weight of the step from (i, j) to a successor (k, l), which lies on the
    // boundary (no weight) unless k <= n and l <= m, or it is (n+1, m+1).
    let weight = |r: &Array2<T>, i: usize, j: usize, k: usize, l: usize| {
        if k == n + 1 && l == m + 1 {
            return if i == n && j == m { T::ONE } else { T::ZERO };
        }
        if k > n || l > m {
            return T::ZERO;
        }
        ((r[[k, l]] - r[[i, j]] - cost(k - 1, l - 1)) / gamma).exp()
    };
    for i in (1..=n).rev() {
        for j in (1..=m).rev() {
            e[[i, j]] = e[[i + 1, j]] * weight(&r, i, j, i + 1, j)
                + e[[i, j + 1]] * weight(&r, i, j, i, j + 1)
                + e[[i + 1, j + 1]] * weight(&r, i, j, i + 1, j + 1);
        }
    }
    let two = T::ONE + T::ONE;
    let mut gradient = Array2::from_elem((n, dims), T::ZERO);
    for i in 0..n {
        for j in 0..m {
            let weight = e[[i + 1, j + 1]];
            for d in 0..dims {
                gradient[[i, d]] = gradient[[i, d]] + weight * two * (x[[i, d]] - y[[j, d]]);
            }
        }
    }
    (value, gradient)
}
