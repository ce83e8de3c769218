//! Time Warp Edit Distance (Marteau 2009), as in the reference C code: a
//! virtual sample of value 0 at time 0 precedes each series (or, for a
//! series that continues another, the sample stored before it:
//! [`BeforeFirst`]), the norm is `(sum |u_k - v_k|^p)^(1/p)` with
//! `p = degree`.

use super::{Measure, MeasureParams};
use crate::{Neighbours, Real, Recurrence, Series, Unbounded};

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
    /// The sample before each series' first, which the first row's and
    /// the first column's costs read.
    pub before_first: BeforeFirst,
}

/// What precedes the first sample of each series of a TWED pair.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BeforeFirst {
    /// A virtual sample of value 0 at time 0: TWED's own definition.
    #[default]
    VirtualZero,
    /// The sample stored just before the series (index -1 of its values
    /// and of its timestamps; with no timestamps, at time -1): a series
    /// that continues another, as the alignment paths' divide and conquer
    /// computes the sub-pairs of one long pair.
    Stored,
}

impl<T> TwedParams<T> {
    /// TWED's own definition (the virtual zero before each series).
    pub const fn new(nu: T, lambda: T, degree: T) -> Self {
        TwedParams {
            nu,
            lambda,
            degree,
            before_first: BeforeFirst::VirtualZero,
        }
    }

    /// The same with each series' preceding sample stored before it.
    pub fn with_stored_before_first(self) -> Self {
        TwedParams {
            before_first: BeforeFirst::Stored,
            ..self
        }
    }
}

impl<T: Copy> MeasureParams for TwedParams<T> {
    const MEASURE: Measure = Measure::Twed;
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

impl<T: Real> TwedParams<T> {
    /// The series to read the samples before those of `s` from, and how
    /// far back: 1-based sample `k - back` of the result is sample `k - 1`
    /// of `s` (its values; [`value_or_zero`] and [`lp_distance`] read no
    /// times). With the virtual zero, `s` itself and `back = 1`; with the
    /// sample before the first stored, `s` one sample earlier and
    /// `back = 0`, so that index 0 (the virtual zero) is never asked for.
    /// The cells' loops compute it once, outside the loop.
    #[inline(always)]
    fn predecessors(&self, s: &Series<T>) -> (Series<T>, usize) {
        match self.before_first {
            BeforeFirst::VirtualZero => (*s, 1),
            BeforeFirst::Stored => {
                let earlier = Series {
                    values: s.values.wrapping_sub(s.dims),
                    len: s.len + 1,
                    ..*s
                };
                (earlier, 0)
            }
        }
    }

    /// Timestamp of 1-based sample `k` of `s`; sample 0 is the one before
    /// the first.
    #[inline(always)]
    unsafe fn time_or_before(&self, s: &Series<T>, k: usize) -> T {
        match (k, self.before_first) {
            (0, BeforeFirst::VirtualZero) => T::ZERO,
            // Without timestamps sample `t` is at time `t`.
            (0, BeforeFirst::Stored) if s.times.is_null() => T::ZERO - T::ONE,
            (0, BeforeFirst::Stored) => *s.times.wrapping_sub(1),
            _ => s.time(k - 1),
        }
    }
}

/// Lp distance between 1-based sample `k` of `x` and sample `l` of `y`, for
/// multivariate series. Univariate callers use `|x_k - y_l|` directly:
/// `(|d|^p)^(1/p)` is `|d|` for every `p`, and skipping the powers avoids
/// their rounding and their overflow.
// Not inlined: the warp driver unrolls the cell update over a lane's
// stripe, and this multivariate path (with its powers) would be copied
// into every unrolled cell.
#[inline(never)]
unsafe fn lp_distance<T: Real>(degree: T, x: &Series<T>, k: usize, y: &Series<T>, l: usize) -> T {
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

/// What a row or a column computes once: its 1-based sample `k`, the
/// values of samples `k` and `k - 1` (first dimension; the whole sample of a
/// univariate series), their times, and the cost of deleting sample `k`.
#[derive(Clone, Copy, Debug)]
pub struct TwedSample<T> {
    /// 32 bits, like [`crate::Sample`]'s.
    index: u32,
    value: T,
    previous_value: T,
    time: T,
    previous_time: T,
    delete_cost: T,
}

impl<T: Real> TwedParams<T> {
    /// Sample `k` (1-based) of `s` with what every cell of its row or
    /// column needs. Deleting it costs its distance to the sample before,
    /// the time elapsed since then, and the constant penalty.
    #[inline(always)]
    unsafe fn sample(&self, s: &Series<T>, k: usize) -> TwedSample<T> {
        let (earlier, back) = self.predecessors(s);
        let time = s.time(k - 1);
        let previous_time = self.time_or_before(s, k - 1);
        let value = s.value(k - 1, 0);
        let previous_value = value_or_zero(&earlier, k - back, 0);
        let distance = if s.dims == 1 {
            (value - previous_value).abs()
        } else {
            lp_distance(self.degree, s, k, &earlier, k - back)
        };
        TwedSample {
            index: k as u32,
            value,
            previous_value,
            time,
            previous_time,
            delete_cost: distance + self.nu * (time - previous_time) + self.lambda,
        }
    }
}

impl<T: Real> Recurrence<T> for TwedParams<T> {
    type Row = TwedSample<T>;
    type Column = TwedSample<T>;
    type Window = Unbounded;
    // Two steps a loop iteration spare the stripe's register moves (on an
    // H100 a TWED f64 pair of 2^20 went from 2.03 to 1.87 s).
    const CHEAP_CELL: bool = true;

    #[inline(always)]
    fn window(&self) -> Unbounded {
        Unbounded
    }

    #[inline(always)]
    unsafe fn row(&self, a: &Series<T>, i: usize) -> TwedSample<T> {
        self.sample(a, i)
    }

    #[inline(always)]
    unsafe fn column(&self, b: &Series<T>, j: usize) -> TwedSample<T> {
        self.sample(b, j)
    }

    #[inline(always)]
    unsafe fn next_row(&self, a: &Series<T>, previous: &TwedSample<T>, i: usize) -> TwedSample<T> {
        if a.dims != 1 {
            return self.sample(a, i);
        }
        // Sample `i - 1` is the row before's; only sample `i` is loaded.
        let (value, time) = (a.value(i - 1, 0), a.time(i - 1));
        TwedSample {
            index: i as u32,
            value,
            previous_value: previous.value,
            time,
            previous_time: previous.time,
            delete_cost: (value - previous.value).abs()
                + self.nu * (time - previous.time)
                + self.lambda,
        }
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        row: &TwedSample<T>,
        column: &TwedSample<T>,
        a: &Series<T>,
        b: &Series<T>,
        Neighbours { diag, up, left }: Neighbours<T>,
    ) -> T {
        let distances = if a.dims == 1 {
            (row.value - column.value).abs() + (row.previous_value - column.previous_value).abs()
        } else {
            let (i, j) = (row.index as usize, column.index as usize);
            let ((a_earlier, back), (b_earlier, _)) = (self.predecessors(a), self.predecessors(b));
            lp_distance(self.degree, a, i, b, j)
                + lp_distance(self.degree, &a_earlier, i - back, &b_earlier, j - back)
        };
        let match_cost = distances
            + self.nu
                * ((row.time - column.time).abs()
                    + (row.previous_time - column.previous_time).abs());
        twed_cell(
            diag,
            up,
            left,
            match_cost,
            row.delete_cost,
            column.delete_cost,
        )
    }
}
