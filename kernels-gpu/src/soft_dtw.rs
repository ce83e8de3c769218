//! Soft-DTW (Cuturi & Blondel 2017): DTW with the minimum replaced by the
//! soft minimum `-gamma * ln(sum(exp(-x / gamma)))`, squared Euclidean cost.

use crate::{Neighbours, Real, Recurrence, Series};

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
    type Row = usize;

    #[inline(always)]
    unsafe fn row(&self, _a: &Series<T>, i: usize) -> usize {
        i - 1
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        &sample: &usize,
        a: &Series<T>,
        b: &Series<T>,
        j: usize,
        Neighbours { diag, up, left }: Neighbours<T>,
    ) -> T {
        soft_dtw_cell(
            self.gamma,
            a.squared_distance(sample, b, j - 1),
            diag,
            up,
            left,
        )
    }
}
