//! The k nearest neighbours under banded DTW with the database resident on
//! one GPU (docs/algorithms.md, "Nearest neighbours", "On the GPU"): the
//! queries in the brute force's blocks, and per block the database in
//! chunks of growing size (the first small, so that each query soon has
//! `k` distances and a finite threshold), per chunk:
//!
//! 1. the GPU computes every pair's bounds (LB_Kim; LB_Keogh on the
//!    query's envelope and on the series' for pairs of one length), in
//!    `f64`, prunes the pairs whose bound passes the cutoff of their
//!    query's threshold now ([`Slack::cutoff`]) and compacts the others,
//!    which alone come back;
//! 2. the host sorts the survivors by their largest bound and, lowest
//!    first, in batches of growing size, keeps those still under their
//!    query's cutoff (the threshold falls between batches) and has the
//!    GPU compute their distances with the brute force's own pair kernel
//!    (`crate::gpu::KnnDevice::distances`); each query's `k` best by
//!    (distance, index) are kept as on the CPU ([`Keeper`]).
//!
//! The thresholds are the brute force's distances of `k` series, so each
//! is at least the query's final `k`-th best; a pair skipped has a bound
//! above the cutoff of a threshold, so its distance as the GPU computes
//! it is above that threshold ([`Slack`]: the GPU's cell, a fused
//! multiply-add for univariate series, rounds once where the CPU's rounds
//! twice, so the CPU's allowance covers it), and every pair of distance at
//! most the final `k`-th best gets its distance from the brute force's
//! kernel: the result is the brute force's, ties included.

use super::bounds::sliding_envelope;
use super::kept::{Keeper, Ranked, Slack};
use super::whole::{largest_magnitude, slack_of, Found};
use super::PruningStats;
use crate::gpu::{search_next_batch, KnnDevice, KnnQueries, PairSurvivors};
use crate::interrupt::{self, Running};
use crate::resident::OnGpus;
use crate::results::zeros;
use crate::{Float, Result, SeriesSet, Variant};
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use timewarp_kernels::launch::search::pruned_by;

/// The first chunk's database series at most: small, so that few pairs
/// are bounded before each query has a threshold.
pub(crate) const FIRST_CHUNK: usize = 1024;

/// What the cascade needs of the device: a block of queries against a
/// resident database (the GPU's `KnnDevice`; the kernels run on the host
/// in the tests).
pub(crate) trait PairDevice<T> {
    /// Database series a chunk holds at most.
    fn max_chunk(&self) -> usize;
    /// Pairs a distances batch holds at most.
    fn max_batch(&self) -> usize;
    /// The survivors of `cutoffs` (one a query) among the pairs of every
    /// query and series `first .. first + count`.
    fn bounds(&mut self, first: usize, count: usize, cutoffs: &[f64]) -> Result<PairSurvivors>;
    /// The brute force's distances of `pairs` (query, database series).
    fn distances(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<T>>;
}

/// Each query's `k` nearest series of the database `set` (`1 <= k <=
/// set.len`) under DTW with a band of `radius`, the queries in blocks of
/// `block_values / set.len` (the brute force's blocks, whose pair kernel
/// each block's distances take), with the pair kernel of `variant`, within
/// `memory_budget`; `None` where the bounds do not apply: a set on several
/// GPUs (the brute force spreads over them all), values for which
/// [`slack_of`] gives none, a memory budget that holds no chunk of the
/// bounds.
pub(crate) fn nearest<T: Float>(
    queries: &SeriesSet<T>,
    set: &OnGpus<T>,
    (k, radius): (usize, usize),
    (variant, memory_budget): (Variant, Option<usize>),
    block_values: usize,
) -> Result<Option<Found<T>>> {
    let parts = set.parts();
    let [(gpu, _, database)] = parts.parts[..] else {
        return Ok(None);
    };
    let dims = queries.dims();
    let largest = set.largest().max(largest_magnitude(queries));
    let shape = (queries.max_len(), database.max_len(), dims);
    let Some(slack) = slack_of::<T>(shape, radius, largest) else {
        return Ok(None);
    };
    let _running = Running::start();
    let (n, size) = (queries.len(), database.len());
    let mut indices = zeros(n, k)?;
    let mut distances = zeros(n, k)?;
    let mut stats = PruningStats::default();
    let per_block = (block_values / size).max(1);
    for start in (0..n).step_by(per_block) {
        let end = (start + per_block).min(n);
        let part = queries.slice(start..end);
        let (exact, offsets, _) = part.parts();
        let values: Vec<f64> = exact.iter().map(|v| v.to_f64()).collect();
        let (mut lower, mut upper) = (Vec::with_capacity(values.len()), Vec::new());
        upper.reserve(values.len());
        let (mut lo, mut up, mut deque) = (Vec::new(), Vec::new(), VecDeque::new());
        for w in offsets.windows(2) {
            let x = &values[w[0] as usize * dims..w[1] as usize * dims];
            sliding_envelope(x, dims, radius, &mut lo, &mut up, &mut deque);
            lower.extend_from_slice(&lo);
            upper.extend_from_slice(&up);
        }
        let block_queries = KnnQueries {
            values: &values,
            offsets,
            lower: &lower,
            upper: &upper,
            exact,
        };
        let how = (radius, variant);
        let Some(mut device) = KnnDevice::open(gpu, database, &block_queries, how, memory_budget)?
        else {
            return Ok(None);
        };
        let found = block(&mut device, (end - start, size, k), slack, &mut stats)?;
        drop(device);
        for (offset, mut kept) in found.into_iter().enumerate() {
            kept.sort_unstable();
            for (rank, ranked) in kept.iter().take(k).enumerate() {
                indices[[start + offset, rank]] = ranked.index;
                distances[[start + offset, rank]] = ranked.distance;
            }
        }
    }
    Ok(Some(Found {
        indices,
        distances,
        stats,
    }))
}

impl<T: Float> PairDevice<T> for KnnDevice<'_, T> {
    fn max_chunk(&self) -> usize {
        KnnDevice::max_chunk(self)
    }

