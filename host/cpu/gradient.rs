//! The Soft-DTW gradient of paired batches on the CPU: the GPU's gradient
//! kernel's stencil driver, forward and backward, on one thread a pair.

use crate::interrupt;
use crate::lockstep::SingleThread;
use crate::results::Gradients;
use crate::{Float, SeriesSet};
use rayon::prelude::*;
use timewarp_kernels::drivers::stencil::{
    interior_offset, ring_len, stencil_gradient, stencil_value, GRADIENT_RINGS,
};
use timewarp_kernels::{Differentiable, Series};

/// Scratch memory of one pair's gradient: the stored cost matrix and the
/// rings, reused from pair to pair.
#[derive(Default)]
struct GradientScratch<T> {
    store: Vec<T>,
    ring: Vec<T>,
}

/// Value of one pair and its gradient, added to `grad_a` (`a.len * dims`)
/// and, if given, `grad_b`: the GPU's stencil driver on one thread (forward
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
    let value = stencil_value(&block, measure, a, b, ring_ptr, ring, store);
    let grad_b = grad_b.map_or(std::ptr::null_mut(), |g| g.as_mut_ptr());
    stencil_gradient(
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
            // Interrupted: the caller discards the result.
            if interrupt::requested() {
                return (T::ZERO, grad_a, grad_b);
            }
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
