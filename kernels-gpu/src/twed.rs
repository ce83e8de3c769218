//! Time Warp Edit Distance (Marteau 2009), as in the reference C code: a
//! virtual sample of value 0 at time 0 precedes each series, the norm is
//! `(sum |u_k - v_k|^p)^(1/p)` with `p = degree`.

use crate::{Neighbours, Real, Recurrence, Series};

/// TWED parameters as the kernels receive them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TwedParams<T> {
    /// Stiffness (weight of time differences), >= 0.
    pub nu: T,
    /// Constant penalty of a deletion, >= 0.
    pub lambda: T,
    /// Exponent `p >= 1` of the Lp norm between samples.
    pub degree: T,
}

/// Value `d` of 1-based sample `k` of `s`; sample 0 is the virtual zero.
#[inline(always)]
unsafe fn value_or_zero<T: Real>(s: &Series<T>, k: usize, d: usize) -> T {
    if k == 0 {
        T::ZERO
    } else {
        s.value(k - 1, d)
    }
}

/// Timestamp of 1-based sample `k` of `s`; the virtual sample 0 is at time 0.
#[inline(always)]
unsafe fn time_or_zero<T: Real>(s: &Series<T>, k: usize) -> T {
    if k == 0 {
        T::ZERO
    } else {
        s.time(k - 1)
    }
}

/// Lp distance between 1-based sample `k` of `x` and sample `l` of `y`.
#[inline(always)]
unsafe fn lp_distance<T: Real>(degree: T, x: &Series<T>, k: usize, y: &Series<T>, l: usize) -> T {
    if x.dims == 1 {
        // (|d|^p)^(1/p) is |d| for every p; skipping the powers avoids their
        // rounding and their overflow.
        return (value_or_zero(x, k, 0) - value_or_zero(y, l, 0)).abs();
    }
    let mut sum = T::ZERO;
    for d in 0..x.dims {
        let diff = (value_or_zero(x, k, d) - value_or_zero(y, l, d)).abs();
        sum = sum
            + if degree == T::ONE {
                diff
            } else if degree == T::ONE + T::ONE {
                diff * diff
            } else {
                diff.powf(degree)
            };
    }
    if degree == T::ONE {
        sum
    } else if degree == T::ONE + T::ONE {
        sum.sqrt()
    } else {
        sum.powf(T::ONE / degree)
    }
}

/// The TWED cell update: the cheapest of a match and the two deletions.
#[inline(always)]
pub fn twed_cell<T: Real>(
    diag: T,
    up: T,
    left: T,
    match_cost: T,
    delete_a_cost: T,
    delete_b_cost: T,
) -> T {
    (diag + match_cost)
        .min(up + delete_a_cost)
        .min(left + delete_b_cost)
}

/// What row `i` computes once: its sample index, time, and the cost of
/// deleting its sample from `a`.
#[derive(Clone, Copy)]
pub struct TwedRow<T> {
    i: usize,
    time: T,
    previous_time: T,
    delete_cost: T,
}

impl<T: Real> TwedParams<T> {
    /// Cost of deleting 1-based sample `k` of `s`: its distance to the
    /// sample before, the time elapsed since then, and the constant penalty.
    #[inline(always)]
    unsafe fn delete_cost(&self, s: &Series<T>, k: usize) -> T {
        lp_distance(self.degree, s, k, s, k - 1)
            + self.nu * (time_or_zero(s, k) - time_or_zero(s, k - 1))
            + self.lambda
    }
}

impl<T: Real> Recurrence<T> for TwedParams<T> {
    type Row = TwedRow<T>;

    #[inline(always)]
    unsafe fn row(&self, a: &Series<T>, i: usize) -> TwedRow<T> {
        TwedRow {
            i,
            time: time_or_zero(a, i),
            previous_time: time_or_zero(a, i - 1),
            delete_cost: self.delete_cost(a, i),
        }
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        row: &TwedRow<T>,
        a: &Series<T>,
        b: &Series<T>,
        j: usize,
        Neighbours { diag, up, left }: Neighbours<T>,
    ) -> T {
        let i = row.i;
        let match_cost = lp_distance(self.degree, a, i, b, j)
            + lp_distance(self.degree, a, i - 1, b, j - 1)
            + self.nu
                * ((row.time - time_or_zero(b, j)).abs()
                    + (row.previous_time - time_or_zero(b, j - 1)).abs());
        twed_cell(
            diag,
            up,
            left,
            match_cost,
            row.delete_cost,
            self.delete_cost(b, j),
        )
    }
}
