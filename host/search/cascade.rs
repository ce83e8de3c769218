//! One task of the k-NN with lower bounds (`super::whole`): a block of
//! queries against a chunk of the database, database series outer, so
//! that a series' envelope serves the block's queries. Per pair: LB_Kim,
//! LB_Keogh on the query's envelope, LB_Keogh on the series' envelope;
//! the pairs left wait in a batch per query, whose DTWs run together in
//! lanes, pruned and abandoned against the query's threshold then
//! (`super::pruned`). A pair whose DTW is at most the threshold gets its
//! distance from the CPU backend's code.

use super::bounds::{outside, sliding_envelope};
use super::dtw::{Dims, Many, One};
use super::kept::{Keeper, Ranked, Slack};
use super::pruned::{dtw_pruned, Batch, Buffers, LANES};
use super::PruningStats;
use crate::{cpu, interrupt, Float, SeriesSet};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use timewarp_kernels::DtwParams;

/// A query in `f64`, with its envelope.
pub(super) struct Query {
    values: Vec<f64>,
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl Query {
    pub fn new<T: Float>(queries: &SeriesSet<T>, q: usize, radius: usize) -> Self {
        let values: Vec<f64> = queries.series(q).iter().map(|v| v.to_f64()).collect();
        let (mut lower, mut upper) = (Vec::new(), Vec::new());
        let dims = queries.dims();
        sliding_envelope(
            &values,
            dims,
            radius,
            &mut lower,
            &mut upper,
            &mut VecDeque::new(),
        );
        Query {
            values,
            lower,
            upper,
        }
    }
}

/// What the tasks of a group of queries share.
pub(super) struct Shared<'a, T> {
    pub queries: &'a SeriesSet<T>,
    pub database: &'a SeriesSet<T>,
    /// The group's queries, from query `first` on.
    pub prepared: Vec<Query>,
    pub first: usize,
    /// Each query's threshold (bits of an `f64`).
    pub thresholds: Vec<AtomicU64>,
    pub params: DtwParams,
    pub radius: usize,
    pub k: usize,
    pub slack: Slack,
}

/// What a task found: for each query of `block`, its best in the chunk.
pub(super) struct TaskResult<T> {
    pub block: Range<usize>,
    pub kept: Vec<Vec<Ranked<T>>>,
    pub stats: PruningStats,
}

/// A thread's buffers, kept between tasks.
#[derive(Default)]
pub(super) struct Worker<T> {
    /// The database series the envelope is of.
    ready: Option<usize>,
    candidate: Vec<f64>,
    lower: Vec<f64>,
    upper: Vec<f64>,
    deque: VecDeque<usize>,
    /// Each sample's LB_Keogh term: on the query's envelope (by the
    /// series' samples), on the series' (by the query's).
    by_candidate: Vec<f64>,
    by_query: Vec<f64>,
    /// One batch of pairs waiting for their DTWs per query of the task.
    batches: Vec<Batch>,
    buffers: Buffers,
    exact: Vec<T>,
    stats: PruningStats,
}

