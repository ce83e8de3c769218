//! A whole pair in one warp: panels of columns, left to right.

use super::{warp_region, Region};
use crate::hw::Warp;
use crate::{Real, Recurrence, Series, Window};
use core::ptr::{null, null_mut};

/// A whole pair in one warp: panels of `lanes * S` columns, left to right,
/// each passing its right column to the next through `border`.
///
/// # Safety
/// As [`warp_region`]; `border` holds `a.len + 1` values when `b.len >
/// lanes * S` (unused otherwise, may be null).
#[inline(always)]
pub unsafe fn warp_pair<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    border: *mut T,
) -> T {
    let width = W::LANES * S;
    let panels = b.len.div_ceil(width);
    let mut value = T::INFINITY;
    let mut left_end = 0;
    for panel in 0..panels {
        let region = panel_region(measure, a, b, panel, width, left_end);
        let corner = match panel {
            0 => region.corner,
            _ => panel_corner(measure, a, b, &region, |i| *border.add(i)),
        };
        let region = Region {
            corner,
            left: if panel == 0 { null() } else { border },
            right: if panel + 1 < panels {
                border
            } else {
                null_mut()
            },
            ..region
        };
        value = warp_region::<T, M, W, S>(warp, measure, a, b, &region);
        left_end = region.row0 + region.rows;
    }
    value
}

/// Panel `panel` (`width` columns, the last one narrower) of the `a.len x
/// b.len` matrix as a region of the rows the measure's window allows in its
/// columns (all of them without a band: cells outside the band are never
/// computed), with no borders in memory yet; `left_end` is the last row of
/// the panel to its left. Its top row is outside the window (infinite); its
/// corner is the matrix's `(0, 0)` for the first panel and left to
/// [`panel_corner`] for the others.
#[inline(always)]
pub(super) fn panel_region<T: Real, M: Recurrence<T>>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    panel: usize,
    width: usize,
    left_end: usize,
) -> Region<T> {
    let col0 = panel * width;
    let cols = width.min(b.len - col0);
    let (first, last) = measure.window().rows(col0 + 1, col0 + cols, a.len, b.len);
    Region {
        row0: first - 1,
        rows: last - first + 1,
        col0,
        cols,
        corner: if first == 1 && panel == 0 {
            T::ZERO
        } else {
            T::INFINITY
        },
        left_end,
        ..Region::top_left(1, 1)
    }
}

/// Cell `(row0, col0)` of a panel's region: from the border the panel to
/// its left wrote (`read(i)` gives its row `i`), if the window allows it;
/// infinite otherwise (and on the matrix's top row), where the border holds
/// no value of this pair.
///
/// # Safety
/// `read` may be called with the row `row0` of the left panel, which has
/// that row.
#[inline(always)]
pub(super) unsafe fn panel_corner<T: Real, M: Recurrence<T>>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    region: &Region<T>,
    read: impl FnOnce(usize) -> T,
) -> T {
    if region.row0 == 0 {
        return T::INFINITY;
    }
    let (lo, hi) = measure.window().columns(region.row0, a.len, b.len);
    if (lo..=hi).contains(&region.col0) && region.row0 <= region.left_end {
        read(region.row0)
    } else {
        T::INFINITY
    }
}
