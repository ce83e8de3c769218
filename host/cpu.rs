//! The fast CPU backend: the kernels' own recurrences with linear memory
//! per pair, pairs spread over threads with rayon. Most measures follow the
//! rows (`rows::pair_value`); latency-bound ones (Soft-DTW) follow the
//! anti-diagonals with the GPU's block driver on one thread, so that the
//! exponentials of neighbouring cells overlap instead of waiting on each
//! other.

use crate::soft_dtw::Gradients;
use crate::{Float, SeriesSet};
use ndarray::Array2;
use rayon::prelude::*;
use timewarp_kernels::block::{
    block_gradient, block_value, interior_offset, ring_len, SingleThread, GRADIENT_RINGS,
    VALUE_RINGS,
};
use timewarp_kernels::launch::{tile_pairs, triangle_pair};
use timewarp_kernels::{pair_value, Differentiable, Recurrence, RowPair, Series};

/// Pairs handed to a rayon task at once: enough to amortise scheduling for
/// short series, few enough to balance long ones.
const PAIRS_PER_TASK: usize = 16;

/// One pair's value with the measure's preferred CPU order, in `buffer`
/// (at least [`buffer_len`] values for the longest series).
///
/// # Safety
/// The series are valid; `buffer` is long enough.
unsafe fn one_pair<T: Float, R: Recurrence<T>>(
    measure: &R,
    a: &Series<T>,
    b: &Series<T>,
    buffer: &mut [T],
) -> T {
    if R::LATENCY_BOUND {
        let ring = ring_len(a.len, b.len);
        let block = SingleThread {
            memory: buffer.as_mut_ptr() as *mut u8,
        };
        block_value(
            &block,
            measure,
            a,
            b,
            buffer.as_mut_ptr(),
            ring,
            std::ptr::null_mut(),
        )
    } else {
        let rows = RowPair {
            base: buffer.as_mut_ptr(),
            len: b.len + 1,
            stride: 1,
        };
        pair_value(measure, a, b, rows)
    }
}

/// Values [`one_pair`] needs for series up to `a_len` and `b_len` samples.
fn buffer_len(a_len: usize, b_len: usize) -> usize {
    (2 * (b_len + 1)).max(VALUE_RINGS * ring_len(a_len, b_len))
}

/// Series `k` of `a` against series `k` of `b`, for every `k` (same counts).
pub(crate) fn paired<T: Float, R: Recurrence<T> + Sync>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    measure: &R,
) -> Vec<T> {
    let (a_ref, b_ref) = (a.host_ref(), b.host_ref());
    let len = buffer_len(a.max_len(), b.max_len());
    (0..a.len())
        .into_par_iter()
        .with_min_len(PAIRS_PER_TASK)
        .map_init(
            || vec![T::ZERO; len],
            // SAFETY: k indexes both batches, which outlive this call; the
            // buffer fits their longest series.
            |buffer, k| unsafe { one_pair(measure, &a_ref.series(k), &b_ref.series(k), buffer) },
        )
        .collect()
}

/// Every series of `a` against every series of `b` (or of `a` itself, upper
/// triangle computed once, when `b` is `None`).
pub(crate) fn matrix<T: Float, R: Recurrence<T> + Sync>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    measure: &R,
) -> Array2<T> {
    let triangle = b.is_none();
    let b = b.unwrap_or(a);
    let (a_ref, b_ref) = (a.host_ref(), b.host_ref());
    let len = buffer_len(a.max_len(), b.max_len());
    let columns = b.len() as u64;
    let pairs = tile_pairs(a.len() as u64, columns, triangle);
    let pair = |k: u64| {
        if triangle {
            triangle_pair(k, columns)
        } else {
            (k / columns, k % columns)
        }
    };
    let values: Vec<T> = (0..pairs as usize)
        .into_par_iter()
        .with_min_len(PAIRS_PER_TASK)
        .map_init(
            || vec![T::ZERO; len],
            |buffer, k| {
                let (i, j) = pair(k as u64);
                // SAFETY: i and j index the batches, which outlive this call;
                // the buffer fits their longest series.
                unsafe {
                    one_pair(
                        measure,
                        &a_ref.series(i as usize),
                        &b_ref.series(j as usize),
                        buffer,
                    )
                }
            },
        )
        .collect();
    let mut out = Array2::from_elem((a.len(), b.len()), T::ZERO);
    for (k, value) in values.into_iter().enumerate() {
        let (i, j) = pair(k as u64);
        out[[i as usize, j as usize]] = value;
        if triangle {
            out[[j as usize, i as usize]] = value;
        }
    }
    out
}

