//! Open-ended subsequence alignment on the GPU (docs/algorithms.md,
//! "Subsequence alignment"): the recurrence of `host/search/subsequence.rs`
//! over a chunk of a long series, a warp a *segment* of its columns, and
//! the one kernel parameter [`SubsequenceLaunch`] of `dtw_subsequence<R>`
//! (and its univariate twin `_1d`), `R` query rows a lane.
//!
//! ```text
//! C[0][j] = d(0, j)                                          start j
//! C[i][j] = d(i, j) + min(C[i-1][j-1], C[i-1][j], C[i][j-1])  start of the one [`preferred`] picks
//! ```
//!
//! *A warp's segment.* The query's rows are cut into panels of `LANES * R`
//! rows, a lane holding `R` consecutive rows of a panel in registers; the
//! segment's columns into tiles of `tile` columns. For each tile, panel
//! after panel, the columns flow through the lanes as a wavefront: at step
//! `s` lane `l` computes column `s - l` of the tile for its rows, from its
//! own cells of the column before (the left and diagonal neighbours) and
//! the last row of lane `l - 1`'s stripe, which that lane computed a step
//! earlier and hands on with a shuffle (the cell above). Lane 0 takes the
//! boundary row (panel 0: `up` infinite, diagonal 0 at the column's own
//! start) or the last row of the panel above, which that panel's last lane
//! wrote to a border in memory for each column. A tile of a panel takes
//! `tile + lanes - 1` steps. The column at each tile's end is the tile's
//! *checkpoint*, kept in memory; the cells of the query's last row give
//! the tile's [`Best`] end, the earliest least.
//!
//! *Segments of one chunk at once, exactly.* A segment needs the column
//! before its first, which the segment before computes last. The first
//! pass (`pass` 0) starts every segment but the first from the infinite
//! column (the first from the chunk's true one) and counts every segment
//! as changed. Each later pass reruns the segments whose predecessor's
//! last column changed in the pass before, from that column (handed over
//! through `handoff`, one buffer a pass parity, so that no segment reads
//! what another writes in the same pass), and compares the column at each
//! tile's end with its checkpoint: where they are equal, bit for bit (the
//! costs and the starts), every later column of the segment is too (a
//! column depends only on the one before it and on its sample), so its
//! later checkpoints and tiles' bests stand, and the segment stops. A
//! segment that reaches its end with a different last column marks its
//! successor for the next pass. The host repeats passes until one changes
//! no column with a successor: every segment's stored values are then
//! those of its true input. At most one pass a segment (after pass `t`,
//! segments `0..=t` have their true inputs and never change again);
//! usually the rerun of every segment stops after a tile or two, since
//! paths from before a segment rarely stay the cheapest far into it.
//!
//! Every cost is the CPU's: the squared differences summed over the
//! dimensions in order, plus the predecessor's cost, with no fused
//! multiply-add (the PTX has `sub`, `mul.rn` and `add.rn`), and the
//! predecessor chosen by the same rule with the same comparisons.

use crate::hw::{add_u32, broadcast_u32, Warp};

/// A cell of the recurrence: its accumulated cost, and the series' column
/// (counted from the series' first sample) where its best path starts.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reach {
    pub cost: f64,
    pub start: u64,
}

impl Reach {
    /// A cell of the column before the series' first: the infinite
    /// boundary.
    pub const INFINITE: Reach = Reach {
        cost: f64::INFINITY,
        start: 0,
    };

    /// The same cost, bit for bit, and the same start.
    #[inline(always)]
    pub fn same(self, other: Reach) -> bool {
        self.cost.to_bits() == other.cost.to_bits() && self.start == other.start
    }
}

/// The least cost in the query's last row over a tile's columns, the
/// earliest on a tie: the column where the path ends, where it starts,
/// and its accumulated cost (infinite if every cell of the tile was).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Best {
    pub cost: f64,
    pub end: u64,
    pub start: u64,
}

