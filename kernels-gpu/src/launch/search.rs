//! The subsequence search's launch (docs/algorithms.md, "Search"): one
//! chunk of a long series on the device, the query with its envelope, and
//! the three kernels that share this one parameter struct:
//!
//! - `dtw_search_envelope_f64`, a thread a value: the chunk's envelope
//!   (min and max over `[p - r, p + r]`, clipped to the chunk);
//! - `dtw_search_bounds_f64`, a thread a start: LB_Kim, LB_Keogh on the
//!   query's envelope and LB_Keogh on the chunk's; a start that none of
//!   them prunes at `cutoff` is appended to the survivors' list with its
//!   three bounds (a slot taken by an atomic count, so in no particular
//!   order), and a start pruned is counted for the first bound that prunes
//!   it (the [`tally`](SearchLaunch::tally));
//! - `dtw_search_dtw_f64`, a thread a candidate (a start the host kept):
//!   the banded DTW, abandoned once its partial cost plus the cumulative
//!   tail of the larger LB_Keogh passes `cutoff`.
//!
//! Every value is computed as the CPU search computes it (`host/search`):
//! the statistics of a window in two passes summed in order (a window
//! whose values are all equal normalises to zeros), `(x - mean) / std`,
//! the DTW's cells as `crate::oracle::dtw`'s, each a sum of squares over
//! the dimensions in order plus the least neighbour, with no fused
//! multiply-add (the compiler contracts none: the PTX has `mul.rn` and
//! `add.rn`). A DTW that finishes is the CPU's cost bit for bit.

use crate::hw::add_u32;

/// Bounds written per start: LB_Kim, LB_Keogh on the query's envelope,
/// LB_Keogh on the data's envelope, in that order.
pub const BOUNDS_PER_START: usize = 3;

/// What a DTW the kernel abandoned writes as its cost (costs are >= 0).
pub const ABANDONED: f64 = -1.0;

/// The starts pruned by each bound are counted in this many slots (a
/// start's slot: its index modulo this), so that the atomic additions of
/// adjacent threads go to distinct words.
pub const TALLY_SLOTS: usize = 256;

/// Words of the bounds kernel's tally: the survivors' count, then, for
/// each bound in order, [`TALLY_SLOTS`] counts of the starts it pruned.
pub const TALLY_WORDS: usize = 1 + BOUNDS_PER_START * TALLY_SLOTS;

/// The first of a start's `bounds` (LB_Kim, LB_Keogh on the query's
/// envelope, on the data's) above `cutoff`: the one that prunes the start
/// and is credited with it; `None` if none is (the start survives). The
/// host credits a survivor that a later cutoff prunes the same way.
#[inline(always)]
pub fn pruned_by(bounds: [f64; BOUNDS_PER_START], cutoff: f64) -> Option<usize> {
    if bounds[0] > cutoff {
        Some(0)
    } else if bounds[1] > cutoff {
        Some(1)
    } else if bounds[2] > cutoff {
        Some(2)
    } else {
        None
    }
}

/// A tally the bounds kernel wrote ([`TALLY_WORDS`] words): the number of
/// survivors, and the starts each bound pruned.
pub fn read_tally(tally: &[u32]) -> (usize, [u64; BOUNDS_PER_START]) {
    let mut pruned = [0; BOUNDS_PER_START];
    for (b, count) in pruned.iter_mut().enumerate() {
        let slots = &tally[1 + b * TALLY_SLOTS..1 + (b + 1) * TALLY_SLOTS];
        *count = slots.iter().map(|&c| u64::from(c)).sum();
    }
    (tally[0] as usize, pruned)
}