    fn max_batch(&self) -> usize {
        KnnDevice::max_batch(self)
    }

    fn bounds(&mut self, first: usize, count: usize, cutoffs: &[f64]) -> Result<PairSurvivors> {
        KnnDevice::bounds(self, first, count, cutoffs)
    }

    fn distances(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<T>> {
        KnnDevice::distances(self, pairs)
    }
}

/// Counts a pair pruned by the first of its bounds above `cutoff`; false
/// if none is.
fn pruned(bounds: [f64; 3], cutoff: f64, stats: &mut PruningStats) -> bool {
    match pruned_by(bounds, cutoff) {
        Some(b) => {
            credit(stats, b, 1);
            true
        }
        None => false,
    }
}

/// Counts `n` pairs pruned by bound `b` (0: LB_Kim, 1: LB_Keogh on the
/// query's envelope, 2: on the series').
fn credit(stats: &mut PruningStats, b: usize, n: u64) {
    match b {
        0 => stats.kim += n,
        1 => stats.keogh_query += n,
        _ => stats.keogh_data += n,
    }
}

/// The `k` nearest of each of `queries` queries among the `size` series
/// of the database `device` holds: each query's `k` best (distance, index)
/// in no order, and the counts added to `stats`.
fn block<T: Float, D: PairDevice<T>>(
    device: &mut D,
    (queries, size, k): (usize, usize, usize),
    slack: Slack,
    stats: &mut PruningStats,
) -> Result<Vec<Vec<Ranked<T>>>> {
    let mut keepers: Vec<Keeper<T>> = (0..queries).map(|_| Keeper::new()).collect();
    let shared: Vec<AtomicU64> = (0..queries)
        .map(|_| AtomicU64::new(f64::INFINITY.to_bits()))
        .collect();
    let cutoff = |keepers: &[Keeper<T>], q: usize| slack.cutoff(keepers[q].threshold(&shared[q]));
    let (max_chunk, max_batch) = (device.max_chunk(), device.max_batch());
    let mut chunk = FIRST_CHUNK.max(k).min(max_chunk);
    let mut first = 0;
    while first < size {
        interrupt::check()?;
        let count = chunk.min(size - first);
        let cutoffs: Vec<f64> = (0..queries).map(|q| cutoff(&keepers, q)).collect();
        let found = device.bounds(first, count, &cutoffs)?;
        stats.candidates += (queries * count) as u64;
        for (b, &n) in found.pruned.iter().enumerate() {
            credit(stats, b, n);
        }
        // (largest bound, pair, place in `found`), in the order of the
        // first two: the same whatever order the kernel listed them in.
        let mut order: Vec<(f64, u32, u32)> = found
            .pairs
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let b = found.bounds_of(i);
                (b[0].max(b[1]).max(b[2]), p, i as u32)
            })
            .collect();
        order.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let (mut at, mut batch) = (0, 0);
        while at < order.len() {
            batch = search_next_batch(batch, max_batch);
            let mut take = Vec::with_capacity(batch);
            while at < order.len() && take.len() < batch {
                let (_, p, i) = order[at];
                at += 1;
                let q = p as usize / count;
                if pruned(found.bounds_of(i as usize), cutoff(&keepers, q), stats) {
                    continue;
                }
                take.push((q as u32, (first + p as usize % count) as u32));
            }
            if take.is_empty() {
                break;
            }
            interrupt::check()?;
            let distances = device.distances(&take)?;
            stats.dtw += take.len() as u64;
            for (&(q, j), distance) in take.iter().zip(distances) {
                let q = q as usize;
                let ranked = Ranked {
                    distance,
                    index: j as usize,
                };
                keepers[q].offer(ranked, k, &shared[q]);
            }
        }
        first += count;
        chunk = chunk.saturating_mul(2).min(max_chunk);
    }
    Ok(keepers.into_iter().map(Keeper::into_kept).collect())
}