/// The predecessor the tie rule picks, with its start: the diagonal on a
/// tie with either other, then the cell above, then the one to the left
/// (numpy's `argmin` over tslearn's `[diagonal, up, left]`). Two choices,
/// the first off the chain of `up`s (the diagonal and the left cell are
/// the column before's), compiled to selects rather than branches. The CPU
/// and the GPU both use this one function.
#[inline(always)]
pub fn preferred<S: Copy>(diagonal: (f64, S), up: (f64, S), left: (f64, S)) -> (f64, S) {
    let diagonal_first = diagonal.0 <= left.0;
    let earlier = if diagonal_first { diagonal } else { left };
    let take_up = up.0 < earlier.0 || (up.0 == earlier.0 && !diagonal_first);
    if take_up {
        up
    } else {
        earlier
    }
}

/// `||q - x||^2` over `dims` values, summed in order: the first square,
/// then each next added (the CPU's `search::dtw::cost`).
///
/// # Safety
/// `q` and `x` are valid for `dims >= 1` values.
#[inline(always)]
pub unsafe fn squared_distance(q: *const f64, x: *const f64, dims: usize) -> f64 {
    let t = *q - *x;
    let mut sum = t * t;
    for k in 1..dims {
        let t = *q.add(k) - *x.add(k);
        sum += t * t;
    }
    sum
}

/// The one parameter of the `dtw_subsequence` kernels: a chunk of the
/// series, its segments and tiles, and where their columns are kept.
/// Launched with a warp a segment (`segments` warps in all).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SubsequenceLaunch {
    /// The query, `m x dims`, row-major.
    pub query: *const f64,
    pub m: u64,
    pub dims: u64,
    /// The chunk's samples, `columns x dims`; `first` is the series' index
    /// of the chunk's first sample.
    pub series: *const f64,
    pub columns: u64,
    pub first: u64,
    /// Columns a segment (a multiple of `tile`; the last segment may be
    /// shorter), columns a tile, and segments (`ceil(columns / segment)`).
    pub segment: u64,
    pub tile: u64,
    pub segments: u64,
    /// 0: the first pass over the chunk (every segment, from the infinite
    /// column but the first); `t >= 1`: the `t`-th rerun of the segments
    /// marked in the pass before.
    pub pass: u64,
    /// The column before the chunk (`m` cells): the first segment's input.
    pub carried: *const Reach,
    /// `segment / tile` columns of `m` cells a segment: the column at the
    /// end of each tile (the segment's last tile's slot is not used).
    pub checkpoints: *mut Reach,
    /// The last column of each segment (`segments x m`), the one kept.
    pub ends: *mut Reach,
    /// `2 x segments x m`: the last column of each segment, written in a
    /// pass of parity `p` to half `p`, read by its successor in the next
    /// pass.
    pub handoff: *mut Reach,
    /// `segment / tile` a segment: each tile's best end.
    pub bests: *mut Best,
    /// `2 x segments x tile` cells a segment (null when the query fits one
    /// panel): a panel's last row, for the panel below.
    pub borders: *mut Reach,
    /// `2 x segments` words, zeroed before a chunk's first pass: half `p`
    /// marks, in a pass of parity `p`, the segments to rerun in the next
    /// (each clears its mark when it reads it).
    pub dirty: *mut u32,
    /// A word a pass, zeroed before the chunk's first: the segments of the
    /// pass whose last column changed and that have a successor.
    pub changed: *mut u32,
}

/// Where a panel's column before its tile comes from.
#[derive(Clone, Copy)]
enum Before {
    Infinite,
    At(*const Reach),
}

impl Before {
    /// Cell `row` (infinite past the query's `m` rows).
    ///
    /// # Safety
    /// `At` points to `m` cells.
    #[inline(always)]
    unsafe fn cell(self, row: usize, m: usize) -> Reach {
        match self {
            Before::At(column) if row < m => *column.add(row),
            _ => Reach::INFINITE,
        }
    }
}

