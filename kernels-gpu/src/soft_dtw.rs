//! Soft-DTW (Cuturi & Blondel 2017): DTW with the minimum replaced by the
//! soft minimum `-gamma * ln(sum(exp(-x / gamma)))`, squared Euclidean cost.

use crate::{Neighbours, Real, Recurrence, Sample, Series};

/// Soft-DTW parameters as the kernels receive them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftDtwParams<T> {
    /// Smoothing, > 0.
    pub gamma: T,
}

/// `-gamma * ln(exp(-a/gamma) + exp(-b/gamma) + exp(-c/gamma))`, computed
/// after shifting by the smallest argument so no exponential overflows.
#[inline(always)]
pub fn soft_min<T: Real>(gamma: T, a: T, b: T, c: T) -> T {
    let smallest = a.min(b).min(c);
    if smallest == T::INFINITY {
        return T::INFINITY;
    }
    let sum = ((smallest - a) / gamma).exp()
        + ((smallest - b) / gamma).exp()
        + ((smallest - c) / gamma).exp();
    smallest - gamma * sum.ln()
}

/// The Soft-DTW cell update.
#[inline(always)]
pub fn soft_dtw_cell<T: Real>(gamma: T, cost: T, diag: T, up: T, left: T) -> T {
    cost + soft_min(gamma, diag, up, left)
}

impl<T: Real> Recurrence<T> for SoftDtwParams<T> {
    type Row = Sample<T>;
    type Column = Sample<T>;

    #[inline(always)]
    unsafe fn row(&self, a: &Series<T>, i: usize) -> Sample<T> {
        a.sample(i - 1)
    }

    #[inline(always)]
    unsafe fn column(&self, b: &Series<T>, j: usize) -> Sample<T> {
        b.sample(j - 1)
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        row: &Sample<T>,
        column: &Sample<T>,
        a: &Series<T>,
        b: &Series<T>,
        Neighbours { diag, up, left }: Neighbours<T>,
    ) -> T {
        soft_dtw_cell(
            self.gamma,
            a.squared_distance_of(row, b, column),
            diag,
            up,
            left,
        )
    }
}
