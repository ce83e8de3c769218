//! The launches of the kernels that compute one long pair over the whole
//! GPU: the tiled kernels (tiles an anti-diagonal of tiles a launch, or
//! pipelined panels in one launch) and the anti-diagonal kernels.

use crate::drivers::antidiagonal::{diagonal_cells, diagonal_pair, diagonal_value, Diagonals};
use crate::drivers::columns::long_pair::{
    diagonal_tiles, pipelined_pair, tile_counts, warp_tile, PanelHandoff, TileGrid,
};
use crate::hw::{Grid, Scope, Warp};
use crate::{Real, Recurrence, SetRef};

/// Everything a launch of the tiled long-pair kernel needs: one
/// anti-diagonal of tiles of the pair `a.series(0)`, `b.series(0)`, a tile
/// per warp.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TileLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    pub grid: TileGrid<T>,
    /// Where the last tile writes the pair's value.
    pub out: *mut T,
    pub diagonal: u64,
}

impl<T: Real, P: Recurrence<T>> TileLaunch<T, P> {
    /// The tile rows on this launch's anti-diagonal, `first..=last`, for
    /// tiles `tile_cols` wide.
    #[inline(always)]
    pub fn tiles(&self, n: usize, m: usize, tile_cols: usize) -> (usize, usize) {
        let (rows, cols) = tile_counts(n, m, self.grid.tile_rows as usize, tile_cols);
        diagonal_tiles(self.diagonal as usize, rows, cols)
    }

    /// Compute tile `index` of the launch's anti-diagonal with the warp
    /// driver, `S` columns per lane (`UNIVARIATE`: see
    /// [`SetRef::series_of`]). Warps past the diagonal's tiles return at
    /// once.
    ///
    /// # Safety
    /// All lanes of the warp call it together; every earlier anti-diagonal
    /// is done; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run_tile<W: Warp, const S: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        index: u64,
    ) {
        let a = self.a.series_of::<UNIVARIATE>(0);
        let b = self.b.series_of::<UNIVARIATE>(0);
        let (first, last) = self.tiles(a.len, b.len, W::LANES * S);
        let tile_row = first + index as usize;
        if tile_row > last {
            return;
        }
        let (grid, diagonal) = (&self.grid, self.diagonal as usize);
        let value = warp_tile::<T, P, W, S>(warp, &self.params, &a, &b, grid, diagonal, tile_row);
        if let Some(value) = value {
            if warp.lane() == 0 {
                *self.out = value;
            }
        }
    }
}

/// Everything a launch of the pipelined long-pair kernel needs: the pair
/// `a.series(0)`, `b.series(0)`, done by all warps of the launch together,
/// a panel a warp.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PanelLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    pub handoff: PanelHandoff<T>,
    /// Where the warp of the last panel writes the pair's value.
    pub out: *mut T,
}

impl<T: Real, P: Recurrence<T>> PanelLaunch<T, P> {
    /// This warp's share of the pair, `S` columns per lane (`UNIVARIATE`:
    /// see [`SetRef::series_of`]).
    ///
    /// # Safety
    /// All lanes of the warp call it together; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run<W: Warp, const S: usize, const UNIVARIATE: bool>(&self, warp: &W) {
        let a = self.a.series_of::<UNIVARIATE>(0);
        let b = self.b.series_of::<UNIVARIATE>(0);
        let value =
            pipelined_pair::<T, P, W, S>(warp, Scope::Launch, &self.params, &a, &b, &self.handoff);
        if let Some(value) = value {
            if warp.lane() == 0 {
                *self.out = value;
            }
        }
    }
}

/// Everything a launch of the anti-diagonal kernels needs: the pair
/// `a.series(0)`, `b.series(0)`, its three rolling anti-diagonals, and,
/// for the persistent kernel, its grid barrier; for the one-launch-per-
/// anti-diagonal kernel, which anti-diagonal.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DiagonalLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    /// `len >= a.series(0).len + 1`.
    pub diagonals: Diagonals<T>,
    /// Two `u32` words, zero before the first launch, for
    /// [`crate::hw::generation_barrier`] (persistent kernel only).
    pub barrier: *mut u32,
    /// Where the pair's value is written.
    pub out: *mut T,
    /// The anti-diagonal to compute (one-launch-per-anti-diagonal kernel).
    pub diagonal: u64,
}

impl<T: Real, P: Recurrence<T>> DiagonalLaunch<T, P> {
    /// The whole pair, the grid's threads together: the persistent kernel.
    ///
    /// # Safety
    /// All threads of `grid` call it together; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run_pair<G: Grid>(&self, grid: &G) {
        let a = self.a.series(0);
        let b = self.b.series(0);
        let value = diagonal_pair(grid, &self.params, &a, &b, &self.diagonals);
        if grid.thread() == 0 {
            *self.out = value;
        }
    }

    /// Thread `thread`'s cells of anti-diagonal `self.diagonal`; on the last
    /// anti-diagonal thread 0 computes the pair's last cell and writes it
    /// out.
    ///
    /// # Safety
    /// Every earlier anti-diagonal is complete; `self.diagonal <= n + m`;
    /// pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run_diagonal(&self, thread: usize, threads: usize) {
        let a = self.a.series(0);
        let b = self.b.series(0);
        let k = self.diagonal as usize;
        diagonal_cells(&self.params, &a, &b, &self.diagonals, k, thread, threads);
        if k == a.len + b.len && thread == 0 {
            *self.out = diagonal_value(&self.diagonals, a.len, b.len);
        }
    }
}