/// A tile of a segment: its place, its columns within the chunk
/// (`c0..c1`), and where its last column goes.
#[derive(Clone, Copy)]
struct Tile {
    /// Its index among the launch's tiles (segment `b`, tile `k`: `b *
    /// (segment / tile) + k`), for its best and checkpoint.
    slot: usize,
    c0: usize,
    c1: usize,
    before: Before,
    /// Its checkpoint, or the segment's end and its handoff.
    after: *mut Reach,
    handoff: *mut Reach,
}

/// `R` consecutive rows of the query held by one lane: their cells of the
/// current column, and their query samples (kept in registers where the
/// series is univariate).
struct Stripe<const R: usize> {
    cost: [f64; R],
    start: [u64; R],
    /// The query row of its first cell.
    first_row: usize,
    q: [f64; R],
}

impl<const R: usize> Stripe<R> {
    /// Column `c` of the stripe's rows (sample `x`, `dims` values), from
    /// the row above's cells at `c` (`up`) and at `c - 1` (`diagonal`);
    /// returns the stripe's last row's new cell.
    ///
    /// # Safety
    /// `x` valid for `dims` values, `query` for `m x dims`.
    #[inline(always)]
    unsafe fn advance<const UNIVARIATE: bool>(
        &mut self,
        (query, m, dims): (*const f64, usize, usize),
        x: *const f64,
        mut up: Reach,
        mut diagonal: Reach,
    ) -> Reach {
        for i in 0..R {
            let left = Reach {
                cost: self.cost[i],
                start: self.start[i],
            };
            let (reached, start) = preferred(
                (diagonal.cost, diagonal.start),
                (up.cost, up.start),
                (left.cost, left.start),
            );
            let d = if UNIVARIATE {
                let t = self.q[i] - *x;
                t * t
            } else {
                // Rows past the query compute copies of its last, unread.
                let row = (self.first_row + i).min(m - 1);
                squared_distance(query.add(row * dims), x, dims)
            };
            let cost = d + reached;
            self.cost[i] = cost;
            self.start[i] = start;
            diagonal = left;
            up = Reach { cost, start };
        }
        up
    }

    /// Cell `i` of the stripe, chosen by selects (an index into the arrays
    /// would put them in local memory).
    #[inline(always)]
    fn cell(&self, index: usize) -> Reach {
        let mut cell = Reach {
            cost: self.cost[0],
            start: self.start[0],
        };
        for i in 1..R {
            if i == index {
                cell = Reach {
                    cost: self.cost[i],
                    start: self.start[i],
                };
            }
        }
        cell
    }
}

/// Whether any lane of the warp gives `true`.
///
/// # Safety
/// All lanes call it together.
#[inline(always)]
unsafe fn any_lane<W: Warp>(warp: &W, mine: bool) -> bool {
    let mut any = false;
    for lane in 0..W::LANES {
        any |= broadcast_u32(warp, u32::from(mine), lane) != 0;
    }
    any
}

/// `value` handed from each lane to the next (lane 0 gets its own).
///
/// # Safety
/// All lanes call it together.
#[inline(always)]
unsafe fn shuffle_reach_up<W: Warp>(warp: &W, value: Reach) -> Reach {
    Reach {
        cost: warp.shuffle_up(value.cost),
        start: warp.shuffle_up(f64::from_bits(value.start)).to_bits(),
    }
}

