//! The Soft-DTW gradient of paired batches on the CPU: the GPU's gradient
//! kernel's stencil driver, forward and backward, on one thread, over
//! pairs of one shape in lockstep where the processor allows it (as
//! `units` does for the values: lanes of pairs, vectorised `exp` and `ln`),
//! else a pair at a time.

use super::lanes::Lanes;
use super::lockstep::{interleave, Lockstep, SingleThread};
use super::units::{lockstep_available, units, LOCKSTEP_BYTES, LOCKSTEP_MIN};
use crate::interrupt;
use crate::results::Gradients;
use crate::{Float, SeriesSet};
use rayon::prelude::*;
use timewarp_kernels::drivers::stencil::{
    interior_offset, ring_len, stencil_gradient, stencil_value, GRADIENT_RINGS,
};
use timewarp_kernels::{Differentiable, Real, Series, SoftDtwParams};

/// Scratch memory of one pair's (or one unit's) gradient: the series
/// interleaved into lanes, the stored cost matrix, the rings and the
/// gradients, reused from unit to unit.
struct GradientScratch<X> {
    series: Vec<X>,
    store: Vec<X>,
    ring: Vec<X>,
    grad_a: Vec<X>,
    grad_b: Vec<X>,
}

impl<X> Default for GradientScratch<X> {
    fn default() -> Self {
        GradientScratch {
            series: Vec::new(),
            store: Vec::new(),
            ring: Vec::new(),
            grad_a: Vec::new(),
            grad_b: Vec::new(),
        }
    }
}

/// Value of one pair and its gradient, added to `scratch.grad_a`
/// (`a.len * dims`) and, if `with_b`, `scratch.grad_b`: the GPU's stencil
/// driver on one thread (forward pass storing the cost matrix, then the
/// backward pass).
///
/// # Safety
/// The series are valid and non-empty.
#[inline(always)]
unsafe fn one_gradient<X: Real, R: Differentiable<X>>(
    measure: &R,
    a: &Series<X>,
    b: &Series<X>,
    scratch: &mut GradientScratch<X>,
    with_b: bool,
) -> X {
    let (n, m) = (a.len, b.len);
    let ring = ring_len(n, m);
    scratch
        .store
        .resize(interior_offset(n + m + 1, n, m), X::ZERO);
    scratch.ring.resize(GRADIENT_RINGS * ring, X::ZERO);
    scratch.grad_a.clear();
    scratch.grad_a.resize(n * a.dims, X::ZERO);
    scratch.grad_b.clear();
    scratch
        .grad_b
        .resize(if with_b { m * b.dims } else { 0 }, X::ZERO);
    let block = SingleThread {
        memory: scratch.ring.as_mut_ptr() as *mut u8,
    };
    let ring_ptr = scratch.ring.as_mut_ptr();
    let store = scratch.store.as_mut_ptr();
    let value = stencil_value(&block, measure, a, b, ring_ptr, ring, store);
    let grad_b = if with_b {
        scratch.grad_b.as_mut_ptr()
    } else {
        std::ptr::null_mut()
    };
    let grad_a = scratch.grad_a.as_mut_ptr();
    stencil_gradient(&block, measure, a, b, ring_ptr, ring, store, grad_a, grad_b);
    value
}

/// [`one_gradient`] of `K` pairs of one shape in lockstep: their series
/// interleaved into lanes, the driver once over the lanes.
///
/// # Safety
/// The series are valid, non-empty and of one shape.
#[inline(always)]
unsafe fn lanes_gradient<T: Float, const K: usize>(
    params: &SoftDtwParams<T>,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    scratch: &mut GradientScratch<Lanes<T, K>>,
    with_b: bool,
) -> [T; K] {
    let (n, m, dims) = (a[0].len, b[0].len, a[0].dims);
    let zero = Lanes([T::ZERO; K]);
    scratch.series.resize((n + m) * (dims + 1), zero);
    let a_lanes = interleave(a, scratch.series.as_mut_ptr());
    let b_lanes = interleave(b, scratch.series.as_mut_ptr().add(n * (dims + 1)));
    let lanes = Lockstep::<T, K>::lanes(params);
    one_gradient(&lanes, &a_lanes, &b_lanes, scratch, with_b).0
}

/// [`lanes_gradient`] compiled for AVX2 and FMA (see `units`).
///
/// # Safety
/// As [`lanes_gradient`]; the processor has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lanes_gradient_avx2<T: Float, const K: usize>(
    params: &SoftDtwParams<T>,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    scratch: &mut GradientScratch<Lanes<T, K>>,
    with_b: bool,
) -> [T; K] {
    lanes_gradient(params, a, b, scratch, with_b)
}

/// One pair's value and gradients (with respect to `b` only if asked).
type PairGradient<T> = (T, Vec<T>, Vec<T>);

