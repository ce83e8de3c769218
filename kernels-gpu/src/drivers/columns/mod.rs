//! The column driver, shared by every measure: one warp computes a region
//! of the cost matrix, each lane a stripe of `S` adjacent columns held in
//! registers, and the rows flow through the lanes as a wavefront.
//!
//! At step `t` lane `l` computes row `t - l` of its stripe. The cell left of
//! its stripe is the last cell of lane `l - 1`'s stripe, which that lane
//! computed one step earlier and passes on with a warp shuffle; the cell
//! diagonally left is the one it received the step before. Lane 0 takes the
//! region's left border instead, fetched 32 rows at a time with one
//! coalesced load and handed out by shuffles. A region of `rows x cols`
//! takes `rows + lanes - 1` steps, `lanes = ceil(cols / S)`.
//!
//! Regions chain through their borders: a region reads its top row and
//! left column from memory (or takes the matrix boundary) and can write its
//! bottom row and right column for the regions below and to the right. A
//! pair wider than one warp's stripes is cut into *panels* of `lanes * S`
//! columns, one after the other ([`pair`]); a long pair into tiles computed
//! wavefront by wavefront, or into panels that warps compute at once, each
//! right behind the one to its left ([`long_pair`]).

pub mod gradient;
pub mod long_pair;
pub mod pair;
pub mod skewed;

use super::stripe_cell;
use crate::hw::{Scope, Warp};
use crate::series::specialised;
use crate::{Neighbours, Real, Recurrence, Series, Window};
use core::array::from_fn;
use core::ptr::{null, null_mut};

/// A region of the cost matrix: cells `(row0 + 1 ..= row0 + rows) x
/// (col0 + 1 ..= col0 + cols)` (1-based, as in [`Recurrence`]), with
/// `1 <= cols <= lanes * S` and `rows >= 1`, and where its borders come
/// from and go to. Border arrays are indexed by the matrix's own row or
/// column number.
#[derive(Clone, Copy, Debug)]
pub struct Region<T> {
    pub row0: usize,
    pub rows: usize,
    pub col0: usize,
    pub cols: usize,
    /// Cell `(row0, col0)`.
    pub corner: T,
    /// `top[j]` is cell `(row0, j)` for the region's columns; null for the
    /// matrix's row 0 (infinite).
    pub top: *const T,
    /// `left[i]` is cell `(i, col0)` for the region's rows up to
    /// `left_end`; null for the matrix's column 0 (infinite).
    pub left: *const T,
    /// The last row of `left` that holds a value: the cells of the rows
    /// below it are infinite (outside the measure's band) and not read.
    pub left_end: usize,
    /// If not null, cell `(row0 + rows, j)` is written to `bottom[j]` for
    /// the region's columns.
    pub bottom: *mut T,
    /// If not null, cell `(i, col0 + cols)` is written to `right[i]` for
    /// the region's rows. Needs `cols == lanes * S`. May be `left`: each row
    /// is read long before it is written.
    pub right: *mut T,
    /// If not null, the left border is being written while this region runs:
    /// its rows up to `*left_ready` (a row number of the matrix) are
    /// complete. The region waits for each chunk of rows before it reads
    /// them.
    pub left_ready: *const u32,
    /// If not null, after every few rows (and the last) of the right border
    /// are written, the matrix row of the last one written is stored here
    /// (with release ordering) for the region to the right.
    pub right_ready: *mut u32,
    /// The warps that share `left_ready` and `right_ready`: those of one
    /// block, or of the whole launch.
    pub ready_scope: Scope,
}

impl<T: Real> Region<T> {
    /// A region with no borders in memory: the matrix's top-left corner
    /// region of `rows x cols`, corner 0.
    #[inline(always)]
    pub fn top_left(rows: usize, cols: usize) -> Self {
        Region {
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
            ready_scope: Scope::Launch,
        }
    }
}

/// Computes `region` with `S` columns per lane and returns its bottom-right
/// cell on every lane.
///
/// # Safety
/// All lanes call it together with the same arguments; the region lies in
/// the `a.len x b.len` matrix; the border pointers are valid as documented.
#[inline(always)]
pub unsafe fn warp_region<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    region: &Region<T>,
) -> T {
    specialised(a, b, |a, b| {
        region_steps::<T, M, W, S>(warp, measure, a, b, region)
    })
}