/// Scratch memory of one pair's gradient: the stored cost matrix and the
/// rings, reused from pair to pair.
#[derive(Default)]
struct GradientScratch<T> {
    store: Vec<T>,
    ring: Vec<T>,
}

/// Value of one pair and its gradient, added to `grad_a` (`a.len * dims`)
/// and, if given, `grad_b`: the GPU's block drivers on one thread (forward
/// pass storing the cost matrix, then the backward pass).
///
/// # Safety
/// The series are valid; the gradients have their sizes.
unsafe fn one_gradient<T: Float, R: Differentiable<T>>(
    measure: &R,
    a: &Series<T>,
    b: &Series<T>,
    scratch: &mut GradientScratch<T>,
    grad_a: &mut [T],
    grad_b: Option<&mut [T]>,
) -> T {
    let (n, m) = (a.len, b.len);
    let ring = ring_len(n, m);
    scratch
        .store
        .resize(interior_offset(n + m + 1, n, m), T::ZERO);
    scratch.ring.resize(GRADIENT_RINGS * ring, T::ZERO);
    let block = SingleThread {
        memory: scratch.ring.as_mut_ptr() as *mut u8,
    };
    let ring_ptr = scratch.ring.as_mut_ptr();
    let store = scratch.store.as_mut_ptr();
    let value = block_value(&block, measure, a, b, ring_ptr, ring, store);
    let grad_b = grad_b.map_or(std::ptr::null_mut(), |g| g.as_mut_ptr());
    block_gradient(
        &block,
        measure,
        a,
        b,
        ring_ptr,
        ring,
        store,
        grad_a.as_mut_ptr(),
        grad_b,
    );
    value
}

/// Values and gradients of series `k` of `a` against series `k` of `b`:
/// the gradients laid out like the batches' values (sample-major), with
/// respect to `b` only if `with_b`.
pub(crate) fn paired_gradient<T: Float, R: Differentiable<T> + Sync>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    measure: &R,
    with_b: bool,
) -> Gradients<T> {
    let (a_ref, b_ref) = (a.host_ref(), b.host_ref());
    let dims = a.dims();
    let results: Vec<(T, Vec<T>, Vec<T>)> = (0..a.len())
        .into_par_iter()
        .map_init(GradientScratch::default, |scratch, k| {
            // SAFETY: k indexes both batches, which outlive this call.
            let (x, y) = unsafe { (a_ref.series(k), b_ref.series(k)) };
            let mut grad_a = vec![T::ZERO; x.len * dims];
            let mut grad_b = vec![T::ZERO; if with_b { y.len * dims } else { 0 }];
            let grad_b_ref = with_b.then_some(grad_b.as_mut_slice());
            // SAFETY: the gradients have the series' sizes.
            let value = unsafe { one_gradient(measure, &x, &y, scratch, &mut grad_a, grad_b_ref) };
            (value, grad_a, grad_b)
        })
        .collect();
    let mut values = Vec::with_capacity(results.len());
    let mut grad_a = Vec::with_capacity(a.total_samples() * dims);
    let mut grad_b = Vec::with_capacity(if with_b { b.total_samples() * dims } else { 0 });
    for (value, ga, gb) in results {
        values.push(value);
        grad_a.extend_from_slice(&ga);
        grad_b.extend_from_slice(&gb);
    }
    (values, grad_a, with_b.then_some(grad_b))
}
