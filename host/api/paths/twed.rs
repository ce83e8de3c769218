//! TWED's edit path with a matrix of steps (one byte a cell) and two rows
//! of costs: the oracle's recurrence and padding, in the precision asked.

use super::types::{Edit, EditPath, EditStep, Samples, Step};
use crate::{Error, Float, Result, Twed};

/// TWED's costs for one pair: samples are 1-based, sample 0 being the
/// virtual sample of value 0 at time 0 before each series, and sample
/// `k >= 1` at time `k - 1` (the default timestamps of `SeriesSet`).
struct Costs<'a, T: Float> {
    x: &'a Samples<'a, T>,
    y: &'a Samples<'a, T>,
    nu: T,
    lambda: T,
    degree: T,
}

impl<T: Float> Costs<'_, T> {
    fn time(k: usize) -> T {
        T::from_index(k.saturating_sub(1))
    }

    /// The Lp distance of sample `k` of `u` to sample `l` of `v` (1-based).
    fn distance(&self, u: &Samples<T>, k: usize, v: &Samples<T>, l: usize) -> T {
        let value = |s: &Samples<T>, k: usize, d: usize| {
            if k == 0 {
                T::ZERO
            } else {
                s.sample(k - 1)[d]
            }
        };
        if u.dims() == 1 {
            // (|d|^p)^(1/p) is |d|: no powers, no rounding of them.
            return (value(u, k, 0) - value(v, l, 0)).abs();
        }
        let two = T::ONE + T::ONE;
        let mut sum = T::ZERO;
        for d in 0..u.dims() {
            let diff = (value(u, k, d) - value(v, l, d)).abs();
            sum = sum
                + match self.degree {
                    p if p == T::ONE => diff,
                    p if p == two => diff * diff,
                    p => diff.powf(p),
                };
        }
        match self.degree {
            p if p == T::ONE => sum,
            p if p == two => sum.sqrt(),
            p => sum.powf(T::ONE / p),
        }
    }

    fn matched(&self, i: usize, j: usize) -> T {
        let (x, y) = (self.x, self.y);
        let times =
            (Self::time(i) - Self::time(j)).abs() + (Self::time(i - 1) - Self::time(j - 1)).abs();
        self.distance(x, i, y, j) + self.distance(x, i - 1, y, j - 1) + self.nu * times
    }

    fn delete(&self, s: &Samples<T>, k: usize) -> T {
        self.distance(s, k, s, k - 1) + self.nu * (Self::time(k) - Self::time(k - 1)) + self.lambda
    }
}

/// The optimal edit path by traceback over the recorded steps, ties by
/// [`Step::preferred`] on the totals, and the last cell's value; an
/// error if the value overflowed the precision.
pub(super) fn traceback<T: Float>(
    x: &Samples<T>,
    y: &Samples<T>,
    twed: Twed,
) -> Result<EditPath<T>> {
    let costs = Costs {
        x,
        y,
        nu: T::from_f64(twed.nu()),
        lambda: T::from_f64(twed.lambda()),
        degree: T::from_f64(twed.degree()),
    };
    let (n, m) = (x.len(), y.len());
    let delete_y: Vec<T> = (1..=m).map(|j| costs.delete(y, j)).collect();
    let mut steps = Vec::with_capacity(n * m);
    // Rows of D[i][0..=m] (1-based: column 0 is the boundary).
    let mut previous = vec![T::INFINITY; m + 1];
    previous[0] = T::ZERO;
    let mut current = vec![T::INFINITY; m + 1];
    for i in 1..=n {
        let delete_x = costs.delete(x, i);
        current[0] = T::INFINITY;
        for j in 1..=m {
            let (step, best) = Step::preferred(
                previous[j - 1] + costs.matched(i, j),
                previous[j] + delete_x,
                current[j - 1] + delete_y[j - 1],
            );
            steps.push(step);
            current[j] = best;
        }
        std::mem::swap(&mut previous, &mut current);
    }
    let value = previous[m];
    if !value.is_finite() {
        return Err(Error::Overflow { precision: T::NAME });
    }
    let mut edits = Vec::with_capacity(n + m);
    let (mut i, mut j) = (n, m);
    while (i, j) != (0, 0) {
        let (step, cost, before) = match steps[(i - 1) * m + (j - 1)] {
            Step::Diagonal => (EditStep::Match, costs.matched(i, j), (i - 1, j - 1)),
            Step::Up => (EditStep::DeleteX, costs.delete(x, i), (i - 1, j)),
            Step::Left => (EditStep::DeleteY, delete_y[j - 1], (i, j - 1)),
        };
        edits.push(Edit {
            step,
            i: i - 1,
            j: j - 1,
            cost,
        });
        (i, j) = before;
    }
    edits.reverse();
    Ok(EditPath { edits, value })
}
