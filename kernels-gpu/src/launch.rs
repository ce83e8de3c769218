//! Launch parameters shared by host and device, and the mapping from a
//! thread's pair number to the pair of series it computes.

use crate::diagonal::{diagonal_cells, diagonal_pair, diagonal_value, Diagonals, Grid};
use crate::warp::{
    diagonal_tiles, pipelined_pair, tile_counts, warp_pair, warp_tile, Pipeline, TileGrid, Warp,
};
use crate::{pair_value, Real, Recurrence, RowPair, SetRef};
use core::mem::MaybeUninit;

/// Everything a pairwise kernel needs, passed by value as its one parameter.
///
/// The launch computes pairs `first_pair .. first_pair + pair_count` of a tile
/// of `a.count x b.count` pairs, numbered row-major, or, when `triangle != 0`
/// (`a` and `b` are the same series), the upper triangle `i <= j` numbered
/// row-major, writing both `out[i][j]` and `out[j][i]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PairsLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    /// Row-major `a.count x b.count` output.
    pub out: *mut T,
    /// The naive kernel: two rows of `row_len` values for each of the
    /// `pair_count` pairs, interleaved: element `k` of row `r` of pair `p` at
    /// `(r * row_len + k) * pair_count + p`. The warp kernel: `row_len`
    /// values for each pair, one after the other (the border column between
    /// its column bands), or null when no series of `b` needs more than one band.
    pub workspace: *mut T,
    /// At least the longest series of `a` and of `b`, plus one.
    pub row_len: u64,
    pub first_pair: u64,
    pub pair_count: u64,
    pub triangle: u32,
}

/// Number of pairs in a tile: all `a_count * b_count`, or the upper triangle
/// with its diagonal when `a` and `b` are the same `a_count` series.
#[inline(always)]
pub fn tile_pairs(a_count: u64, b_count: u64, triangle: bool) -> u64 {
    if triangle {
        a_count * (a_count + 1) / 2
    } else {
        a_count * b_count
    }
}

/// First pair number of row `i` of the upper triangle of an `n x n` matrix.
#[inline(always)]
fn triangle_row_start(i: u64, n: u64) -> u64 {
    i * n - i * i.saturating_sub(1) / 2
}

/// The `(i, j)` with `i <= j < n` of pair number `k` of the upper triangle,
/// numbered row-major. A floating-point estimate of the row, then exact
/// integer correction.
#[inline(always)]
pub fn triangle_pair(k: u64, n: u64) -> (u64, u64) {
    // Row i starts at i*n - i*(i-1)/2; solve start(i) = k for i.
    let b = 2.0 * n as f64 + 1.0;
    let discriminant = b * b - 8.0 * k as f64;
    let estimate = (b - sqrt_f64(if discriminant > 0.0 {
        discriminant
    } else {
        0.0
    })) / 2.0;
    let mut i = if estimate > 0.0 { estimate as u64 } else { 0 };
    if i >= n {
        i = n - 1;
    }
    while i > 0 && triangle_row_start(i, n) > k {
        i -= 1;
    }
    while i + 1 < n && triangle_row_start(i + 1, n) <= k {
        i += 1;
    }
    (i, i + (k - triangle_row_start(i, n)))
}

#[inline(always)]
fn sqrt_f64(x: f64) -> f64 {
    <f64 as Real>::sqrt(x)
}

impl<T: Real, P: Recurrence<T>> PairsLaunch<T, P> {
    /// The `(i, j)` of this launch's pair `index` (`index < pair_count`).
    #[inline(always)]
    pub fn pair(&self, index: u64) -> (u64, u64) {
        let k = self.first_pair + index;
        if self.triangle != 0 {
            triangle_pair(k, self.a.count)
        } else {
            (k / self.b.count, k % self.b.count)
        }
    }

    /// Compute pair `index` of the launch with rolling rows in the workspace
    /// and write its value to the output: one thread's whole job in the
    /// one-thread-per-pair kernels.
    ///
    /// # Safety
    /// `index < pair_count`; every pointer valid as documented on the fields.
    #[inline(always)]
    pub unsafe fn run_pair_with_workspace(&self, index: u64) {
        let rows = RowPair {
            base: self.workspace.add(index as usize),
            len: self.row_len as usize,
            stride: self.pair_count as usize,
        };
        self.run_pair_in_rows(index, rows);
    }

    /// Compute pair `index` of the launch with its two rolling rows in
    /// `rows` and write its value to the output.
    ///
    /// # Safety
    /// `index < pair_count`; `rows` holds two rows of at least the pair's
    /// `b` length plus one, used by nobody else; pointers valid as
    /// documented on the fields.
    #[inline(always)]
    pub unsafe fn run_pair_in_rows(&self, index: u64, rows: RowPair<T>) {
        let (i, j) = self.pair(index);
        let a = self.a.series(i as usize);
        let b = self.b.series(j as usize);
        let value = pair_value(&self.params, &a, &b, rows);
        self.write(i, j, value);
    }

