//! Dynamic Time Warping: squared Euclidean local cost, accumulated sum (no
//! square root), optional Sakoe-Chiba band.

use crate::{Neighbours, Real, Recurrence, Sample, Series};

/// DTW parameters as the kernels receive them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DtwParams {
    /// Sakoe-Chiba radius in samples, or [`DtwParams::NO_BAND`].
    pub band: u64,
}

impl DtwParams {
    pub const NO_BAND: u64 = u64::MAX;
}

/// The band for series of lengths `n` (rows) and `m` (columns), radius `r`:
/// 0-based sample `i` of the first series may meet sample `j` of the second
/// when `i - r - max(0, n - m) <= j <= i + r + max(0, m - n)`. The band is
/// widened on the side of the longer series by the length difference, so a
/// path from `(0, 0)` to `(n - 1, m - 1)` always exists (also with `r = 0`);
/// for equal lengths it is the classic `|i - j| <= r`.
///
/// Returns the 1-based columns `lo..=hi` of 1-based row `i`.
#[inline(always)]
pub fn band_columns(i: usize, n: usize, m: usize, radius: usize) -> (usize, usize) {
    let below = radius + n.saturating_sub(m);
    let above = radius + m.saturating_sub(n);
    let lo = if i > below { i - below } else { 1 };
    let hi = if i + above < m { i + above } else { m };
    (lo, hi)
}

/// The rows `lo..=hi` (1-based) whose band of radius `radius` (as
/// [`band_columns`]) meets one of the 1-based columns `first..=last`:
/// column `j` is in row `i`'s band when `j - above <= i <= j + below`.
#[inline(always)]
pub fn band_rows(first: usize, last: usize, n: usize, m: usize, radius: usize) -> (usize, usize) {
    let below = radius + n.saturating_sub(m);
    let above = radius + m.saturating_sub(n);
    let lo = if first > above + 1 { first - above } else { 1 };
    let hi = if last + below < n { last + below } else { n };
    (lo, hi)
}

/// [`band_columns`] for a radius that may be [`DtwParams::NO_BAND`]
/// (every column), as DTW and Soft-DTW keep it.
#[inline(always)]
pub fn band_columns_of(band: u64, i: usize, n: usize, m: usize) -> (usize, usize) {
    if band == DtwParams::NO_BAND {
        (1, m)
    } else {
        band_columns(i, n, m, band as usize)
    }
}

/// [`band_rows`] for a radius that may be [`DtwParams::NO_BAND`] (every row).
#[inline(always)]
pub fn band_rows_of(band: u64, first: usize, last: usize, n: usize, m: usize) -> (usize, usize) {
    if band == DtwParams::NO_BAND {
        (1, n)
    } else {
        band_rows(first, last, n, m, band as usize)
    }
}

/// [`band_columns`] as the diagonals below and above the main one that it
/// takes, `(below, above)`, for a radius that may be
/// [`DtwParams::NO_BAND`] (then `None`).
#[inline(always)]
pub fn band_diagonals_of(band: u64, n: usize, m: usize) -> Option<(usize, usize)> {
    (band != DtwParams::NO_BAND).then(|| {
        let radius = band as usize;
        (radius + n.saturating_sub(m), radius + m.saturating_sub(n))
    })
}

impl<T: Real> Recurrence<T> for DtwParams {
    type Row = Sample<T>;
    type Column = Sample<T>;

    /// A subtraction, two minimums and a fused multiply-add.
    const CHEAP_CELL: bool = true;

    #[inline(always)]
    fn banded(&self) -> bool {
        self.band != Self::NO_BAND
    }

    #[inline(always)]
    fn columns(&self, i: usize, n: usize, m: usize) -> (usize, usize) {
        band_columns_of(self.band, i, n, m)
    }

    #[inline(always)]
    fn rows(&self, first: usize, last: usize, n: usize, m: usize) -> (usize, usize) {
        band_rows_of(self.band, first, last, n, m)
    }

    #[inline(always)]
    fn diagonals(&self, n: usize, m: usize) -> Option<(usize, usize)> {
        band_diagonals_of(self.band, n, m)
    }

    #[inline(always)]
    unsafe fn row(&self, a: &Series<T>, i: usize) -> Sample<T> {
        a.sample(i - 1)
    }

    #[inline(always)]
    unsafe fn column(&self, b: &Series<T>, j: usize) -> Sample<T> {
        b.sample(j - 1)
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        row: &Sample<T>,
        column: &Sample<T>,
        a: &Series<T>,
        b: &Series<T>,
        Neighbours { diag, up, left }: Neighbours<T>,
    ) -> T {
        a.squared_distance_plus(row, b, column, diag.min(up).min(left))
    }
}
