//! Soft-DTW's expected alignment: the forward matrix `R` and the backward
//! recursion of Cuturi & Blondel (2017, Algorithm 2), both kept whole.

use super::dtw::band_columns;
use super::types::Samples;
use crate::{Float, Result, SoftDtw};
use ndarray::Array2;

/// The values the computation keeps for an `n x m` pair: `R` and `E`
/// padded by one on each side.
pub(super) fn workspace_values(n: usize, m: usize) -> u128 {
    2 * (n as u128 + 2) * (m as u128 + 2)
}

/// `-gamma ln(sum exp(-v / gamma))` of three values, from their minimum so
/// that no exponential overflows; `+inf` when all three are.
fn softmin3<T: Float>(a: T, b: T, c: T, gamma: T) -> T {
    let least = a.min(b).min(c);
    if least == T::INFINITY {
        return T::INFINITY;
    }
    let sum = [a, b, c]
        .iter()
        .fold(T::ZERO, |sum, &v| sum + (-(v - least) / gamma).exp());
    least - gamma * sum.ln()
}

/// `E` (`n x m`: the derivative of the value with respect to each cell's
/// cost, 0 outside the band) and the value; [`Error::Interrupted`] if
/// interrupted (checked every row of both passes).
pub(super) fn alignment<T: Float>(
    x: &Samples<T>,
    y: &Samples<T>,
    soft: SoftDtw,
) -> Result<(Array2<T>, T)> {
    let (n, m) = (x.len(), y.len());
    let gamma = T::from_f64(soft.gamma());
    let inside = |i: usize, j: usize| {
        let (lo, hi) = band_columns(i - 1, n, m, soft.band());
        (lo..=hi).contains(&(j - 1))
    };
    let cost = |i: usize, j: usize| x.squared_distance(i - 1, y, j - 1);
    // R with 1-based cells, +inf on the boundary and outside the band.
    let mut r = Array2::from_elem((n + 2, m + 2), T::INFINITY);
    r[[0, 0]] = T::ZERO;
    for i in 1..=n {
        crate::interrupt::check()?;
        for j in 1..=m {
            if inside(i, j) {
                let soft_min = softmin3(r[[i - 1, j - 1]], r[[i - 1, j]], r[[i, j - 1]], gamma);
                r[[i, j]] = cost(i, j) + soft_min;
            }
        }
    }
    let value = r[[n, m]];
    // The backward pass reads R past the last row and column as -inf
    // (weight 0) but for the corner after the end, which carries the value.
    let neg_inf = -T::INFINITY;
    for i in 0..=n + 1 {
        r[[i, m + 1]] = neg_inf;
    }
    for j in 0..=m + 1 {
        r[[n + 1, j]] = neg_inf;
    }
    r[[n + 1, m + 1]] = value;
    let outer_cost = |i: usize, j: usize| {
        if i > n || j > m {
            T::ZERO
        } else {
            cost(i, j)
        }
    };
    // The weight of the step from (i, j) to its successor (k, l): zero
    // into cells outside the band or past the end (R is +inf or -inf there).
    let weight = |r: &Array2<T>, k: usize, l: usize, i: usize, j: usize| {
        let next = r[[k, l]];
        if !next.is_finite() {
            T::ZERO
        } else {
            ((next - r[[i, j]] - outer_cost(k, l)) / gamma).exp()
        }
    };
    let mut e = Array2::from_elem((n + 2, m + 2), T::ZERO);
    e[[n + 1, m + 1]] = T::ONE;
    for i in (1..=n).rev() {
        crate::interrupt::check()?;
        for j in (1..=m).rev() {
            if !inside(i, j) {
                continue;
            }
            e[[i, j]] = e[[i + 1, j]] * weight(&r, i + 1, j, i, j)
                + e[[i, j + 1]] * weight(&r, i, j + 1, i, j)
                + e[[i + 1, j + 1]] * weight(&r, i + 1, j + 1, i, j);
        }
    }
    Ok((e.slice(ndarray::s![1..=n, 1..=m]).to_owned(), value))
}