/// [`warp_region`] of series whose dimension is known where it is 1.
#[inline(always)]
unsafe fn region_steps<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    region: &Region<T>,
) -> T {
    let lane = warp.lane() as u32;
    let last_column = region.col0 + region.cols;
    let lanes_used = region.cols.div_ceil(S) as u32;
    // Lanes past the region's last column compute copies of its last
    // column and rows, which nobody reads; clamping keeps their loads in
    // bounds.
    let first = region.col0 + lane as usize * S + 1;
    let clamp = |j: usize| if j < last_column { j } else { last_column };
    let top = |j: usize| {
        if region.top.is_null() {
            T::INFINITY
        } else {
            *region.top.add(j)
        }
    };
    // A left border being written while this region runs comes in chunks
    // of `ready_rows` rows (the rows the warp to the left publishes at a
    // time), so that this warp runs close behind it; a finished one in
    // chunks of a row a lane. Either way one chunk ahead, to hide the loads.
    let following = !region.left_ready.is_null();
    let window = measure.window();
    let mut wave = Wavefront::<T, M, W, S> {
        warp,
        measure,
        a,
        b,
        region,
        lane,
        row_lane: lane.min(lanes_used - 1),
        working: lane < lanes_used,
        rows: region.rows as u32,
        left_rows: region.left_end.saturating_sub(region.row0).min(region.rows) as u32,
        first,
        columns: from_fn(|k| measure.column(b, clamp(first + k))),
        cells: from_fn(|k| top(clamp(first + k))),
        diag: if lane == 0 {
            region.corner
        } else {
            top(clamp(first - 1))
        },
        next_row: measure.row(a, region.row0 + 1),
        has_left: !region.left.is_null(),
        following,
        chunk_len: if following {
            ready_rows::<W>(region.ready_scope) as u32
        } else {
            W::LANES as u32
        },
        chunk: T::INFINITY,
        next_chunk: T::INFINITY,
        ready_acquired: 0,
        ready_polled: 0,
    };
    if wave.has_left {
        wave.chunk = wave.left_chunk(0);
        wave.next_chunk = wave.left_chunk(wave.chunk_len);
    }

    match (window.is_banded(), !region.right_ready.is_null()) {
        (true, true) => wave.sweep::<true, true>(lanes_used),
        (true, false) => wave.sweep::<true, false>(lanes_used),
        (false, true) => wave.sweep::<false, true>(lanes_used),
        (false, false) => wave.sweep::<false, false>(lanes_used),
    }

    let cells = wave.cells;
    if !region.bottom.is_null() && wave.working {
        for (k, &cell) in cells.iter().enumerate() {
            if first + k <= last_column {
                *region.bottom.add(first + k) = cell;
            }
        }
    }
    stripe_cell(warp, &cells, region.cols - 1)
}

/// Rows a warp publishes at a time to the warp following it (see
/// [`Region::right_ready`]), and the rows the follower reads at a time: few,
/// so the follower can run close behind (it trails by the wavefront's skew
/// of `lanes - 1` rows plus about two of these), enough that the release
/// and acquire fences stay cheap. Fences among the warps of a launch wait
/// for the whole GPU's memory and are spaced twice as far as those of one
/// block.
#[inline(always)]
const fn ready_rows<W: Warp>(scope: Scope) -> usize {
    let wanted = match scope {
        Scope::Block => 8,
        Scope::Launch => 16,
    };
    if W::LANES < wanted {
        W::LANES
    } else {
        wanted
    }
}

/// Waits until `*ready >= rows` (another warp's progress, shared at
/// `scope`), then acquires what it published; returns the count it saw.
#[inline(always)]
pub(super) unsafe fn wait_for<W: Warp>(
    warp: &W,
    scope: Scope,
    ready: *const u32,
    rows: usize,
) -> u32 {
    loop {
        let seen = warp.load_relaxed(scope, ready);
        if seen as usize >= rows {
            warp.fence_acquire(scope);
            return seen;
        }
        warp.spin();
    }
}

/// One lane's part of a region while the wavefront sweeps it (see
/// [`warp_region`]): its stripe's columns and cells, and what it has
/// fetched ahead. Counters are 32-bit: a region has fewer than 2^32 rows.
struct Wavefront<'a, T: Real, M: Recurrence<T>, W: Warp, const S: usize> {
    warp: &'a W,
    measure: &'a M,
    a: &'a Series<T>,
    b: &'a Series<T>,
    region: &'a Region<T>,
    /// This lane's index, and the one whose rows it follows: lanes past
    /// the region's last column repeat the last working lane's rows (their
    /// results are never read), so that every lane's loads stay in range
    /// when the steps run unchecked.
    lane: u32,
    row_lane: u32,
    working: bool,
    rows: u32,
    /// Rows of the left border that hold values, from the region's first:
    /// `rows`, or fewer where the border ends (`Region::left_end`).
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
    /// A followed border's count of published rows: the last one acquired,
    /// and the one read (relaxed) when the last chunk was fetched, which
    /// has arrived by the next chunk.
    ready_acquired: u32,
    ready_polled: u32,
}

