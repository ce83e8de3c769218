//! The GPU runtime's policy, with no CUDA: how a computation is cut to fit
//! a device-memory budget and which kernel runs it. Every rule here is
//! unit-tested on the CPU. Nothing here depends on the other folders of
//! `gpu`.
//!
//! The files, each depending only on those before it:
//!
//! ```text
//! layout          where the parts of a range of series lie in its device
//!                 image, and the bytes it takes
//! mod.rs          ranges of series and chunks of pairs ([`ranges`],
//!                 [`chunks`]) that fit a budget
//! select          the default variant of a batch, and the kernel of the
//!                 catalogue (driver, shape, univariate twin) a launch takes
//! matrix_tiles    the tiles of a distance matrix, the pipeline's slots'
//!                 share of the budget, the stencil kernels' blocks
//! blocks          blocks for several GPUs: each one's cost (its cells),
//!                 sized and ordered so that the GPUs finish together
//! paired_shapes   the pairs' shapes of paired batches (`x_k` against
//!                 `y_k`), and where a gradient's outputs lie
//! spread          blocks handed out to several workers (one per GPU) from
//!                 one queue, tested with fake workers
//! search          the subsequence search: when `Auto` takes the GPU, its
//!                 chunks of starts and DTW launches within the budget
//! subsequence     the open-ended subsequence alignment: when `Auto` takes
//!                 the GPU, its kernel, chunks, segments and tiles
//! ```

pub(super) mod blocks;
pub(super) mod layout;
pub(super) mod matrix_tiles;
pub(super) mod paired_shapes;
pub(super) mod search;
pub(super) mod select;
pub(super) mod spread;
pub(super) mod subsequence;

use crate::{Error, Float, Result, SeriesSet};
use std::mem::size_of;
use std::ops::Range;

/// At most this many blocks per launch (the grid's x limit is 2^31 - 1).
pub(crate) const MAX_BLOCKS: u64 = 1 << 30;

/// Consecutive ranges covering `range` of `set`, each of at most
/// `max_count` series whose image takes at most `max_bytes` (a single
/// larger series gets a range of its own). Each range's end is found by a
/// binary search over the offsets, not series by series: a streamed
/// matrix plans its chunks at every call, and a million series took
/// milliseconds while the GPU waited.
pub(crate) fn ranges<T: Float>(
    set: &SeriesSet<T>,
    range: Range<usize>,
    max_bytes: usize,
    max_count: usize,
) -> Vec<Range<usize>> {
    let word = size_of::<u64>();
    let per_sample = (set.dims() + usize::from(set.has_timestamps())) * size_of::<T>();
    let offsets = set.parts().1;
    // The image of series `start..end`: `end - start + 1` offsets and the
    // samples.
    let image = |start: usize, end: usize| {
        (end - start + 1) * word + (offsets[end] - offsets[start]) as usize * per_sample
    };
    let mut result = Vec::new();
    let mut start = range.start;
    while start < range.end {
        // The longest range from `start` that fits, and at least one series:
        // the image grows with the end, so the ends that fit come first.
        let (mut fits, mut longest) = (start + 1, range.end.min(start + max_count.max(1)));
        while fits < longest {
            let middle = fits + (longest - fits).div_ceil(2);
            if image(start, middle) <= max_bytes {
                fits = middle;
            } else {
                longest = middle - 1;
            }
        }
        result.push(start..fits);
        start = fits;
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
            return Err(Error::gpu_memory(format!(
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

#[cfg(test)]
mod tests {
    use super::layout::test_sets::set;
    use super::*;

    /// The ranges [`ranges`] cuts, found series by series: a series joins
    /// the range unless that would pass either limit.
    fn one_by_one(
        set: &SeriesSet<f64>,
        range: Range<usize>,
        max_bytes: usize,
        max_count: usize,
    ) -> Vec<Range<usize>> {
        let word = size_of::<u64>();
        let per_sample = (set.dims() + usize::from(set.has_timestamps())) * size_of::<f64>();
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

    #[test]
    fn ranges_are_those_cut_series_by_series() {
        // Lengths of 1 to 23 samples, in a pattern with no period of the limits.
        let lengths: Vec<usize> = (0..200).map(|k| 1 + (k * 7 + k * k / 3) % 23).collect();
        for (dims, times) in [(1, false), (3, false), (2, true)] {
            let set = set(&lengths, dims, times);
            for max_bytes in [0, 8, 50, 300, 1000, 4096, 1 << 20] {
                for max_count in [1, 2, 5, 17, 64, 1000] {
                    for range in [0..200, 13..14, 37..180, 200..200] {
                        assert_eq!(
                            ranges(&set, range.clone(), max_bytes, max_count),
                            one_by_one(&set, range.clone(), max_bytes, max_count),
                            "dims {dims}, times {times}, {max_bytes} bytes, {max_count} series, {range:?}"
                        );
                    }
                }
            }
        }
    }
}
