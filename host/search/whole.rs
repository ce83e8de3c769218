//! The `k` nearest series of a database to each query under banded DTW on
//! the CPU, with the UCR Suite's cascade on whole series as given (not
//! z-normalised): per query and database series, LB_Kim, LB_Keogh on the
//! query's envelope, LB_Keogh on the series' envelope, then the DTW pruned
//! and abandoned against the query's `k`-th best distance so far
//! (`super::cascade`, `super::pruned`).
//!
//! The result is the brute force's bit for bit. The bounds and the
//! pruned DTW run in `f64` on the values (which `f64` holds exactly,
//! whatever the precision), and skip a pair only when the distance the CPU
//! backend computes for it (rounded, in the set's precision) is surely
//! above the threshold (`super::kept::Slack`). A pair not skipped gets
//! its distance from the CPU backend's own code (`cpu::value_alone`), and
//! every pair whose distance is at most the `k`-th best is kept, so the
//! ranks (ties: lower index first) and distances are those of the whole
//! matrix.
//!
//! Pairs of different lengths have LB_Kim only (the envelopes compare
//! samples of one index), then the whole DTW.
//!
//! Work is spread over rayon as tasks of a block of queries against a
//! chunk of the database (`super::cascade`); each query has one
//! threshold, the least `k`-th best any task has found for it (an atomic
//! `fetch_min` on the bits of a non-negative `f64`, which order as the
//! values).

use super::cascade::{Query, Shared, TaskResult, Worker};
use super::kept::{Ranked, Slack};
use super::pruned::LANES;
use super::PruningStats;
use crate::interrupt::{self, Running};
use crate::results::zeros;
use crate::{Float, Result, SeriesSet};
use ndarray::Array2;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::AtomicU64;
use timewarp_kernels::DtwParams;

/// Queries per task at most: a database series' envelope, computed once
/// per task, serves them all.
const QUERIES_PER_TASK: usize = 16;

/// Values the batches of a task's queries hold at most (a megabyte): long
/// series make blocks of fewer queries.
const BATCH_VALUES: usize = 1 << 17;

/// Database series per task at most: enough to amortise a task's set-up,
/// few enough that the threads share a database evenly.
const CHUNK_MAX: usize = 256;

/// The (value, index) pairs that the tasks of one group of queries return
/// at most: groups are sized to it.
const GROUP_RESULTS: usize = 1 << 22;

/// The nearest neighbours found, and what the cascade did.
pub(crate) struct Found<T> {
    pub indices: Array2<usize>,
    pub distances: Array2<T>,
    pub stats: PruningStats,
}

/// The slack of the bounds for `queries` against `database` with a band
/// of `radius`, or `None` where the bounds cannot help or could be wrong:
/// a band that covers every pair's every cell, series so long that the
/// rounding allowance swamps the bounds, or values so large that a
/// distance might overflow the precision (the brute force then reports
/// the overflow as it does).
pub(crate) fn slack<T: Float>(
    queries: &SeriesSet<T>,
    database: &SeriesSet<T>,
    radius: usize,
) -> Option<Slack> {
    let dims = queries.dims();
    let largest = largest_magnitude(queries).max(largest_magnitude(database));
    slack_of::<T>(
        (queries.max_len(), database.max_len(), dims),
        radius,
        largest,
    )
}

/// [`slack`] from the longest query (`q_len`), the longest database series
/// (`c_len`), the dimensions and the largest `|v|` of both sets.
pub(crate) fn slack_of<T: Float>(
    (q_len, c_len, dims): (usize, usize, usize),
    radius: usize,
    largest: f64,
) -> Option<Slack> {
    if radius.saturating_add(1) >= q_len.max(c_len) {
        return None;
    }
    let slack = Slack::new::<T>(q_len, c_len, dims)?;
    // No pair's DTW (nor any of its cells) is above `path x dims x (2
    // max|v|)^2`, a path having at most `q_len + c_len - 1` cells.
    let worst = (q_len + c_len) as f64 * dims as f64 * (2.0 * largest).powi(2);
    (worst * 1.01 < T::MAX.to_f64() / 2.0).then_some(slack)
}

/// The largest `|v|` of a set's values.
pub(crate) fn largest_magnitude<T: Float>(set: &SeriesSet<T>) -> f64 {
    let (values, _, _) = set.parts();
    values
        .par_chunks(1 << 16)
        .map(|chunk| chunk.iter().fold(0.0f64, |m, v| m.max(v.to_f64().abs())))
        .reduce(|| 0.0, f64::max)
}

/// Each query's `k` nearest series of `database` (`1 <= k <=
/// database.len()`), nearest first, ties by index, under DTW with a band
/// of `radius`, as [`slack`] allows.
pub(crate) fn nearest<T: Float>(
    queries: &SeriesSet<T>,
    database: &SeriesSet<T>,
    k: usize,
    radius: usize,
    slack: Slack,
) -> Result<Found<T>> {
    let _running = Running::start();
    let (n, size) = (queries.len(), database.len());
    let mut indices = zeros(n, k)?;
    let mut distances = zeros(n, k)?;
    let threads = rayon::current_num_threads();
    let chunk = size
        .div_ceil(8 * threads)
        .clamp(1, CHUNK_MAX)
        .max(4 * k)
        .min(size);
    let chunks = size.div_ceil(chunk);
    let (m, dims) = (queries.max_len(), queries.dims());
    let per_task = (BATCH_VALUES / (LANES * m * (dims + 2))).clamp(1, QUERIES_PER_TASK);
    let group = (GROUP_RESULTS / (chunks * k)).max(per_task);
    let mut stats = PruningStats::default();
    for first in (0..n).step_by(group) {
        let end = (first + group).min(n);
        let shared = Shared {
            queries,
            database,
            prepared: (first..end)
                .into_par_iter()
                .map(|q| Query::new(queries, q, radius))
                .collect(),
            first,
            thresholds: (first..end)
                .map(|_| AtomicU64::new(f64::INFINITY.to_bits()))
                .collect(),
            params: DtwParams::new(Some(radius)),
            radius,
            k,
            slack,
        };
        let tasks: Vec<(Range<usize>, Range<usize>)> = (first..end)
            .step_by(per_task)
            .flat_map(|q| {
                let block = q..(q + per_task).min(end);
                (0..size)
                    .step_by(chunk)
                    .map(move |c| (block.clone(), c..(c + chunk).min(size)))
            })
            .collect();
        let results: Vec<TaskResult<T>> = tasks
            .into_par_iter()
            .map_init(Worker::default, |worker, (block, chunk)| {
                shared.task(worker, block, chunk)
            })
            .collect();
        interrupt::check()?;
        let mut kept: Vec<Vec<Ranked<T>>> = (first..end).map(|_| Vec::new()).collect();
        for result in results {
            stats.add(&result.stats);
            for (q, found) in result.block.zip(result.kept) {
                kept[q - first].extend(found);
            }
        }
        for (offset, mut found) in kept.into_iter().enumerate() {
            found.sort_unstable();
            for (rank, ranked) in found.iter().take(k).enumerate() {
                indices[[first + offset, rank]] = ranked.index;
                distances[[first + offset, rank]] = ranked.distance;
            }
        }
    }
    Ok(Found {
        indices,
        distances,
        stats,
    })
}
