//! Batches of pairs: a matrix, or paired batches, spread over rayon's
//! threads, in lockstep where the measure and the processor allow it.

use super::one_pair::{buffer_len, one_pair};
use super::units::{lockstep_available, lockstep_pair_values, CpuMeasure, LOCKSTEP_MIN};
use crate::interrupt;
use crate::results::zeros;
use crate::{Float, Result, SeriesSet};
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

/// Series `i` of `a` against series `j` of `b`, alone on this thread: the
/// bits a batch of pairs gives the pair, for measures whose lanes compute
/// as a pair alone (not Soft-DTW's, [`CpuMeasure::LANES_DIFFER`]).
/// `buffer` grows as the pair needs.
pub(crate) fn value_alone<T: Float, R: CpuMeasure<T>>(
    measure: &R,
    (a, i): (&SeriesSet<T>, usize),
    (b, j): (&SeriesSet<T>, usize),
    buffer: &mut Vec<T>,
) -> T {
    assert!(
        !R::LANES_DIFFER && i < a.len() && j < b.len(),
        "value_alone: a measure whose lanes compute as alone, and series of the sets"
    );
    let len = buffer_len(a.series_len(i), b.series_len(j));
    if buffer.len() < len {
        buffer.resize(len, T::ZERO);
    }
    let (a, b) = (a.host_ref(), b.host_ref());
    // SAFETY: i and j index the sets (checked above), which outlive the
    // call; the buffer fits the two series.
    unsafe { one_pair(measure, &a.series(i), &b.series(j), buffer) }
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

/// The pairs of a matrix, numbered `0..count`: every `(i, j)` of `rows x
/// columns` row-major, or, for a set against itself, the upper triangle
/// `i <= j` row-major, without its diagonal `i == j` for measures whose
/// value of a series against itself is 0 (DTW, TWED; not Soft-DTW).
#[derive(Clone, Copy, Debug)]
struct MatrixPairs {
    columns: u64,
    triangle: bool,
    skip_diagonal: bool,
}

impl MatrixPairs {
    fn new(rows: usize, columns: usize, triangle: bool, skip_diagonal: bool) -> (Self, u64) {
        let columns = columns as u64;
        let skip_diagonal = triangle && skip_diagonal;
        let count = if skip_diagonal {
            // The strict triangle of n is the triangle of n - 1, shifted
            // one column right.
            tile_pairs(columns.saturating_sub(1), columns.saturating_sub(1), true)
        } else {
            tile_pairs(rows as u64, columns, triangle)
        };
        let pairs = MatrixPairs {
            columns,
            triangle,
            skip_diagonal,
        };
        (pairs, count)
    }

    fn pair(&self, k: u64) -> (usize, usize) {
        let (i, j) = if self.skip_diagonal {
            let (i, j) = triangle_pair(k, self.columns - 1);
            (i, j + 1)
        } else if self.triangle {
            triangle_pair(k, self.columns)
        } else {
            (k / self.columns, k % self.columns)
        };
        (i as usize, j as usize)
    }
}

/// Every series of `a` against every series of `b` (or of `a` itself, upper
/// triangle computed once, when `b` is `None`; the diagonal is left 0,
/// not computed, when `zero_diagonal`: the measure's value of a series
/// against itself is 0). The result is allocated first, so that one too
/// large for the host is an error before any work.
pub(crate) fn matrix<T: Float, R: CpuMeasure<T>>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    measure: &R,
    zero_diagonal: bool,
) -> Result<Array2<T>> {
    let triangle = b.is_none();
    let b = b.unwrap_or(a);
    let mut out = zeros(a.len(), b.len())?;
    let (pairs, count) = MatrixPairs::new(a.len(), b.len(), triangle, zero_diagonal);
    let values = pair_values(
        &a.host_ref(),
        &b.host_ref(),
        (a.max_len(), b.max_len()),
        count as usize,
        |k| pairs.pair(k as u64),
        measure,
    );
    for (k, value) in values.into_iter().enumerate() {
        let (i, j) = pairs.pair(k as u64);
        out[[i, j]] = value;
        if triangle {
            out[[j, i]] = value;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::MatrixPairs;
    use std::collections::BTreeSet;

    /// Every pair `(i, j)` numbered `0..count`, each once.
    fn enumerated(rows: usize, columns: usize, triangle: bool, skip: bool) -> Vec<(usize, usize)> {
        let (pairs, count) = MatrixPairs::new(rows, columns, triangle, skip);
        (0..count).map(|k| pairs.pair(k)).collect()
    }

    #[test]
    fn a_set_against_itself_skips_the_diagonal_only_when_asked() {
        for n in 1..=9 {
            let strict: BTreeSet<_> = (0..n)
                .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                .collect();
            let skipped = enumerated(n, n, true, true);
            assert_eq!(skipped.len(), n * (n - 1) / 2, "n = {n}");
            assert_eq!(skipped.iter().copied().collect::<BTreeSet<_>>(), strict);

            let with_diagonal = enumerated(n, n, true, false);
            assert_eq!(with_diagonal.len(), n * (n + 1) / 2, "n = {n}");
            let mut expected = strict.clone();
            expected.extend((0..n).map(|i| (i, i)));
            assert_eq!(with_diagonal.into_iter().collect::<BTreeSet<_>>(), expected);
        }
    }

    #[test]
    fn two_sets_compute_every_pair_diagonal_included() {
        for skip in [false, true] {
            let all = enumerated(3, 4, false, skip);
            let expected: Vec<_> = (0..3).flat_map(|i| (0..4).map(move |j| (i, j))).collect();
            assert_eq!(all, expected);
        }
    }
}
