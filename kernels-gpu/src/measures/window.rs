//! The Sakoe-Chiba window, written once for both measures that have one
//! (DTW and Soft-DTW).
//!
//! For series of lengths `n` (rows) and `m` (columns) and radius `r`,
//! 0-based sample `i` of the first series may meet sample `j` of the second
//! when `i - r - max(0, n - m) <= j <= i + r + max(0, m - n)`. The band is
//! widened on the side of the longer series by the length difference, so a
//! path from `(0, 0)` to `(n - 1, m - 1)` always exists (also with `r = 0`);
//! for equal lengths it is the classic `|i - j| <= r` (tslearn's
//! `sakoe_chiba_mask`).

use crate::recurrence::Window;

/// A Sakoe-Chiba radius in samples, or none (every cell), as the kernels
/// receive it: one `u64`, [`SakoeChiba::NONE`] for no band.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SakoeChiba(u64);

impl SakoeChiba {
    /// No band: every cell allowed.
    pub const NONE: SakoeChiba = SakoeChiba(u64::MAX);

    /// A band of `radius` samples, or none.
    pub const fn new(radius: Option<usize>) -> Self {
        match radius {
            Some(r) => SakoeChiba(r as u64),
            None => Self::NONE,
        }
    }

    /// The radius, if there is a band.
    #[inline(always)]
    pub fn radius(&self) -> Option<usize> {
        (self.0 != Self::NONE.0).then_some(self.0 as usize)
    }
}

impl Window for SakoeChiba {
    #[inline(always)]
    fn is_banded(&self) -> bool {
        self.0 != Self::NONE.0
    }

    #[inline(always)]
    fn columns(&self, i: usize, n: usize, m: usize) -> (usize, usize) {
        match self.radius() {
            Some(radius) => band_columns(i, n, m, radius),
            None => (1, m),
        }
    }

    #[inline(always)]
    fn rows(&self, first: usize, last: usize, n: usize, m: usize) -> (usize, usize) {
        match self.radius() {
            Some(radius) => band_rows(first, last, n, m, radius),
            None => (1, n),
        }
    }

    #[inline(always)]
    fn diagonals(&self, n: usize, m: usize) -> Option<(usize, usize)> {
        self.radius()
            .map(|radius| (radius + n.saturating_sub(m), radius + m.saturating_sub(n)))
    }
}

/// The 1-based columns `lo..=hi` of 1-based row `i` in the band of radius
/// `radius` (see the module's documentation).
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
