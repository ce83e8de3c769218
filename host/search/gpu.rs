//! The search on the GPU (docs/algorithms.md, "Search"): the series in
//! chunks of starts (each read with the `m - 1` samples after them, so
//! that consecutive chunks overlap by `m - 1` samples), and per chunk two
//! phases:
//!
//! 1. the GPU computes every start's three bounds (LB_Kim, LB_Keogh on the
//!    query's envelope, on the data's), each from the window's exact
//!    two-pass statistics, prunes the starts with a bound above the
//!    cutoff of the threshold now (counting each for the first such
//!    bound) and compacts the others into a list, which alone comes back;
//!    the host takes it by the largest bound, lowest first;
//! 2. the survivors' DTWs run on the GPU in launches of growing size, the
//!    lowest bounds first, each launch abandoning at the cutoff of the
//!    threshold when it starts; the host offers the costs to the same
//!    witness [`Keeper`] as the CPU's threads, which tightens the
//!    threshold between launches, and stops at the first survivor whose
//!    bound passes the cutoff.
//!
//! A helper thread reads the next chunk (and checks its values) while the
//! GPU and the host search the one before (`super::chunk_reader`).
//!
//! The threshold is only ever the host's, read between launches: no
//! thread of the GPU changes it, so nothing races. A DTW that finishes on
//! the GPU is the CPU's cost bit for bit (`timewarp_kernels::launch::search`),
//! and the matches are chosen from the kept costs as the CPU chooses them.

use super::bounds::sliding_envelope;
use super::chunk_reader::read_ahead;
use super::scan::Cutoff;
use super::select::{choose, sort, Keeper};
use super::{Match, Plan, PruningStats, SearchResult, SeriesSource};
use crate::gpu::{search_next_batch, ChunkSurvivors, Gpu, SearchDevice, SearchQuery};
use crate::interrupt::{self, Running};
use crate::Result;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};
use timewarp_kernels::launch::search::pruned_by;

/// The search of `plan` in `series` on `gpu`.
pub(crate) fn search<S: SeriesSource + ?Sized>(
    plan: &Plan,
    series: &S,
    gpu: &Gpu,
) -> Result<SearchResult> {
    let _running = Running::start();
    let (m, d) = (plan.m, plan.dims);
    let (mut lower, mut upper) = (Vec::new(), Vec::new());
    let mut deque = VecDeque::new();
    sliding_envelope(
        &plan.query,
        d,
        plan.radius,
        &mut lower,
        &mut upper,
        &mut deque,
    );
    let query = SearchQuery {
        values: &plan.query,
        lower: &lower,
        upper: &upper,
        m,
        dims: d,
        radius: plan.radius,
        znorm: plan.znorm,
    };
    let mut device = SearchDevice::open(gpu, &query, (plan.starts, plan.chunk), None)?;
    let chunk_starts = device.chunk_starts();
    let mut state = State::new(plan);
    // The next chunk is read (from a file, perhaps) and checked, into one
    // of two page-locked buffers, while the GPU and this thread search the
    // one before.
    let buffers = [device.chunk_buffer()?, device.chunk_buffer()?];
    let (free, emptied) = sync_channel(buffers.len());
    for buffer in buffers {
        free.send(buffer).expect("room for every buffer");
    }
    let searched = std::thread::scope(|scope| {
        let (send, chunks) = sync_channel(1);
        let reader = scope.spawn(move || read_ahead(plan, series, chunk_starts, &send, emptied));
        let mut phases = Phases::default();
        let searched = (|| {
            let mut waited = Instant::now();
            for chunk in chunks {
                interrupt::check()?;
                let (first, buffer, len) = chunk?;
                let started = Instant::now();
                phases.waiting += started - waited;
                let survivors = device.bounds(&buffer, len, state.cutoff());
                // The copy from the buffer has ended: the reader may fill it.
                let _ = free.send(buffer);
                let survivors = survivors?;
                let bounded = Instant::now();
                phases.bounds += bounded - started;
                let max_batch = device.max_batch();
                phases.survivors += survivors.starts.len();
                state.chunk(&survivors, (first, max_batch), |candidates, cutoff| {
                    interrupt::check()?;
                    phases.launches += 1;
                    phases.candidates += candidates.len();
                    device.dtw(candidates, cutoff)
                })?;
                waited = Instant::now();
                phases.dtw += waited - bounded;
                phases.chunks += 1;
            }
            Ok(())
        })();
        phases.report();
        // An early return has dropped `chunks`: the reader stops at its
        // next chunk. Its buffers come back with it.
        drop(free);
        let emptied = reader.join().expect("the chunk reader does not panic");
        (searched, emptied)
    });
    let (searched, emptied) = searched;
    for buffer in emptied.try_iter() {
        device.give_back(buffer);
    }
    searched?;
    Ok(state.finish())
}

