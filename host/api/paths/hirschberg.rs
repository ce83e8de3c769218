//! DTW paths in memory linear in the lengths: Hirschberg's divide and
//! conquer over a provider of last columns, which the CPU gives here and a
//! GPU can give as well (added separately: the recursion only asks a
//! [`LastColumn`] for whole columns of sub-pairs).

use super::dtw;
use super::types::{Alignment, Samples};
use crate::{Float, Result};
use ndarray::{s, ArrayView2};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Mutex;

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
pub trait LastColumn<T: Send>: Sync {
    fn last_column(&self, rows: Range<usize>, cols: Range<usize>, reversed: bool)
        -> Result<Vec<T>>;

    /// The last column of each pass, in order: all the passes of one level
    /// of the recursion, which may run at once (by default on all cores).
    fn last_columns(&self, passes: &[Pass]) -> Result<Vec<Vec<T>>> {
        passes
            .par_iter()
            .map(|pass| self.last_column(pass.rows.clone(), pass.cols.clone(), pass.reversed))
            .collect()
    }
}

/// One pass of the recursion: [`LastColumn::last_column`]'s arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pass {
    pub rows: Range<usize>,
    pub cols: Range<usize>,
    pub reversed: bool,
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
/// diagonal step first); both halves are solved the same way down to
/// sub-pairs of at most `leaf_cells` cells (or one row or column), which a
/// full-matrix traceback solves.
///
/// The sub-pairs are split a level at a time: the provider gets all passes
/// of a level in one call ([`LastColumn::last_columns`]), so a GPU can run
/// them together, while the leaves found so far are traced on the other
/// CPU cores. Where several paths are optimal it may pick another than the
/// full-matrix traceback; the value is the same.
pub fn hirschberg<T: Float, P: LastColumn<T>>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    provider: &P,
    leaf_cells: usize,
) -> Result<Alignment<T>> {
    let (n, m) = (x.nrows(), y.nrows());
    let is_leaf = |part: &SubPair| {
        let (rows, cols) = (part.rows.len(), part.cols.len());
        rows == 1 || cols == 1 || (rows as u128 * cols as u128) <= leaf_cells as u128
    };
    let whole = SubPair {
        rows: 0..n,
        cols: 0..m,
    };
    // Each leaf's path in the pair's indices, keyed by its first cell (the
    // leaves' order along the path), and its value.
    let leaves = Mutex::new(Vec::new());
    let trace = |part: SubPair| -> Result<()> {
        let leaf = dtw::traceback(
            &Samples::new(x.slice(s![part.rows.clone(), ..])),
            &Samples::new(y.slice(s![part.cols.clone(), ..])),
            None,
        )?;
        let (row0, col0) = (part.rows.start, part.cols.start);
        let path = leaf.path.iter().map(|&(i, j)| (i + row0, j + col0));
        let mut leaves = leaves
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        leaves.push(((row0, col0), path.collect::<Vec<_>>(), leaf.value));
        Ok(())
    };
    let mut value = None;
    let failure = Mutex::new(None);
    rayon::scope(|scope| -> Result<()> {
        let mut level = vec![whole];
        while !level.is_empty() {
            crate::interrupt::check()?;
            let (done, split): (Vec<_>, Vec<_>) = level.into_iter().partition(is_leaf);
            for part in done {
                let (trace, failure) = (&trace, &failure);
                scope.spawn(move |_| {
                    if let Err(error) = trace(part) {
                        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
                    }
                });
            }
            let passes: Vec<_> = split.iter().flat_map(|part| part.passes((n, m))).collect();
            let columns = provider.last_columns(&passes)?;
            level = Vec::with_capacity(2 * split.len());
            for (part, columns) in split.iter().zip(columns.chunks_exact(2)) {
                let (total, left, right) = part.crossing(&columns[0], &columns[1]);
                value.get_or_insert(total);
                level.extend([left, right]);
            }
        }
        Ok(())
    })?;
    if let Some(error) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error);
    }
    let mut leaves = leaves.into_inner().unwrap_or_else(|p| p.into_inner());
    leaves.sort_unstable_by_key(|(start, _, _)| *start);
    // A single leaf is the whole pair, and its value the pair's.
    let value = value.unwrap_or_else(|| leaves[0].2);
    let path = leaves.into_iter().flat_map(|(_, path, _)| path).collect();
    Ok(Alignment {
        path,
        value,
        on_gpu: false,
    })
}

/// A sub-pair of the pair: the path runs from its first cell to its last.
struct SubPair {
    rows: Range<usize>,
    cols: Range<usize>,
}

impl SubPair {
    /// The middle column the sub-pair is split after.
    fn middle(&self) -> usize {
        self.cols.start + (self.cols.len() - 1) / 2
    }

    /// The forward pass to the middle column, and the backward pass (over
    /// the reversed series of the pair of lengths `(n, m)`) to the column
    /// after it.
    fn passes(&self, (n, m): (usize, usize)) -> [Pass; 2] {
        let c = self.middle();
        [
            Pass {
                rows: self.rows.clone(),
                cols: self.cols.start..c + 1,
                reversed: false,
            },
            Pass {
                rows: n - self.rows.end..n - self.rows.start,
                cols: m - self.cols.end..m - (c + 1),
                reversed: true,
            },
        ]
    }

    /// Where the path crosses from the middle column to the next, from the
    /// passes' columns: the path's cost and the two sub-pairs it leaves.
    fn crossing<T: Float>(&self, forward: &[T], backward: &[T]) -> (T, SubPair, SubPair) {
        let n = self.rows.len();
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
        let (row, c) = (self.rows.start + row, self.middle());
        let right_row = row + usize::from(is_diagonal);
        let left = SubPair {
            rows: self.rows.start..row + 1,
            cols: self.cols.start..c + 1,
        };
        let right = SubPair {
            rows: right_row..self.rows.end,
            cols: c + 1..self.cols.end,
        };
        (total, left, right)
    }
}
