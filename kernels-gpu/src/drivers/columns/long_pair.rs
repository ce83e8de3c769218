//! Long pairs over many warps: tiles computed anti-diagonal of tiles by
//! anti-diagonal (a launch each), or panels that all warps of one launch
//! compute at once, each right behind the panel to its left.

use super::pair::{panel_corner, panel_region};
use super::{settle, warp_region, Region};
use crate::hw::{broadcast_u32, Scope, Tagged, WaitBound, Warp};
use crate::{Real, Recurrence, Series};
use core::ptr::{null, null_mut};
use core::sync::atomic::{AtomicU32, Ordering};

/// The borders between the tiles of one long pair, in device memory
/// (linear in the lengths): `rows[j]` holds the lowest row computed so far
/// in column `j` (`b.len + 1` values), `cols[i]` the rightmost column
/// computed so far in row `i` (`a.len + 1` values), `corners[t]` the cell
/// up-left of the next tile in tile row `t` (one per tile row). Before the
/// first tile they hold the matrix's boundary: `rows` and `cols` infinite,
/// `corners[0] = 0` and the other corners infinite.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TileGrid<T> {
    pub rows: *mut T,
    pub cols: *mut T,
    pub corners: *mut T,
    /// Rows of a tile; its columns are `lanes * S`.
    pub tile_rows: u64,
}

/// Tiles of an `n x m` pair along each side, for tiles of `tile_rows` rows
/// and `tile_cols` columns.
#[inline(always)]
pub fn tile_counts(n: usize, m: usize, tile_rows: usize, tile_cols: usize) -> (usize, usize) {
    (n.div_ceil(tile_rows), m.div_ceil(tile_cols))
}

/// The tiles on anti-diagonal `diagonal` of the tile grid: tile rows
/// `first..=last` (tile column `diagonal - row`).
#[inline(always)]
pub fn diagonal_tiles(diagonal: usize, tile_rows: usize, tile_cols: usize) -> (usize, usize) {
    let first = diagonal.saturating_sub(tile_cols - 1);
    let last = if diagonal < tile_rows {
        diagonal
    } else {
        tile_rows - 1
    };
    (first, last)
}

/// Tile `(tile_row, diagonal - tile_row)` of a long pair. Call once per
/// tile, anti-diagonal by anti-diagonal (tiles of one anti-diagonal may run
/// at once); returns the pair's value from the last tile, `None` from the
/// others.
///
/// # Safety
/// As [`warp_region`]; the tile exists; `grid` is valid and every tile of
/// the previous anti-diagonals is done.
#[inline(always)]
pub unsafe fn warp_tile<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    grid: &TileGrid<T>,
    diagonal: usize,
    tile_row: usize,
) -> Option<T> {
    let width = W::LANES * S;
    let (tile_rows, tile_cols) = tile_counts(a.len, b.len, grid.tile_rows as usize, width);
    let tile_col = diagonal - tile_row;
    let row0 = tile_row * grid.tile_rows as usize;
    let col0 = tile_col * width;
    let cols = width.min(b.len - col0);
    let corner = *grid.corners.add(tile_row);
    // The next tile of this tile row starts up-left at this tile's
    // top-right cell; read it before this tile overwrites the row border.
    let next_corner = *grid.rows.add(col0 + cols);
    let last_col = tile_col + 1 == tile_cols;
    let region = Region {
        row0,
        rows: (grid.tile_rows as usize).min(a.len - row0),
        col0,
        cols,
        corner,
        top: grid.rows,
        left: grid.cols,
        left_end: usize::MAX,
        bottom: grid.rows,
        right: if last_col { null_mut() } else { grid.cols },
        ..Region::top_left(1, 1)
    };
    let value = warp_region::<T, M, W, S>(warp, measure, a, b, &region);
    if warp.lane() == 0 {
        *grid.corners.add(tile_row) = next_corner;
    }
    (last_col && tile_row + 1 == tile_rows).then_some(value)
}

