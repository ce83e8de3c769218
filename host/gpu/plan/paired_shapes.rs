//! The launches of paired batches (`x_k` against `y_k`): the pairs' shapes
//! read from the batches' offsets ([`Shapes`]), and where a gradient
//! computation's outputs lie ([`GradientPlan`]).

use crate::{Float, SeriesSet};
use std::cell::Cell;
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::drivers::columns::gradient::panels_store_len;
use timewarp_kernels::drivers::stencil::ring_len;
use timewarp_kernels::hw::LANES;

/// The pairs of a paired computation, by their lengths (read from the
/// batches' sample offsets): `x_k` against `y_k`, and for the soft-DTW
/// divergence also `x_k` against itself and `y_k` against itself, each
/// group a launch of its own over the same two batches ([`operands`]).
#[derive(Clone, Copy)]
pub(crate) struct Shapes<'a> {
    pub x: &'a [u64],
    pub y: &'a [u64],
    pub divergence: bool,
    /// The (shortest, longest) series of `x` and of `y`, kept by the
    /// batches or found in one pass each: the planning of a small call
    /// reads them several times before its first copy.
    x_lengths: (usize, usize),
    y_lengths: (usize, usize),
}

/// The batches launch `launch` pairs: `x` with `y`, `x` with itself, `y`
/// with itself.
pub(crate) fn operands<B: Copy>(launch: usize, x: B, y: B) -> (B, B) {
    match launch {
        0 => (x, y),
        1 => (x, x),
        _ => (y, y),
    }
}

/// Series lengths from `len + 1` sample offsets.
pub(crate) fn lengths(offsets: &[u64]) -> impl Iterator<Item = usize> + '_ {
    offsets.windows(2).map(|w| (w[1] - w[0]) as usize)
}

/// The (shortest, longest) of the lengths `offsets` delimit; (0, 0) for
/// none.
pub(crate) fn lengths_range(offsets: &[u64]) -> (usize, usize) {
    let (min, max) = lengths(offsets).fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    (min.min(max), max)
}

impl<'a> Shapes<'a> {
    pub(crate) fn new(x: &'a [u64], y: &'a [u64], divergence: bool) -> Self {
        Shapes::known(x, y, divergence, lengths_range(x), lengths_range(y))
    }

    /// [`Shapes::new`] of batches whose (shortest, longest) series are
    /// known (kept by the batches): no scan of their offsets.
    pub(crate) fn known(
        x: &'a [u64],
        y: &'a [u64],
        divergence: bool,
        x_lengths: (usize, usize),
        y_lengths: (usize, usize),
    ) -> Self {
        debug_assert_eq!(x.len(), y.len());
        debug_assert_eq!((lengths_range(x), lengths_range(y)), (x_lengths, y_lengths));
        Shapes {
            x,
            y,
            divergence,
            x_lengths,
            y_lengths,
        }
    }

    /// The shapes of paired host batches.
    pub(crate) fn of_sets<T: Float>(
        x: &'a SeriesSet<T>,
        y: &'a SeriesSet<T>,
        divergence: bool,
    ) -> Self {
        Shapes::known(
            x.parts().1,
            y.parts().1,
            divergence,
            x.lengths(),
            y.lengths(),
        )
    }

    pub(crate) fn pairs(&self) -> usize {
        self.x.len() - 1
    }

    /// Launches over the batches: 1, or 3 for the divergence.
    pub(crate) fn launches(&self) -> usize {
        if self.divergence {
            3
        } else {
            1
        }
    }

    /// The lengths `(n, m)` of pair `k` of launch `launch`.
    pub(crate) fn lengths(&self, launch: usize, k: usize) -> (usize, usize) {
        let (a, b) = operands(launch, self.x, self.y);
        ((a[k + 1] - a[k]) as usize, (b[k + 1] - b[k]) as usize)
    }