/// The search's one kernel parameter.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SearchLaunch {
    /// The chunk's samples, `rows x dims`, row-major.
    pub series: *const f64,
    pub rows: u64,
    pub dims: u64,
    /// The query's length and the band's radius.
    pub m: u64,
    pub radius: u64,
    /// 1: z-normalise each window; 0: use the values as they are.
    pub znorm: u64,
    /// The query (normalised as asked) and its envelope, `m x dims` each.
    pub query: *const f64,
    pub query_lower: *const f64,
    pub query_upper: *const f64,
    /// The chunk's envelope, `rows x dims` each (written by the envelope
    /// kernel, read by the others).
    pub lower: *mut f64,
    pub upper: *mut f64,
    /// The chunk's starts: `rows - m + 1`.
    pub starts: u64,
    /// The survivors of the bounds kernel: their starts (`kept`, room for
    /// `starts`) and their bounds (`BOUNDS_PER_START` values a survivor,
    /// in `kept`'s order), `tally[0]` of them; `tally` ([`TALLY_WORDS`]
    /// words, zeroed before the launch) also counts the starts pruned by
    /// each bound.
    pub kept: *mut u32,
    pub bounds: *mut f64,
    pub tally: *mut u32,
    /// The cutoff the bounds kernel prunes at, and the DTW kernel abandons
    /// at.
    pub cutoff: f64,
    /// The DTW kernel's candidates (starts within the chunk), their count,
    /// its scratch
    /// ([`SearchLaunch::scratch_values`] a candidate, interleaved:
    /// value `e` of candidate `t` at `e * candidate_count + t`) and its
    /// output (a cost a candidate, or [`ABANDONED`]).
    pub candidates: *const u32,
    pub candidate_count: u64,
    pub scratch: *mut f64,
    pub costs: *mut f64,
}

/// How one dimension of a window is normalised.
#[derive(Clone, Copy)]
struct Norm {
    raw: bool,
    mean: f64,
    std: f64,
}

impl Norm {
    /// `(v - mean) / std`, 0 where the std is 0, `v` without normalisation.
    #[inline(always)]
    fn apply(self, v: f64) -> f64 {
        if self.raw {
            v
        } else if self.std > 0.0 {
            (v - self.mean) / self.std
        } else {
            0.0
        }
    }
}

/// The squared distance from `v` to `[lo, up]`: a term of LB_Keogh, in
/// the search's and the k-NN's kernels and in the CPU's cascade alike.
#[inline(always)]
pub fn outside(v: f64, lo: f64, up: f64) -> f64 {
    if v > up {
        (v - up) * (v - up)
    } else if v < lo {
        (v - lo) * (v - lo)
    } else {
        0.0
    }
}

/// The square root, correctly rounded (`sqrt.rn.f64` on the GPU).
#[inline(always)]
fn sqrt(v: f64) -> f64 {
    <f64 as crate::Real>::sqrt(v)
}

impl SearchLaunch {
    /// Scratch values a DTW candidate needs: two rows and the tail
    /// (`m + 1` each) and the normalised window (`m * dims`).
    pub const fn scratch_values(m: usize, dims: usize) -> usize {
        3 * (m + 1) + m * dims
    }

    /// Value `k` of sample `p` of the chunk.
    ///
    /// # Safety
    /// `p < rows`, `k < dims`, `series` valid for the chunk.
    #[inline(always)]
    unsafe fn x(&self, p: usize, k: usize) -> f64 {
        *self.series.add(p * self.dims as usize + k)
    }

    /// How dimension `k` of the window at `s` is normalised: as the CPU's
    /// `normalise_exact` (two passes, summed in order; all values equal:
    /// zeros).
    ///
    /// # Safety
    /// `s < starts`, `k < dims`, `series` valid.
    #[inline(always)]
    unsafe fn norm(&self, s: usize, k: usize) -> Norm {
        if self.znorm == 0 {
            return Norm {
                raw: true,
                mean: 0.0,
                std: 1.0,
            };
        }
        let m = self.m as usize;
        let first = self.x(s, k);
        let mut flat = true;
        let mut sum = 0.0;
        for p in s..s + m {
            let v = self.x(p, k);
            flat &= v == first;
            sum += v;
        }
        if flat {
            return Norm {
                raw: false,
                mean: 0.0,
                std: 0.0,
            };
        }
        let mean = sum / m as f64;
        let mut squares = 0.0;
        for p in s..s + m {
            let d = self.x(p, k) - mean;
            squares += d * d;
        }
        Norm {
            raw: false,
            mean,
            std: sqrt(squares / m as f64),
        }
    }