/// What the warps of a pipelined long pair share (see [`pipelined_pair`]),
/// in device memory, zeroed before the launch: `borders` holds two columns
/// of `a.len + 1` tagged values (16-byte aligned), `next_panel` the count
/// of panels taken. `last_row`, if not null (`b.len + 1` values), receives
/// the matrix's last row: cell `(a.len, j)` at index `j` for every column
/// `j` whose panel reaches that row (the alignment paths' divide and
/// conquer reads it). `fault`, a zeroed word, records a wait that gave up
/// ([`WaitBound`]): the pair's value is then NaN, and the host reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PanelHandoff<T> {
    pub borders: *mut Tagged,
    pub next_panel: *mut u32,
    pub last_row: *mut T,
    pub fault: *mut u32,
    /// A test hook: the panel of this index never publishes its right
    /// border, as a broken warp would not, so that the warp of the panel
    /// to its right waits until its bound; [`NO_STALL`] for none.
    pub stall_panel: u32,
}

/// [`PanelHandoff::stall_panel`] of every launch but the tests' of the
/// bound.
pub const NO_STALL: u32 = u32::MAX;

/// One long pair by all the warps of a launch at once: the matrix is cut
/// into panels of `lanes * S` columns, each a single region of all rows. A
/// warp takes the next panel (an atomic counter, so every panel a warp
/// waits for belongs to a warp that is already running), and runs right
/// behind the warp of the panel to its left, reading that panel's right
/// column as it is written, a few rows at a time: panel `k` tags its
/// values `k + 1` ([`Tagged`]), and a follower waits for a row until it
/// carries its leader's tag. Panels alternate between two border columns:
/// panel `k + 2` overwrites a row of panel `k`'s border only after panel
/// `k + 1` has passed that row, hence read it. Memory is linear in the
/// lengths, and one launch does the whole pair. Returns the pair's value
/// from the warp that did the last panel, `None` from the others. `scope`
/// holds every warp that takes the pair's panels: one block's, or the
/// launch's.
///
/// # Safety
/// As [`warp_region`]; `handoff` is valid, zeroed (but `last_row`), and not
/// shared with another pair; no warp outside `scope` takes its panels.
#[inline(always)]
pub unsafe fn pipelined_pair<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    scope: Scope,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    handoff: &PanelHandoff<T>,
) -> Option<T> {
    let width = W::LANES * S;
    let panels = b.len.div_ceil(width);
    let border = |panel: usize| handoff.borders.add((panel % 2) * (a.len + 1));
    // Panel `k`'s tag: never 0, the zeroed border's.
    let tag = |panel: usize| panel as u32 + 1;
    let bound = WaitBound::new(handoff.fault);
    let mut value = None;
    loop {
        let taken = if warp.lane() == 0 {
            AtomicU32::from_ptr(handoff.next_panel).fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        let panel = broadcast_u32(warp, taken, 0) as usize;
        if panel >= panels {
            return value;
        }
        let first = panel == 0;
        let last = panel + 1 == panels;
        let left_end = if first {
            0
        } else {
            let previous = panel_region(measure, a, b, panel - 1, width, 0);
            previous.row0 + previous.rows
        };
        let region = panel_region(measure, a, b, panel, width, left_end);
        let corner = if first {
            region.corner
        } else {
            // The corner is a row of the left panel's border: wait for it.
            panel_corner(measure, a, b, &region, |i| {
                let cell = border(panel - 1).add(i);
                let words = warp.load_tagged(scope, cell);
                settle(warp, scope, cell, words, tag(panel - 1), &bound)
            })
        };
        let region = Region {
            corner,
            left_tagged: if first { null() } else { border(panel - 1) },
            // Panel 0 has no left border: its tag is never read.
            left_tag: if first { 0 } else { tag(panel - 1) },
            right_tagged: if last || panel as u32 == handoff.stall_panel {
                null_mut()
            } else {
                border(panel)
            },
            right_tag: tag(panel),
            scope,
            bottom: if region.row0 + region.rows == a.len {
                handoff.last_row
            } else {
                null_mut()
            },
            bound: &bound,
            ..region
        };
        let result = warp_region::<T, M, W, S>(warp, measure, a, b, &region);
        if last {
            // The last panel follows every other: a wait of any of them
            // that gave up did so before values this warp has read.
            value = Some(if bound.faulted() { T::NAN } else { result });
        }
    }
}