    /// Pairs `range` only.
    pub(crate) fn range(&self, range: &Range<usize>) -> Shapes<'a> {
        if range.len() == self.pairs() {
            return *self;
        }
        Shapes::new(
            &self.x[range.start..=range.end],
            &self.y[range.start..=range.end],
            self.divergence,
        )
    }

    /// The (shortest, longest) series of each batch of launch `launch`.
    pub(crate) fn lengths_range(&self, launch: usize) -> ((usize, usize), (usize, usize)) {
        operands(launch, self.x_lengths, self.y_lengths)
    }

    /// The longest anti-diagonal (with boundary) of launch `launch`'s pairs.
    pub(crate) fn ring_len(&self, launch: usize) -> usize {
        (0..self.pairs())
            .map(|k| {
                let (n, m) = self.lengths(launch, k);
                ring_len(n, m)
            })
            .max()
            .unwrap_or(1)
    }

    /// The longest anti-diagonal of all launches' pairs.
    pub(crate) fn longest_ring(&self) -> usize {
        (0..self.launches())
            .map(|l| self.ring_len(l))
            .max()
            .unwrap_or(1)
    }

    /// The longest series any launch takes as `a` (the rows): `x`'s, and
    /// for the divergence also `y`'s.
    pub(crate) fn longest_rows(&self) -> usize {
        let y = if self.divergence { self.y_lengths.1 } else { 0 };
        self.x_lengths.1.max(y)
    }

    /// The longest series any launch takes as `b` (the columns): `y`'s,
    /// and for the divergence also `x`'s.
    pub(crate) fn longest_columns(&self) -> usize {
        let x = if self.divergence { self.x_lengths.1 } else { 0 };
        self.y_lengths.1.max(x)
    }

    /// The shortest series of both batches.
    pub(crate) fn shortest(&self) -> usize {
        self.x_lengths.0.min(self.y_lengths.0)
    }
}

/// Which kernel computes a paired gradient call, decided once for the
/// call from its longest pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GradientKernel {
    /// `warp_gradient<stripe>` (one warp a pair) or
    /// `panels_gradient<warps>x<stripe>` (a panel of `32 * stripe` columns
    /// a warp): every series `b` fits the pair's warps' stripes.
    Warp { warps: usize, stripe: usize },
    /// The stencil driver's `gradient`, a pair a block, its rings in global
    /// memory when the longest pair's do not fit a block's shared memory.
    Stencil { global_rings: bool },
}

impl GradientKernel {
    /// Values of the store an `n x m` pair's forward pass keeps for its
    /// backward pass.
    pub(crate) fn store_values(self, n: usize, m: usize) -> usize {
        match self {
            GradientKernel::Warp { stripe, .. } => panels_store_len(n, m, LANES * stripe, stripe),
            GradientKernel::Stencil { .. } => n * m,
        }
    }
}

/// What a paired gradient computation allocates, and where its outputs lie
/// in the one buffer that holds them: the values (launch after launch),
/// then the gradients, laid out like the batches' values: of launch 0 with
/// respect to `x` and (if asked for) `y`, and for the divergence of
/// launches 1 and 2 with respect to their first batch (`x`, `y`).
pub(crate) struct GradientPlan {
    pub launches: usize,
    pub pairs: usize,
    pub x_values: usize,
    pub y_values: usize,
    pub with_y: bool,
    pub kernel: GradientKernel,
    /// Bytes of one pair's workspace besides its store: its rings in
    /// global memory (all pairs of the call keep them there when the
    /// longest pair's do not fit shared memory), or the borders between its
    /// panels; or 0.
    pub ring_bytes: usize,
    /// The last pair's lengths and store values ([`GradientPlan::store_values`]).
    last_store: Cell<((usize, usize), usize)>,
}

