//! The fast CPU backend: the kernels' own recurrences with linear memory
//! per pair, pairs spread over threads with rayon.
//!
//! Soft-DTW and DTW compute pairs of one shape several at a time in
//! lockstep (`lanes::lockstep_values`: the GPU's anti-diagonal block driver
//! on one thread and the measure's one cell update, over lanes of 8 `f64`
//! or 16 `f32` pairs, Soft-DTW with vectorised `exp` and `ln`), compiled
//! for AVX2 and FMA where the processor has them. A pair whose shape too
//! few others share, any pair on a processor without them, and TWED run
//! one at a time: DTW and TWED follow the rows (`rows::pair_value`),
//! Soft-DTW the anti-diagonals (the block driver alone), so that the
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
use timewarp_kernels::lanes::lockstep_buffer_len;
use timewarp_kernels::launch::{tile_pairs, triangle_pair};
use timewarp_kernels::{
    lockstep_values, pair_value, Differentiable, DtwParams, Lanes, Lockstep, Recurrence, RowPair,
    Series, SetRef, SoftDtwParams, TwedParams,
};

/// Pairs handed to a rayon task at once: enough to amortise scheduling for
/// short series, few enough to balance long ones.
const PAIRS_PER_TASK: usize = 16;

/// Bytes of the pairs' values that one lockstep step computes: two AVX2
/// vectors, 8 `f64` or 16 `f32` lanes, so that each operation of a cell's
/// update is two independent vector instructions. Measured (Soft-DTW,
/// 256 x 256, one thread): 8 `f64` lanes as fast as 16 or faster, 16
/// `f32` lanes 10 % faster than 8; 4 `f64` lanes are not vectorised at all
/// (see `lanes::LaneReal`).
const LOCKSTEP_BYTES: usize = 64;

/// Fewest pairs of one shape worth a lockstep run (the unused lanes repeat
/// a pair): one run costs about as much as 3 or 4 pairs one at a time.
const LOCKSTEP_MIN: usize = 4;

/// A measure as the CPU backend runs it: one pair at a time, or pairs of
/// one shape in lockstep.
pub(crate) trait CpuMeasure<T: Float>: Recurrence<T> + Sync {
    /// Whether pairs of one shape run together ([`CpuMeasure::lockstep`]).
    const LOCKSTEP: bool = false;

    /// The values of `K` pairs of one shape, computed in lockstep.
    ///
    /// # Safety
    /// As [`lockstep_values`]; only called if [`CpuMeasure::LOCKSTEP`] and
    /// [`lockstep_available`].
    unsafe fn lockstep<const K: usize>(
        &self,
        _a: &[Series<T>; K],
        _b: &[Series<T>; K],
        _buffer: *mut Lanes<T, K>,
    ) -> [T; K] {
        unreachable!("the measure does not run in lockstep")
    }
}

/// DTW's cell update is a recurrence over any [`timewarp_kernels::Real`],
/// lanes included, and gives the same bits in a lane as alone (the same
/// operations on the same values; the lanes' `min` equals `f64::min` on
/// numbers): in lockstep it is 3 to 5 times faster, vectorised.
impl<T: Float> CpuMeasure<T> for DtwParams {
    const LOCKSTEP: bool = true;

    unsafe fn lockstep<const K: usize>(
        &self,
        a: &[Series<T>; K],
        b: &[Series<T>; K],
        buffer: *mut Lanes<T, K>,
    ) -> [T; K] {
        #[cfg(target_arch = "x86_64")]
        return lockstep_avx2(self, a, b, buffer);
        #[cfg(not(target_arch = "x86_64"))]
        lockstep_values(self, a, b, buffer)
    }
}

impl<T: Float> CpuMeasure<T> for TwedParams<T> {}

impl<T: Float> CpuMeasure<T> for SoftDtwParams<T> {
    const LOCKSTEP: bool = true;