impl<T: Float> Shared<'_, T> {
    /// The queries of `block` against the database series of `chunk`.
    pub fn task(
        &self,
        worker: &mut Worker<T>,
        block: Range<usize>,
        chunk: Range<usize>,
    ) -> TaskResult<T> {
        let mut keepers: Vec<Keeper<T>> = block.clone().map(|_| Keeper::new()).collect();
        worker.stats = PruningStats::default();
        worker.ready = None;
        worker.batches.resize_with(block.len(), Batch::default);
        // Interrupted: the caller discards the result.
        if !interrupt::requested() {
            match self.queries.dims() {
                1 => self.scan(worker, &mut keepers, &block, chunk, One),
                dims => self.scan(worker, &mut keepers, &block, chunk, Many(dims)),
            }
        }
        TaskResult {
            block,
            kept: keepers.into_iter().map(|k| k.into_kept()).collect(),
            stats: worker.stats,
        }
    }

    /// The cascade for every query of `block` and series of `chunk`, and
    /// the DTWs of the batches left at the end.
    fn scan<D: Dims>(
        &self,
        worker: &mut Worker<T>,
        keepers: &mut [Keeper<T>],
        block: &Range<usize>,
        chunk: Range<usize>,
        dims: D,
    ) {
        for c in chunk {
            let series = self.database.series(c);
            let series = series.as_slice().expect("a set's series are contiguous");
            for (slot, (q, keeper)) in block.clone().zip(keepers.iter_mut()).enumerate() {
                self.pair(worker, keeper, (slot, q, c), series, dims);
            }
        }
        for (slot, (q, keeper)) in block.clone().zip(keepers.iter_mut()).enumerate() {
            self.run_batch(worker, keeper, (slot, q), dims);
        }
    }

    /// The bounds for query `q` (the task's `slot`-th) and database series
    /// `c` (`series`): a pair they leave waits in the query's batch, or,
    /// of different lengths, gets its distance at once.
    #[inline(always)]
    fn pair<D: Dims>(
        &self,
        worker: &mut Worker<T>,
        keeper: &mut Keeper<T>,
        (slot, q, c): (usize, usize, usize),
        series: &[T],
        dims: D,
    ) {
        let shared = &self.thresholds[q - self.first];
        let query = &self.prepared[q - self.first];
        let cutoff = self.slack.cutoff(keeper.threshold(shared));
        worker.stats.candidates += 1;
        if lb_kim(&query.values, series, dims) > cutoff {
            worker.stats.kim += 1;
            return;
        }
        if series.len() != query.values.len() {
            worker.stats.dtw += 1;
            self.offer_exact(worker, keeper, (q, c));
            return;
        }
        if !self.lb_keogh_both_ways(worker, query, (c, series), cutoff, dims) {
            return;
        }
        worker.stats.dtw += 1;
        let terms = (&worker.by_query[..], &worker.by_candidate[..]);
        worker.batches[slot].push(c, series, terms);
        if worker.batches[slot].len() == LANES {
            self.run_batch(worker, keeper, (slot, q), dims);
        }
    }

    /// LB_Keogh on the query's envelope, then on the series' (of the
    /// query's length): whether the pair passed both, their terms in the
    /// worker's `by_candidate` and `by_query`.
    #[inline(always)]
    fn lb_keogh_both_ways<D: Dims>(
        &self,
        worker: &mut Worker<T>,
        query: &Query,
        (c, series): (usize, &[T]),
        cutoff: f64,
        dims: D,
    ) -> bool {
        let d = dims.get();
        let m = series.len() / d;
        worker.by_candidate.resize(m, 0.0);
        worker.by_query.resize(m, 0.0);
        let mut on_query = 0.0;
        for i in 0..m {
            let mut term = 0.0;
            for k in 0..d {
                let at = i * d + k;
                term += outside(series[at].to_f64(), query.lower[at], query.upper[at]);
            }
            worker.by_candidate[i] = term;
            on_query += term;
            if on_query > cutoff {
                worker.stats.keogh_query += 1;
                return false;
            }
        }
        if worker.ready != Some(c) {
            worker.candidate.clear();
            worker.candidate.extend(series.iter().map(|v| v.to_f64()));
            let (lower, upper, deque) = (&mut worker.lower, &mut worker.upper, &mut worker.deque);
            sliding_envelope(&worker.candidate, d, self.radius, lower, upper, deque);
            worker.ready = Some(c);
        }
        let mut on_series = 0.0;
        for i in 0..m {
            let mut term = 0.0;
            for k in 0..d {
                let at = i * d + k;
                term += outside(query.values[at], worker.lower[at], worker.upper[at]);
            }
            worker.by_query[i] = term;
            on_series += term;
            if on_series > cutoff {
                worker.stats.keogh_data += 1;
                return false;
            }
        }
        true
    }

    /// The DTWs of query `q`'s batch, against its threshold now; those at
    /// most it are offered with their exact distances.
    fn run_batch<D: Dims>(
        &self,
        worker: &mut Worker<T>,
        keeper: &mut Keeper<T>,
        (slot, q): (usize, usize),
        dims: D,
    ) {
        let batch = &worker.batches[slot];
        if batch.len() == 0 {
            return;
        }
        let shared = &self.thresholds[q - self.first];
        let query = &self.prepared[q - self.first];
        let cutoff = self.slack.cutoff(keeper.threshold(shared));
        let costs = dtw_pruned(
            &query.values,
            batch,
            dims,
            self.radius,
            cutoff,
            &mut worker.buffers,
        );
        let under: Vec<usize> = (0..batch.len())
            .filter(|&l| costs[l].is_some())
            .map(|l| batch.index[l])
            .collect();
        worker.stats.abandoned += (batch.len() - under.len()) as u64;
        worker.batches[slot].clear();
        for c in under {
            self.offer_exact(worker, keeper, (q, c));
        }
    }

    /// Offers query `q`'s pair with database series `c` at its distance as
    /// the brute force computes it.
    fn offer_exact(&self, worker: &mut Worker<T>, keeper: &mut Keeper<T>, (q, c): (usize, usize)) {
        let distance = cpu::value_alone(
            &self.params,
            (self.queries, q),
            (self.database, c),
            &mut worker.exact,
        );
        let shared = &self.thresholds[q - self.first];
        keeper.offer(Ranked { distance, index: c }, self.k, shared);
    }
}

/// LB_Kim of a query and a series (`len x dims` each, row-major, lengths
/// may differ): the costs of their first samples and of their last, which
/// every warping path matches (one cell when both have one sample).
#[inline(always)]
fn lb_kim<T: Float, D: Dims>(query: &[f64], series: &[T], dims: D) -> f64 {
    let d = dims.get();
    let cost = |q: usize, c: usize| -> f64 {
        (0..d)
            .map(|k| {
                let t = query[q * d + k] - series[c * d + k].to_f64();
                t * t
            })
            .sum()
    };
    let (n, m) = (query.len() / d, series.len() / d);
    if n == 1 && m == 1 {
        return cost(0, 0);
    }
    cost(0, 0) + cost(n - 1, m - 1)
}
