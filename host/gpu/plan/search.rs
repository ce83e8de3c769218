//! The subsequence search on the GPU, its policy (no CUDA): when `Auto`
//! takes the GPU, how many starts a chunk of the series holds on the
//! device, and how many candidates each DTW launch takes.

use crate::{Error, Result};
use std::mem::size_of;
use timewarp_kernels::launch::search::{SearchLaunch, BOUNDS_PER_START, TALLY_WORDS};

/// `Device::Auto` searches on the GPU (when one is usable) from this many
/// samples a CPU thread on: below it the CPU's cascade, on every core,
/// finishes first (on an H200 with 16 cores, 10^7 samples took 0.38 s on
/// the cores and 0.57 s on the GPU; 10^8, 1.75 s on the GPU).
pub(crate) const AUTO_SAMPLES_PER_THREAD: usize = 1 << 21;

/// A chunk on the GPU holds this many of the options' units of starts
/// (`SearchOptions::chunk`, default 2^14: 2^21 starts a chunk, whose
/// page-locked buffer of a univariate series the GPU keeps between calls).
pub(crate) const UNITS_PER_CHUNK: usize = 128;

/// The first DTW launch of a chunk: few candidates, the lowest bounds, so
/// that the threshold is tight before the many; each next launch takes
/// [`BATCH_GROWTH`] times more.
pub(crate) const FIRST_BATCH: usize = 1024;
pub(crate) const BATCH_GROWTH: usize = 4;

/// Whether `Auto` searches a series of `samples` samples on the GPU, with
/// `threads` CPU threads to search on otherwise.
pub(crate) fn auto_on_gpu(samples: usize, threads: usize) -> bool {
    samples >= auto_min_samples(threads)
}

/// The fewest samples `Auto` searches on the GPU, with `threads` CPU
/// threads.
pub(crate) fn auto_min_samples(threads: usize) -> usize {
    AUTO_SAMPLES_PER_THREAD.saturating_mul(threads.max(1))
}

/// How a search is cut for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SearchShape {
    /// Starts a chunk (its samples are these and `m - 1` more).
    pub chunk_starts: usize,
    /// Candidates one DTW launch takes at most.
    pub max_batch: usize,
}

/// Device bytes of a chunk of `starts` starts: its samples and their
/// envelope (three values a sample and dimension), room for every start
/// to survive (its bounds and its index), a candidate's index a start, and
/// the bounds kernel's tally.
pub(crate) fn chunk_bytes(starts: usize, m: usize, dims: usize) -> usize {
    let rows = starts + m - 1;
    3 * rows * dims * size_of::<f64>()
        + starts * (BOUNDS_PER_START * size_of::<f64>() + 2 * size_of::<u32>())
        + TALLY_WORDS * size_of::<u32>()
}

/// Device bytes of a DTW launch of `batch` candidates: its scratch, its
/// costs and the candidates' starts.
pub(crate) fn batch_bytes(batch: usize, m: usize, dims: usize) -> usize {
    batch
        * (SearchLaunch::scratch_values(m, dims) * size_of::<f64>()
            + size_of::<f64>()
            + size_of::<u32>())
}

/// The shape of a search of `starts` starts of a query of `m` samples of
/// `dims` values, in units of `unit` starts, within `budget` bytes: half
/// the budget for a chunk (at most [`UNITS_PER_CHUNK`] units, the starts
/// numbered by `u32` within it), the other half for a DTW launch's
/// scratch. An error when not even one start and one candidate fit.
pub(crate) fn search_shape(
    starts: usize,
    unit: usize,
    (m, dims): (usize, usize),
    budget: usize,
) -> Result<SearchShape> {
    let half = budget / 2;
    let wanted = unit
        .saturating_mul(UNITS_PER_CHUNK)
        .min(starts)
        .min(u32::MAX as usize)
        .max(1);
    // The bytes grow with the starts: the largest that fits, by halving.
    let mut chunk_starts = wanted;
    while chunk_starts > 1 && chunk_bytes(chunk_starts, m, dims) > half {
        chunk_starts = chunk_starts.div_ceil(2);
    }
    let one = batch_bytes(1, m, dims);
    let max_batch = (half / one).min(chunk_starts);
    if chunk_bytes(chunk_starts, m, dims) > half || max_batch == 0 {
        return Err(Error::GpuOutOfMemory {
            what: format!(
                "a search with a query of {m} samples of {dims} values needs {} bytes \
                 for one start and one candidate, more than half the budget of {budget} bytes",
                chunk_bytes(1, m, dims) + one
            ),
            source: None,
        });
    }
    Ok(SearchShape {
        chunk_starts,
        max_batch,
    })
}

/// The candidates of the DTW launch after one of `previous` candidates (0:
/// the first of a chunk), at most `max_batch`.
pub(crate) fn next_batch(previous: usize, max_batch: usize) -> usize {
    if previous == 0 {
        FIRST_BATCH.min(max_batch)
    } else {
        previous.saturating_mul(BATCH_GROWTH).min(max_batch)
    }
    .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_gpu_from_a_million_samples() {
        assert!(!auto_on_gpu((1 << 21) - 1, 1));
        assert!(auto_on_gpu(1 << 21, 1));
        assert!(!auto_on_gpu((1 << 25) - 1, 16));
        assert!(auto_on_gpu(1 << 25, 16));
        assert_eq!(auto_min_samples(0), 1 << 21);
    }

    #[test]
    fn chunks_are_units_of_starts_within_half_the_budget() {
        let budget = 1 << 30;
        let shape = search_shape(10_000_000, 1 << 14, (128, 1), budget).unwrap();
        assert_eq!(shape.chunk_starts, (1 << 14) * UNITS_PER_CHUNK);
        assert!(chunk_bytes(shape.chunk_starts, 128, 1) <= budget / 2);
        assert!(batch_bytes(shape.max_batch, 128, 1) <= budget / 2);
        // A short series: one chunk of all its starts.
        let shape = search_shape(500, 1 << 14, (128, 1), budget).unwrap();
        assert_eq!(shape.chunk_starts, 500);
        assert!(shape.max_batch <= 500);
        // A small budget cuts the chunk, and the batch.
        let small = 4 << 20;
        let shape = search_shape(10_000_000, 1 << 14, (128, 3), small).unwrap();
        assert!(shape.chunk_starts < (1 << 14) * UNITS_PER_CHUNK);
        assert!(chunk_bytes(shape.chunk_starts, 128, 3) <= small / 2);
        assert!(batch_bytes(shape.max_batch, 128, 3) <= small / 2);
        assert!(shape.max_batch >= 1);
    }

    #[test]
    fn a_budget_too_small_for_one_candidate_is_refused() {
        let error = search_shape(1000, 100, (1000, 4), 1000).unwrap_err();
        assert!(matches!(error, Error::GpuOutOfMemory { .. }), "{error}");
    }

    #[test]
    fn batches_start_small_and_grow_to_the_largest() {
        assert_eq!(next_batch(0, 1 << 20), FIRST_BATCH);
        assert_eq!(next_batch(FIRST_BATCH, 1 << 20), FIRST_BATCH * BATCH_GROWTH);
        assert_eq!(next_batch(1 << 19, 1 << 20), 1 << 20);
        assert_eq!(next_batch(0, 10), 10);
        assert_eq!(next_batch(0, 0), 1);
    }
}
