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
//! ([`diagonal_rows`]); the cells of row 0 or column 0 on it are the
//! boundary (`0` at `(0, 0)`, infinite elsewhere) and are written like any
//! other cell, so no read ever needs a bounds test.
//!
//! Between two anti-diagonals every thread must wait for all others: on the
//! GPU either a grid-wide barrier inside one persistent kernel
//! ([`diagonal_pair`] over a [`Grid`]), or one kernel launch per
//! anti-diagonal ([`diagonal_cells`], as cuTWED does). The host tests run
//! the same code on threads with a `std::sync::Barrier`.

use crate::{Neighbours, Real, Recurrence, Series};
use core::sync::atomic::{fence, AtomicU32, Ordering};

/// What the persistent driver needs of the threads that run it.
pub trait Grid {
    /// This thread's number, `0..self.threads()`.
    fn thread(&self) -> usize;
    /// Threads that run the driver together.
    fn threads(&self) -> usize;
    /// Waits until every thread has called it; memory written by any thread
    /// before its call is visible to every thread after the return.
    ///
    /// # Safety
    /// Called by all threads together.
    unsafe fn sync(&self);
}

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
        // SAFETY (of the callers' accesses): `i <= n < len`, buffer < 3.
        unsafe { self.base.add((k % 3) * self.len as usize + i) }
    }
}

/// The rows `first..=last` of the cells `(i, k - i)` on anti-diagonal `k`
/// of the `(n + 1) x (m + 1)` matrix, `k <= n + m`.
#[inline(always)]
pub fn diagonal_rows(k: usize, n: usize, m: usize) -> (usize, usize) {
    (k.saturating_sub(m), if k < n { k } else { n })
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
    let (first, last) = diagonal_rows(k, n, m);
    let banded = measure.banded();
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
                let (lo, hi) = measure.columns(i, n, m);
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

/// A generation-counting barrier of `parties` participants over two words
/// of shared memory, `[count, generation]`, both zero before first use (and
/// again zero and some generation after every completed barrier, so the
/// words can serve any number of barriers and launches). Each participant
/// (on the GPU: thread 0 of each block, after the block's `bar.sync`)
/// reads the generation, arrives by incrementing the count; the last to
/// arrive resets the count and advances the generation, the others wait
/// for it to advance, calling `pause` while they spin.
///
/// The fences make it a full memory barrier between the participants:
/// everything written before arriving (by the participant, or by threads
/// whose writes it has observed, such as its block through `bar.sync`) is
/// visible to every participant after it returns.
///
/// # Safety
/// `state` points to two `u32` used only by this barrier's participants;
/// exactly `parties` participants call it each time.
#[inline(always)]
pub unsafe fn generation_barrier(state: *mut u32, parties: u32, pause: impl Fn()) {
    let count = AtomicU32::from_ptr(state);
    let generation = AtomicU32::from_ptr(state.add(1));
    // The current generation: it cannot advance before this participant
    // arrives, and this thread saw the last advance (or its own).
    let current = generation.load(Ordering::Relaxed);
    fence(Ordering::SeqCst);
    if count.fetch_add(1, Ordering::AcqRel) == parties - 1 {
        count.store(0, Ordering::Relaxed);
        generation.store(current.wrapping_add(1), Ordering::Release);
    } else {
        while generation.load(Ordering::Acquire) == current {
            pause();
        }
    }
    fence(Ordering::SeqCst);
}
