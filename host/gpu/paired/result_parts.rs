//! A paired gradient call's results on the host and the parts of them
//! that blocks of pairs own: the whole call's values and gradients made
//! zero, each block's results put in place ([`place_gradients`]), or each
//! block given its own disjoint slices of them to copy its results into
//! ([`block_parts`]), so that several GPUs write theirs at once, without
//! a lock and without a copy of their own. No CUDA.

use crate::results::PairedGradients;
use crate::Float;
use std::ops::Range;

/// Zero values and gradients of a paired call over batches with these
/// sample offsets (the first is the batch's start), for its blocks to be
/// placed in.
pub(super) fn zero_gradients<T: Float>(
    (x, y): (&[u64], &[u64]),
    dims: usize,
    (divergence, with_y): (bool, bool),
) -> PairedGradients<T> {
    let pairs = x.len() - 1;
    let launches = if divergence { 3 } else { 1 };
    let zeros = |offsets: &[u64]| vec![T::ZERO; (offsets[pairs] - offsets[0]) as usize * dims];
    PairedGradients {
        values: vec![T::ZERO; launches * pairs],
        grad_x: zeros(x),
        grad_y: with_y.then(|| zeros(y)),
        grad_xx: divergence.then(|| zeros(x)),
        grad_yy: (divergence && with_y).then(|| zeros(y)),
    }
}

/// Puts the results of the pairs `range` (laid out as a call of just them
/// lays them out) in place in the whole call's.
pub(super) fn place_gradients<T: Float>(
    whole: &mut PairedGradients<T>,
    (x, y): (&[u64], &[u64]),
    dims: usize,
    range: Range<usize>,
    got: PairedGradients<T>,
) {
    let pairs = x.len() - 1;
    for (l, values) in got.values.chunks(range.len()).enumerate() {
        whole.values[l * pairs + range.start..l * pairs + range.end].copy_from_slice(values);
    }
    // The values of a range of pairs in a batch laid out like its values.
    let samples =
        |offsets: &[u64]| offsets[range.start] as usize * dims..offsets[range.end] as usize * dims;
    let (in_x, in_y) = (samples(x), samples(y));
    whole.grad_x[in_x.clone()].copy_from_slice(&got.grad_x);
    let parts = [
        (whole.grad_y.as_mut(), got.grad_y.as_ref(), in_y.clone()),
        (whole.grad_xx.as_mut(), got.grad_xx.as_ref(), in_x),
        (whole.grad_yy.as_mut(), got.grad_yy.as_ref(), in_y),
    ];
    for (into, from, at) in parts {
        if let (Some(into), Some(from)) = (into, from) {
            into[at].copy_from_slice(from);
        }
    }
}

/// A block of pairs' part of a paired call's results: its values (a slice
/// a launch, in launch order) and its samples' part of each gradient
/// present, in the order of [`PairedGradients`]' fields.
pub(super) struct BlockParts<'a, T> {
    pub values: Vec<&'a mut [T]>,
    pub gradients: Vec<&'a mut [T]>,
}

/// The parts of `whole` (laid out for batches with these sample offsets)
/// that each of `blocks` owns: consecutive ranges of pairs that together
/// cover every pair once, in any order; the parts in the order of
/// `blocks`.
pub(super) fn block_parts<'a, T>(
    whole: &'a mut PairedGradients<T>,
    (x, y): (&[u64], &[u64]),
    dims: usize,
    blocks: &[Range<usize>],
) -> Vec<BlockParts<'a, T>> {
    let pairs = x.len() - 1;
    let mut parts: Vec<BlockParts<'a, T>> = blocks
        .iter()
        .map(|_| BlockParts {
            values: Vec::new(),
            gradients: Vec::new(),
        })
        .collect();
    for launch in whole.values.chunks_mut(pairs.max(1)) {
        for (part, slice) in parts.iter_mut().zip(cut(launch, blocks, |k| k)) {
            part.values.push(slice);
        }
    }
    let gradients = [
        (Some(&mut whole.grad_x), x),
        (whole.grad_y.as_mut(), y),
        (whole.grad_xx.as_mut(), x),
        (whole.grad_yy.as_mut(), y),
    ];
    for (gradient, offsets) in gradients {
        let Some(gradient) = gradient else { continue };
        for (part, slice) in parts.iter_mut().zip(cut(gradient, blocks, |k| {
            (offsets[k] - offsets[0]) as usize * dims
        })) {
            part.gradients.push(slice);
        }
    }
    parts
}

