//! Soft-DTW (Cuturi & Blondel 2017): DTW with the minimum replaced by the
//! soft minimum `-gamma * ln(sum(exp(-x / gamma)))`, squared Euclidean cost,
//! optional Sakoe-Chiba band; and its derivatives for the backward pass.

use super::window::SakoeChiba;
use super::{Measure, MeasureParams};
use crate::{Differentiable, Neighbours, Real, Recurrence, Sample, Series};

/// Soft-DTW parameters as the kernels receive them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftDtwParams<T> {
    /// Smoothing, > 0.
    pub gamma: T,
    /// DTW's window.
    pub window: SakoeChiba,
}

impl<T> SoftDtwParams<T> {
    /// Smoothing `gamma`, no band.
    pub fn new(gamma: T) -> Self {
        Self {
            gamma,
            window: SakoeChiba::NONE,
        }
    }

    /// The same with a Sakoe-Chiba band of `radius` samples (or none).
    pub fn with_band(self, radius: Option<usize>) -> Self {
        Self {
            window: SakoeChiba::new(radius),
            ..self
        }
    }
}

impl<T: Copy> MeasureParams for SoftDtwParams<T> {
    const MEASURE: Measure = Measure::SoftDtw;
}

/// `plus(m) - m + soft_min(a, b, c)`, where `m` is the smallest argument
/// and `soft_min(a, b, c) = -gamma * ln(exp(-a/gamma) + exp(-b/gamma) +
/// exp(-c/gamma))`, computed after shifting by `m`, so that no
/// exponential overflows and the smallest one's term is exactly 1: `m -
/// gamma * ln(1 + (exp((m - x) / gamma) + exp((m - y) / gamma)))`, `x` and
/// `y` the other two arguments. Two exponentials and one logarithm of a
/// sum in `[1, 3]`, in the base [`Real::soft_pow`] computes; for `gamma ->
/// 0` the exponentials underflow to 0 and the result is `plus(m)` exactly
/// (the DTW limit). Infinite arguments contribute 0; all three infinite
/// give `plus(inf)`, infinity.
///
/// The same bits for the arguments in any order, so that a pair and its
/// transpose have the same value: `m` is the smallest whatever the order,
/// `{x, y}` is `{max(a, b), max(min(a, b), c)}`, the same two values
/// whatever the order (`c` above `min(a, b)` replaces it, else `min(a,
/// b)` is one of them), and their terms are added to each other before 1
/// (a sum of two numbers does not depend on their order).
///
/// `c` comes last in the order of its dependencies: one minimum or maximum
/// with what `a` and `b` give, then a subtraction, a scaling, an
/// exponential, two additions, a logarithm and a fused multiply-add, so
/// that a driver whose `c` arrives last (the left neighbour, from the cell
/// just computed) waits on no more. Without a branch or a test for
/// infinity, which would cost a cell two more instructions (a branch
/// around each cell would also keep the GPU from interleaving independent
/// cells, `drivers::columns::skewed`): the differences are taken from `m`
/// capped at the largest finite value (`min(c, min(a, b, MAX))`), so that
/// with all three infinite they are `-inf` (terms of 0), not NaN. `plus`
/// is the cell's cost added to `m` (one fused multiply-add for univariate
/// DTW costs).
#[inline(always)]
pub fn soft_min_plus<T: Real>(gamma: T, a: T, b: T, c: T, plus: impl FnOnce(T) -> T) -> T {
    let (low, high) = (a.min(b), a.max(b));
    let low_capped = low.min(T::MAX);
    let smallest = low.min(c);
    let capped = c.min(low_capped);
    let other = low.max(c);
    // Loop-invariant: the drivers' loops compute them once.
    let exp_scale = T::ONE / (gamma * T::SOFT_LN_BASE);
    let log_scale = gamma * T::SOFT_LN_BASE;
    let terms =
        ((capped - other) * exp_scale).soft_pow() + ((capped - high) * exp_scale).soft_pow();
    (T::ONE + terms)
        .soft_log()
        .mul_add_fast(-log_scale, plus(smallest))
}

impl<T: Real> Recurrence<T> for SoftDtwParams<T> {
    type Row = Sample<T>;
    type Column = Sample<T>;
    type Window = SakoeChiba;

    /// Two exponentials and a logarithm in each cell's dependency chain.
    const LATENCY_BOUND: bool = true;

    #[inline(always)]
    fn window(&self) -> SakoeChiba {
        self.window
    }

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
        soft_min_plus(self.gamma, diag, up, left, |smallest| {
            a.squared_distance_plus(row, b, column, smallest)
        })
    }
}

/// A cell is `cost + soft_min(diag, up, left)`, so its derivative with
/// respect to a neighbour `x` is `exp((soft_min - x) / gamma)`: the key is
/// the soft minimum, `value - cost`, and the cost's derivative with respect
/// to value `d` of `a_i` is `2 (a_i[d] - b_j[d])` (minus that for `b_j`).
impl<T: Real> Differentiable<T> for SoftDtwParams<T> {
    #[inline(always)]
    unsafe fn key(
        &self,
        row: &Sample<T>,
        column: &Sample<T>,
        a: &Series<T>,
        b: &Series<T>,
        value: T,
    ) -> T {
        value - a.squared_distance_of(row, b, column)
    }

    #[inline(always)]
    fn partial(&self, key: T, neighbour: T) -> T {
        // The soft minimum is at most each neighbour; rounding can make the
        // difference slightly positive, which must not give weights above 1.
        let exp_scale = T::ONE / (self.gamma * T::SOFT_LN_BASE);
        ((key - neighbour).min(T::ZERO) * exp_scale).soft_pow()
    }

    #[inline(always)]
    unsafe fn cost_gradient(
        &self,
        row: &Sample<T>,
        column: &Sample<T>,
        a: &Series<T>,
        b: &Series<T>,
        dim: usize,
    ) -> T {
        let difference = if a.dims == 1 {
            row.first - column.first
        } else {
            a.value(row.index as usize, dim) - b.value(column.index as usize, dim)
        };
        difference + difference
    }
}
