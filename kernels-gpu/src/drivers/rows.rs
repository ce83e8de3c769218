//! The row driver: the cost matrix filled row by row, keeping only two rows.
//!
//! The two rows live wherever the caller puts them: a slice on the CPU
//! (`stride == 1`), or interleaved with other threads' rows in GPU global
//! memory (`stride == threads in the launch`), so that neighbouring threads
//! touch neighbouring addresses.

use crate::{Neighbours, Real, Recurrence, Series, Window};

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
    let window = measure.window();
    let mut previous = 0;
    for i in 1..=n {
        let current = 1 - previous;
        let (lo, hi) = window.columns(i, n, m);
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
