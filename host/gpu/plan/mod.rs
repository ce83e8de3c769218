//! How a computation is cut to fit a device-memory budget: ranges of
//! series and chunks of pairs ([`ranges`], [`chunks`]), the tiles of a
//! distance matrix ([`matrix`]) and the launches of paired batches
//! ([`paired`]), and work spread over several GPUs ([`spread`]). No CUDA
//! here: every plan is unit-tested on the CPU.

pub mod matrix;
pub mod paired;
pub mod spread;

use crate::{Error, Float, Result, SeriesSet};
use std::mem::size_of;
use std::ops::Range;

/// At most this many blocks per launch (the grid's x limit is 2^31 - 1).
pub(crate) const MAX_BLOCKS: u64 = 1 << 30;

/// Consecutive ranges covering `range` of `set`, each of at most
/// `max_count` series whose image takes at most `max_bytes` (a single
/// larger series gets a range of its own).
pub(crate) fn ranges<T: Float>(
    set: &SeriesSet<T>,
    range: Range<usize>,
    max_bytes: usize,
    max_count: usize,
) -> Vec<Range<usize>> {
    let word = size_of::<u64>();
    let per_sample = (set.dims() + usize::from(set.has_timestamps())) * size_of::<T>();
    let mut result = Vec::new();
    let (mut start, mut bytes) = (range.start, word);
    for k in range.clone() {
        let size = set.series_len(k) * per_sample + word;
        if k > start && (bytes + size > max_bytes || k - start == max_count) {
            result.push(start..k);
            (start, bytes) = (k, word);
        }
        bytes += size;
    }
    if start < range.end {
        result.push(start..range.end);
    }
    result
}

/// `0..count` in consecutive ranges of at most `max_count`.
pub(crate) fn count_ranges(count: usize, max_count: usize) -> Vec<Range<usize>> {
    (0..count)
        .step_by(max_count)
        .map(|start| start..(start + max_count).min(count))
        .collect()
}

/// Consecutive ranges of pairs whose `bytes(k)` sum, with `per_chunk`
/// bytes more, to at most `budget` each (a single larger pair is an error).
pub(crate) fn chunks(
    pairs: usize,
    budget: usize,
    per_chunk: usize,
    bytes: impl Fn(usize) -> usize,
    what: &str,
) -> Result<Vec<Range<usize>>> {
    let mut result = Vec::new();
    let (mut start, mut used) = (0, per_chunk);
    for k in 0..pairs {
        let size = bytes(k);
        if per_chunk + size > budget {
            return Err(Error::Gpu(format!(
                "pair {k} needs {} bytes of device memory for {what}, over the {budget} available",
                per_chunk + size
            )));
        }
        if k > start && (used + size > budget || (k - start) as u64 == MAX_BLOCKS) {
            result.push(start..k);
            (start, used) = (k, per_chunk);
        }
        used += size;
    }
    result.push(start..pairs);
    Ok(result)
}