/// Where a search's time went, printed on stderr when
/// `TIMEWARP_SEARCH_PHASES=1` (docs/algorithms.md, "Search"): waiting for
/// the reader's chunks, the upload and bounds of each (with the
/// survivors' copy back), and the DTW launches and the host's selection.
#[derive(Default)]
struct Phases {
    chunks: usize,
    survivors: usize,
    launches: usize,
    candidates: usize,
    waiting: Duration,
    bounds: Duration,
    dtw: Duration,
}

impl Phases {
    fn report(&self) {
        if std::env::var("TIMEWARP_SEARCH_PHASES").is_ok_and(|v| v == "1") {
            eprintln!(
                "search phases: {} chunks, {} survivors of the bounds kernel, {} DTW launches of \
                 {} candidates; waiting for chunks {:.4} s, upload and bounds {:.4} s, DTWs {:.4} s",
                self.chunks,
                self.survivors,
                self.launches,
                self.candidates,
                self.waiting.as_secs_f64(),
                self.bounds.as_secs_f64(),
                self.dtw.as_secs_f64()
            );
        }
    }
}

/// What the host keeps between chunks: the costs computed up to the
/// threshold, the witness threshold, the counts. No CUDA: the DTWs come
/// from the closure [`State::chunk`] is given.
pub(crate) struct State {
    k: usize,
    exclusion: usize,
    radius: usize,
    cutoff: Cutoff,
    keeper: Keeper,
    /// The keeper's shared threshold (only this thread publishes to it).
    shared: AtomicU64,
    pub stats: PruningStats,
    /// The size of the last DTW launch's batch, for the next one's.
    batch: usize,
}

/// Counts `n` starts pruned by bound `b` (0: LB_Kim, 1: LB_Keogh on the
/// query's envelope, 2: on the data's).
fn credit(stats: &mut PruningStats, b: usize, n: u64) {
    match b {
        0 => stats.kim += n,
        1 => stats.keogh_query += n,
        _ => stats.keogh_data += n,
    }
}

/// Counts a start pruned by the first of its bounds above `cutoff`
/// (as the bounds kernel counts them); false if none is.
fn pruned(bounds: [f64; 3], cutoff: f64, stats: &mut PruningStats) -> bool {
    let Some(b) = pruned_by(bounds, cutoff) else {
        return false;
    };
    credit(stats, b, 1);
    true
}

impl State {
    pub fn new(plan: &Plan) -> Self {
        State {
            k: plan.k,
            exclusion: plan.exclusion,
            radius: plan.radius,
            cutoff: Cutoff::new(plan),
            keeper: Keeper::new(plan.k, plan.exclusion),
            shared: AtomicU64::new(f64::INFINITY.to_bits()),
            stats: PruningStats::default(),
            batch: 0,
        }
    }

    fn threshold(&self) -> f64 {
        self.keeper.threshold(&self.shared)
    }

    /// The cutoff of the threshold now: the next chunk's bounds prune at
    /// it.
    pub fn cutoff(&self) -> f64 {
        self.cutoff.of(self.threshold())
    }

