//! The k nearest neighbours under banded DTW with lower bounds on the GPU
//! (docs/algorithms.md, "Nearest neighbours"): a block of queries against
//! a chunk of a resident database, and the kernels of the cascade before
//! the distances, in both precisions:
//!
//! - `dtw_knn_envelope_<t>`, a thread a value of the chunk: each database
//!   series' envelope (min and max over `[t - r, t + r]`, clipped to the
//!   series), where every series has one length ([`KnnLaunch::length`]);
//! - `dtw_knn_bounds_<t>`, a thread a (query, series) pair: LB_Kim, and for
//!   pairs of one length LB_Keogh on the query's envelope and on the
//!   series'; a pair that none of them prunes at its query's cutoff is
//!   appended to the survivors' list with its three bounds (an atomic
//!   count, so in no particular order), a pruned one counted for the first
//!   bound that prunes it (the tally of `launch::search`);
//! - `dtw_knn_gather_<t>`, a thread a sample: series of a set copied, in a
//!   given order, into a batch of their own ([`GatherLaunch`]), on which
//!   the host runs the brute force's own pair kernel, so that every
//!   distance that can enter the result is the brute force's.
//!
//! The bounds are computed in `f64` on the values (exact in `f64` for
//! `f32` sets), as the CPU's cascade computes them (`host/search/cascade.rs`),
//! with no fused multiply-add.

use crate::hw::add_u32;
use crate::launch::search::{outside, pruned_by, BOUNDS_PER_START, TALLY_SLOTS};
use crate::{Real, SetRef};

/// The bounds' kernels' one parameter: a block of queries, a chunk of the
/// database.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KnnLaunch<T> {
    /// The whole database; the chunk is series `first .. first + count`.
    pub database: SetRef<T>,
    pub first: u64,
    pub count: u64,
    pub dims: u64,
    /// The band's radius.
    pub radius: u64,
    /// Every database series' length when they all have one (the
    /// envelopes then apply to pairs of that length); 0 when they differ
    /// (LB_Kim only).
    pub length: u64,
    /// The block's queries in `f64` (`dims` values a sample), series `q`
    /// the samples `query_offsets[q] .. query_offsets[q + 1]`, and their
    /// envelopes in the same layout; `query_count` of them.
    pub queries: *const f64,
    pub query_offsets: *const u64,
    pub query_lower: *const f64,
    pub query_upper: *const f64,
    pub query_count: u64,
    /// The chunk's envelopes, `count x length x dims` each (written by the
    /// envelope kernel, read by the bounds kernel).
    pub lower: *mut T,
    pub upper: *mut T,
    /// Each query's cutoff: a pair whose bound passes it is pruned.
    pub cutoffs: *const f64,
    /// The survivors: pair `q * count + j` (query `q` of the block, series
    /// `first + j`), room for every pair of the launch; their bounds
    /// (`BOUNDS_PER_START` a survivor, in `kept`'s order); `tally[0]` of
    /// them; `tally` (`launch::search::TALLY_WORDS`, zeroed before the
    /// launch) also counts the pairs pruned by each bound.
    pub kept: *mut u32,
    pub bounds: *mut f64,
    pub tally: *mut u32,
}

impl<T: Real> KnnLaunch<T> {
    /// Pairs of the launch: the block's queries times the chunk's series.
    pub fn pairs(&self) -> u64 {
        self.query_count * self.count
    }

    /// The envelope kernel's thread `index` (a value of the chunk).
    ///
    /// # Safety
    /// The pointers valid as documented; `length` is every series' length.
    #[inline(always)]
    pub unsafe fn knn_envelope(&self, index: u64) {
        let (l, d) = (self.length as usize, self.dims as usize);
        if l == 0 || index >= self.count * (l * d) as u64 {
            return;
        }
        let at = index as usize;
        let (j, rest) = (at / (l * d), at % (l * d));
        let (t, k) = (rest / d, rest % d);
        let c = self.database.series(self.first as usize + j);
        let r = self.radius as usize;
        let (from, to) = (t.saturating_sub(r), (t + r).min(l - 1));
        let (mut lo, mut up) = (c.value(from, k), c.value(from, k));
        for u in from + 1..=to {
            let v = c.value(u, k);
            lo = lo.min(v);
            up = up.max(v);
        }
        *self.lower.add(at) = lo;
        *self.upper.add(at) = up;
    }

