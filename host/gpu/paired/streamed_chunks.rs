//! The order in which a streamed call ([`super::streamed_values`]) writes
//! the pairs into its staging buffer: chunks of pairs, and after each the
//! count of pairs the kernel may read.

use crate::gpu::transfer::image_writes::Image;
use std::ops::Range;

/// Bytes of `x` and `y` the host writes before it raises the count: small,
/// so that the first warps start soon, but each costs the host a little.
const CHUNK_BYTES: usize = 64 << 10;

/// The staging's ranges of the buffer in the order they are written, and
/// after each the count of pairs written once it is (`None` but for a
/// chunk's last range): chunks of pairs of about [`CHUNK_BYTES`], each
/// the values of `x`, its timestamps (if any), then those of `y`.
/// `values_at` is where each image's values start in the buffer.
pub(super) fn chunk_ranges(
    images: &[Image; 2],
    values_at: &[usize],
    dims: usize,
    pairs: usize,
) -> (Vec<Range<usize>>, Vec<Option<usize>>) {
    let uniform = images
        .iter()
        .all(|image| image.lengths.0 == image.lengths.1);
    chunks_of(images, values_at, dims, pairs, uniform)
}

/// [`chunk_ranges`]; with `uniform` (every series of each image of one
/// length), a chunk's pairs are counted at once rather than one by one
/// (the calling thread does this before the launch).
fn chunks_of(
    images: &[Image; 2],
    values_at: &[usize],
    dims: usize,
    pairs: usize,
    uniform: bool,
) -> (Vec<Range<usize>>, Vec<Option<usize>>) {
    let sample = |image: &Image, k: usize| (image.offsets[k] - image.offsets[0]) as usize;
    let sample_bytes =
        |image: &Image| image.layout.element * (dims + usize::from(image.layout.times));
    let bytes = |from: usize, to: usize| -> usize {
        images
            .iter()
            .map(|image| (sample(image, to) - sample(image, from)) * sample_bytes(image))
            .sum()
    };
    let (mut ranges, mut counts) = (Vec::new(), Vec::new());
    let mut first = 0;
    while first < pairs {
        let mut end = first + 1;
        if uniform {
            end = (first + CHUNK_BYTES.div_ceil(bytes(first, end))).min(pairs);
        }
        while end < pairs && bytes(first, end) < CHUNK_BYTES {
            end += 1;
        }
        for (image, &at) in images.iter().zip(values_at) {
            let layout = image.layout;
            let value = layout.element * dims;
            let (from, to) = (sample(image, first), sample(image, end));
            ranges.push(at + from * value..at + to * value);
            counts.push(None);
            if layout.times {
                let times = at + layout.times_at() - layout.values_at();
                let element = layout.element;
                ranges.push(times + from * element..times + to * element);
                counts.push(None);
            }
        }
        *counts.last_mut().expect("a chunk has ranges") = Some(end);
        first = end;
    }
    (ranges, counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::plan::layout::test_sets::set;
    use crate::gpu::transfer::call_uploads::upload_places;
    use std::mem::size_of;

    /// The chunks cover every staged byte once, in order of the pairs, and
    /// the count after a chunk is the pairs whose bytes are all in it or
    /// before it.
    #[test]
    fn chunks_cover_the_pairs_in_order() {
        for (lengths, dims, times) in [
            (vec![128; 1024], 1, false),
            (vec![3, 1, 70_000, 1, 9, 2, 4000, 1], 2, true),
            (vec![1], 1, false),
        ] {
            let (x, y) = (set(&lengths, dims, times), set(&lengths, dims, times));
            let pairs = lengths.len();
            let images = [Image::new(&x, &(0..pairs)), Image::new(&y, &(0..pairs))];
            let (values_at, _) = upload_places(&images);
            let (ranges, counts) = chunk_ranges(&images, &values_at, dims, pairs);
            let one_by_one = chunks_of(&images, &values_at, dims, pairs, false);
            assert_eq!((&ranges, &counts), (&one_by_one.0, &one_by_one.1));
            assert_eq!(ranges.len(), counts.len());
            // Every byte of each image's values and timestamps, once.
            let mut covered: Vec<Range<usize>> = ranges.clone();
            covered.sort_by_key(|range| range.start);
            for (image, &at) in images.iter().zip(&values_at) {
                let end = at + image.layout.bytes() - image.layout.values_at();
                let mut next = at;
                for range in covered.iter().filter(|r| r.start >= at && r.end <= end) {
                    assert_eq!(range.start, next, "no gap and no overlap");
                    next = range.end;
                }
                assert_eq!(next, end);
            }
            // The counts rise to every pair, each after the last range that
            // holds part of its pairs.
            let published: Vec<usize> = counts.iter().flatten().copied().collect();
            assert!(published.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(published.last(), Some(&pairs));
            let per_value = size_of::<f64>() * dims;
            let mut count = 0;
            for (range, published) in ranges.iter().zip(&counts) {
                let image = usize::from(range.start >= values_at[1]);
                let sample =
                    |k: usize| (images[image].offsets[k] - images[image].offsets[0]) as usize;
                let values = values_at[image];
                if range.end <= values + sample(pairs) * per_value {
                    // A values range: it starts where the pairs counted end.
                    assert_eq!(range.start, values + sample(count) * per_value);
                }
                if let Some(published) = published {
                    count = *published;
                }
            }
        }
    }
}
