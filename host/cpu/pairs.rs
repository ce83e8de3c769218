//! Batches of pairs: a matrix, or paired batches, spread over rayon's
//! threads, in lockstep where the measure and the processor allow it.

use super::one_pair::{buffer_len, one_pair};
use super::units::{lockstep_available, lockstep_pair_values, CpuMeasure, LOCKSTEP_MIN};
use crate::interrupt;
use crate::{Float, SeriesSet};
use ndarray::Array2;
use rayon::prelude::*;
use timewarp_kernels::launch::{tile_pairs, triangle_pair};
use timewarp_kernels::SetRef;

/// Pairs handed to a rayon task at once: enough to amortise scheduling for
/// short series, few enough to balance long ones.
const PAIRS_PER_TASK: usize = 16;

/// Cells from which a pair is long: where a call has fewer pairs than
/// threads, such a pair is computed on all of them ([`CpuMeasure::long_pair`]),
/// which pays from a few tiles along each side on.
const LONG_PAIR_CELLS: usize = 1 << 20;

/// The values of the pairs `0..count`, pair `k` being series `pair(k).0` of
/// `a` against series `pair(k).1` of `b`, whose series have at most `a_max`
/// and `b_max` samples. Fewer pairs than threads: the long ones one after
/// the other, each on all threads, the others as below.
fn pair_values<T: Float, R: CpuMeasure<T>>(
    a: &SetRef<T>,
    b: &SetRef<T>,
    maxima: (usize, usize),
    count: usize,
    pair: impl Fn(usize) -> (usize, usize) + Sync,
    measure: &R,
) -> Vec<T> {
    let series = |k: usize| {
        let (i, j) = pair(k);
        // SAFETY: pair(k) indexes the batches, which outlive this call.
        unsafe { (a.series(i), b.series(j)) }
    };
    let long = |k: usize| {
        let (x, y) = series(k);
        x.len.saturating_mul(y.len) >= LONG_PAIR_CELLS
    };
    if count >= rayon::current_num_threads() || !(0..count).any(long) {
        return batch_values(a, b, maxima, count, pair, measure);
    }
    let others: Vec<usize> = (0..count).filter(|&k| !long(k)).collect();
    let values = batch_values(a, b, maxima, others.len(), |s| pair(others[s]), measure);
    let mut out = vec![T::ZERO; count];
    for (&k, value) in others.iter().zip(values) {
        out[k] = value;
    }
    for k in (0..count).filter(|&k| long(k)) {
        let (x, y) = series(k);
        // SAFETY: the series are valid (above) and non-empty (a set's are).
        out[k] = unsafe { measure.long_pair(&x, &y) };
    }
    out
}

/// [`pair_values`] without the long pairs' route: in lockstep where the
/// measure and the processor allow it, else one at a time.
fn batch_values<T: Float, R: CpuMeasure<T>>(
    a: &SetRef<T>,
    b: &SetRef<T>,
    (a_max, b_max): (usize, usize),
    count: usize,
    pair: impl Fn(usize) -> (usize, usize) + Sync,
    measure: &R,
) -> Vec<T> {
    // Few pairs run one at a time, unless their values alone would differ
    // from the same pairs' in a larger call.
    let enough = count >= LOCKSTEP_MIN || R::LANES_DIFFER;
    if R::LOCKSTEP && enough && lockstep_available() {
        let maxima = (a_max, b_max);
        let mut lanes = R::LOCKSTEP_BYTES / std::mem::size_of::<T>();
        // Too few pairs to give every thread a unit of 16 lanes: units of
        // 8, which keep twice as many threads busy.
        if count < lanes * rayon::current_num_threads() {
            lanes = lanes.min(8);
        }
        return match lanes {
            4 => lockstep_pair_values::<T, R, 4>(a, b, maxima, count, pair, measure),
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
                // Interrupted: the caller discards the result.
                if interrupt::requested() {
                    return T::ZERO;
                }
                let (i, j) = pair(k);
                // SAFETY: pair(k) indexes the batches, which outlive this
                // call; the buffer fits their longest series.
                unsafe { one_pair(measure, &a.series(i), &b.series(j), buffer) }
            },
        )
        .collect()
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
