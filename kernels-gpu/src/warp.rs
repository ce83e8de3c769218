//! The warp driver, shared by every measure: one warp computes a block of
//! the cost matrix, each lane a stripe of `S` adjacent columns held in
//! registers, and the rows flow through the lanes as a wavefront.
//!
//! At step `t` lane `l` computes row `t - l` of its stripe. The cell left of
//! its stripe is the last cell of lane `l - 1`'s stripe, which that lane
//! computed one step earlier and passes on with a warp shuffle; the cell
//! diagonally left is the one it received the step before. Lane 0 takes the
//! block's left border instead, fetched 32 rows at a time with one coalesced
//! load and handed out by shuffles. A block of `rows x cols` takes
//! `rows + lanes - 1` steps, `lanes = ceil(cols / S)`.
//!
//! Blocks chain through their borders: a block reads its top row and left
//! column from memory (or takes the matrix boundary) and can write its
//! bottom row and right column for the blocks below and to the right. The
//! pair drivers here use that for series wider than one warp (column bands
//! of one pair, one after the other) and for long pairs (tiles computed
//! wavefront by wavefront, one launch per anti-diagonal of tiles).
//!
//! The driver is generic over [`Warp`], the two exchanges it needs, so the
//! same code runs on the GPU (shuffle instructions) and in the host tests
//! (32 threads and a barrier).

use crate::band::{band_of, band_pair};
use crate::{Neighbours, Real, Recurrence, Series};
use core::array::from_fn;
use core::ptr::{null, null_mut};
use core::sync::atomic::{AtomicU32, Ordering};

/// Lanes of a GPU warp.
pub const LANES: usize = 32;

/// What the driver needs of a warp. Every lane must make the same calls in
/// the same order (they are collective).
pub trait Warp {
    /// Lanes of the warp: [`LANES`] on the GPU; the host tests also emulate
    /// narrower ones, which exercise the same code with fewer threads.
    const LANES: usize;
    /// This lane's index, `0..Self::LANES`.
    fn lane(&self) -> usize;
    /// Every lane gives `value`; each gets the value of lane `lane - 1`
    /// (lane 0 gets its own).
    ///
    /// # Safety
    /// Called by all lanes together.
    unsafe fn shuffle_up<T: Real>(&self, value: T) -> T;
    /// Every lane gives `value`; each gets the value of lane `lane + 1`
    /// (the last lane gets its own).
    ///
    /// # Safety
    /// Called by all lanes together.
    unsafe fn shuffle_down<T: Real>(&self, value: T) -> T;
    /// Every lane gives `value`; each gets the value of lane `source`.
    ///
    /// # Safety
    /// Called by all lanes together, `source < Self::LANES`.
    unsafe fn broadcast<T: Real>(&self, value: T, source: usize) -> T;
    /// Called in each round of a spin-wait on another warp's progress.
    fn spin(&self) {}
    /// `*counter`, read atomically with no ordering (a spin-wait's poll).
    ///
    /// # Safety
    /// `counter` is valid.
    unsafe fn load_relaxed(&self, counter: *const u32) -> u32 {
        AtomicU32::from_ptr(counter as *mut u32).load(Ordering::Relaxed)
    }
    /// An acquire fence at the scope of the warps of a launch: after a
    /// relaxed load that read a value stored with release ordering, what
    /// the writer stored before that store is visible. Polls are relaxed
    /// and fenced once when they succeed because on the GPU every acquire
    /// also invalidates the SM's L1 cache, which the other warps' loads
    /// then miss.
    fn fence_acquire(&self) {
        core::sync::atomic::fence(Ordering::Acquire)
    }
    /// `*counter = value` with release ordering at the same scope.
    ///
    /// # Safety
    /// `counter` is valid.
    unsafe fn store_release(&self, counter: *mut u32, value: u32) {
        AtomicU32::from_ptr(counter).store(value, Ordering::Release)
    }
}

/// `value` of lane `source`, for integers (shuffles move bits).
#[inline(always)]
unsafe fn broadcast_u32<W: Warp>(warp: &W, value: u32, source: usize) -> u32 {
    warp.broadcast(f32::from_bits(value), source).to_bits()
}

