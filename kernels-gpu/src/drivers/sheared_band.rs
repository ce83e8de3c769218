//! The sheared band driver: one warp computes one pair inside a narrow
//! diagonal band (a Sakoe-Chiba band), and only the band's cells.
//!
//! The column driver (`columns`: lane `l` holds columns `l*S ..`) can skip
//! only whole rows of a panel, so a pair narrower than one panel gains
//! nothing from a band. Here the columns are *sheared*:
//! row `i`'s cells are numbered from the band's left edge, cell `c` of row
//! `i` being matrix column `j = i - below + c`, `0 <= c < width`, and lane
//! `l` holds cells `l*S .. l*S + S` of every row. A band of `width`
//! diagonals then takes `ceil(width / S)` lanes for any length, and the
//! pair `n + lanes - 1` steps of `S` cells a lane, in place of the
//! `n x m` cells of the full matrix.
//!
//! In sheared cells the three neighbours of cell `(i, c)` are `(i - 1, c)`
//! (the diagonal, `j - 1`), `(i - 1, c + 1)` (up, same `j`) and `(i, c -
//! 1)` (left). A lane computes its row left to right in place, so its own
//! registers hold every diagonal and upper neighbour but the upper one of
//! its last cell, which is the first cell of lane `l + 1` one row before.
//! The wavefront is the column driver's: lane `l` computes row `t - l` at step
//! `t`. At the start of a step lane `l` takes its left neighbour from lane
//! `l - 1` (which finished that row the step before); lane `l + 1` computes
//! the row before in the same step, so after every lane has computed its
//! first cell, one more shuffle hands each lane the upper neighbour of its
//! last cell, and the other `S - 2` cells hide that shuffle's latency.
//!
//! A cell outside the matrix (`j < 1` or `j > m`: the band's corners) or
//! past the band (`c >= width`: the last lane's spare cells) is infinite.
//! A row's cells move one matrix column right from one row to the next, so
//! a lane's column data shift by one cell a row and the last cell loads a
//! new column (fetched a row ahead).

use super::stripe_cell;
use crate::hw::Warp;
use crate::series::specialised;
use crate::{Neighbours, Real, Recurrence, Series, Window};
use core::array::from_fn;

/// Whether a band of `width` diagonals fits a warp of `lanes` lanes of
/// `stripe` cells, as the driver needs: at least 2 cells a lane (a lane's
/// first and last cell must differ) and every diagonal in a lane.
#[inline(always)]
pub fn fits(width: usize, lanes: usize, stripe: usize) -> bool {
    stripe >= 2 && width <= lanes * stripe
}

/// The band of an `n x m` pair as the driver takes it, `(below, above)`
/// diagonals from the measure's window, if the window is such a band and
/// it [`fits`] a warp of `lanes` lanes of `stripe` cells. Whether the
/// driver pays for a pair is the host's choice (its kernel selection).
#[inline(always)]
pub fn band_in_warp<T: Real, M: Recurrence<T>>(
    measure: &M,
    n: usize,
    m: usize,
    lanes: usize,
    stripe: usize,
) -> Option<(usize, usize)> {
    let (below, above) = measure.window().diagonals(n, m)?;
    fits(below + above + 1, lanes, stripe).then_some((below, above))
}

/// One lane's part of the band (see the module's documentation). Counters
/// are 32-bit (series are shorter than 2^32 samples).
struct Band<'a, T: Real, M: Recurrence<T>, W: Warp, const S: usize> {
    warp: &'a W,
    measure: &'a M,
    a: &'a Series<T>,
    b: &'a Series<T>,
    lane: u32,
    /// Lanes holding cells of the band. The others take part in the
    /// shuffles and, in masked and steady steps, repeat the rows of the
    /// last of them (`row_lane`), so that their loads stay in range; their cells
    /// are all past the band, so infinite, and nobody reads them.
    lanes_used: u32,
    row_lane: u32,
    rows: u32,
    /// `l*S - below`: the matrix column of the lane's first cell is row
    /// `i` plus this (wrapping: negative near the top-left corner).
    shift: u32,
    /// The band's right edge: row `i`'s last column is `min(m, i + above)`.
    above: u32,
    /// The lane's cells of its last row.
    cells: [T; S],
    /// Infinite for the lane's cells past the band's right edge, 0 for the
    /// others.
    spare: [T; S],
    /// The column data of the lane's cells in the next row but for the
    /// shift by one: row `i`'s are `columns[1..]` and `next_column`.
    columns: [M::Column; S],
    next_column: M::Column,
    next_row: M::Row,
}

