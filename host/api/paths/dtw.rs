//! DTW's warping path with a matrix of steps: one byte per cell of the
//! pair, or per cell of its Sakoe-Chiba band, and two rows of costs.

use super::types::{Alignment, Samples, Step};
use crate::{Error, Float, Result};

/// The columns `lo..=hi` of 0-based row `i` that a band of radius `r`
/// allows for lengths `n`, `m` (all of them without a band): the band of
/// `Dtw::with_band`, widened by the length difference.
pub(super) fn band_columns(i: usize, n: usize, m: usize, band: Option<usize>) -> (usize, usize) {
    match band {
        None => (0, m - 1),
        Some(r) => {
            let lo = i.saturating_sub(r.saturating_add(n.saturating_sub(m)));
            let hi = i.saturating_add(r).saturating_add(m.saturating_sub(n));
            (lo, hi.min(m - 1))
        }
    }
}

/// The cells the steps' matrix holds: all `n * m`, or the band's.
pub(super) fn cells(n: usize, m: usize, band: Option<usize>) -> u128 {
    match band {
        None => n as u128 * m as u128,
        Some(_) => (0..n)
            .map(|i| {
                let (lo, hi) = band_columns(i, n, m, band);
                (hi - lo + 1) as u128
            })
            .sum(),
    }
}

/// The optimal path by traceback over the recorded steps, ties by
/// [`Step::preferred`]; the value is the last cell's cost (an error if it
/// overflowed the precision).
pub(super) fn traceback<T: Float>(
    x: &Samples<T>,
    y: &Samples<T>,
    band: Option<usize>,
) -> Result<Alignment<T>> {
    let (n, m) = (x.len(), y.len());
    let mut steps: Vec<Step> = Vec::with_capacity(cells(n, m, band) as usize);
    // Where each row's steps start, and the row's first column.
    let mut row_start = Vec::with_capacity(n);
    let mut previous = vec![T::INFINITY; m];
    let mut current = vec![T::INFINITY; m];
    let mut previous_range = (0, 0);
    for i in 0..n {
        let (lo, hi) = band_columns(i, n, m, band);
        row_start.push((steps.len(), lo));
        // This row's buffer held row i - 2: clear what it wrote.
        current[previous_range.0..=previous_range.1].fill(T::INFINITY);
        for j in lo..=hi {
            let diagonal = match (i, j) {
                (0, 0) => T::ZERO,
                (0, _) | (_, 0) => T::INFINITY,
                _ => previous[j - 1],
            };
            let up = if i > 0 { previous[j] } else { T::INFINITY };
            let left = if j > lo { current[j - 1] } else { T::INFINITY };
            let (step, best) = Step::preferred(diagonal, up, left);
            steps.push(step);
            current[j] = x.squared_distance(i, y, j) + best;
        }
        previous_range = if i == 0 {
            (lo, hi)
        } else {
            band_columns(i - 1, n, m, band)
        };
        std::mem::swap(&mut previous, &mut current);
    }
    let value = previous[m - 1];
    if !value.is_finite() {
        return Err(Error::Overflow { precision: T::NAME });
    }
    let mut path = Vec::with_capacity(n + m - 1);
    let (mut i, mut j) = (n - 1, m - 1);
    path.push((i, j));
    while (i, j) != (0, 0) {
        let (start, lo) = row_start[i];
        (i, j) = match steps[start + j - lo] {
            Step::Diagonal => (i - 1, j - 1),
            Step::Up => (i - 1, j),
            Step::Left => (i, j - 1),
        };
        path.push((i, j));
    }
    path.reverse();
    Ok(Alignment {
        path,
        value,
        on_gpu: false,
    })
}