    /// The bounds kernel's thread `index` (a pair): its three bounds; the
    /// pair appended to the survivors if none passes its query's cutoff,
    /// else counted for the first that does.
    ///
    /// # Safety
    /// The pointers valid as documented, the envelopes written (where
    /// `length` is not 0), the tally zeroed before the launch.
    #[inline(always)]
    pub unsafe fn knn_bounds(&self, index: u64) {
        if index >= self.pairs() {
            return;
        }
        let (q, j) = ((index / self.count) as usize, (index % self.count) as usize);
        let bounds = self.bounds_of(q, j);
        match pruned_by(bounds, *self.cutoffs.add(q)) {
            Some(b) => {
                let slot = self.tally.add(1 + b * TALLY_SLOTS + j % TALLY_SLOTS);
                add_u32(slot, 1);
            }
            None => {
                let at = add_u32(self.tally, 1) as usize;
                *self.kept.add(at) = index as u32;
                let out = self.bounds.add(at * BOUNDS_PER_START);
                for (i, &bound) in bounds.iter().enumerate() {
                    *out.add(i) = bound;
                }
            }
        }
    }

    /// LB_Kim, LB_Keogh on query `q`'s envelope and on series `first + j`'s
    /// (both 0 for pairs of different lengths or without envelopes).
    ///
    /// # Safety
    /// `q < query_count`, `j < count`, the pointers valid as documented.
    #[inline(always)]
    pub unsafe fn bounds_of(&self, q: usize, j: usize) -> [f64; BOUNDS_PER_START] {
        let d = self.dims as usize;
        let from = *self.query_offsets.add(q) as usize;
        let n = *self.query_offsets.add(q + 1) as usize - from;
        let query = self.queries.add(from * d);
        let c = self.database.series(self.first as usize + j);
        let m = c.len;
        let cost = |a: usize, b: usize| -> f64 {
            let mut sum = 0.0;
            for k in 0..d {
                let t = *query.add(a * d + k) - c.value(b, k).to_f64();
                sum += t * t;
            }
            sum
        };
        let kim = if n == 1 && m == 1 {
            cost(0, 0)
        } else {
            cost(0, 0) + cost(n - 1, m - 1)
        };
        let (mut on_query, mut on_data) = (0.0, 0.0);
        if self.length as usize == m && n == m {
            let (lower, upper) = (
                self.query_lower.add(from * d),
                self.query_upper.add(from * d),
            );
            let own = j * m * d;
            for at in 0..m * d {
                let (t, k) = (at / d, at % d);
                let v = c.value(t, k).to_f64();
                on_query += outside(v, *lower.add(at), *upper.add(at));
                let lo = (*self.lower.add(own + at)).to_f64();
                let up = (*self.upper.add(own + at)).to_f64();
                on_data += outside(*query.add(at), lo, up);
            }
        }
        [kim, on_query, on_data]
    }
}

/// The gather kernel's parameter: series `indices[p]` of `source`, for
/// `p < count`, copied to samples `offsets[p] .. offsets[p + 1]` of `out`
/// (`dims` values a sample), a thread a sample of the longest.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GatherLaunch<T> {
    pub source: SetRef<T>,
    pub indices: *const u32,
    pub count: u64,
    /// `count + 1` sample offsets of the copies in `out`.
    pub offsets: *const u64,
    /// At least the longest copy.
    pub max_len: u64,
    pub out: *mut T,
}

impl<T: Real> GatherLaunch<T> {
    /// The gather kernel's thread `index`: sample `index % max_len` of copy
    /// `index / max_len`, if it has one.
    ///
    /// # Safety
    /// The pointers valid as documented, the offsets those of the sources'
    /// lengths; threads write distinct values.
    #[inline(always)]
    pub unsafe fn knn_gather(&self, index: u64) {
        if index >= self.count * self.max_len {
            return;
        }
        let (p, t) = (
            (index / self.max_len) as usize,
            (index % self.max_len) as usize,
        );
        let to = *self.offsets.add(p) as usize;
        let len = *self.offsets.add(p + 1) as usize - to;
        if t >= len {
            return;
        }
        let series = self.source.series(*self.indices.add(p) as usize);
        let d = self.source.dims as usize;
        for k in 0..d {
            *self.out.add((to + t) * d + k) = series.value(t, k);
        }
    }
}