/// `slice` cut into the parts of `blocks` (ranges of pairs, consecutive
/// and covering `slice` once sorted; pair boundary `k` at `at(k)`), in
/// the order of `blocks`.
fn cut<'a, T>(
    slice: &'a mut [T],
    blocks: &[Range<usize>],
    at: impl Fn(usize) -> usize,
) -> Vec<&'a mut [T]> {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&b| blocks[b].start);
    let mut parts: Vec<Option<&'a mut [T]>> = blocks.iter().map(|_| None).collect();
    let (mut rest, mut base) = (slice, 0);
    for b in order {
        let (start, end) = (at(blocks[b].start), at(blocks[b].end));
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(start - base);
        let (part, tail) = tail.split_at_mut(end - start);
        parts[b] = Some(part);
        (rest, base) = (tail, end);
    }
    parts
        .into_iter()
        .map(|part| part.expect("every block has its part"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Results whose every value names where it is: launch or gradient,
    /// and index.
    fn numbered(x: &[u64], y: &[u64], dims: usize) -> PairedGradients<f64> {
        let mut whole = zero_gradients::<f64>((x, y), dims, (true, true));
        let fields = [
            Some(&mut whole.values),
            Some(&mut whole.grad_x),
            whole.grad_y.as_mut(),
            whole.grad_xx.as_mut(),
            whole.grad_yy.as_mut(),
        ];
        for (f, field) in fields.into_iter().enumerate() {
            for (i, v) in field.unwrap().iter_mut().enumerate() {
                *v = (f * 1000 + i) as f64;
            }
        }
        whole
    }

    #[test]
    fn blocks_in_any_order_own_their_pairs_values_and_samples() {
        // Four pairs: x of lengths 2, 1, 3, 2 and y of 1, 2, 2, 1, two dims.
        let (x, y, dims) = ([0, 2, 3, 6, 8], [0, 1, 3, 5, 6], 2);
        let blocks = [2..4, 0..1, 1..2];
        let mut whole = numbered(&x, &y, dims);
        let parts = block_parts(&mut whole, (&x, &y), dims, &blocks);
        let expected = numbered(&x, &y, dims);
        for (part, block) in parts.iter().zip(&blocks) {
            assert_eq!(part.values.len(), 3);
            for (l, values) in part.values.iter().enumerate() {
                let at = l * 4 + block.start..l * 4 + block.end;
                assert_eq!(**values, expected.values[at]);
            }
            let in_x = x[block.start] as usize * dims..x[block.end] as usize * dims;
            let in_y = y[block.start] as usize * dims..y[block.end] as usize * dims;
            assert_eq!(*part.gradients[0], expected.grad_x[in_x.clone()]);
            assert_eq!(
                *part.gradients[1],
                expected.grad_y.as_ref().unwrap()[in_y.clone()]
            );
            assert_eq!(*part.gradients[2], expected.grad_xx.as_ref().unwrap()[in_x]);
            assert_eq!(*part.gradients[3], expected.grad_yy.as_ref().unwrap()[in_y]);
        }
    }

    #[test]
    fn a_batch_that_starts_past_zero_is_cut_from_its_start() {
        let (x, y) = ([4, 5, 7], [10, 12, 13]);
        let mut whole = zero_gradients::<f32>((&x, &y), 1, (false, false));
        assert_eq!((whole.grad_x.len(), whole.grad_y.is_none()), (3, true));
        whole.grad_x.copy_from_slice(&[1.0, 2.0, 3.0]);
        whole.values.copy_from_slice(&[7.0, 8.0]);
        let parts = block_parts(&mut whole, (&x, &y), 1, &[1..2, 0..1]);
        assert_eq!(
            (&*parts[0].values[0], &*parts[0].gradients[0]),
            (&[8.0][..], &[2.0, 3.0][..])
        );
        assert_eq!(
            (&*parts[1].values[0], &*parts[1].gradients[0]),
            (&[7.0][..], &[1.0][..])
        );
        assert_eq!(parts[0].gradients.len(), 1);
    }
}
