//! Which measures run pairs of one shape in lockstep ([`CpuMeasure`]), and
//! the batch cut into units of one shape that run together, spread over
//! rayon's threads.

use super::lanes::Lanes;
use super::lockstep::{lockstep_buffer_len, lockstep_values, Lockstep};
use super::one_pair::{buffer_len, narrow_window, one_pair};
use super::wavefront::{wavefront_value, Build, TILE};
use crate::interrupt;
use crate::Float;
use rayon::prelude::*;
use timewarp_kernels::{DtwParams, Recurrence, Series, SetRef, SoftDtwParams, TwedParams};

/// Bytes of the pairs' values that one lockstep step computes, by default:
/// two AVX2 vectors, 8 `f64` or 16 `f32` lanes, so that each operation of a
/// cell's update is two independent vector instructions (fewer lanes do not
/// vectorise the exponentials and logarithms: see `lanes::LaneReal`;
/// docs/algorithms.md has the measurements).
pub(super) const LOCKSTEP_BYTES: usize = 64;

/// The share of a pair's cells below which pairs of one shape run one at a
/// time on the rows instead of in lockstep, which passes over every cell:
/// vectorised, a lockstep run's cell costs a small part of one on the rows,
/// so only very narrow windows gain (one pair at a time on the rows was
/// faster for Soft-DTW only below about 1.3% of the cells, for DTW up to
/// 12%; one threshold serves both).
const NARROW_FOR_LOCKSTEP: f64 = 0.01;

/// Fewest pairs of one shape worth a lockstep run (the unused lanes repeat
/// a pair): one run costs about as much as 3 or 4 pairs one at a time.
pub(super) const LOCKSTEP_MIN: usize = 4;

/// A measure as the CPU backend runs it: one pair at a time, or pairs of
/// one shape in lockstep.
pub(crate) trait CpuMeasure<T: Float>: Recurrence<T> + Sync {
    /// Whether pairs of one shape run together ([`CpuMeasure::lockstep`]).
    const LOCKSTEP: bool = false;

    /// Bytes of the pairs' values one lockstep step computes.
    const LOCKSTEP_BYTES: usize = LOCKSTEP_BYTES;

    /// Whether a pair's value in a lane differs in its last bits from its
    /// value alone (Soft-DTW: the lanes' exponential and logarithm are
    /// polynomials of their own, not the library's): then a pair without
    /// others of its shape runs in lockstep too, in a single lane, so that
    /// its value never depends on the pairs computed with it.
    const LANES_DIFFER: bool = false;

    /// Whether the lockstep driver computes the rows and columns once
    /// first ([`lockstep_values`]).
    const PRECOMPUTED_ROWS: bool = true;

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

    /// One long pair's value on all of rayon's threads
    /// ([`wavefront_value`]): the same cell updates as the pair computed
    /// alone, so the same bits.
    ///
    /// # Safety
    /// The series are non-empty and valid.
    unsafe fn long_pair(&self, a: &Series<T>, b: &Series<T>) -> T {
        wavefront_value(self, a, b, (TILE, TILE), Build::Plain)
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
        run_lockstep(
            self,
            a,
            b,
            buffer,
            <Self as CpuMeasure<T>>::PRECOMPUTED_ROWS,
        )
    }
}

/// TWED in lockstep too, its rows and columns (a sample, the one before,
/// their timestamps and the deletion cost) computed once, not once per
/// cell, and one AVX2 vector of lanes: those rows and columns then stay in
/// the first-level cache (with two vectors they do not, and the steps are
/// slower), and its update has no exponentials to vectorise.
impl<T: Float> CpuMeasure<T> for TwedParams<T> {
    const LOCKSTEP: bool = true;
    const LOCKSTEP_BYTES: usize = 32;
    const PRECOMPUTED_ROWS: bool = true;

    unsafe fn lockstep<const K: usize>(
        &self,
        a: &[Series<T>; K],
        b: &[Series<T>; K],
        buffer: *mut Lanes<T, K>,
    ) -> [T; K] {
        let lanes = Lockstep::<T, K>::lanes(self);
        run_lockstep(
            &lanes,
            a,
            b,
            buffer,
            <Self as CpuMeasure<T>>::PRECOMPUTED_ROWS,
        )
    }
}

impl<T: Float> CpuMeasure<T> for SoftDtwParams<T> {
    const LOCKSTEP: bool = true;
    const LANES_DIFFER: bool = true;

