//! DTW paths in memory linear in the lengths: Hirschberg's divide and
//! conquer over a provider of last columns, which the CPU gives here and a
//! GPU can give as well (added separately: the recursion only asks a
//! [`LastColumn`] for whole columns of sub-pairs).

use super::dtw;
use super::types::{Alignment, Samples};
use crate::{Float, Result};
use ndarray::{s, ArrayView2};
use std::ops::Range;

/// Sub-pairs of at most this many cells are solved by a full-matrix
/// traceback: one byte a cell, so a leaf takes 16 MiB, small beside the
/// caches' worth of work a split saves, and a few leaves run at once.
pub const HIRSCHBERG_LEAF_CELLS: usize = 1 << 24;

/// The last column of a plain DTW (no band) of a sub-pair of one pair
/// `(x, y)` (`n x dims`, `m x dims`): for the sub-series `x[rows]` and
/// `y[cols]`, `D[i][cols.len() - 1]` for every row `i`, where `D[i][j]` is
/// the least cost of a warping path from the sub-pair's first cell to
/// `(i, j)` (the cost of `(i, j)` included) with squared Euclidean costs.
///
/// With `reversed`, the same of the reversed series, `rows` and `cols`
/// counted from their own first samples (the last of `x` and `y`): the
/// recursion's backward pass is this forward pass over the reversed
/// sub-series, which is exact for DTW since its costs belong to cells, not
/// to steps. The recursion calls it from several threads at once.
pub trait LastColumn<T>: Sync {
    fn last_column(&self, rows: Range<usize>, cols: Range<usize>, reversed: bool)
        -> Result<Vec<T>>;
}

/// The CPU's [`LastColumn`] of the pair `(x, y)`: one rolling row of
/// costs.
#[derive(Clone, Copy, Debug)]
pub struct CpuLastColumn<'a, T> {
    x: ArrayView2<'a, T>,
    y: ArrayView2<'a, T>,
}

impl<'a, T> CpuLastColumn<'a, T> {
    pub fn new(x: ArrayView2<'a, T>, y: ArrayView2<'a, T>) -> Self {
        Self { x, y }
    }
}

impl<T: Float> LastColumn<T> for CpuLastColumn<'_, T> {
    fn last_column(
        &self,
        rows: Range<usize>,
        cols: Range<usize>,
        reversed: bool,
    ) -> Result<Vec<T>> {
        let (x, y) = if reversed {
            (self.x.slice(s![..;-1, ..]), self.y.slice(s![..;-1, ..]))
        } else {
            (self.x, self.y)
        };
        let x = Samples::new(x.slice_move(s![rows, ..]));
        let y = Samples::new(y.slice_move(s![cols, ..]));
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
    let pair = Pair {
        lengths: (x.nrows(), y.nrows()),
        provider,
        leaf_cells,
    };
    let (path, value) = solve(x, y, (0, 0), &pair)?;
    Ok(Alignment { path, value })
}

/// The whole pair's lengths, its provider and the leaves' size.
struct Pair<'p, P> {
    lengths: (usize, usize),
    provider: &'p P,
    leaf_cells: usize,
}

/// The path of the sub-pair `x`, `y` (whose first cell is `(row0, col0)`
/// of the whole pair) in its own indices, and its cost.
fn solve<T: Float, P: LastColumn<T>>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    (row0, col0): (usize, usize),
    pair: &Pair<'_, P>,
) -> Result<(Vec<(usize, usize)>, T)> {
    let (n, m) = (x.nrows(), y.nrows());
    let (rows_all, cols_all) = pair.lengths;
    if n == 1 || m == 1 || (n as u128 * m as u128) <= pair.leaf_cells as u128 {
        let leaf = dtw::traceback(&Samples::new(x), &Samples::new(y), None)?;
        return Ok((leaf.path, leaf.value));
    }
    crate::interrupt::check()?;
    let c = (m - 1) / 2;
    // The backward pass's sub-series counted from the ends of the pair.
    let reversed_rows = rows_all - (row0 + n)..rows_all - row0;
    let reversed_cols = cols_all - (col0 + m)..cols_all - (col0 + c + 1);
    let (forward, backward) = rayon::join(
        || {
            pair.provider
                .last_column(row0..row0 + n, col0..col0 + c + 1, false)
        },
        || {
            pair.provider
                .last_column(reversed_rows, reversed_cols, true)
        },
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
                (row0, col0),
                pair,
            )
        },
        || {
            solve(
                x.slice(s![right_row.., ..]),
                y.slice(s![c + 1.., ..]),
                (row0 + right_row, col0 + c + 1),
                pair,
            )
        },
    );
    let (mut path, _) = left?;
    let (right, _) = right?;
    path.extend(right.into_iter().map(|(i, j)| (i + right_row, j + c + 1)));
    Ok((path, total))
}