impl GradientPlan {
    /// The plan of the pairs of `shapes` (samples of `dims` values) for
    /// `kernel`, with `ring_bytes` of rings per pair in global memory (or
    /// 0).
    pub(crate) fn new(
        shapes: &Shapes,
        dims: usize,
        with_y: bool,
        kernel: GradientKernel,
        ring_bytes: usize,
    ) -> Self {
        let pairs = shapes.pairs();
        GradientPlan {
            launches: shapes.launches(),
            pairs,
            x_values: (shapes.x[pairs] - shapes.x[0]) as usize * dims,
            y_values: (shapes.y[pairs] - shapes.y[0]) as usize * dims,
            with_y,
            kernel,
            ring_bytes,
            last_store: Cell::new(((usize::MAX, usize::MAX), 0)),
        }
    }

    /// [`GradientKernel::store_values`] of an `n x m` pair, computed again
    /// only when the lengths differ from the last pair's: it divides, and
    /// planning a batch of one length asks it once a pair.
    pub(crate) fn store_values(&self, n: usize, m: usize) -> usize {
        let (lengths, values) = self.last_store.get();
        if lengths == (n, m) {
            return values;
        }
        let values = self.kernel.store_values(n, m);
        self.last_store.set(((n, m), values));
        values
    }

    /// Offsets in the output buffer of the gradients of launch `launch`
    /// with respect to its first and (or null) second batch.
    pub(crate) fn gradients(&self, launch: usize) -> (usize, Option<usize>) {
        let values = self.launches * self.pairs;
        let grad_y = values + self.x_values;
        let after_y = grad_y + if self.with_y { self.y_values } else { 0 };
        match launch {
            0 => (values, self.with_y.then_some(grad_y)),
            1 => (after_y, None),
            _ => (after_y + self.x_values, None),
        }
    }

    /// Values of the output buffer.
    pub(crate) fn outputs(&self) -> usize {
        let (first, second) = self.gradients(self.launches - 1);
        match (self.launches, second) {
            (3, _) => first + self.y_values,
            (_, Some(grad_y)) => grad_y + self.y_values,
            (_, None) => first + self.x_values,
        }
    }

    /// Output values of pair `k` alone (its values and its share of the
    /// gradients), for chunking a host batch: the plan of a chunk holds
    /// the sum of its pairs'.
    pub(crate) fn outputs_of(&self, shapes: &Shapes, k: usize, dims: usize) -> usize {
        let (n, m) = shapes.lengths(0, k);
        let y_grads = usize::from(self.with_y) + usize::from(self.launches == 3);
        self.launches + (n * (1 + usize::from(self.launches == 3)) + m * y_grads) * dims
    }

    /// At least [`GradientPlan::workspace_of`] any pair of `shapes`: as if
    /// every launch paired the longest rows with the longest columns (a
    /// store grows with both lengths).
    pub(crate) fn largest_workspace<T: Float>(&self, shapes: &Shapes) -> usize {
        let store = self
            .kernel
            .store_values(shapes.longest_rows(), shapes.longest_columns());
        let one = store
            .saturating_mul(size_of::<T>())
            .saturating_add(size_of::<u64>() + self.ring_bytes);
        self.launches.saturating_mul(one)
    }

    /// The store offsets of `ranges` of the pairs of `shapes` (a chunk's,
    /// launch after launch, from its store's start), where each chunk's begin,
    /// and the store values of the largest chunk. Batches of one length a
    /// launch (training batches) take a step a pair, not a pass over the
    /// pairs' lengths.
    pub(crate) fn store_offsets(
        &self,
        shapes: &Shapes,
        ranges: &[Range<usize>],
    ) -> (Vec<u64>, Vec<usize>, usize) {
        let mut offsets = Vec::with_capacity(shapes.launches() * shapes.pairs());
        let mut starts = Vec::with_capacity(ranges.len());
        let mut store_len = 0;
        for range in ranges {
            starts.push(offsets.len());
            let mut total = 0u64;
            for l in 0..shapes.launches() {
                let ((a_short, a_long), (b_short, b_long)) = shapes.lengths_range(l);
                if a_short == a_long && b_short == b_long {
                    let step = self.store_values(a_long, b_long) as u64;
                    offsets.extend((0..range.len() as u64).map(|k| total + k * step));
                    total += range.len() as u64 * step;
                    continue;
                }
                for k in range.clone() {
                    offsets.push(total);
                    let (n, m) = shapes.lengths(l, k);
                    total += self.store_values(n, m) as u64;
                }
            }
            store_len = store_len.max(total as usize);
        }
        (offsets, starts, store_len)
    }