impl<T: Real, M: Recurrence<T>, W: Warp, const S: usize> Band<'_, T, M, W, S> {
    /// Matrix column `j` clamped into `1..=m` for a load: cells outside the
    /// matrix load some column and are set infinite.
    #[inline(always)]
    fn clamp(&self, j: u32) -> usize {
        if j.wrapping_sub(1) < self.b.len as u32 {
            j as usize
        } else {
            1
        }
    }

    /// Every step, as the column driver's wavefront, in three kinds:
    /// - checked steps, while the wavefront fills and drains, test whether
    ///   the lane has a row, and which of its cells are in the matrix and
    ///   the band;
    /// - masked steps, the top rows after the fill, where every lane has
    ///   a row but cells left of column 1 occur, test the cells only;
    /// - steady steps, in between, test nothing: every cell left of the
    ///   band's right edge is in the matrix or right of it, cells right of
    ///   the matrix (`j > m`) are read by no cell of the matrix, so they
    ///   may hold anything, and only the cells past the band's right edge
    ///   (the last lane's spare ones) are set infinite, by adding `spare`.
    #[inline(always)]
    unsafe fn sweep(&mut self, below: u32) {
        let steps = self.rows + self.lanes_used - 1;
        let full_from = (self.lanes_used - 1).min(self.rows);
        // Lane `lanes_used - 1` is on row `t - lanes_used + 2` (1-based),
        // whose first cell is column `t - lanes_used + 2 - below`: at
        // least 2 from this step on.
        let steady_from = (below + self.lanes_used).min(self.rows).max(full_from);
        // One copy of the checked step serves both the fill and the drain.
        let mut t = 0;
        while t < steps {
            if t == full_from {
                while t < steady_from {
                    self.step::<false, true, false>(t, 0);
                    t += 1;
                }
                // For cheap cells, the column data in a ring, which spares
                // their moves (a cell is a handful of instructions: one
                // move each weighs). Only in f32: in f64 the ring's
                // unrolled steps add registers to kernels that are already
                // at the edge of an SM's next occupancy step (with the
                // ring, f64 DTW without a band fell from 1761 to 1342
                // GCUPS: 173 registers, past the 170 of 3 blocks an SM).
                if M::CHEAP_CELL && core::mem::size_of::<T>() == 4 {
                    self.ring_steps(&mut t, self.rows);
                }
                while t < self.rows {
                    self.step::<false, false, false>(t, 0);
                    t += 1;
                }
                if t == steps {
                    break;
                }
            }
            self.step::<true, true, false>(t, 0);
            t += 1;
        }
    }

    /// Step `t`: this lane computes row `t - lane` (1-based row `t - lane +
    /// 1`), as [`Band::sweep`] says: `CHECKED`, `MASKED` or steady. `RING`
    /// steps find the column data in a ring (see [`Band::ring_steps`]) at
    /// `phase`, a constant once the ring's steps are unrolled.
    #[inline(always)]
    unsafe fn step<const CHECKED: bool, const MASKED: bool, const RING: bool>(
        &mut self,
        t: u32,
        phase: usize,
    ) {
        let warp = self.warp;
        let from_lane_before = warp.shuffle_up(self.cells[S - 1]);
        let left = if self.lane == 0 {
            T::INFINITY
        } else {
            from_lane_before
        };
        let r = t.wrapping_sub(self.row_lane);
        let active = !CHECKED || (self.lane < self.lanes_used && r < self.rows);
        let i = r.wrapping_add(1);
        // Cell `k` is in the matrix and the band when its column `j = i +
        // shift + k` has `1 <= j <= min(m, i + above)`: one unsigned
        // comparison of `j - 1` with that limit.
        let first = i.wrapping_add(self.shift).wrapping_sub(1);
        let limit = (self.b.len as u32).min(i.wrapping_add(self.above));
        let allowed = |k: usize| !MASKED || first.wrapping_add(k as u32) < limit;
        let mut row = self.next_row;
        let mut diag = self.cells[0];
        if active {
            row = self.next_row;
            let next = (i + 1).min(self.rows);
            self.next_row = self.measure.next_row(self.a, &row, next as usize);
            if !RING {
                self.shift_columns(i);
            }
            let up = self.cells[1];
            let value = self.cell::<RING>(&row, 0, phase, Neighbours { diag, up, left });
            diag = up;
            // The band's last lane has no spare first cell.
            self.cells[0] = if allowed(0) { value } else { T::INFINITY };
        }
        // Lane `l + 1`'s first cell of the row before: the upper
        // neighbour of this lane's last cell (past the band's last lane,
        // outside the band).
        let from_lane_after = warp.shuffle_down(self.cells[0]);
        let last_up = if self.lane + 1 < self.lanes_used {
            from_lane_after
        } else {
            T::INFINITY
        };
        if active {
            let mut left = self.cells[0];
            for k in 1..S {
                let up = if k + 1 < S {
                    self.cells[k + 1]
                } else {
                    last_up
                };
                let value = self.cell::<RING>(&row, k, phase, Neighbours { diag, up, left });
                diag = up;
                if MASKED {
                    let value = if allowed(k) { value } else { T::INFINITY };
                    left = value;
                    self.cells[k] = value;
                } else {
                    // Off the dependency chain: the next cell's left
                    // neighbour is in the band or spare itself.
                    left = value;
                    self.cells[k] = value + self.spare[k];
                }
            }
            if RING {
                // Cell 0's column leaves; the next row's last one comes in
                // its place.
                self.columns[phase] = self.next_column;
                let j = i.wrapping_add(self.shift).wrapping_add(S as u32 + 1);
                self.next_column = self.measure.column(self.b, self.clamp(j));
            }
        }
    }

    /// Row `i`'s column data from row `i - 1`'s: every cell takes the
    /// column of the one to its right, the last the one fetched ahead, and
    /// the next row's last column is fetched.
    #[inline(always)]
    unsafe fn shift_columns(&mut self, i: u32) {
        for k in 0..S - 1 {
            self.columns[k] = self.columns[k + 1];
        }
        self.columns[S - 1] = self.next_column;
        let j = i.wrapping_add(self.shift).wrapping_add(S as u32);
        self.next_column = self.measure.column(self.b, self.clamp(j));
    }

    /// Steady steps `*t ..` in chunks of `S`, while whole chunks fit before
    /// `end`, with the column data in a ring instead of shifting them: at
    /// step `t` cell `k` takes the column in slot `(t + 1 + k) % S` (the
    /// same slot in every lane: a lane's columns run one ahead of the lane
    /// before's, and its row one behind), and the column that cell 0 leaves
    /// is replaced by the next row's last. Unrolled `S` steps at a time,
    /// every slot is a constant, so no column moves; the ring is entered
    /// and left where the phase `(t + 1) % S` is 0, where it is the shifted
    /// layout one row on.
    #[inline(always)]
    unsafe fn ring_steps(&mut self, t: &mut u32, end: u32) {
        const {
            assert!(
                S <= 32,
                "the ring's steps are unrolled for up to 32 cells a lane"
            )
        };
        while *t < end && !(*t + 1).is_multiple_of(S as u32) {
            self.step::<false, false, false>(*t, 0);
            *t += 1;
        }
        if *t + S as u32 > end {
            return;
        }
        // Into the ring: row `i`'s columns in slots `0..S`.
        self.shift_columns(t.wrapping_sub(self.row_lane) + 1);
        while *t + S as u32 <= end {
            // Unrolled in the source: LLVM would leave a loop of 16 steps
            // of 16 cells rolled, and index the ring in local memory.
            macro_rules! phases {
                ($($phase:literal)*) => {
                    $(
                        if $phase < S {
                            self.step::<false, false, true>(*t + $phase, $phase);
                        }
                    )*
                };
            }
            phases!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
            *t += S as u32;
        }
        // Out of it: the shifted layout one row before (its cell 0's
        // column is never read).
        self.next_column = self.columns[S - 1];
        for k in (1..S).rev() {
            self.columns[k] = self.columns[k - 1];
        }
    }

    #[inline(always)]
    unsafe fn cell<const RING: bool>(
        &self,
        row: &M::Row,
        k: usize,
        phase: usize,
        neighbours: Neighbours<T>,
    ) -> T {
        let slot = if RING { (phase + k) % S } else { k };
        self.measure
            .cell(row, &self.columns[slot], self.a, self.b, neighbours)
    }
}