#[cfg(test)]
mod tests {
    use super::super::bounds::sliding_envelope;
    use super::super::whole;
    use super::*;
    use crate::{cpu, ComputeOptions, Device, Dtw, Metric, SeriesSet};
    use ndarray::Array2;
    use std::collections::VecDeque;
    use timewarp_kernels::launch::neighbours::{GatherLaunch, KnnLaunch};
    use timewarp_kernels::launch::search::{read_tally, BOUNDS_PER_START, TALLY_WORDS};
    use timewarp_kernels::DtwParams;

    /// The device's kernels run on the host, a thread after another (the
    /// bounds' threads from the last, so that the survivors come in
    /// another order than the pairs), the distances the CPU backend's.
    struct Emulated<'a> {
        database: &'a SeriesSet<f64>,
        queries: &'a SeriesSet<f64>,
        lower: Vec<f64>,
        upper: Vec<f64>,
        radius: usize,
        max_chunk: usize,
        max_batch: usize,
        batches: Vec<usize>,
    }

    impl<'a> Emulated<'a> {
        fn new(queries: &'a SeriesSet<f64>, database: &'a SeriesSet<f64>, radius: usize) -> Self {
            let (values, offsets, _) = queries.parts();
            let d = queries.dims();
            let (mut lower, mut upper) = (Vec::new(), Vec::new());
            for q in 0..queries.len() {
                let x = &values[offsets[q] as usize * d..offsets[q + 1] as usize * d];
                let (mut lo, mut up, mut deque) = (Vec::new(), Vec::new(), VecDeque::new());
                sliding_envelope(x, d, radius, &mut lo, &mut up, &mut deque);
                lower.extend(lo);
                upper.extend(up);
            }
            Emulated {
                database,
                queries,
                lower,
                upper,
                radius,
                max_chunk: 7,
                max_batch: 5,
                batches: Vec::new(),
            }
        }
    }

    impl PairDevice<f64> for Emulated<'_> {
        fn max_chunk(&self) -> usize {
            self.max_chunk
        }

        fn max_batch(&self) -> usize {
            self.max_batch
        }

        fn bounds(&mut self, first: usize, count: usize, cutoffs: &[f64]) -> Result<PairSurvivors> {
            let db = self.database;
            let length = if db.min_len() == db.max_len() {
                db.max_len()
            } else {
                0
            };
            let d = db.dims();
            let pairs = count * self.queries.len();
            let (mut lower, mut upper) =
                (vec![0.0; count * length * d], vec![0.0; count * length * d]);
            let (mut kept, mut bounds) = (vec![0u32; pairs], vec![0.0; pairs * BOUNDS_PER_START]);
            let mut tally = vec![0u32; TALLY_WORDS];
            let (values, offsets, _) = self.queries.parts();
            let launch = KnnLaunch {
                database: db.host_ref(),
                first: first as u64,
                count: count as u64,
                dims: d as u64,
                radius: self.radius as u64,
                length: length as u64,
                queries: values.as_ptr(),
                query_offsets: offsets.as_ptr(),
                query_lower: self.lower.as_ptr(),
                query_upper: self.upper.as_ptr(),
                query_count: self.queries.len() as u64,
                lower: lower.as_mut_ptr(),
                upper: upper.as_mut_ptr(),
                cutoffs: cutoffs.as_ptr(),
                kept: kept.as_mut_ptr(),
                bounds: bounds.as_mut_ptr(),
                tally: tally.as_mut_ptr(),
            };
            // SAFETY: the vectors above, of the sizes the launch
            // documents; one thread after another.
            unsafe {
                (0..count * length * d).for_each(|i| launch.knn_envelope(i as u64));
                (0..pairs).rev().for_each(|i| launch.knn_bounds(i as u64));
            }
            let (n, pruned) = read_tally(&tally);
            kept.truncate(n);
            bounds.truncate(n * BOUNDS_PER_START);
            Ok(PairSurvivors {
                pairs: kept,
                bounds,
                pruned,
            })
        }

        fn distances(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<f64>> {
            assert!(pairs.len() <= self.max_batch);
            self.batches.push(pairs.len());
            // The gather kernel, then the CPU backend's value of each pair.
            let d = self.database.dims();
            let gather = |set: &SeriesSet<f64>, indices: &[u32]| {
                let mut offsets = vec![0u64];
                for &i in indices {
                    let len = set.series_len(i as usize) as u64;
                    offsets.push(offsets.last().unwrap() + len);
                }
                let max_len = set.max_len() as u64;
                let mut out = vec![f64::NAN; *offsets.last().unwrap() as usize * d];
                let launch = GatherLaunch {
                    source: set.host_ref(),
                    indices: indices.as_ptr(),
                    count: indices.len() as u64,
                    offsets: offsets.as_ptr(),
                    max_len,
                    out: out.as_mut_ptr(),
                };
                // SAFETY: as above.
                unsafe { (0..indices.len() as u64 * max_len).for_each(|i| launch.knn_gather(i)) };
                let series: Vec<ndarray::ArrayView2<f64>> = offsets
                    .windows(2)
                    .map(|w| {
                        let (from, to) = (w[0] as usize * d, w[1] as usize * d);
                        ndarray::ArrayView2::from_shape(((to - from) / d, d), &out[from..to])
                            .unwrap()
                    })
                    .collect();
                SeriesSet::from_series(series).unwrap()
            };
            let a = gather(self.queries, &pairs.iter().map(|p| p.0).collect::<Vec<_>>());
            let b = gather(
                self.database,
                &pairs.iter().map(|p| p.1).collect::<Vec<_>>(),
            );
            let params = DtwParams::new(Some(self.radius));
            let mut buffer = Vec::new();
            Ok((0..pairs.len())
                .map(|p| cpu::value_alone(&params, (&a, p), (&b, p), &mut buffer))
                .collect())
        }
    }

    /// Random walks of `lengths`, `dims` values a sample.
    fn walks(seed: u64, lengths: &[usize], dims: usize) -> SeriesSet<f64> {
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let series: Vec<Array2<f64>> = lengths
            .iter()
            .map(|&n| {
                let mut x = Array2::zeros((n, dims));
                for i in 1..n {
                    for k in 0..dims {
                        x[[i, k]] = x[[i - 1, k]] + next();
                    }
                }
                x
            })
            .collect();
        SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap()
    }

    #[test]
    fn the_kernels_on_the_host_give_the_brute_forces_neighbours() {
        for (case, &(dims, equal, radius, k)) in [
            (1, true, 3, 1),
            (1, true, 0, 4),
            (2, true, 2, 3),
            (1, false, 4, 2),
            (3, false, 1, 1),
        ]
        .iter()
        .enumerate()
        {
            let lengths = |n: usize, seed: usize| -> Vec<usize> {
                (0..n)
                    .map(|i| if equal { 30 } else { 20 + (i * 7 + seed) % 15 })
                    .collect()
            };
            let mut database = walks(case as u64 + 1, &lengths(60, 0), dims);
            // Duplicates: ties at the same distance, the lower index first.
            let (values, offsets, _) = database.parts();
            let mut series: Vec<Array2<f64>> = (0..database.len())
                .map(|i| {
                    let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
                    Array2::from_shape_vec((b - a, dims), values[a * dims..b * dims].to_vec())
                        .unwrap()
                })
                .collect();
            series[40] = series[3].clone();
            series[41] = series[3].clone();
            database = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
            let queries = walks(case as u64 + 100, &lengths(4, 3), dims);
            let metric = Metric::Dtw(Dtw::with_band(radius));
            let options = ComputeOptions::on(Device::Cpu);
            let matrix =
                crate::distance_matrix(&queries, Some(&database), metric, &options).unwrap();
            let largest =
                whole::largest_magnitude(&queries).max(whole::largest_magnitude(&database));
            let slack = whole::slack_of::<f64>(
                (queries.max_len(), database.max_len(), dims),
                radius,
                largest,
            )
            .unwrap();
            let mut device = Emulated::new(&queries, &database, radius);
            let mut stats = PruningStats::default();
            let found = block(&mut device, (4, 60, k), slack, &mut stats).unwrap();
            for (q, mut kept) in found.into_iter().enumerate() {
                kept.sort_unstable();
                let row = matrix.row(q);
                let mut order: Vec<usize> = (0..row.len()).collect();
                order.sort_by(|&i, &j| row[i].total_cmp(&row[j]).then(i.cmp(&j)));
                let got: Vec<(usize, u64)> = kept
                    .iter()
                    .map(|r| (r.index, r.distance.to_bits()))
                    .collect();
                let want: Vec<(usize, u64)> =
                    order[..k].iter().map(|&j| (j, row[j].to_bits())).collect();
                assert_eq!(got, want, "case {case}, query {q}");
            }
            assert_eq!(stats.candidates, 4 * 60, "case {case}");
            let s = stats;
            assert_eq!(s.kim + s.keogh_query + s.keogh_data + s.dtw, s.candidates);
            assert!(s.dtw < s.candidates, "case {case}: nothing pruned");
            assert!(device.batches.iter().all(|&b| b <= 5));
        }
    }
}