/// A block of the cost matrix: cells `(row0 + 1 ..= row0 + rows) x
/// (col0 + 1 ..= col0 + cols)` (1-based, as in [`Recurrence`]), with
/// `1 <= cols <= lanes * S` and `rows >= 1`, and where its borders come
/// from and go to. Border arrays are indexed by the matrix's own row or
/// column number.
#[derive(Clone, Copy, Debug)]
pub struct Block<T> {
    pub row0: usize,
    pub rows: usize,
    pub col0: usize,
    pub cols: usize,
    /// Cell `(row0, col0)`.
    pub corner: T,
    /// `top[j]` is cell `(row0, j)` for the block's columns; null for the
    /// matrix's row 0 (infinite).
    pub top: *const T,
    /// `left[i]` is cell `(i, col0)` for the block's rows up to
    /// `left_end`; null for the matrix's column 0 (infinite).
    pub left: *const T,
    /// The last row of `left` that holds a value: the cells of the rows
    /// below it are infinite (outside the measure's band) and not read.
    pub left_end: usize,
    /// If not null, cell `(row0 + rows, j)` is written to `bottom[j]` for
    /// the block's columns.
    pub bottom: *mut T,
    /// If not null, cell `(i, col0 + cols)` is written to `right[i]` for
    /// the block's rows. Needs `cols == lanes * S`. May be `left`: each row
    /// is read long before it is written.
    pub right: *mut T,
    /// If not null, the left border is being written while this block runs:
    /// its rows up to `*left_ready` (a row number of the matrix) are
    /// complete. The block waits for each chunk of rows before it reads
    /// them.
    pub left_ready: *const u32,
    /// If not null, after every few rows (and the last) of the right border
    /// are written, the matrix row of the last one written is stored here
    /// (with release ordering) for the block to the right.
    pub right_ready: *mut u32,
}

impl<T: Real> Block<T> {
    /// A block with no borders in memory: the matrix's top-left corner
    /// region of `rows x cols`, corner 0.
    #[inline(always)]
    pub fn top_left(rows: usize, cols: usize) -> Self {
        Block {
            row0: 0,
            rows,
            col0: 0,
            cols,
            corner: T::ZERO,
            top: null(),
            left: null(),
            left_end: usize::MAX,
            bottom: null_mut(),
            right: null_mut(),
            left_ready: null(),
            right_ready: null_mut(),
        }
    }
}

/// Computes `block` with `S` columns per lane and returns its bottom-right
/// cell on every lane.
///
/// # Safety
/// All lanes call it together with the same arguments; the block lies in
/// the `a.len x b.len` matrix; the border pointers are valid as documented.
#[inline(always)]
pub unsafe fn warp_block<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    block: &Block<T>,
) -> T {
    // Univariate series get a copy of the driver of their own, where the
    // cell updates' multivariate paths (a loop over the dimensions per
    // cell, and the registers it holds) fold away.
    if a.dims == 1 {
        let (a, b) = (Series { dims: 1, ..*a }, Series { dims: 1, ..*b });
        block_steps::<T, M, W, S>(warp, measure, &a, &b, block)
    } else {
        block_steps::<T, M, W, S>(warp, measure, a, b, block)
    }
}

/// Rows a warp publishes at a time to the warp following it (see
/// [`Block::right_ready`]): few, so the follower can run close behind (it
/// trails by the wavefront's skew of `lanes - 1` rows plus about two of
/// these), enough that the release stores and the follower's polling stay
/// cheap.
#[inline(always)]
const fn ready_rows<W: Warp>() -> usize {
    if W::LANES < 8 {
        W::LANES
    } else {
        8
    }
}

/// Waits until `*ready >= rows` (another warp's progress), then acquires
/// what it published.
#[inline(always)]
unsafe fn wait_for<W: Warp>(warp: &W, ready: *const u32, rows: usize) {
    while (warp.load_relaxed(ready) as usize) < rows {
        warp.spin();
    }
    warp.fence_acquire();
}

