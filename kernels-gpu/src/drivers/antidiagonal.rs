//! The anti-diagonal driver, shared by every measure: one pair, every cell
//! of an anti-diagonal at once (one thread per cell), three rolling
//! anti-diagonals in memory, as in the Improved TWED algorithm behind
//! cuTWED (Wright 2020), but generic over [`Recurrence`].
//!
//! Cell `(i, j)` of the `(n + 1) x (m + 1)` cost matrix (row 0 and column 0
//! the boundary) lies on anti-diagonal `k = i + j`, `0 <= k <= n + m`. Its
//! three neighbours lie on the two anti-diagonals before it: `(i - 1, j)`
//! and `(i, j - 1)` on `k - 1`, `(i - 1, j - 1)` on `k - 2`. So every cell
//! of anti-diagonal `k` can be computed at once from anti-diagonals `k - 1`
//! and `k - 2`, and three buffers suffice: anti-diagonal `k` lives in
//! buffer `k % 3`, cell `(i, k - i)` at position `i` of it (the row; each
//! buffer holds `n + 1` values). Neighbouring threads take neighbouring
//! rows, so their loads and stores are coalesced; the neighbours of the
//! cell at position `i` are at positions `i - 1` and `i` of buffer
//! `(k - 1) % 3` and position `i - 1` of buffer `(k - 2) % 3`.
//!
//! Anti-diagonal `k` holds the rows `max(0, k - m) ..= min(k, n)`
//! ([`antidiagonal_rows`]); the cells of row 0 or column 0 on it are the
//! boundary (`0` at `(0, 0)`, infinite elsewhere) and are written like any
//! other cell, so no read ever needs a bounds test.
//!
//! Between two anti-diagonals every thread must wait for all others: on the
//! GPU either a grid-wide barrier inside one persistent kernel
//! ([`diagonal_pair`] over a [`Grid`]), or one kernel launch per
//! anti-diagonal ([`diagonal_cells`], as cuTWED does). The host tests run
//! the same code on threads with a `std::sync::Barrier`.

use super::antidiagonal_rows;
use crate::hw::Grid;
use crate::{Neighbours, Real, Recurrence, Series, Window};

/// The three rolling anti-diagonals of one pair: `3 * len` values, buffer
/// `b` at `base[b * len .. (b + 1) * len]`. `len >= a.len + 1` (`n + 1`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Diagonals<T> {
    pub base: *mut T,
    pub len: u64,
}

impl<T: Real> Diagonals<T> {
    /// Where cell `(i, k - i)` of anti-diagonal `k` lives.
    #[inline(always)]
    fn slot(&self, k: usize, i: usize) -> *mut T {
        // SAFETY: in the buffer for the callers' `i <= n < len`, slot < 3.
        unsafe { self.base.add((k % 3) * self.len as usize + i) }
    }
}

/// The cells of anti-diagonal `k` that thread `thread` of `threads`
/// computes: rows `first + thread`, `first + thread + threads`, ... Each
/// thread's cells are written, in any order relative to other threads;
/// anti-diagonals `k - 1` and `k - 2` must be complete.
///
/// # Safety
/// `k <= a.len + b.len`; `diagonals` is valid with `len > a.len`; the
/// series are non-empty and valid.
#[inline(always)]
pub unsafe fn diagonal_cells<T: Real, M: Recurrence<T>>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    diagonals: &Diagonals<T>,
    k: usize,
    thread: usize,
    threads: usize,
) {
    let (n, m) = (a.len, b.len);
    let (first, last) = antidiagonal_rows(k, n, m);
    let window = measure.window();
    let banded = window.is_banded();
    let mut i = first + thread;
    while i <= last {
        let j = k - i;
        let value = if i == 0 || j == 0 {
            if k == 0 {
                T::ZERO
            } else {
                T::INFINITY
            }
        } else {
            let inside = if banded {
                let (lo, hi) = window.columns(i, n, m);
                lo <= j && j <= hi
            } else {
                true
            };
            if inside {
                let neighbours = Neighbours {
                    diag: *diagonals.slot(k - 2, i - 1),
                    up: *diagonals.slot(k - 1, i - 1),
                    left: *diagonals.slot(k - 1, i),
                };
                let row = measure.row(a, i);
                let column = measure.column(b, j);
                measure.cell(&row, &column, a, b, neighbours)
            } else {
                T::INFINITY
            }
        };
        *diagonals.slot(k, i) = value;
        i += threads;
    }
}

/// The pair's value, cell `(n, m)`, once anti-diagonal `n + m` is complete.
///
/// # Safety
/// As [`diagonal_cells`].
#[inline(always)]
pub unsafe fn diagonal_value<T: Real>(diagonals: &Diagonals<T>, n: usize, m: usize) -> T {
    *diagonals.slot(n + m, n)
}

/// The whole pair, every anti-diagonal in turn with a [`Grid::sync`]
/// between two; returns the pair's value on thread 0 (which computes the
/// last cell itself, so no barrier follows the last anti-diagonal), and an
/// unspecified value on the others.
///
/// # Safety
/// All threads of `grid` call it together with the same arguments; as
/// [`diagonal_cells`].
#[inline(always)]
pub unsafe fn diagonal_pair<T: Real, M: Recurrence<T>, G: Grid>(
    grid: &G,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    diagonals: &Diagonals<T>,
) -> T {
    let (n, m) = (a.len, b.len);
    let (thread, threads) = (grid.thread(), grid.threads());
    for k in 0..=n + m {
        diagonal_cells(measure, a, b, diagonals, k, thread, threads);
        if k < n + m {
            grid.sync();
        }
    }
    if thread == 0 {
        diagonal_value(diagonals, n, m)
    } else {
        T::INFINITY
    }
}