    unsafe fn lockstep<const K: usize>(
        &self,
        a: &[Series<T>; K],
        b: &[Series<T>; K],
        buffer: *mut Lanes<T, K>,
    ) -> [T; K] {
        let lanes = Lockstep::<T, K>::lanes(self);
        #[cfg(target_arch = "x86_64")]
        return lockstep_avx2(&lanes, a, b, buffer);
        #[cfg(not(target_arch = "x86_64"))]
        lockstep_values(&lanes, a, b, buffer)
    }
}

/// Whether the lockstep driver can run here: its polynomials need fused
/// multiply-adds in hardware (AVX2 and FMA on x86-64, always there on
/// AArch64); elsewhere every pair runs alone.
fn lockstep_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
    #[cfg(target_arch = "aarch64")]
    return true;
    #[allow(unreachable_code)]
    false
}

/// [`lockstep_values`] compiled for AVX2 and FMA (the driver, the cell
/// update and the lanes' arithmetic are all inlined into it): four `f64` or
/// eight `f32` lanes per instruction, and `mul_add` one instruction.
///
/// # Safety
/// As [`lockstep_values`]; the processor has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lockstep_avx2<T: Float, M: Recurrence<Lanes<T, K>>, const K: usize>(
    measure: &M,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    buffer: *mut Lanes<T, K>,
) -> [T; K] {
    lockstep_values(measure, a, b, buffer)
}

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

/// Pairs run together: `len` consecutive pairs of the shape-sorted order
/// from `start` on, in lockstep if `len >= LOCKSTEP_MIN`, else one by one.
#[derive(Clone, Copy)]
struct Unit {
    start: usize,
    len: usize,
}

/// The pairs `0..count` ordered by shape (`shape(k)`; stable, so that pairs
/// of one shape keep their order) and cut into [`Unit`]s: runs of one shape
/// in groups of up to `lanes`, single pairs where a run is shorter than
/// [`LOCKSTEP_MIN`].
fn units(
    count: usize,
    lanes: usize,
    shape: impl Fn(usize) -> (usize, usize),
) -> (Vec<usize>, Vec<Unit>) {
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|&k| shape(k));
    let mut units = Vec::with_capacity(count / lanes + 1);
    let mut start = 0;
    while start < count {
        let first = shape(order[start]);
        let mut end = start + 1;
        while end < count && end - start < lanes && shape(order[end]) == first {
            end += 1;
        }
        if end - start >= LOCKSTEP_MIN {
            units.push(Unit {
                start,
                len: end - start,
            });
        } else {
            units.extend((start..end).map(|start| Unit { start, len: 1 }));
        }
        start = end;
    }
    (order, units)
}

/// The values of the pairs `0..count`, pair `k` being series `pair(k).0` of
/// `a` against series `pair(k).1` of `b`, whose series have at most `a_max`
/// and `b_max` samples: in lockstep where the measure and the processor
/// allow it, else one at a time.
fn pair_values<T: Float, R: CpuMeasure<T>>(
    a: &SetRef<T>,
    b: &SetRef<T>,
    (a_max, b_max): (usize, usize),
    count: usize,
    pair: impl Fn(usize) -> (usize, usize) + Sync,
    measure: &R,
) -> Vec<T> {
    if R::LOCKSTEP && count >= LOCKSTEP_MIN && lockstep_available() {
        let maxima = (a_max, b_max);
        let mut lanes = LOCKSTEP_BYTES / std::mem::size_of::<T>();
        // Too few pairs to give every thread a unit of 16 lanes: units of
        // 8, one vector, which keep twice as many threads busy.
        if count < lanes * rayon::current_num_threads() {
            lanes = 8;
        }
        return match lanes {
            8 => lockstep_pair_values::<T, R, 8>(a, b, maxima, count, pair, measure),
            16 => lockstep_pair_values::<T, R, 16>(a, b, maxima, count, pair, measure),
            lanes => unreachable!("{lanes} lanes"),
        };
    }
    let len = buffer_len(a_max, b_max);
    (0..count)
        .into_par_iter()
        .with_min_len(PAIRS_PER_TASK)
        .map_init(
            || vec![T::ZERO; len],
            |buffer, k| {
                let (i, j) = pair(k);
                // SAFETY: pair(k) indexes the batches, which outlive this
                // call; the buffer fits their longest series.
                unsafe { one_pair(measure, &a.series(i), &b.series(j), buffer) }
            },
        )
        .collect()
}