/// One lane's part of a block while the wavefront sweeps it (see
/// [`block_steps`]): its stripe's columns and cells, and what it has
/// fetched ahead. Counters are 32-bit: a block has fewer than 2^32 rows.
struct Wavefront<'a, T: Real, M: Recurrence<T>, W: Warp, const S: usize> {
    warp: &'a W,
    measure: &'a M,
    a: &'a Series<T>,
    b: &'a Series<T>,
    block: &'a Block<T>,
    /// This lane's index, and the one whose rows it follows: lanes past
    /// the block's last column repeat the last working lane's rows (their
    /// results are never read), so that every lane's loads stay in range
    /// when the steps run unchecked.
    lane: u32,
    row_lane: u32,
    working: bool,
    rows: u32,
    /// Rows of the left border that hold values, from the block's first:
    /// `rows`, or fewer where the border ends (`Block::left_end`).
    left_rows: u32,
    /// The matrix column of the stripe's first cell.
    first: usize,
    columns: [M::Column; S],
    cells: [T; S],
    /// The cell diagonally up-left of the next row's first cell.
    diag: T,
    /// The row the lane computes next.
    next_row: M::Row,
    /// Lane 0's left border: the current chunk (one row a lane), the next.
    has_left: bool,
    following: bool,
    chunk_len: u32,
    chunk: T,
    next_chunk: T,
    banded: bool,
}

impl<'a, T: Real, M: Recurrence<T>, W: Warp, const S: usize> Wavefront<'a, T, M, W, S> {
    /// Rows `r .. r + chunk_len` (counted from 0) of the left border, one a
    /// lane: cell `(row0 + 1 + r + lane, col0)`, infinite past the block.
    /// A border being written while this block runs is waited for first.
    #[inline(always)]
    unsafe fn left_chunk(&self, r: u32) -> T {
        let block = self.block;
        // No wait where the border has no rows for this block: its writer
        // never publishes them.
        if self.following && self.left_rows > 0 {
            let needed = block.row0 + (r + self.chunk_len).min(self.left_rows) as usize;
            wait_for(self.warp, block.left_ready, needed);
        }
        if self.has_left && self.lane < self.chunk_len && r + self.lane < self.left_rows {
            *block.left.add(block.row0 + 1 + (r + self.lane) as usize)
        } else {
            T::INFINITY
        }
    }

    /// Every step of the block, `lanes_used` lanes working. Lane `l`
    /// computes row `t - l` at step `t`: while the wavefront fills (`t <
    /// lanes_used - 1`) and drains (`t >= rows`) some lanes have no row; in
    /// between every working lane has one, and the steps skip the test.
    /// `BANDED` is the measure's `banded()`, a constant so that an unbanded
    /// measure's steps carry no band test.
    #[inline(always)]
    unsafe fn sweep<const BANDED: bool>(&mut self, lanes_used: u32) {
        let rows = self.rows;
        let steps = rows + lanes_used - 1;
        let full_from = (lanes_used - 1).min(rows);
        // One copy of the checked step serves both the fill and the drain.
        let mut t = 0;
        while t < steps {
            if t == full_from {
                // For cheap cells, two steps an iteration: each step's new
                // cells take other registers than the ones they replace
                // (the next cell still reads the old as its diagonal), and
                // a second step moves them back in place of the moves a
                // loop would need.
                while M::CHEAP_CELL && t + 1 < rows {
                    self.step::<false, BANDED>(t);
                    self.step::<false, BANDED>(t + 1);
                    t += 2;
                }
                while t < rows {
                    self.step::<false, BANDED>(t);
                    t += 1;
                }
                if t == steps {
                    break;
                }
            }
            self.step::<true, BANDED>(t);
            t += 1;
        }
    }

