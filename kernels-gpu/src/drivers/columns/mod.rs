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
use crate::hw::{tagged, untagged, Scope, Tagged, WaitBound, Warp};
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
    /// If not null, the left border is being written while this region
    /// runs, by the warp to its left: `left_tagged[i]` is cell `(i, col0)`
    /// tagged `left_tag` ([`Tagged`]), for the rows up to `left_end`. The
    /// region waits for each value's tag before it uses it. `left` is then
    /// null.
    pub left_tagged: *const Tagged,
    pub left_tag: u32,
    /// If not null, cell `(i, col0 + cols)` is written to `right_tagged[i]`
    /// tagged `right_tag` for the region to the right, which runs
    /// meanwhile. Needs `cols == lanes * S`; `right` is then null.
    pub right_tagged: *mut Tagged,
    pub right_tag: u32,
    /// The warps that share the tagged borders: those of one block, or of
    /// the whole launch.
    pub scope: Scope,
    /// The bound on this warp's waits for `left_tagged` (see [`settle`]);
    /// null when there is none to wait for.
    pub bound: *const WaitBound,
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
            left_tagged: null(),
            left_tag: 0,
            right_tagged: null_mut(),
            right_tag: 0,
            scope: Scope::Launch,
            bound: null(),
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
    // of `handoff_rows` rows, so that this warp runs close behind the warp
    // writing it; a finished one in chunks of a row a lane. Either way one
    // chunk ahead, to hide the loads.
    let following = !region.left_tagged.is_null();
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
        has_left: !region.left.is_null() || following,
        following,
        chunk_len: if following {
            handoff_rows::<W>() as u32
        } else {
            W::LANES as u32
        },
        chunk: T::INFINITY,
        next_value: T::INFINITY,
        next_tagged: [0; 2],
    };
    if wave.has_left {
        wave.fetch_left(0);
        wave.chunk = wave.settled_left(0);
        wave.fetch_left(wave.chunk_len);
    }

    // A region on the matrix's left edge takes steps without the border's
    // hand-out (a fifth of a cheap cell's step, a branch and reconvergence
    // in each of Soft-DTW's, whose warp issues one long chain); a measure
    // whose cell is neither would test `has_left` in its steps (one copy of
    // its larger steps).
    let left = wave.has_left || !(M::CHEAP_CELL || M::LATENCY_BOUND);
    match (window.is_banded(), left) {
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

/// Rows of a left border being written meanwhile that a warp fetches at a
/// time, a chunk ahead: few, so that the warp can run close behind the
/// writer (it trails by the wavefront's skew of `lanes - 1` rows plus about
/// two of these), enough to hide the loads' latency.
#[inline(always)]
const fn handoff_rows<W: Warp>() -> usize {
    if W::LANES < 8 {
        W::LANES
    } else {
        8
    }
}

/// The value at `border` once it carries `tag`: loads it again (and again)
/// while the writer has not got there, starting from `words`, already
/// loaded; NaN if the wait gives up (`bound`, which records it).
///
/// # Safety
/// `border` is valid and 16-byte aligned; its writer runs meanwhile, or is
/// done; `bound`'s fault word is valid.
#[inline(always)]
pub(super) unsafe fn settle<T: Real, W: Warp>(
    warp: &W,
    scope: Scope,
    border: *const Tagged,
    words: Tagged,
    tag: u32,
    bound: &WaitBound,
) -> T {
    let mut words = Some(words);
    let arrived = || {
        let loaded = words
            .take()
            .unwrap_or_else(|| warp.load_tagged(scope, border));
        untagged(loaded, tag)
    };
    bound.wait(warp, arrived).unwrap_or(T::NAN)
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
    /// Lane 0's left border: the current chunk (one row a lane), and the
    /// next as fetched: a finished border's value, or a border being
    /// written, its tagged words, settled when the chunk is used. Apart, so
    /// that kernels that never follow carry a value, not tagged words, from
    /// chunk to chunk.
    has_left: bool,
    following: bool,
    chunk_len: u32,
    chunk: T,
    next_value: T,
    next_tagged: Tagged,
}

impl<'a, T: Real, M: Recurrence<T>, W: Warp, const S: usize> Wavefront<'a, T, M, W, S> {
    /// Whether this lane holds a row of the left border in the chunk of
    /// rows `r ..` (counted from 0), and its row of the matrix.
    #[inline(always)]
    fn left_row(&self, r: u32) -> Option<usize> {
        let row = r + self.lane;
        (self.lane < self.chunk_len && row < self.left_rows)
            .then(|| self.region.row0 + 1 + row as usize)
    }

    /// Fetches rows `r .. r + chunk_len` (counted from 0) of the left
    /// border, one a lane: cell `(row0 + 1 + r + lane, col0)`. A border being
    /// written meanwhile gives its tagged words as loaded, which
    /// [`Self::settled_left`] checks when they are used.
    #[inline(always)]
    unsafe fn fetch_left(&mut self, r: u32) {
        let region = self.region;
        match self.left_row(r) {
            Some(i) if self.following => {
                self.next_tagged = self
                    .warp
                    .load_tagged(region.scope, region.left_tagged.add(i))
            }
            Some(i) => self.next_value = *region.left.add(i),
            None => {}
        }
    }

    /// The chunk of rows `r ..` that [`Self::fetch_left`] fetched (once
    /// every lane's value carries the writer's tag), infinite past the
    /// region.
    #[inline(always)]
    unsafe fn settled_left(&self, r: u32) -> T {
        let region = self.region;
        match self.left_row(r) {
            Some(i) if self.following => settle(
                self.warp,
                region.scope,
                region.left_tagged.add(i),
                self.next_tagged,
                region.left_tag,
                &*region.bound,
            ),
            Some(_) => self.next_value,
            None => T::INFINITY,
        }
    }

    /// Every step of the region, `lanes_used` lanes working. Lane `l`
    /// computes row `t - l` at step `t`: while the wavefront fills (`t <
    /// lanes_used - 1`) and drains (`t >= rows`) some lanes have no row; in
    /// between every working lane has one, and the steps skip the test.
    /// `BANDED` is the measure's `banded()`, a constant so that an unbanded
    /// measure's steps carry no band test; without `LEFT` the region has no
    /// left border (with it, `has_left` says whether it has one).
    #[inline(always)]
    unsafe fn sweep<const BANDED: bool, const LEFT: bool>(&mut self, lanes_used: u32) {
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
                    self.step::<false, BANDED, LEFT>(t);
                    self.step::<false, BANDED, LEFT>(t + 1);
                    t += 2;
                }
                while t < rows {
                    self.step::<false, BANDED, LEFT>(t);
                    t += 1;
                }
                if t == steps {
                    break;
                }
            }
            self.step::<true, BANDED, LEFT>(t);
            t += 1;
        }
    }

    /// Step `t` of the wavefront: this lane computes row `t - lane` of its
    /// stripe. `CHECKED` steps test whether the lane has a row at this step;
    /// unchecked ones are for steps where every working lane has one.
    /// `LEFT` as in [`Self::sweep`].
    #[inline(always)]
    unsafe fn step<const CHECKED: bool, const BANDED: bool, const LEFT: bool>(&mut self, t: u32) {
        let warp = self.warp;
        let from_lane_before = warp.shuffle_up(self.cells[S - 1]);
        let border = if LEFT && self.has_left {
            // chunk_len is a power of two.
            let in_chunk = t & (self.chunk_len - 1);
            let border = warp.broadcast(self.chunk, in_chunk as usize);
            if in_chunk == self.chunk_len - 1 {
                self.chunk = self.settled_left(t + 1);
                self.fetch_left(t + 1 + self.chunk_len);
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
        if self.lane as usize == W::LANES - 1 {
            let value = self.cells[S - 1];
            if !region.right.is_null() {
                *region.right.add(i) = value;
            } else if !region.right_tagged.is_null() {
                let border = region.right_tagged.add(i);
                warp.store_tagged(region.scope, border, tagged(value, region.right_tag));
            }
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