    /// Over one lane, as the lockstep driver computes a pair alone, where
    /// that driver would (so that the value is the same bits as in any
    /// batch); with std's `exp` and `ln` where it would not.
    unsafe fn long_pair(&self, a: &Series<T>, b: &Series<T>) -> T {
        let narrow = narrow_window(self, (a.len, b.len), NARROW_FOR_LOCKSTEP);
        if narrow || !lockstep_available() {
            return wavefront_value(self, a, b, (TILE, TILE), Build::Plain);
        }
        let lanes = Lockstep::<T, 1>::lanes(self);
        let build = if cfg!(target_arch = "x86_64") {
            Build::Avx2
        } else {
            Build::Plain
        };
        wavefront_value(&lanes, &one_lane(a), &one_lane(b), (TILE, TILE), build).0[0]
    }

    unsafe fn lockstep<const K: usize>(
        &self,
        a: &[Series<T>; K],
        b: &[Series<T>; K],
        buffer: *mut Lanes<T, K>,
    ) -> [T; K] {
        let lanes = Lockstep::<T, K>::lanes(self);
        run_lockstep(
            &lanes,
            a,
            b,
            buffer,
            <Self as CpuMeasure<T>>::PRECOMPUTED_ROWS,
        )
    }
}

/// A series as a series of one lane (the same memory: a lane of one
/// value is laid out as the value).
fn one_lane<T: Float>(series: &Series<T>) -> Series<Lanes<T, 1>> {
    Series {
        values: series.values as *const Lanes<T, 1>,
        times: series.times as *const Lanes<T, 1>,
        len: series.len,
        dims: series.dims,
    }
}

/// [`lockstep_values`] of a measure over lanes, in the AVX2 build where
/// there is one.
///
/// # Safety
/// As [`lockstep_values`]; only called if [`lockstep_available`].
#[inline(always)]
unsafe fn run_lockstep<T: Float, M: Recurrence<Lanes<T, K>>, const K: usize>(
    measure: &M,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    buffer: *mut Lanes<T, K>,
    precomputed_rows: bool,
) -> [T; K] {
    #[cfg(target_arch = "x86_64")]
    return lockstep_avx2(measure, a, b, buffer, precomputed_rows);
    #[cfg(not(target_arch = "x86_64"))]
    lockstep_values(measure, a, b, buffer, precomputed_rows)
}

/// Whether the lockstep driver can run here: its polynomials need fused
/// multiply-adds in hardware (AVX2 and FMA on x86-64, always there on
/// AArch64); elsewhere every pair runs alone.
pub(super) fn lockstep_available() -> bool {
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
    precomputed_rows: bool,
) -> [T; K] {
    lockstep_values(measure, a, b, buffer, precomputed_rows)
}

/// Pairs run together: `len` consecutive pairs of the shape-sorted order
/// from `start` on, in lockstep if `len >= LOCKSTEP_MIN`, else one by one.
#[derive(Clone, Copy)]
pub(super) struct Unit {
    pub(super) start: usize,
    pub(super) len: usize,
}

/// The pairs `0..count` ordered by shape (`shape(k)`; stable, so that pairs
/// of one shape keep their order) and cut into [`Unit`]s: runs of one shape
/// in groups of up to `lanes`, single pairs where a run is shorter than
/// [`LOCKSTEP_MIN`].
pub(super) fn units(
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

/// [`pair_values`] with pairs of one shape `K` at a time: [`units`] spread
/// over rayon's threads, each thread with its buffers.
pub(super) fn lockstep_pair_values<T: Float, R: CpuMeasure<T>, const K: usize>(
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
                let lane = vec![Lanes([T::ZERO; 1]); if R::LANES_DIFFER { lanes_len } else { 0 }];
                (vec![T::ZERO; single_len], lanes, lane)
            },
            |(single, lanes, lane), unit| {
                let pairs = &order[unit.start..unit.start + unit.len];
                let mut values = [T::ZERO; K];
                // Interrupted: the caller discards the result.
                if interrupt::requested() {
                    return values;
                }
                let (x, y) = series(pairs[0]);
                let narrow = narrow_window(measure, (x.len, y.len), NARROW_FOR_LOCKSTEP);
                if unit.len >= LOCKSTEP_MIN && !narrow {
                    // Unused lanes repeat the unit's last pair.
                    let xs = std::array::from_fn(|l| series(pairs[l.min(unit.len - 1)]).0);
                    let ys = std::array::from_fn(|l| series(pairs[l.min(unit.len - 1)]).1);
                    // SAFETY: the pairs share a shape, and the buffer fits
                    // the longest series.
                    values = unsafe { measure.lockstep(&xs, &ys, lanes.as_mut_ptr()) };
                } else if R::LANES_DIFFER && !narrow {
                    for (value, &k) in values.iter_mut().zip(pairs) {
                        let (x, y) = series(k);
                        // SAFETY: the buffer fits the longest series.
                        *value = unsafe { measure.lockstep::<1>(&[x], &[y], lane.as_mut_ptr()) }[0];
                    }
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