    /// Step `t` of the wavefront: this lane computes row `t - lane` of its
    /// stripe. `CHECKED` steps test whether the lane has a row at this step;
    /// unchecked ones are for steps where every working lane has one.
    #[inline(always)]
    unsafe fn step<const CHECKED: bool, const BANDED: bool>(&mut self, t: u32) {
        let warp = self.warp;
        let from_lane_before = warp.shuffle_up(self.cells[S - 1]);
        let border = if self.has_left {
            // chunk_len is a power of two.
            let in_chunk = t & (self.chunk_len - 1);
            let border = warp.broadcast(self.chunk, in_chunk as usize);
            if in_chunk == self.chunk_len - 1 {
                self.chunk = self.next_chunk;
                self.next_chunk = self.left_chunk(t + 1 + self.chunk_len);
            }
            border
        } else {
            T::INFINITY
        };
        let left = if self.lane == 0 {
            border
        } else {
            from_lane_before
        };
        // The row of this step, counted from 0; wraps for lanes not started.
        let r = t.wrapping_sub(self.row_lane);
        if CHECKED && !(self.working && r < self.rows) {
            return;
        }
        let block = self.block;
        let i = block.row0 + 1 + r as usize;
        let row = self.next_row;
        // The last row's successor is never used: fetch the last row again
        // (unconditionally, which spares the moves of a conditional).
        let next = block.row0 + 1 + (r + 1).min(self.rows - 1) as usize;
        self.next_row = self.measure.next_row(self.a, &row, next);
        let neighbours = Neighbours {
            diag: self.diag,
            up: T::INFINITY,
            left,
        };
        // Cell `k` is in the band when `lo <= first + k <= hi`: one unsigned
        // 32-bit comparison of `first + k - lo` with `hi - lo`. Without a
        // band (`BANDED` is a constant) the test folds away.
        let (offset, span) = if BANDED {
            let (lo, hi) = self.measure.columns(i, self.a.len, self.b.len);
            (
                (self.first as u32).wrapping_sub(lo as u32),
                (hi - lo) as u32,
            )
        } else {
            (0, 0)
        };
        stripe_row(
            self.measure,
            self.a,
            self.b,
            &row,
            &self.columns,
            &mut self.cells,
            neighbours,
            |k| !BANDED || offset.wrapping_add(k as u32) <= span,
        );
        self.diag = left;
        if !block.right.is_null() && self.lane as usize == W::LANES - 1 {
            *block.right.add(i) = self.cells[S - 1];
            if !block.right_ready.is_null()
                && ((r + 1).is_multiple_of(ready_rows::<W>() as u32) || r + 1 == self.rows)
            {
                // Release: the rows stored above are visible to whoever
                // reads this count with acquire ordering.
                warp.store_release(block.right_ready, i as u32);
            }
        }
    }
}

#[inline(always)]
unsafe fn block_steps<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    block: &Block<T>,
) -> T {
    let lane = warp.lane() as u32;
    let last_column = block.col0 + block.cols;
    let lanes_used = block.cols.div_ceil(S) as u32;
    // Lanes past the block's last column compute copies of its last
    // column and rows, which nobody reads; clamping keeps their loads in
    // bounds.
    let first = block.col0 + lane as usize * S + 1;
    let clamp = |j: usize| if j < last_column { j } else { last_column };
    let top = |j: usize| {
        if block.top.is_null() {
            T::INFINITY
        } else {
            *block.top.add(j)
        }
    };
    // A left border being written while this block runs comes in chunks
    // of `ready_rows` rows (the rows the warp to the left publishes at a
    // time), so that this warp runs close behind it; a finished one in
    // chunks of a row a lane. Either way one chunk ahead, to hide the loads.
    let following = !block.left_ready.is_null();
    let mut wave = Wavefront::<T, M, W, S> {
        warp,
        measure,
        a,
        b,
        block,
        lane,
        row_lane: lane.min(lanes_used - 1),
        working: lane < lanes_used,
        rows: block.rows as u32,
        left_rows: block.left_end.saturating_sub(block.row0).min(block.rows) as u32,
        first,
        columns: from_fn(|k| measure.column(b, clamp(first + k))),
        cells: from_fn(|k| top(clamp(first + k))),
        diag: if lane == 0 {
            block.corner
        } else {
            top(clamp(first - 1))
        },
        next_row: measure.row(a, block.row0 + 1),
        has_left: !block.left.is_null(),
        following,
        chunk_len: if following {
            ready_rows::<W>() as u32
        } else {
            W::LANES as u32
        },
        chunk: T::INFINITY,
        next_chunk: T::INFINITY,
        banded: measure.banded(),
    };
    if wave.has_left {
        wave.chunk = wave.left_chunk(0);
        wave.next_chunk = wave.left_chunk(wave.chunk_len);
    }

    if wave.banded {
        wave.sweep::<true>(lanes_used);
    } else {
        wave.sweep::<false>(lanes_used);
    }

    let cells = wave.cells;
    if !block.bottom.is_null() && wave.working {
        for (k, &cell) in cells.iter().enumerate() {
            if first + k <= last_column {
                *block.bottom.add(first + k) = cell;
            }
        }
    }
    let owner = (block.cols - 1) / S;
    let index = (block.cols - 1) % S;
    let mut mine = cells[0];
    for (k, &cell) in cells.iter().enumerate().skip(1) {
        if k == index {
            mine = cell;
        }
    }
    warp.broadcast(mine, owner)
}