    /// One chunk whose first start is `first`, with what its bounds left
    /// at [`State::cutoff`] (the state unchanged since): counts the
    /// pruned, then runs `dtw` on the survivors, lowest bound first, in
    /// batches of at most `max_batch` (`dtw(candidates, cutoff)`: a cost,
    /// or `None` when abandoned above `cutoff`).
    pub fn chunk(
        &mut self,
        found: &ChunkSurvivors,
        (first, max_batch): (usize, usize),
        mut dtw: impl FnMut(&[u32], f64) -> Result<Vec<Option<f64>>>,
    ) -> Result<()> {
        self.stats.candidates += found.candidates();
        for (b, &n) in found.pruned.iter().enumerate() {
            credit(&mut self.stats, b, n);
        }
        // (largest bound, start, index in `found`), taken in the order of
        // the first two: the same whatever order the kernel listed them in.
        // Only each launch's candidates are sorted: once the threshold has
        // fallen, most survivors pass the cutoff and are dropped unsorted.
        let order =
            |a: &(f64, u32, u32), b: &(f64, u32, u32)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        let mut left: Vec<(f64, u32, u32)> = found
            .starts
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let b = found.bounds_of(i);
                (b[0].max(b[1]).max(b[2]), s, i as u32)
            })
            .collect();
        let mut dropped = Vec::new();
        self.batch = 0;
        loop {
            let t = self.threshold();
            let cutoff = self.cutoff.of(t);
            // A survivor above the cutoff stays above it (the threshold
            // only falls): counted at the end.
            left.retain(|&(lb, _, i)| {
                let under = lb <= cutoff;
                if !under {
                    dropped.push(i);
                }
                under
            });
            if left.is_empty() {
                break;
            }
            self.batch = search_next_batch(self.batch, max_batch);
            let take = self.batch.min(left.len());
            if take < left.len() {
                left.select_nth_unstable_by(take - 1, order);
            }
            left[..take].sort_unstable_by(order);
            let candidates: Vec<u32> = left[..take].iter().map(|c| c.1).collect();
            let costs = dtw(&candidates, cutoff)?;
            self.stats.dtw += take as u64;
            for (&s, cost) in candidates.iter().zip(costs) {
                match cost {
                    None => self.stats.abandoned += 1,
                    Some(cost) => self.keeper.offer(first + s as usize, cost, t, &self.shared),
                }
            }
            left.drain(..take);
        }
        // Those dropped pass the cutoff now: each by one of its bounds.
        let cutoff = self.cutoff();
        for i in dropped {
            let counted = pruned(found.bounds_of(i as usize), cutoff, &mut self.stats);
            debug_assert!(counted, "a survivor left passes the cutoff");
        }
        Ok(())
    }

    /// The matches among the kept costs, as the CPU's search chooses them.
    pub fn finish(self) -> SearchResult {
        let t = self.threshold();
        let mut found = self.keeper.found;
        found.retain(|f| f.0 <= t);
        sort(&mut found);
        let matches = choose(&found, self.k, self.exclusion)
            .into_iter()
            .map(|(cost, start)| Match {
                start,
                distance: cost.sqrt(),
            })
            .collect();
        SearchResult {
            matches,
            stats: self.stats,
            radius: self.radius,
            exclusion: self.exclusion,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{plan, scan, Band, SearchOptions};
    use super::*;
    use ndarray::ArrayView2;
    use timewarp_kernels::launch::search::{
        read_tally, SearchLaunch, ABANDONED, BOUNDS_PER_START, TALLY_WORDS,
    };

    /// The GPU's search with its kernels run on the host, a thread after
    /// another, in chunks of `chunk_starts` and launches of at most
    /// `max_batch` candidates; and the starts the bounds kernel pruned.
    fn emulated(
        plan: &Plan,
        x: &[f64],
        chunk_starts: usize,
        max_batch: usize,
    ) -> (SearchResult, u64) {
        let (m, d) = (plan.m, plan.dims);
        let (mut q_lower, mut q_upper) = (Vec::new(), Vec::new());
        let mut deque = VecDeque::new();
        sliding_envelope(
            &plan.query,
            d,
            plan.radius,
            &mut q_lower,
            &mut q_upper,
            &mut deque,
        );
        let mut state = State::new(plan);
        let (mut first, mut kernel_pruned) = (0, 0);
        while first < plan.starts {
            let starts = chunk_starts.min(plan.starts - first);
            let rows = starts + m - 1;
            let chunk = &x[first * d..(first + rows) * d];
            let (mut lower, mut upper) = (vec![0.0; rows * d], vec![0.0; rows * d]);
            let launch = SearchLaunch {
                series: chunk.as_ptr(),
                rows: rows as u64,
                dims: d as u64,
                m: m as u64,
                radius: plan.radius as u64,
                znorm: u64::from(plan.znorm),
                query: plan.query.as_ptr(),
                query_lower: q_lower.as_ptr(),
                query_upper: q_upper.as_ptr(),
                lower: lower.as_mut_ptr(),
                upper: upper.as_mut_ptr(),
                starts: starts as u64,
                kept: std::ptr::null_mut(),
                bounds: std::ptr::null_mut(),
                tally: std::ptr::null_mut(),
                cutoff: f64::INFINITY,
                candidates: std::ptr::null(),
                candidate_count: 0,
                scratch: std::ptr::null_mut(),
                costs: std::ptr::null_mut(),
            };
            // SAFETY: the pointers are the vectors above, of the sizes the
            // launch documents; one thread after another.
            unsafe { (0..rows * d).for_each(|i| launch.search_envelope(i as u64)) };
            let found = emulated_bounds(&launch, state.cutoff());
            kernel_pruned += found.pruned.iter().sum::<u64>();
            let dtw = |candidates: &[u32], cutoff: f64| {
                let n = candidates.len();
                let mut scratch = vec![f64::NAN; n * SearchLaunch::scratch_values(m, d)];
                let mut costs = vec![f64::NAN; n];
                let launch = SearchLaunch {
                    candidates: candidates.as_ptr(),
                    candidate_count: n as u64,
                    cutoff,
                    scratch: scratch.as_mut_ptr(),
                    costs: costs.as_mut_ptr(),
                    ..launch
                };
                // SAFETY: as above, with this launch's scratch and costs.
                unsafe { (0..n).for_each(|t| launch.search_dtw(t as u64)) };
                Ok(costs
                    .into_iter()
                    .map(|c| (c != ABANDONED).then_some(c))
                    .collect())
            };
            state.chunk(&found, (first, max_batch), dtw).unwrap();
            first += starts;
        }
        (state.finish(), kernel_pruned)
    }

    /// The bounds kernel of `launch` (the chunk's envelope written) at
    /// `cutoff`, its threads one after another from the last (so that the
    /// survivors are listed in another order than the starts), and what
    /// the device returns of it; checked against every start's bounds (the
    /// same kernel at an infinite cutoff, which keeps every start).
    fn emulated_bounds(launch: &SearchLaunch, cutoff: f64) -> ChunkSurvivors {
        let starts = launch.starts as usize;
        let run = |cutoff: f64| {
            let mut kept = vec![u32::MAX; starts];
            let mut bounds = vec![f64::NAN; starts * BOUNDS_PER_START];
            let mut tally = vec![0; TALLY_WORDS];
            let launch = SearchLaunch {
                kept: kept.as_mut_ptr(),
                bounds: bounds.as_mut_ptr(),
                tally: tally.as_mut_ptr(),
                cutoff,
                ..*launch
            };
            // SAFETY: the buffers above, of the sizes the launch documents,
            // the tally zeroed, the envelope written; one thread after
            // another.
            unsafe {
                (0..starts)
                    .rev()
                    .for_each(|s| launch.search_bounds(s as u64))
            };
            let (count, pruned) = read_tally(&tally);
            kept.truncate(count);
            bounds.truncate(count * BOUNDS_PER_START);
            ChunkSurvivors {
                starts: kept,
                bounds,
                pruned,
            }
        };
        let found = run(cutoff);
        let all = run(f64::INFINITY);
        assert_eq!(all.starts.len(), starts);
        let mut of_start = vec![[0.0; BOUNDS_PER_START]; starts];
        for (i, &s) in all.starts.iter().enumerate() {
            of_start[s as usize] = all.bounds_of(i);
        }
        let (mut pruned, mut survivors) = ([0; BOUNDS_PER_START], Vec::new());
        for (s, &b) in of_start.iter().enumerate() {
            match pruned_by(b, cutoff) {
                Some(k) => pruned[k] += 1,
                None => survivors.push(s as u32),
            }
        }
        assert_eq!(found.pruned, pruned);
        let mut listed = found.starts.clone();
        listed.sort_unstable();
        assert_eq!(listed, survivors);
        for (i, &s) in found.starts.iter().enumerate() {
            let bits = |b: [f64; BOUNDS_PER_START]| b.map(f64::to_bits);
            assert_eq!(bits(found.bounds_of(i)), bits(of_start[s as usize]));
        }
        found
    }

    /// A random walk of `n` samples of `dims` values, with constant
    /// stretches (zero std) and the query's copy planted at `at`.
    fn walk(n: usize, dims: usize, seed: u64) -> Vec<f64> {
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut x = vec![0.0; n * dims];
        for i in 1..n {
            for k in 0..dims {
                x[i * dims + k] = x[(i - 1) * dims + k] + next();
            }
        }
        for i in n / 3..n / 3 + 90 {
            let flat = x[(n / 3) * dims];
            x[i * dims..(i + 1) * dims].fill(flat);
        }
        x
    }

    #[test]
    fn the_kernels_on_the_host_find_the_cpus_matches_bit_for_bit() {
        let m = 40;
        for (case, &(dims, znorm, band, k, exclusion, chunk, batch)) in [
            (1, true, Band::Fraction(0.1), 3, None, 300, 7),
            (1, true, Band::Count(0), 5, Some(1), 1000, 1024),
            (1, false, Band::Count(5), 2, Some(100), 250, 3),
            (1, true, Band::Fraction(1.0), 4, Some(10), 5000, 64),
            (2, true, Band::Count(3), 3, None, 333, 16),
            (3, false, Band::Fraction(0.05), 1, None, 700, 1),
        ]
        .iter()
        .enumerate()
        {
            let n = 3000;
            let x = walk(n, dims, 7 + case as u64);
            // The query: a copy of the window that straddles the first
            // chunk's end, a little perturbed.
            let at = chunk.min(n / 2) - m / 2;
            let mut q: Vec<f64> = x[at * dims..(at + m) * dims].to_vec();
            q.iter_mut()
                .enumerate()
                .for_each(|(i, v)| *v += 1e-3 * (i % 3) as f64);
            let query = ArrayView2::from_shape((m, dims), &q).unwrap();
            let mut options = SearchOptions::default().with_band(band).with_k(k);
            options = options.with_znorm(znorm);
            if let Some(e) = exclusion {
                options = options.with_exclusion(e);
            }
            let series = ArrayView2::from_shape((n, dims), &x).unwrap();
            let plan = plan(query, n, dims, &options).unwrap();
            let cpu = scan::search(&plan, &series).unwrap();
            let (gpu, kernel_pruned) = emulated(&plan, &x, chunk, batch);
            assert_eq!(gpu.matches, cpu.matches, "case {case}");
            // Later chunks are pruned on the device, at a finite cutoff.
            assert_eq!(kernel_pruned > 0, chunk < n - m + 1, "case {case}");
            assert_eq!(gpu.matches.len(), k, "case {case}");
            let s = gpu.stats;
            assert_eq!(s.candidates, (n - m + 1) as u64, "case {case}");
            assert_eq!(s.kim + s.keogh_query + s.keogh_data + s.dtw, s.candidates);
            assert!(s.abandoned <= s.dtw);
        }
    }

    #[test]
    fn a_survivor_left_when_the_threshold_falls_is_counted_by_its_bound() {
        let mut stats = PruningStats::default();
        assert!(pruned([3.0, 1.0, 1.0], 2.0, &mut stats));
        assert!(pruned([1.0, 3.0, 4.0], 2.0, &mut stats));
        assert!(pruned([1.0, 1.0, 4.0], 2.0, &mut stats));
        assert!(!pruned([1.0, 2.0, 2.0], 2.0, &mut stats));
        assert_eq!((stats.kim, stats.keogh_query, stats.keogh_data), (1, 1, 1));
    }
}