    /// Compute pair `index` with its two rolling rows in a fixed array of
    /// the calling thread's own (`ROW` values a row: on the GPU, local
    /// memory) and write its value: the `local` kernels' whole job.
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_rows`]; every series of `b` has fewer
    /// than `ROW` samples (the host checks).
    #[inline(always)]
    pub unsafe fn run_pair_in_local<const ROW: usize>(&self, index: u64) {
        // Never read before written (see `pair_value`): no initialisation.
        let mut rows = MaybeUninit::<[[T; ROW]; 2]>::uninit();
        let rows = RowPair {
            base: rows.as_mut_ptr().cast::<T>(),
            len: ROW,
            stride: 1,
        };
        self.run_pair_in_rows(index, rows);
    }

    /// Compute pair `index` with its two rolling rows in memory shared by
    /// the `threads` threads of its block, interleaved: element `k` of row
    /// `r` of the block's thread `thread` at `block_rows[(r * row_len + k)
    /// * threads + thread]`, so the threads of a warp touch consecutive
    /// words (no bank conflicts). The `shared` kernels' whole job.
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_rows`]; `block_rows` holds `threads *
    /// 2 * row_len` values; `thread < threads`.
    #[inline(always)]
    pub unsafe fn run_pair_in_block_rows(
        &self,
        index: u64,
        block_rows: *mut T,
        thread: usize,
        threads: usize,
    ) {
        let rows = RowPair {
            base: block_rows.add(thread),
            len: self.row_len as usize,
            stride: threads,
        };
        self.run_pair_in_rows(index, rows);
    }

    /// Compute pair `index` of the launch with the warp driver, `S` columns
    /// per lane, and write its value to the output: one warp's whole job in
    /// the warp kernels. Warps past the launch's pairs return at once.
    ///
    /// # Safety
    /// All lanes of the warp call it together; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run_pair_in_warp<W: Warp, const S: usize>(&self, warp: &W, index: u64) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let a = self.a.series(i as usize);
        let b = self.b.series(j as usize);
        let border = if self.workspace.is_null() {
            self.workspace
        } else {
            self.workspace.add(index as usize * self.row_len as usize)
        };
        let value = warp_pair::<T, P, W, S>(warp, &self.params, &a, &b, border);
        if warp.lane() == 0 {
            self.write(i, j, value);
        }
    }

    /// Store the value of pair `(i, j)`, and of `(j, i)` in a triangle.
    #[inline(always)]
    unsafe fn write(&self, i: u64, j: u64, value: T) {
        let columns = self.b.count as usize;
        *self.out.add(i as usize * columns + j as usize) = value;
        if self.triangle != 0 && i != j {
            *self.out.add(j as usize * columns + i as usize) = value;
        }
    }
}

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
    /// driver, `S` columns per lane. Warps past the diagonal's tiles return
    /// at once.
    ///
    /// # Safety
    /// All lanes of the warp call it together; every earlier anti-diagonal
    /// is done; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run_tile<W: Warp, const S: usize>(&self, warp: &W, index: u64) {
        let a = self.a.series(0);
        let b = self.b.series(0);
        let (first, last) = self.tiles(a.len, b.len, W::LANES * S);
        let tile_row = first + index as usize;
        if tile_row > last {
            return;
        }
        let value = warp_tile::<T, P, W, S>(
            warp,
            &self.params,
            &a,
            &b,
            &self.grid,
            self.diagonal as usize,
            tile_row,
        );
        if let Some(value) = value {
            if warp.lane() == 0 {
                *self.out = value;
            }
        }
    }
}

/// Everything a launch of the pipelined long-pair kernel needs: the pair
/// `a.series(0)`, `b.series(0)`, done by all warps of the launch together.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PipelineLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    pub pipeline: Pipeline<T>,
    /// Where the warp of the last band writes the pair's value.
    pub out: *mut T,
}

impl<T: Real, P: Recurrence<T>> PipelineLaunch<T, P> {
    /// This warp's share of the pair, `S` columns per lane.
    ///
    /// # Safety
    /// All lanes of the warp call it together; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run<W: Warp, const S: usize>(&self, warp: &W) {
        let a = self.a.series(0);
        let b = self.b.series(0);
        let value = pipelined_pair::<T, P, W, S>(warp, &self.params, &a, &b, &self.pipeline);
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
    /// [`crate::diagonal::generation_barrier`] (persistent kernel only).
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