    /// The envelope kernel's thread `index` (a value of the chunk).
    ///
    /// # Safety
    /// The pointers valid as documented; threads write distinct values.
    #[inline(always)]
    pub unsafe fn search_envelope(&self, index: u64) {
        let d = self.dims as usize;
        if index >= self.rows * self.dims {
            return;
        }
        let (p, k) = (index as usize / d, index as usize % d);
        let r = self.radius as usize;
        let first = p.saturating_sub(r);
        let last = (p + r).min(self.rows as usize - 1);
        let (mut lo, mut up) = (self.x(first, k), self.x(first, k));
        for q in first + 1..=last {
            let v = self.x(q, k);
            lo = lo.min(v);
            up = up.max(v);
        }
        *self.lower.add(index as usize) = lo;
        *self.upper.add(index as usize) = up;
    }

    /// The bounds kernel's thread `index` (a start of the chunk): its
    /// three bounds; the start appended to the survivors if none of them
    /// passes `cutoff`, else counted for the first that does.
    ///
    /// # Safety
    /// The pointers valid as documented, the envelope written, the tally
    /// zeroed before the launch.
    #[inline(always)]
    pub unsafe fn search_bounds(&self, index: u64) {
        if index >= self.starts {
            return;
        }
        let s = index as usize;
        let bounds = self.bounds_of(s);
        match pruned_by(bounds, self.cutoff) {
            Some(b) => {
                let slot = self.tally.add(1 + b * TALLY_SLOTS + s % TALLY_SLOTS);
                add_u32(slot, 1);
            }
            None => {
                // A distinct slot of the list: at most `starts` survivors.
                let at = add_u32(self.tally, 1) as usize;
                *self.kept.add(at) = s as u32;
                let out = self.bounds.add(at * BOUNDS_PER_START);
                for (i, &bound) in bounds.iter().enumerate() {
                    *out.add(i) = bound;
                }
            }
        }
    }

    /// The three bounds of the start `s`, dimension by dimension.
    ///
    /// # Safety
    /// `s < starts`, the pointers valid as documented, the envelope
    /// written.
    #[inline(always)]
    unsafe fn bounds_of(&self, s: usize) -> [f64; BOUNDS_PER_START] {
        let (m, d) = (self.m as usize, self.dims as usize);
        let (mut kim, mut on_query, mut on_data) = (0.0, 0.0, 0.0);
        for k in 0..d {
            let norm = self.norm(s, k);
            let head = norm.apply(self.x(s, k)) - *self.query.add(k);
            let last = norm.apply(self.x(s + m - 1, k)) - *self.query.add((m - 1) * d + k);
            kim += head * head + last * last;
            for i in 0..m {
                let at = i * d + k;
                let z = norm.apply(self.x(s + i, k));
                on_query += outside(z, *self.query_lower.add(at), *self.query_upper.add(at));
                let data = (s + i) * d + k;
                let lo = norm.apply(*self.lower.add(data));
                let up = norm.apply(*self.upper.add(data));
                on_data += outside(*self.query.add(at), lo, up);
            }
        }
        [kim, on_query, on_data]
    }

    /// The DTW kernel's thread `index` (a candidate): its window
    /// normalised, the tail of its larger LB_Keogh, then its DTW.
    ///
    /// # Safety
    /// The pointers valid as documented, the envelope written, the
    /// candidates starts of the chunk.
    #[inline(always)]
    pub unsafe fn search_dtw(&self, index: u64) {
        if index >= self.candidate_count {
            return;
        }
        let t = index as usize;
        let s = *self.candidates.add(t) as usize;
        let (m, d) = (self.m as usize, self.dims as usize);
        let slots = Slots {
            base: self.scratch.add(t),
            stride: self.candidate_count as usize,
            m,
        };
        self.prepare(s, &slots);
        let cost = self.dtw(&slots, d);
        *self.costs.add(t) = cost;
    }