    /// Workspace bytes of pair `k`: every launch's stored cost matrix, its
    /// offset in the store, and its rings if they are in global memory.
    pub(crate) fn workspace_of<T: Float>(&self, shapes: &Shapes, k: usize) -> usize {
        (0..self.launches)
            .map(|l| {
                let (n, m) = shapes.lengths(l, k);
                self.store_values(n, m) * size_of::<T>() + size_of::<u64>() + self.ring_bytes
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remembered store size is the kernel's for every pair, whether
    /// its lengths repeat the last pair's or not.
    #[test]
    fn store_values_follow_the_lengths() {
        let x: Vec<u64> = [0, 128, 256, 300, 301, 429, 557].to_vec();
        let y: Vec<u64> = [0, 128, 256, 384, 385, 390, 518].to_vec();
        let shapes = Shapes::new(&x, &y, false);
        for kernel in [
            GradientKernel::Warp {
                warps: 1,
                stripe: 4,
            },
            GradientKernel::Warp {
                warps: 2,
                stripe: 1,
            },
            GradientKernel::Stencil {
                global_rings: false,
            },
        ] {
            let plan = GradientPlan::new(&shapes, 1, false, kernel, 0);
            for k in (0..shapes.pairs()).chain((0..shapes.pairs()).rev()) {
                let (n, m) = shapes.lengths(0, k);
                assert_eq!(
                    plan.store_values(n, m),
                    kernel.store_values(n, m),
                    "pair {k}"
                );
            }
        }
    }

    /// Store offsets, chunk by chunk and launch after launch, are the
    /// running sums of the kernel's store sizes, whether the batches have
    /// one length (a step a pair) or several; the largest chunk's sum is
    /// the store's length, and no pair's workspace exceeds the largest.
    #[test]
    fn store_offsets_are_running_sums_of_store_sizes() {
        let kernel = GradientKernel::Warp {
            warps: 1,
            stripe: 4,
        };
        let uniform_x: Vec<u64> = (0..=5).map(|k| k * 128).collect();
        let uniform_y: Vec<u64> = (0..=5).map(|k| k * 96).collect();
        let mixed_x: Vec<u64> = [0, 128, 256, 300, 301, 429].to_vec();
        let mixed_y: Vec<u64> = [0, 100, 228, 356, 357, 362].to_vec();
        for (x, y) in [(&uniform_x, &uniform_y), (&mixed_x, &mixed_y)] {
            for divergence in [false, true] {
                let shapes = Shapes::new(x, y, divergence);
                let plan = GradientPlan::new(&shapes, 1, true, kernel, 16);
                let ranges = [0..2, 2..5];
                let (offsets, starts, store_len) = plan.store_offsets(&shapes, &ranges);
                let mut expected = Vec::new();
                let mut longest = 0;
                for range in &ranges {
                    let mut total = 0;
                    for l in 0..shapes.launches() {
                        for k in range.clone() {
                            expected.push(total);
                            let (n, m) = shapes.lengths(l, k);
                            total += kernel.store_values(n, m) as u64;
                        }
                    }
                    longest = longest.max(total as usize);
                }
                let here = format!("{x:?} {y:?}, divergence {divergence}");
                assert_eq!(offsets, expected, "{here}");
                assert_eq!(starts, [0, 2 * shapes.launches()], "{here}");
                assert_eq!(store_len, longest, "{here}");
                let largest = plan.largest_workspace::<f32>(&shapes);
                for k in 0..shapes.pairs() {
                    assert!(
                        plan.workspace_of::<f32>(&shapes, k) <= largest,
                        "{here}: pair {k}"
                    );
                }
            }
        }
    }
}