/// The pair's value by the sheared band driver, on every lane: `(below,
/// above)` is the band from [`band_in_warp`].
///
/// # Safety
/// All lanes call it together with the same arguments; `S >= 2`; the band
/// has at most `W::LANES * S` diagonals; the series are non-empty and valid.
#[inline(always)]
pub unsafe fn band_pair<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    (below, above): (usize, usize),
) -> T {
    specialised(a, b, |a, b| {
        band_steps::<T, M, W, S>(warp, measure, a, b, (below, above))
    })
}

/// [`band_pair`] of series whose dimension is known where it is 1.
#[inline(always)]
unsafe fn band_steps<T: Real, M: Recurrence<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    (below, above): (usize, usize),
) -> T {
    let width = below + above + 1;
    let lane = warp.lane();
    let shift = ((lane * S) as u32).wrapping_sub(below as u32);
    let mut band = Band::<T, M, W, S> {
        warp,
        measure,
        a,
        b,
        lane: lane as u32,
        lanes_used: width.div_ceil(S) as u32,
        row_lane: (lane as u32).min(width.div_ceil(S) as u32 - 1),
        rows: a.len as u32,
        shift,
        above: above as u32,
        // Row 0: cell (0, 0) is 0 (sheared cell `below`), the others infinite.
        cells: from_fn(|k| {
            if lane * S + k == below {
                T::ZERO
            } else {
                T::INFINITY
            }
        }),
        spare: from_fn(|k| {
            if lane * S + k >= width {
                T::INFINITY
            } else {
                T::ZERO
            }
        }),
        columns: [measure.column(b, 1); S],
        next_column: measure.column(b, 1),
        next_row: measure.row(a, 1),
    };
    // Row 0's columns, and row 1's last.
    band.columns = from_fn(|k| measure.column(b, band.clamp(shift.wrapping_add(k as u32))));
    band.next_column = measure.column(b, band.clamp(shift.wrapping_add(S as u32)));
    band.sweep(below as u32);
    // Cell (n, m) is sheared cell `m - n + below` of the last row.
    stripe_cell(warp, &band.cells, b.len + below - a.len)
}
