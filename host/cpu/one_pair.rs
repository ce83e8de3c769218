//! One pair on one thread, in the order its measure prefers.

use super::lockstep::SingleThread;
use crate::Float;
use timewarp_kernels::drivers::rows::{pair_value, RowPair};
use timewarp_kernels::drivers::stencil::{ring_len, stencil_value, VALUE_RINGS};
use timewarp_kernels::{Recurrence, Series, Window};

/// One pair's value with the measure's preferred CPU order, in `buffer`
/// (at least [`buffer_len`] values for the longest series): the
/// anti-diagonals for latency-bound measures, unless the measure's window
/// leaves few of the pair's cells ([`NARROW_FOR_ONE_PAIR`]), else the rows.
///
/// # Safety
/// The series are valid; `buffer` is long enough.
pub(super) unsafe fn one_pair<T: Float, R: Recurrence<T>>(
    measure: &R,
    a: &Series<T>,
    b: &Series<T>,
    buffer: &mut [T],
) -> T {
    if R::LATENCY_BOUND && !narrow_window(measure, (a.len, b.len), NARROW_FOR_ONE_PAIR) {
        let ring = ring_len(a.len, b.len);
        let block = SingleThread {
            memory: buffer.as_mut_ptr() as *mut u8,
        };
        let null = std::ptr::null_mut();
        stencil_value(&block, measure, a, b, buffer.as_mut_ptr(), ring, null)
    } else {
        let rows = RowPair {
            base: buffer.as_mut_ptr(),
            len: b.len + 1,
            stride: 1,
        };
        pair_value(measure, a, b, rows)
    }
}

/// Whether the measure's window leaves at most `share` of an `n x m`
/// pair's cells: the rows driver computes only those, while the
/// anti-diagonals (the stencil driver, and lockstep runs) pass over every
/// cell, those outside the window included, at a small part of the cost of
/// one inside.
pub(super) fn narrow_window<T: Float, R: Recurrence<T>>(
    measure: &R,
    (n, m): (usize, usize),
    share: f64,
) -> bool {
    let window = measure.window();
    if !window.is_banded() {
        return false;
    }
    let cells: usize = (1..=n)
        .map(|i| {
            let (lo, hi) = window.columns(i, n, m);
            (hi + 1).saturating_sub(lo)
        })
        .sum();
    cells as f64 <= share * (n * m) as f64
}

/// The share of a pair's cells below which a latency-bound measure's pair
/// takes the rows instead of the anti-diagonals: a row's cells wait on each
/// other, so a cell costs more there than on an anti-diagonal, but the rows
/// skip the cells outside the window (Soft-DTW: about 24 ns a cell on the
/// rows, 16 ns on an anti-diagonal and 1.3 ns one outside the window
/// there, so the rows win below about a sixth of the cells).
pub(super) const NARROW_FOR_ONE_PAIR: f64 = 1.0 / 8.0;

/// Values [`one_pair`] needs for series up to `a_len` and `b_len` samples.
pub(super) fn buffer_len(a_len: usize, b_len: usize) -> usize {
    (2 * (b_len + 1)).max(VALUE_RINGS * ring_len(a_len, b_len))
}