/// Values and gradients of series `k` of `a` against series `k` of `b`:
/// the gradients laid out like the batches' values (sample-major), with
/// respect to `b` only if `with_b`.
pub(crate) fn paired_gradient<T: Float>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    params: &SoftDtwParams<T>,
    with_b: bool,
) -> Gradients<T> {
    let results = if lockstep_available() {
        match LOCKSTEP_BYTES / std::mem::size_of::<T>() {
            8 => lockstep_pairs::<T, 8>(a, b, params, with_b),
            16 => lockstep_pairs::<T, 16>(a, b, params, with_b),
            lanes => unreachable!("{lanes} lanes"),
        }
    } else {
        single_pairs(a, b, params, with_b)
    };
    let dims = a.dims();
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

/// Every pair on its own, with std's `exp` and `ln`: where the processor
/// lacks what the lanes need.
fn single_pairs<T: Float>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    params: &SoftDtwParams<T>,
    with_b: bool,
) -> Vec<PairGradient<T>> {
    let (a_ref, b_ref) = (a.host_ref(), b.host_ref());
    (0..a.len())
        .into_par_iter()
        .map_init(GradientScratch::default, |scratch, k| {
            // Interrupted: the caller discards the result.
            if interrupt::requested() {
                return (T::ZERO, Vec::new(), Vec::new());
            }
            // SAFETY: k indexes both batches, which outlive this call.
            let (x, y) = unsafe { (a_ref.series(k), b_ref.series(k)) };
            // SAFETY: the series are valid and non-empty.
            let value = unsafe { one_gradient(params, &x, &y, scratch, with_b) };
            (value, scratch.grad_a.clone(), scratch.grad_b.clone())
        })
        .collect()
}

/// Pairs of one shape `K` at a time in lockstep, spread over rayon's
/// threads; a pair that too few others share runs in a single lane, so
/// that its value and gradients are the same bits in any batch (as the
/// values' lockstep driver does).
fn lockstep_pairs<T: Float, const K: usize>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    params: &SoftDtwParams<T>,
    with_b: bool,
) -> Vec<PairGradient<T>> {
    let (a_ref, b_ref) = (a.host_ref(), b.host_ref());
    // SAFETY: k indexes both batches, which outlive this call.
    let series = |k: usize| unsafe { (a_ref.series(k), b_ref.series(k)) };
    let (order, units) = units(a.len(), K, |k| {
        let (x, y) = series(k);
        (x.len, y.len)
    });
    let per_unit: Vec<Vec<(usize, PairGradient<T>)>> = units
        .par_iter()
        .map_init(
            || (GradientScratch::default(), GradientScratch::default()),
            |(lanes, lane), unit| {
                let pairs = &order[unit.start..unit.start + unit.len];
                // Interrupted: the caller discards the result.
                if interrupt::requested() {
                    return pairs
                        .iter()
                        .map(|&k| (k, (T::ZERO, Vec::new(), Vec::new())))
                        .collect();
                }
                if unit.len >= LOCKSTEP_MIN {
                    // Unused lanes repeat the unit's last pair.
                    let xs = std::array::from_fn(|l| series(pairs[l.min(unit.len - 1)]).0);
                    let ys = std::array::from_fn(|l| series(pairs[l.min(unit.len - 1)]).1);
                    // SAFETY: the pairs share a shape; lockstep_available.
                    let values = unsafe { run::<T, K>(params, &xs, &ys, lanes, with_b) };
                    let (n, m) = (xs[0].len, ys[0].len);
                    pairs
                        .iter()
                        .enumerate()
                        .map(|(l, &k)| (k, lane_of(values[l], lanes, l, (n, m), a.dims())))
                        .collect()
                } else {
                    pairs
                        .iter()
                        .map(|&k| {
                            let (x, y) = series(k);
                            // SAFETY: as above.
                            let value = unsafe { run::<T, 1>(params, &[x], &[y], lane, with_b) };
                            (k, lane_of(value[0], lane, 0, (x.len, y.len), a.dims()))
                        })
                        .collect()
                }
            },
        )
        .collect();
    let mut out: Vec<PairGradient<T>> = (0..a.len())
        .map(|_| (T::ZERO, Vec::new(), Vec::new()))
        .collect();
    for (k, result) in per_unit.into_iter().flatten() {
        out[k] = result;
    }
    out
}

/// [`lanes_gradient`], in the AVX2 build on x86-64.
///
/// # Safety
/// As [`lanes_gradient`]; only if [`lockstep_available`].
#[inline(always)]
unsafe fn run<T: Float, const K: usize>(
    params: &SoftDtwParams<T>,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    scratch: &mut GradientScratch<Lanes<T, K>>,
    with_b: bool,
) -> [T; K] {
    #[cfg(target_arch = "x86_64")]
    return lanes_gradient_avx2(params, a, b, scratch, with_b);
    #[cfg(not(target_arch = "x86_64"))]
    lanes_gradient(params, a, b, scratch, with_b)
}

/// Lane `l`'s value and gradients out of a unit's scratch.
fn lane_of<T: Float, const K: usize>(
    value: T,
    scratch: &GradientScratch<Lanes<T, K>>,
    l: usize,
    (n, m): (usize, usize),
    dims: usize,
) -> PairGradient<T> {
    let lane = |values: &[Lanes<T, K>]| values.iter().map(|v| v.0[l]).collect::<Vec<T>>();
    let grad_b = if scratch.grad_b.is_empty() {
        Vec::new()
    } else {
        lane(&scratch.grad_b[..m * dims])
    };
    (value, lane(&scratch.grad_a[..n * dims]), grad_b)
}