/// One row of a lane's stripe, left to right; `allowed(k)` says whether
/// the stripe's cell `k` is inside the measure's band (infinite if not).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn stripe_row<T: Real, M: Recurrence<T>, const S: usize>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    row: &M::Row,
    columns: &[M::Column; S],
    cells: &mut [T; S],
    start: Neighbours<T>,
    allowed: impl Fn(usize) -> bool,
) {
    let Neighbours {
        mut diag, mut left, ..
    } = start;
    for k in 0..S {
        let up = cells[k];
        let value = measure.cell(row, &columns[k], a, b, Neighbours { diag, up, left });
        let value = if allowed(k) { value } else { T::INFINITY };
        diag = up;
        left = value;
        cells[k] = value;
    }
}

/// A whole pair in one warp: column bands of `lanes * S` columns, left to
/// right, each passing its right column to the next through `border`; or,
/// for a narrow enough Sakoe-Chiba band, only the band's cells laid out
/// along it (`band.rs`).
///
/// # Safety
/// As [`warp_block`]; `border` holds `a.len + 1` values when `b.len >
/// lanes * S` (unused otherwise, may be null).
#[inline(always)]
pub unsafe fn warp_pair<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    border: *mut T,
) -> T {
    if let Some(band) = band_of(measure, a.len, b.len, W::LANES, S) {
        return band_pair::<T, M, W, S>(warp, measure, a, b, band);
    }
    let width = W::LANES * S;
    let bands = b.len.div_ceil(width);
    let mut value = T::INFINITY;
    let mut left_end = 0;
    for band in 0..bands {
        let block = band_block(measure, a, b, band, width, left_end);
        let corner = match band {
            0 => block.corner,
            _ => band_corner(measure, a, b, &block, border),
        };
        let block = Block {
            corner,
            left: if band == 0 { null() } else { border },
            right: if band + 1 < bands { border } else { null_mut() },
            ..block
        };
        value = warp_block::<T, M, W, S>(warp, measure, a, b, &block);
        left_end = block.row0 + block.rows;
    }
    value
}

/// Column band `band` (`width` columns, the last one narrower) of the `a.len
/// x b.len` matrix as a block of the rows the measure allows in its columns
/// (all of them without a band: a band's cells outside are never
/// computed), with no borders in memory yet; `left_end` is the last row of
/// the band to its left. Its top row is outside the band (infinite); its
/// corner is the matrix's `(0, 0)` for the first band and left to
/// [`band_corner`] for the others.
#[inline(always)]
fn band_block<T: Real, M: Recurrence<T>>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    band: usize,
    width: usize,
    left_end: usize,
) -> Block<T> {
    let col0 = band * width;
    let cols = width.min(b.len - col0);
    let (first, last) = measure.rows(col0 + 1, col0 + cols, a.len, b.len);
    Block {
        row0: first - 1,
        rows: last - first + 1,
        col0,
        cols,
        corner: if first == 1 && band == 0 {
            T::ZERO
        } else {
            T::INFINITY
        },
        left_end,
        ..Block::top_left(1, 1)
    }
}