/// [`pair_values`] with pairs of one shape `K` at a time: [`units`] spread
/// over rayon's threads, each thread with its buffers.
fn lockstep_pair_values<T: Float, R: CpuMeasure<T>, const K: usize>(
    a: &SetRef<T>,
    b: &SetRef<T>,
    (a_max, b_max): (usize, usize),
    count: usize,
    pair: impl Fn(usize) -> (usize, usize) + Sync,
    measure: &R,
) -> Vec<T> {
    let series = |k: usize| {
        let (i, j) = pair(k);
        // SAFETY: pair(k) indexes the batches, which outlive this call.
        unsafe { (a.series(i), b.series(j)) }
    };
    let (order, units) = units(count, K, |k| {
        let (x, y) = series(k);
        (x.len, y.len)
    });
    let single_len = buffer_len(a_max, b_max);
    let lanes_len = lockstep_buffer_len(a_max, b_max, a.dims as usize);
    let results: Vec<[T; K]> = units
        .par_iter()
        .map_init(
            || {
                let lanes = vec![Lanes([T::ZERO; K]); lanes_len];
                (vec![T::ZERO; single_len], lanes)
            },
            |(single, lanes), unit| {
                let pairs = &order[unit.start..unit.start + unit.len];
                let mut values = [T::ZERO; K];
                if unit.len >= LOCKSTEP_MIN {
                    // Unused lanes repeat the unit's last pair.
                    let xs = std::array::from_fn(|l| series(pairs[l.min(unit.len - 1)]).0);
                    let ys = std::array::from_fn(|l| series(pairs[l.min(unit.len - 1)]).1);
                    // SAFETY: the pairs share a shape, and the buffer fits
                    // the longest series.
                    values = unsafe { measure.lockstep(&xs, &ys, lanes.as_mut_ptr()) };
                } else {
                    for (value, &k) in values.iter_mut().zip(pairs) {
                        let (x, y) = series(k);
                        // SAFETY: the buffer fits the longest series.
                        *value = unsafe { one_pair(measure, &x, &y, single) };
                    }
                }
                values
            },
        )
        .collect();
    let mut out = vec![T::ZERO; count];
    for (unit, values) in units.iter().zip(results) {
        for (&k, value) in order[unit.start..unit.start + unit.len].iter().zip(values) {
            out[k] = value;
        }
    }
    out
}

/// Series `k` of `a` against series `k` of `b`, for every `k` (same counts).
pub(crate) fn paired<T: Float, R: CpuMeasure<T>>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    measure: &R,
) -> Vec<T> {
    pair_values(
        &a.host_ref(),
        &b.host_ref(),
        (a.max_len(), b.max_len()),
        a.len(),
        |k| (k, k),
        measure,
    )
}

/// Every series of `a` against every series of `b` (or of `a` itself, upper
/// triangle computed once, when `b` is `None`).
pub(crate) fn matrix<T: Float, R: CpuMeasure<T>>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    measure: &R,
) -> Array2<T> {
    let triangle = b.is_none();
    let b = b.unwrap_or(a);
    let columns = b.len() as u64;
    let pairs = tile_pairs(a.len() as u64, columns, triangle);
    let pair = |k: u64| {
        if triangle {
            triangle_pair(k, columns)
        } else {
            (k / columns, k % columns)
        }
    };
    let values = pair_values(
        &a.host_ref(),
        &b.host_ref(),
        (a.max_len(), b.max_len()),
        pairs as usize,
        |k| {
            let (i, j) = pair(k as u64);
            (i as usize, j as usize)
        },
        measure,
    );
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
