//! DTW paths in memory linear in the lengths: Hirschberg's divide and
//! conquer over a provider of last columns, which the CPU gives here and a
//! GPU can give as well (added separately: the recursion only asks a
//! [`LastColumn`] for whole columns of sub-pairs).

use super::dtw;
use super::types::{Alignment, Samples};
use crate::{Float, Result};
use ndarray::{s, ArrayView2};

/// Sub-pairs of at most this many cells are solved by a full-matrix
/// traceback: one byte a cell, so a leaf takes 16 MiB, small beside the
/// caches' worth of work a split saves, and a few leaves run at once.
pub const HIRSCHBERG_LEAF_CELLS: usize = 1 << 24;

/// The last column of a plain DTW (no band) of a sub-pair: for series `x`
/// (`n x dims`) and `y` (`m x dims`), `D[i][m - 1]` for every row `i`,
/// where `D[i][j]` is the least cost of a warping path from `(0, 0)` to
/// `(i, j)` (the cost of `(i, j)` included) with squared Euclidean costs.
///
/// The views may be reversed (negative strides): the recursion's backward
/// pass is this forward pass over the reversed sub-series, which is exact
/// for DTW since its costs belong to cells, not to steps.
pub trait LastColumn<T>: Sync {
    fn last_column(&self, x: ArrayView2<T>, y: ArrayView2<T>) -> Result<Vec<T>>;
}

/// The CPU's [`LastColumn`]: one rolling row of `m` costs.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuLastColumn;

impl<T: Float> LastColumn<T> for CpuLastColumn {
    fn last_column(&self, x: ArrayView2<T>, y: ArrayView2<T>) -> Result<Vec<T>> {
        let (x, y) = (Samples::new(x), Samples::new(y));
        let m = y.len();
        let mut row = vec![T::INFINITY; m];
        let mut column = Vec::with_capacity(x.len());
        for i in 0..x.len() {
            // `diagonal` is the row above's cell to the left; `left` this
            // row's (both +inf off the matrix, the origin's diagonal 0).
            let mut diagonal = if i == 0 { T::ZERO } else { T::INFINITY };
            let mut left = T::INFINITY;
            for (j, cell) in row.iter_mut().enumerate() {
                let up = *cell;
                let best = diagonal.min(up).min(left);
                *cell = x.squared_distance(i, &y, j) + best;
                diagonal = up;
                left = *cell;
            }
            column.push(row[m - 1]);
        }
        Ok(column)
    }
}

/// The optimal DTW path of `x` against `y` (no band) in memory linear in
/// their lengths, and its value: split at the middle column `c`, the last
/// column of `x` against `y[..=c]` from `provider`, the costs from each
/// cell of column `c + 1` to the end from the same pass over the reversed
/// `x` and `y[c + 1..]`; the path crosses from `(i, c)` to `(i, c + 1)` or
/// `(i + 1, c + 1)` where the sum is least (the lowest such row, the
/// diagonal step first); both halves are solved the same way, in
/// parallel, down to sub-pairs of at most `leaf_cells` cells (or one row
/// or column), which a full-matrix traceback solves.
///
/// This is the entry point for a GPU provider. Where several paths are
/// optimal it may pick another than the full-matrix traceback; the value
/// is the same.
pub fn hirschberg<T: Float, P: LastColumn<T>>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    provider: &P,
    leaf_cells: usize,
) -> Result<Alignment<T>> {
    let (path, value) = solve(x, y, provider, leaf_cells)?;
    Ok(Alignment { path, value })
}

/// The path of the sub-pair in its own indices, and its cost.
fn solve<T: Float, P: LastColumn<T>>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    provider: &P,
    leaf_cells: usize,
) -> Result<(Vec<(usize, usize)>, T)> {
    let (n, m) = (x.nrows(), y.nrows());
    if n == 1 || m == 1 || (n as u128 * m as u128) <= leaf_cells as u128 {
        let leaf = dtw::traceback(&Samples::new(x), &Samples::new(y), None)?;
        return Ok((leaf.path, leaf.value));
    }
    crate::interrupt::check()?;
    let c = (m - 1) / 2;
    let (forward, backward) = rayon::join(
        || provider.last_column(x, y.slice(s![..=c, ..])),
        || provider.last_column(x.slice(s![..;-1, ..]), y.slice(s![c + 1..;-1, ..])),
    );
    let (forward, backward) = (forward?, backward?);
    // The cost from (i, c + 1) to the end, the cell's own cost included.
    let to_end = |i: usize| backward[n - 1 - i];
    let mut best: Option<(T, usize, bool)> = None;
    for (i, &reach) in forward.iter().enumerate() {
        let diagonal = (i + 1 < n).then(|| (reach + to_end(i + 1), true));
        for (total, is_diagonal) in diagonal.into_iter().chain([(reach + to_end(i), false)]) {
            if best.is_none_or(|(least, _, _)| total < least) {
                best = Some((total, i, is_diagonal));
            }
        }
    }
    let (total, row, is_diagonal) = best.expect("a sub-pair has rows");
    let right_row = row + usize::from(is_diagonal);
    let (left, right) = rayon::join(
        || {
            solve(
                x.slice(s![..=row, ..]),
                y.slice(s![..=c, ..]),
                provider,
                leaf_cells,
            )
        },
        || {
            solve(
                x.slice(s![right_row.., ..]),
                y.slice(s![c + 1.., ..]),
                provider,
                leaf_cells,
            )
        },
    );
    let (mut path, _) = left?;
    let (right, _) = right?;
    path.extend(right.into_iter().map(|(i, j)| (i + right_row, j + c + 1)));
    Ok((path, total))
}
