//! The one dynamic-programming driver that every measure shares: the cost
//! matrix is filled row by row, keeping only two rows.
//!
//! The two rows live wherever the caller puts them: a slice on the CPU
//! (`stride == 1`), or interleaved with other threads' rows in GPU global
//! memory (`stride == threads in the launch`), so that neighbouring threads
//! touch neighbouring addresses.

use crate::{Real, Series};

/// Two rows of `len` values each, element `k` of row `r` at
/// `base[(r * len + k) * stride]`.
#[derive(Clone, Copy)]
pub struct RowPair<T> {
    pub base: *mut T,
    pub len: usize,
    pub stride: usize,
}

impl<T: Real> RowPair<T> {
    #[inline(always)]
    unsafe fn get(&self, row: usize, k: usize) -> T {
        *self.base.add((row * self.len + k) * self.stride)
    }
    #[inline(always)]
    unsafe fn set(&self, row: usize, k: usize, value: T) {
        *self.base.add((row * self.len + k) * self.stride) = value;
    }
}

/// The three cells a cell's value follows from.
#[derive(Clone, Copy, Debug)]
pub struct Neighbours<T> {
    /// Cell `(i - 1, j - 1)`.
    pub diag: T,
    /// Cell `(i - 1, j)`.
    pub up: T,
    /// Cell `(i, j - 1)`.
    pub left: T,
}

/// A measure's recurrence: how one cell of the cost matrix follows from its
/// three neighbours. Cells are 1-based: cell `(i, j)` pairs sample `i - 1` of
/// `a` with sample `j - 1` of `b`; row 0 and column 0 are the boundary
/// (`0` at `(0, 0)`, infinity elsewhere).
///
/// What a cell needs of its row and of its column alone is computed once per
/// row ([`Recurrence::row`]) and once per column ([`Recurrence::column`]), so
/// that every driver can keep it where it is cheapest: the row driver
/// recomputes a column per cell, the warp driver holds a lane's columns in
/// registers for a whole block of rows.
pub trait Recurrence<T: Real> {
    /// What a row computes once for all its cells.
    type Row: Copy;
    /// What a column computes once for all its cells.
    type Column: Copy;

    /// Whether a cell's update is a long dependent chain (Soft-DTW's
    /// exponentials and logarithm), so that a CPU computing one pair
    /// should interleave independent cells (anti-diagonal order, see
    /// `block::block_value`) rather than follow the rows.
    const LATENCY_BOUND: bool = false;

    /// Whether a cell is a handful of instructions (DTW's), so that what a
    /// driver spends per step beside the cells weighs: the warp driver then
    /// runs two steps per loop iteration, which spares the register moves
    /// between steps but holds more registers. Measured on an H200: DTW
    /// 9.5% faster with it, TWED 3.7% slower.
    const CHEAP_CELL: bool = false;

    /// Whether [`Recurrence::columns`] may exclude columns (a band); drivers
    /// skip the per-cell band test when it cannot.
    #[inline(always)]
    fn banded(&self) -> bool {
        false
    }

    /// The columns `lo..=hi` of row `i` that the measure allows (a band);
    /// cells outside are infinite. `hi` may grow by at most 1 from row to row
    /// and `lo` may never shrink; the default is every column.
    #[inline(always)]
    fn columns(&self, _i: usize, _n: usize, m: usize) -> (usize, usize) {
        (1, m)
    }

    /// The rows `lo..=hi` that allow at least one of the columns
    /// `first..=last` (`1 <= first <= last <= m`): the band read along the
    /// columns, so that drivers working on a range of columns can skip
    /// the rows where it is wholly outside. Non-empty, and both ends never
    /// shrink as the columns move right. The default is every row.
    #[inline(always)]
    fn rows(&self, _first: usize, _last: usize, n: usize, _m: usize) -> (usize, usize) {
        (1, n)
    }

    /// The band as diagonals, `Some((below, above))`, when the columns of
    /// every row `i` are exactly `max(1, i - below) ..= min(m, i + above)`
    /// (a Sakoe-Chiba band): drivers
    /// that lay the cells out along the band (`band.rs`) then compute
    /// only its cells. `None` (the default) for any other set of columns.
    #[inline(always)]
    fn diagonals(&self, _n: usize, _m: usize) -> Option<(usize, usize)> {
        None
    }

