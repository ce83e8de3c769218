//! The one abstraction every measure implements and every driver is generic
//! over: how a cell of the cost matrix follows from its neighbours
//! ([`Recurrence`]), which cells a measure allows at all ([`Window`]), and,
//! for the backward pass, the cell's derivatives ([`Differentiable`]).

use crate::{Real, Series};

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

/// The cells of the `n x m` matrix a measure allows; the others are
/// infinite (excluded from every path). Rows and columns are 1-based, as in
/// [`Recurrence`].
pub trait Window: Copy {
    /// Whether any cell may be excluded; drivers skip their per-cell tests
    /// when none can.
    fn is_banded(&self) -> bool;

    /// The columns `lo..=hi` of row `i` that are allowed. `hi` grows by at
    /// most 1 from row to row and `lo` never shrinks.
    fn columns(&self, i: usize, n: usize, m: usize) -> (usize, usize);

    /// The rows `lo..=hi` that allow at least one of the columns
    /// `first..=last` (`1 <= first <= last <= m`): the window read along
    /// the columns, so that drivers working on a range of columns skip the
    /// rows where it is wholly outside. Non-empty; both ends never shrink
    /// as the columns move right.
    fn rows(&self, first: usize, last: usize, n: usize, m: usize) -> (usize, usize);

    /// The window as diagonals, `Some((below, above))`, when the columns of
    /// every row `i` are exactly `max(1, i - below) ..= min(m, i + above)`:
    /// drivers that lay the cells out along the diagonals
    /// (`drivers::sheared_band`) then compute only these. `None` for any
    /// other window.
    fn diagonals(&self, n: usize, m: usize) -> Option<(usize, usize)>;
}

/// Every cell allowed: the window of a measure without a band.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unbounded;

impl Window for Unbounded {
    #[inline(always)]
    fn is_banded(&self) -> bool {
        false
    }
    #[inline(always)]
    fn columns(&self, _i: usize, _n: usize, m: usize) -> (usize, usize) {
        (1, m)
    }
    #[inline(always)]
    fn rows(&self, _first: usize, _last: usize, n: usize, _m: usize) -> (usize, usize) {
        (1, n)
    }
    #[inline(always)]
    fn diagonals(&self, _n: usize, _m: usize) -> Option<(usize, usize)> {
        None
    }
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
    /// Which cells the measure allows.
    type Window: Window;

    /// Whether a cell's update is a long dependent chain (Soft-DTW's
    /// exponentials and logarithm): a CPU computing one pair should then
    /// interleave independent cells (anti-diagonal order,
    /// `drivers::stencil`) rather than follow the rows, and a warp, whose
    /// few companions hide little of its waiting, gets steps without the
    /// left border's branch where a region has none (`drivers::columns`).
    const LATENCY_BOUND: bool = false;

    /// Whether a cell is a short chain of plain arithmetic (DTW's, TWED's),
    /// so that what a driver spends per step beside the cells weighs: the
    /// warp drivers then unroll steps (two a loop iteration, or the sheared
    /// band's ring), which spares register moves between steps but may hold
    /// more registers.
    const CHEAP_CELL: bool = false;

    /// The cells the measure allows.
    fn window(&self) -> Self::Window;

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

/// A recurrence whose cell is a local cost of the pair's samples plus a
/// function of the three neighbours with the same derivative formula for
/// each, so that the backward pass (`drivers::stencil::stencil_gradient`)
/// can compute the derivative of the pair's value with respect to every
/// cell and every sample. Soft-DTW implements it.
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