/// Cell `(row0, col0)` of a band's block: from the border the band to its
/// left wrote, if the measure allows it; infinite otherwise (and on the
/// matrix's top row), where the border holds no value of this pair.
///
/// # Safety
/// `border` holds the left band's column for its rows, which are done.
#[inline(always)]
unsafe fn band_corner<T: Real, M: Recurrence<T>>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    block: &Block<T>,
    border: *const T,
) -> T {
    if block.row0 == 0 {
        return T::INFINITY;
    }
    let (lo, hi) = measure.columns(block.row0, a.len, b.len);
    if (lo..=hi).contains(&block.col0) && block.row0 <= block.left_end {
        *border.add(block.row0)
    } else {
        T::INFINITY
    }
}

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
/// As [`warp_block`]; the tile exists; `grid` is valid and every tile of
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
    let block = Block {
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
        left_ready: null(),
        right_ready: null_mut(),
    };
    let value = warp_block::<T, M, W, S>(warp, measure, a, b, &block);
    if warp.lane() == 0 {
        *grid.corners.add(tile_row) = next_corner;
    }
    (last_col && tile_row + 1 == tile_rows).then_some(value)
}

/// What the warps of a pipelined long pair share (see [`pipelined_pair`]),
/// in device memory, zeroed before the launch: `borders` holds two columns
/// of `a.len + 1` values, `ready` one count per band, `next_band` one.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Pipeline<T> {
    pub borders: *mut T,
    pub ready: *mut u32,
    pub next_band: *mut u32,
}

/// One long pair by all the warps of a launch at once: the matrix is cut
/// into column bands of `lanes * S` columns, each a single block of all
/// rows. A warp takes the next band (an atomic counter, so every band a
/// warp waits for belongs to a warp that is already running), and runs
/// right behind the warp of the band to its left, reading that band's
/// right column as it is written, a few rows at a time, through a readiness
/// count. Bands alternate between two border columns: band `k + 2`
/// overwrites a row of band `k`'s border only after band `k + 1` has
/// passed that row, hence read it. Memory is linear in the lengths, and
/// one launch does the whole pair. Returns the pair's value from the warp
/// that did the last band, `None` from the others.
///
/// # Safety
/// As [`warp_block`]; `pipeline` is valid, zeroed, and not shared with
/// another pair.
#[inline(always)]
pub unsafe fn pipelined_pair<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    pipeline: &Pipeline<T>,
) -> Option<T> {
    let width = W::LANES * S;
    let bands = b.len.div_ceil(width);
    let border = |band: usize| pipeline.borders.add((band % 2) * (a.len + 1));
    let mut value = None;
    loop {
        let taken = if warp.lane() == 0 {
            AtomicU32::from_ptr(pipeline.next_band).fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        let band = broadcast_u32(warp, taken, 0) as usize;
        if band >= bands {
            return value;
        }
        let first = band == 0;
        let last = band + 1 == bands;
        let left_end = if first {
            0
        } else {
            let previous = band_block(measure, a, b, band - 1, width, 0);
            previous.row0 + previous.rows
        };
        let block = band_block(measure, a, b, band, width, left_end);
        let corner = if first {
            block.corner
        } else {
            // The corner is a row of the left band's border: wait for it.
            let ready = pipeline.ready.add(band - 1);
            wait_for(warp, ready, block.row0.min(left_end));
            band_corner(measure, a, b, &block, border(band - 1))
        };
        let block = Block {
            corner,
            left: if first { null() } else { border(band - 1) },
            left_ready: if first {
                null()
            } else {
                pipeline.ready.add(band - 1)
            },
            right: if last { null_mut() } else { border(band) },
            right_ready: if last {
                null_mut()
            } else {
                pipeline.ready.add(band)
            },
            ..block
        };
        let result = warp_block::<T, M, W, S>(warp, measure, a, b, &block);
        if last {
            value = Some(result);
        }
    }
}