    /// Writes the window at `s` normalised into the scratch, and the tail
    /// of the larger LB_Keogh (`tail[p]`: the terms of positions `p..m`).
    ///
    /// # Safety
    /// As [`SearchLaunch::search_dtw`].
    #[inline(always)]
    unsafe fn prepare(&self, s: usize, slots: &Slots) {
        let (m, d) = (self.m as usize, self.dims as usize);
        // The terms on the query's envelope in the tail's slots, those on
        // the data's in the second row's.
        for i in 0..=m {
            slots.set(TAIL, i, 0.0);
            slots.set(ROW_B, i, 0.0);
        }
        for k in 0..d {
            let norm = self.norm(s, k);
            for i in 0..m {
                let at = i * d + k;
                let z = norm.apply(self.x(s + i, k));
                slots.set(WINDOW, at, z);
                let on_query = outside(z, *self.query_lower.add(at), *self.query_upper.add(at));
                slots.set(TAIL, i, slots.get(TAIL, i) + on_query);
                let data = (s + i) * d + k;
                let lo = norm.apply(*self.lower.add(data));
                let up = norm.apply(*self.upper.add(data));
                let on_data = outside(*self.query.add(at), lo, up);
                slots.set(ROW_B, i, slots.get(ROW_B, i) + on_data);
            }
        }
        let (mut on_query, mut on_data) = (0.0, 0.0);
        for i in 0..m {
            on_query += slots.get(TAIL, i);
            on_data += slots.get(ROW_B, i);
        }
        let terms = if on_query > on_data { TAIL } else { ROW_B };
        slots.set(TAIL, m, 0.0);
        for i in (0..m).rev() {
            let sum = slots.get(TAIL, i + 1) + slots.get(terms, i);
            slots.set(TAIL, i, sum);
        }
    }

    /// The banded DTW of the normalised window (rows) and the query
    /// (columns), as the CPU's `dtw_abandoning`: the cost, or
    /// [`ABANDONED`].
    ///
    /// # Safety
    /// As [`SearchLaunch::search_dtw`], the scratch prepared.
    #[inline(always)]
    unsafe fn dtw(&self, slots: &Slots, d: usize) -> f64 {
        let (m, r) = (self.m as usize, self.radius as usize);
        for j in 0..=m {
            slots.set(ROW_A, j, f64::INFINITY);
            slots.set(ROW_B, j, f64::INFINITY);
        }
        slots.set(ROW_A, 0, 0.0);
        let (mut prev, mut cur) = (ROW_A, ROW_B);
        for i in 1..=m {
            let lo = i.saturating_sub(r).max(1);
            let hi = (i + r).min(m);
            slots.set(cur, lo - 1, f64::INFINITY);
            let mut least = f64::INFINITY;
            let mut left = f64::INFINITY;
            for j in lo..=hi {
                let best = slots.get(prev, j - 1).min(slots.get(prev, j)).min(left);
                let a = (i - 1) * d;
                let b = (j - 1) * d;
                let t = slots.get(WINDOW, a) - *self.query.add(b);
                let mut sum = t * t;
                for k in 1..d {
                    let t = slots.get(WINDOW, a + k) - *self.query.add(b + k);
                    sum += t * t;
                }
                let value = sum + best;
                slots.set(cur, j, value);
                left = value;
                least = least.min(value);
            }
            if i < m && least + slots.get(TAIL, (i + r).min(m)) > self.cutoff {
                return ABANDONED;
            }
            core::mem::swap(&mut prev, &mut cur);
        }
        slots.get(prev, m)
    }
}

/// The scratch's parts, in units of `m + 1` values: two rows, the tail,
/// then the window.
const ROW_A: usize = 0;
const ROW_B: usize = 1;
const TAIL: usize = 2;
const WINDOW: usize = 3;

/// One candidate's scratch, interleaved with the other candidates' so that
/// a warp's threads, which run the same loops, read consecutive addresses.
struct Slots {
    base: *mut f64,
    stride: usize,
    m: usize,
}

impl Slots {
    /// # Safety
    /// `part` and `i` within the candidate's scratch.
    #[inline(always)]
    unsafe fn get(&self, part: usize, i: usize) -> f64 {
        *self.base.add((part * (self.m + 1) + i) * self.stride)
    }

    /// # Safety
    /// As [`Slots::get`].
    #[inline(always)]
    unsafe fn set(&self, part: usize, i: usize, value: f64) {
        *self.base.add((part * (self.m + 1) + i) * self.stride) = value;
    }
}