    /// # Safety
    /// `1 <= i <= a.len`.
    unsafe fn row(&self, a: &Series<T>, i: usize) -> Self::Row;

    /// # Safety
    /// `1 <= j <= b.len`.
    unsafe fn column(&self, b: &Series<T>, j: usize) -> Self::Column;

    /// Row `i` when `previous` is row `i - 1`: drivers that walk a lane's
    /// rows in order call this, so a measure whose row repeats what the
    /// row before loaded (TWED's previous sample) can take it from there.
    /// With another `previous` the result is not row `i` (drivers then
    /// never use it) but the call stays in bounds.
    ///
    /// # Safety
    /// `1 <= i <= a.len`; `previous` is a row of `a`.
    #[inline(always)]
    unsafe fn next_row(&self, a: &Series<T>, _previous: &Self::Row, i: usize) -> Self::Row {
        self.row(a, i)
    }

    /// The value of the cell of `row` and `column` from its diagonal, upper
    /// and left neighbours.
    ///
    /// # Safety
    /// `row` and `column` were computed from `a` and `b`.
    unsafe fn cell(
        &self,
        row: &Self::Row,
        column: &Self::Column,
        a: &Series<T>,
        b: &Series<T>,
        neighbours: Neighbours<T>,
    ) -> T;
}

/// The measure's value for one pair: cell `(a.len, b.len)`.
///
/// # Safety
/// `rows` has two rows of at least `b.len + 1` values each, not aliased by
/// anyone else while this runs; both series are non-empty and valid.
#[inline(always)]
pub unsafe fn pair_value<T: Real, M: Recurrence<T>>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    rows: RowPair<T>,
) -> T {
    let (n, m) = (a.len, b.len);
    rows.set(0, 0, T::ZERO);
    for j in 1..=m {
        rows.set(0, j, T::INFINITY);
    }
    let mut previous = 0;
    for i in 1..=n {
        let current = 1 - previous;
        let (lo, hi) = measure.columns(i, n, m);
        // Cells just outside the band read as infinite by this row and the next.
        rows.set(current, lo - 1, T::INFINITY);
        if hi < m {
            rows.set(current, hi + 1, T::INFINITY);
        }
        let row = measure.row(a, i);
        let mut diag = rows.get(previous, lo - 1);
        let mut left = T::INFINITY;
        for j in lo..=hi {
            let up = rows.get(previous, j);
            let column = measure.column(b, j);
            let value = measure.cell(&row, &column, a, b, Neighbours { diag, up, left });
            rows.set(current, j, value);
            diag = up;
            left = value;
        }
        previous = current;
    }
    rows.get(previous, m)
}

/// A recurrence whose cell is a local cost of the pair's samples plus a
/// function of the three neighbours with the same derivative formula for
/// each, so that the backward pass (`block::block_gradient`) can compute
/// the derivative of the pair's value with respect to every cell and every
/// sample. Soft-DTW implements it.
///
/// With `v = cell(row, column, neighbours)`, `key = key(row, column, v)`:
/// `d v / d x = partial(key, x)` for each neighbour value `x`, and
/// `partial(-inf, x) = 0` (the key of a cell outside the matrix or the band).
pub trait Differentiable<T: Real>: Recurrence<T> {
    /// What a cell passes to the derivatives with respect to its
    /// neighbours, from its value.
    ///
    /// # Safety
    /// As [`Recurrence::cell`].
    unsafe fn key(
        &self,
        row: &Self::Row,
        column: &Self::Column,
        a: &Series<T>,
        b: &Series<T>,
        value: T,
    ) -> T;

    /// The derivative of a cell with key `key` with respect to a neighbour
    /// whose value is `neighbour`.
    fn partial(&self, key: T, neighbour: T) -> T;

    /// The derivative of the cell of `row` and `column` with respect to
    /// value `dim` of sample `a_i` (the row's); the cost depends on
    /// `a_i - b_j` only, so with respect to `b_j[dim]` it is the negation.
    ///
    /// # Safety
    /// As [`Recurrence::cell`]; `dim < a.dims`.
    unsafe fn cost_gradient(
        &self,
        row: &Self::Row,
        column: &Self::Column,
        a: &Series<T>,
        b: &Series<T>,
        dim: usize,
    ) -> T;
}