impl<'a, T: Real, M: Recurrence<T>, W: Warp, const S: usize> Wavefront<'a, T, M, W, S> {
    /// Rows `r .. r + chunk_len` (counted from 0) of the left border, one a
    /// lane: cell `(row0 + 1 + r + lane, col0)`, infinite past the region.
    /// A border being written while this region runs is waited for first:
    /// usually the count read a chunk earlier shows its rows published
    /// already (the warp to the left runs ahead), and acquiring them costs
    /// a fence but no wait for a read; the count for the next chunk is read
    /// now, to be used then.
    #[inline(always)]
    unsafe fn left_chunk(&mut self, r: u32) -> T {
        let region = self.region;
        // No wait where the border has no rows for this region: its writer
        // never publishes them.
        if self.following && self.left_rows > 0 {
            let needed = region.row0 + (r + self.chunk_len).min(self.left_rows) as usize;
            if (self.ready_acquired as usize) < needed {
                self.ready_acquired = if self.ready_polled as usize >= needed {
                    // Acquires what was published before the count read.
                    self.warp.fence_acquire(region.ready_scope);
                    self.ready_polled
                } else {
                    wait_for(self.warp, region.ready_scope, region.left_ready, needed)
                };
            }
            self.ready_polled = self
                .warp
                .load_relaxed(region.ready_scope, region.left_ready);
        }
        if self.has_left && self.lane < self.chunk_len && r + self.lane < self.left_rows {
            *region.left.add(region.row0 + 1 + (r + self.lane) as usize)
        } else {
            T::INFINITY
        }
    }

    /// Every step of the region, `lanes_used` lanes working. Lane `l`
    /// computes row `t - l` at step `t`: while the wavefront fills (`t <
    /// lanes_used - 1`) and drains (`t >= rows`) some lanes have no row; in
    /// between every working lane has one, and the steps skip the test.
    /// `BANDED` is the measure's `banded()`, a constant so that an unbanded
    /// measure's steps carry no band test; `PUBLISHES` whether the region
    /// publishes its right border's progress (`Region::right_ready`).
    #[inline(always)]
    unsafe fn sweep<const BANDED: bool, const PUBLISHES: bool>(&mut self, lanes_used: u32) {
        let rows = self.rows;
        let steps = rows + lanes_used - 1;
        let full_from = (lanes_used - 1).min(rows);
        // Between publications the steps run in blocks: a publication in
        // every step, even predicated off, would wait there for the
        // border's stores.
        let block = if PUBLISHES {
            ready_rows::<W>(self.region.ready_scope) as u32
        } else {
            rows
        };
        // One copy of the checked step serves both the fill and the drain.
        let mut t = 0;
        while t < steps {
            if t == full_from {
                while t < rows {
                    let end = if PUBLISHES {
                        (t + block).min(rows)
                    } else {
                        rows
                    };
                    self.full_steps::<BANDED>(t, end);
                    t = end;
                    if PUBLISHES {
                        self.publish(t);
                    }
                }
                if t == steps {
                    break;
                }
            }
            self.step::<true, BANDED>(t);
            t += 1;
            if PUBLISHES && (t % block == 0 || t == steps) {
                self.publish(t);
            }
        }
    }

    /// Steps `t..end`, where every working lane has a row.
    #[inline(always)]
    unsafe fn full_steps<const BANDED: bool>(&mut self, mut t: u32, end: u32) {
        // For cheap cells, two steps an iteration: each step's new cells
        // take other registers than the ones they replace (the next cell
        // still reads the old as its diagonal), and a second step moves
        // them back in place of the moves a loop would need.
        while M::CHEAP_CELL && t + 1 < end {
            self.step::<false, BANDED>(t);
            self.step::<false, BANDED>(t + 1);
            t += 2;
        }
        while t < end {
            self.step::<false, BANDED>(t);
            t += 1;
        }
    }

    /// Once steps `..t` are done, tells the region to the right how many
    /// rows of the right border the last lane has written: it has a row at
    /// step `lanes - 1` and each step after, as every lane works in a region
    /// with a right border. Every lane calls it at the same steps, and only
    /// for a region with `Region::right_ready`.
    #[inline(always)]
    unsafe fn publish(&self, t: u32) {
        let region = self.region;
        let skew = W::LANES as u32 - 1;
        if t <= skew {
            return;
        }
        if self.lane == skew {
            let written = (t - skew).min(self.rows);
            // Release: the rows stored before are visible to whoever reads
            // this count with acquire ordering.
            self.warp.store_release(
                region.ready_scope,
                region.right_ready,
                (region.row0 + written as usize) as u32,
            );
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
        let region = self.region;
        let i = region.row0 + 1 + r as usize;
        let row = self.next_row;
        // The last row's successor is never used: fetch the last row again
        // (unconditionally, which spares the moves of a conditional).
        let next = region.row0 + 1 + (r + 1).min(self.rows - 1) as usize;
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
            let (lo, hi) = self.measure.window().columns(i, self.a.len, self.b.len);
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
        if !region.right.is_null() && self.lane as usize == W::LANES - 1 {
            *region.right.add(i) = self.cells[S - 1];
        }
    }
}

/// One row of a lane's stripe, left to right; `allowed(k)` says whether
/// the stripe's cell `k` is inside the measure's band (infinite if not).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn stripe_row<T: Real, M: Recurrence<T>, const S: usize>(
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