impl SubsequenceLaunch {
    /// Segment `segment`'s part of the pass, on `warp` (`R` rows a lane;
    /// the series univariate where `UNIVARIATE`): nothing in a rerun
    /// unless the segment is marked; else its tiles, until one ends in the
    /// column its checkpoint holds (in a rerun), or to the segment's end,
    /// which then marks the next segment and counts in `changed`.
    ///
    /// # Safety
    /// All lanes of the warp call it together with the same `segment`; the
    /// pointers are valid as documented (the query and every buffer sized
    /// for `m`, `segments`, `segment` and `tile`); no other warp runs the
    /// same segment at once; with `UNIVARIATE`, `dims == 1`.
    #[inline(always)]
    pub unsafe fn run_segment<W: Warp, const R: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        segment: u64,
    ) {
        if segment >= self.segments {
            return;
        }
        let b = segment as usize;
        let (m, segments) = (self.m as usize, self.segments as usize);
        let parity = (self.pass % 2) as usize;
        let rerun = self.pass > 0;
        if rerun {
            // Lane 0 reads the mark and clears it, after every lane has it.
            let marks = self.dirty.add((1 - parity) * segments + b);
            let mine = if warp.lane() == 0 { *marks } else { 0 };
            if broadcast_u32(warp, mine, 0) == 0 {
                return;
            }
            if warp.lane() == 0 {
                *marks = 0;
            }
        }
        let input = if rerun {
            Before::At(self.handoff.add(((1 - parity) * segments + b - 1) * m))
        } else if b == 0 {
            Before::At(self.carried)
        } else {
            Before::Infinite
        };
        let (segment_len, tile_len) = (self.segment as usize, self.tile as usize);
        let start = b * segment_len;
        let end = (start + segment_len).min(self.columns as usize);
        let tiles = (end - start).div_ceil(tile_len);
        let mut before = input;
        for k in 0..tiles {
            let slot = b * (segment_len / tile_len) + k;
            let last = k + 1 == tiles;
            let tile = Tile {
                slot,
                c0: start + k * tile_len,
                c1: (start + (k + 1) * tile_len).min(end),
                before,
                after: if last {
                    self.ends.add(b * m)
                } else {
                    self.checkpoints.add(slot * m)
                },
                handoff: if last {
                    self.handoff.add((parity * segments + b) * m)
                } else {
                    core::ptr::null_mut()
                },
            };
            let differs = self.tile::<W, R, UNIVARIATE>(warp, &tile, rerun);
            if !any_lane(warp, differs) {
                // The rerun joined the stored columns: the rest stands.
                return;
            }
            before = Before::At(tile.after);
        }
        if warp.lane() == 0 && b + 1 < segments {
            *self.dirty.add(parity * segments + b + 1) = 1;
            add_u32(self.changed.add(self.pass as usize), 1);
        }
    }

    /// One tile of the segment, panel after panel; whether this lane's
    /// cells of its last column differ from those stored (always, unless
    /// `compare`).
    ///
    /// # Safety
    /// As [`SubsequenceLaunch::run_segment`].
    #[inline(always)]
    unsafe fn tile<W: Warp, const R: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        tile: &Tile,
        compare: bool,
    ) -> bool {
        let m = self.m as usize;
        let panels = m.div_ceil(W::LANES * R);
        let mut differs = !compare;
        for p in 0..panels {
            differs |= self.panel::<W, R, UNIVARIATE>(warp, tile, p, compare);
            // The panel's cells and border written, for the lanes of the
            // next panel and tile.
            warp.sync();
        }
        differs
    }

    /// Panel `p` of `tile`: the wavefront over the tile's columns, this
    /// lane's cells of the last column compared with the stored ones (if
    /// `compare`) and stored; whether they differed.
    ///
    /// # Safety
    /// As [`SubsequenceLaunch::run_segment`].
    #[inline(always)]
    unsafe fn panel<W: Warp, const R: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        tile: &Tile,
        p: usize,
        compare: bool,
    ) -> bool {
        let m = self.m as usize;
        let lane = warp.lane();
        let panel_rows = W::LANES * R;
        let rows = p * panel_rows + lane * R;
        let mut stripe = Stripe::<R> {
            cost: [0.0; R],
            start: [0; R],
            first_row: rows,
            q: [0.0; R],
        };
        for i in 0..R {
            let cell = tile.before.cell(rows + i, m);
            stripe.cost[i] = cell.cost;
            stripe.start[i] = cell.start;
            if UNIVARIATE {
                stripe.q[i] = *self.query.add((rows + i).min(m - 1));
            }
        }
        let best = self.sweep::<W, R, UNIVARIATE>(warp, tile, p, &mut stripe);
        // The lane that holds the query's last row, in the last panel.
        if p + 1 == m.div_ceil(panel_rows) && lane == (m - 1 - p * panel_rows) / R {
            *self.bests.add(tile.slot) = best;
        }
        let mut differs = false;
        for i in 0..R {
            let row = rows + i;
            if row >= m {
                break;
            }
            let cell = Reach {
                cost: stripe.cost[i],
                start: stripe.start[i],
            };
            if compare {
                differs |= !cell.same(*tile.after.add(row));
            }
            *tile.after.add(row) = cell;
            if !tile.handoff.is_null() {
                *tile.handoff.add(row) = cell;
            }
        }
        differs
    }

    /// The wavefront of panel `p` over `tile`'s columns, each lane's
    /// stripe loaded with the column before; returns the best end of the
    /// query's last row over the tile (meaningful on the lane that holds
    /// that row, in the last panel).
    ///
    /// # Safety
    /// As [`SubsequenceLaunch::run_segment`].
    #[inline(always)]
    unsafe fn sweep<W: Warp, const R: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        tile: &Tile,
        p: usize,
        stripe: &mut Stripe<R>,
    ) -> Best {
        let (m, dims) = (self.m as usize, self.dims as usize);
        let dims = if UNIVARIATE { 1 } else { dims };
        let lane = warp.lane();
        let panel_rows = W::LANES * R;
        let panels = m.div_ceil(panel_rows);
        let rows = stripe.first_row;
        // The lanes that hold rows of the query: the wavefront's depth.
        let lanes = (m - p * panel_rows).div_ceil(R).min(W::LANES);
        let len = tile.c1 - tile.c0;
        // Panel `p` reads the border panel `p - 1` wrote, and writes its
        // own to the other half (the borders exist where there are panels).
        let (border_in, border_out) = if panels > 1 {
            let segment = tile.slot / (self.segment / self.tile) as usize;
            let half = |h: usize| {
                let segments = self.segments as usize;
                self.borders
                    .add((h * segments + segment) * self.tile as usize)
            };
            (half((p + 1) % 2), half(p % 2))
        } else {
            (core::ptr::null_mut(), core::ptr::null_mut())
        };
        let writes_border = p + 1 < panels && lane == W::LANES - 1;
        let tracks = p + 1 == panels && lane == (m - 1 - p * panel_rows) / R;
        let last_index = (m - 1) % R;
        let mut best = Best {
            cost: f64::INFINITY,
            end: self.first + tile.c0 as u64,
            start: 0,
        };
        // The row above the stripe at the column before this lane's.
        let mut above = if rows > 0 {
            tile.before.cell(rows - 1, m)
        } else {
            Reach::INFINITE
        };
        let mut bottom = Reach::INFINITE;
        for s in 0..len + lanes - 1 {
            let handed = shuffle_reach_up(warp, bottom);
            if lane > s || s - lane >= len || lane >= lanes {
                continue;
            }
            let at = s - lane;
            let c = tile.c0 + at;
            let column = self.first + c as u64;
            let (up, diagonal) = if rows == 0 {
                (
                    Reach::INFINITE,
                    Reach {
                        cost: 0.0,
                        start: column,
                    },
                )
            } else if lane == 0 {
                (*border_in.add(at), above)
            } else {
                (handed, above)
            };
            above = up;
            let x = self.series.add(c * dims);
            bottom = stripe.advance::<UNIVARIATE>((self.query, m, dims), x, up, diagonal);
            if writes_border {
                *border_out.add(at) = bottom;
            }
            if tracks {
                let cell = stripe.cell(last_index);
                // Strictly less: the earliest end on a tie.
                if cell.cost < best.cost {
                    best = Best {
                        cost: cell.cost,
                        end: column,
                        start: cell.start,
                    };
                }
            }
        }
        best
    }
}
