//! TWED's edit path with a matrix of steps (one byte a cell) and two rows
//! of costs: the oracle's recurrence and padding, in the precision asked;
//! and its divide and conquer in linear memory ([`TwedPair`]).
//!
//! Paths run over the *nodes* `(i, j)` of the pair, `0 <= i <= n`,
//! `0 <= j <= m`: node `(i, j)` is the cell `D[i][j]` of TWED's matrix,
//! reached when `x_1..x_i` and `y_1..y_j` (1-based, sample 0 the virtual
//! zero) are aligned. A step into `(i, j)` matches `x_i` with `y_j` (from
//! `(i - 1, j - 1)`), deletes `x_i` (from `(i - 1, j)`) or deletes `y_j`
//! (from `(i, j - 1)`); its cost reads the samples it enters and the ones
//! before them.

use super::hirschberg::{least, Pass, PassSeries, PathPair, SubPair};
use super::types::{Edit, EditPath, EditStep, Samples, Step};
use super::{check_pair, check_times};
use crate::{Error, Float, Result, Twed};
use ndarray::{ArrayView1, ArrayView2};
use timewarp_kernels::TwedParams;

/// A series as TWED reads it: 1-based samples, sample 0 the virtual sample
/// of value 0 at time 0, sample `k >= 1` at its timestamp (`k - 1` without
/// timestamps, as `SeriesSet` has it).
struct TwedSeries<'a, T: Float> {
    samples: Samples<'a, T>,
    times: Option<ArrayView1<'a, T>>,
}

impl<T: Float> TwedSeries<'_, T> {
    fn value(&self, k: usize, d: usize) -> T {
        if k == 0 {
            T::ZERO
        } else {
            self.samples.sample(k - 1)[d]
        }
    }

    fn time(&self, k: usize) -> T {
        match (k, &self.times) {
            (0, _) => T::ZERO,
            (k, Some(times)) => times[k - 1],
            (k, None) => T::from_index(k - 1),
        }
    }
}

/// TWED's step costs for one pair.
pub(super) struct Costs<'a, T: Float> {
    x: TwedSeries<'a, T>,
    y: TwedSeries<'a, T>,
    nu: T,
    lambda: T,
    degree: T,
}

impl<'a, T: Float> Costs<'a, T> {
    /// The costs of `x` against `y` with their timestamps (checked by the
    /// caller).
    pub(super) fn new(
        (x, x_times): (ArrayView2<'a, T>, Option<ArrayView1<'a, T>>),
        (y, y_times): (ArrayView2<'a, T>, Option<ArrayView1<'a, T>>),
        twed: Twed,
    ) -> Self {
        let series = |samples, times| TwedSeries {
            samples: Samples::new(samples),
            times,
        };
        Self {
            x: series(x, x_times),
            y: series(y, y_times),
            nu: T::from_f64(twed.nu()),
            lambda: T::from_f64(twed.lambda()),
            degree: T::from_f64(twed.degree()),
        }
    }

    fn lengths(&self) -> (usize, usize) {
        (self.x.samples.len(), self.y.samples.len())
    }

    /// The Lp distance of sample `k` of `u` to sample `l` of `v` (1-based).
    fn distance(&self, u: &TwedSeries<T>, k: usize, v: &TwedSeries<T>, l: usize) -> T {
        if u.samples.dims() == 1 {
            // (|d|^p)^(1/p) is |d|: no powers, no rounding of them.
            return (u.value(k, 0) - v.value(l, 0)).abs();
        }
        let two = T::ONE + T::ONE;
        let mut sum = T::ZERO;
        for d in 0..u.samples.dims() {
            let diff = (u.value(k, d) - v.value(l, d)).abs();
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

    /// The cost of the match into node `(i, j)`.
    fn matched(&self, i: usize, j: usize) -> T {
        let (x, y) = (&self.x, &self.y);
        let times = (x.time(i) - y.time(j)).abs() + (x.time(i - 1) - y.time(j - 1)).abs();
        self.distance(x, i, y, j) + self.distance(x, i - 1, y, j - 1) + self.nu * times
    }

    /// The cost of deleting sample `k` of `s` (1-based).
    fn delete(&self, s: &TwedSeries<T>, k: usize) -> T {
        self.distance(s, k, s, k - 1) + self.nu * (s.time(k) - s.time(k - 1)) + self.lambda
    }
}

/// The optimal edit path through the nodes of `part`, from its first
/// corner `(a, b)` to its last, by traceback over the recorded steps (ties
/// by [`Step::preferred`] on the totals), and its cost; an error if that
/// overflowed the precision. From the origin `(0, 0)` the boundary is
/// TWED's (infinite off the origin: the first step is a match); from any
/// other node the path may also start along the part's first row or
/// column.
pub(super) fn traceback<T: Float>(costs: &Costs<T>, part: &SubPair) -> Result<(Vec<Edit<T>>, T)> {
    let (x, y) = (&costs.x, &costs.y);
    let (a, b) = (part.rows.start, part.cols.start);
    let (rows, cols) = (part.rows.len() - 1, part.cols.len() - 1);
    let origin = (a, b) == (0, 0);
    let delete_y: Vec<T> = (b + 1..b + 1 + cols).map(|j| costs.delete(y, j)).collect();
    // Rows of D over the part's columns, from D[a][b] = 0.
    let mut previous = vec![T::INFINITY; cols + 1];
    previous[0] = T::ZERO;
    if !origin {
        for j in 1..=cols {
            previous[j] = previous[j - 1] + delete_y[j - 1];
        }
    }
    let mut current = vec![T::INFINITY; cols + 1];
    // The steps into the nodes past the first row and column; those along
    // them are deletions.
    let mut steps = Vec::with_capacity(rows * cols);
    for i in 1..=rows {
        // A row is at most a few milliseconds: stops promptly on Ctrl-C.
        crate::interrupt::check()?;
        let delete_x = costs.delete(x, a + i);
        current[0] = if origin {
            T::INFINITY
        } else {
            previous[0] + delete_x
        };
        for j in 1..=cols {
            let (step, best) = Step::preferred(
                previous[j - 1] + costs.matched(a + i, b + j),
                previous[j] + delete_x,
                current[j - 1] + delete_y[j - 1],
            );
            steps.push(step);
            current[j] = best;
        }
        std::mem::swap(&mut previous, &mut current);
    }
    let value = previous[cols];
    if !value.is_finite() {
        return Err(Error::Overflow { precision: T::NAME });
    }
    let mut edits = Vec::with_capacity(rows + cols);
    let (mut i, mut j) = (rows, cols);
    while (i, j) != (0, 0) {
        let step = match (i, j) {
            (0, _) => Step::Left,
            (_, 0) => Step::Up,
            _ => steps[(i - 1) * cols + (j - 1)],
        };
        let (row, col) = (a + i, b + j);
        let (step, cost, before) = match step {
            Step::Diagonal => (EditStep::Match, costs.matched(row, col), (i - 1, j - 1)),
            Step::Up => (EditStep::DeleteX, costs.delete(x, row), (i - 1, j)),
            Step::Left => (EditStep::DeleteY, delete_y[j - 1], (i, j - 1)),
        };
        edits.push(Edit {
            step,
            i: row - 1,
            j: col - 1,
            cost,
        });
        (i, j) = before;
    }
    edits.reverse();
    Ok((edits, value))
}

/// TWED's divide and conquer of one pair (`crate::hirschberg`): a
/// [`SubPair`] is a rectangle of nodes, from its first corner to its last.
///
/// TWED's costs belong to steps and read the samples before the ones a
/// step enters, so it splits on a node, not between cells: at column `k`
/// in the middle, the forward pass gives `F(i)`, the cost from the first
/// corner to node `(i, k)`, the backward pass `B(i)`, the cost from
/// `(i, k)` to the last corner, and the path passes through the node of
/// least `F + B` (the lowest on ties); each half starts at a node.
///
/// Both are passes of the kernels' TWED with the sample before each
/// sub-series stored before it ([`timewarp_kernels::BeforeFirst::Stored`]),
/// whose matrix of `x[r..]` against `y[c..]` holds the costs of paths
/// from node `(r - 1, c - 1)` that begin with the match into `(r, c)`. So
/// a part from node `(a, b)` has its forward pass start at `(a, b)` (`F`
/// plus that match's cost, the same for every row), or, from the origin,
/// at `(1, 1)` (TWED's own first match). The backward pass is the same
/// over the reversed series, stored as `[0, x_n, ..., x_1, x_0]` with
/// their times negated (`0, -t_n, ..., -t_1, -t_0`): there a step into
/// node `s` (node `n - s` of the pair) reads `x_{n-s}` and, before it,
/// `x_{n-s+1}`, the samples of the step from node `n - s` into
/// `n - s + 1`, so it is that step walked backwards, at the same cost (the
/// same distances, the same absolute time differences); the leading zero
/// at time 0 in both is the sample before the end, whose match adds the
/// same cost to every row.
pub struct TwedPair<'a, T: Float> {
    costs: Costs<'a, T>,
    series: PassSeries<T, TwedParams<T>>,
}

impl<'a, T: Float> TwedPair<'a, T> {
    /// The pair `x`, `y` (`length x dims` each) with their timestamps
    /// (finite, non-decreasing; `None`: 0, 1, 2, ...), checked.
    pub fn new(
        (x, x_times): (ArrayView2<'a, T>, Option<ArrayView1<'a, T>>),
        (y, y_times): (ArrayView2<'a, T>, Option<ArrayView1<'a, T>>),
        twed: Twed,
    ) -> Result<Self> {
        check_pair(x, y)?;
        check_times(x_times, x.nrows(), "x")?;
        check_times(y_times, y.nrows(), "y")?;
        let costs = Costs::new((x, x_times), (y, y_times), twed);
        let (n, m) = costs.lengths();
        let dims = x.ncols();
        // x_0..x_n forward, then 0, x_n..x_0 reversed.
        let laid_out = |s: &TwedSeries<T>, len: usize| {
            let values = |k: usize| (0..dims).map(move |d| s.value(k, d));
            let forward = (0..=len).flat_map(values);
            let reversed =
                std::iter::repeat_n(T::ZERO, dims).chain((0..=len).rev().flat_map(values));
            let times = (0..=len).map(|k| s.time(k));
            let reversed_times =
                std::iter::once(T::ZERO).chain((0..=len).rev().map(|k| -s.time(k)));
            (
                (forward.collect(), reversed.collect()),
                (times.collect(), reversed_times.collect()),
            )
        };
        let ((x_values, x_reversed), (x_times, x_reversed_times)) = laid_out(&costs.x, n);
        let ((y_values, y_reversed), (y_times, y_reversed_times)) = laid_out(&costs.y, m);
        let params =
            TwedParams::new(costs.nu, costs.lambda, costs.degree).with_stored_before_first();
        let series = PassSeries::new(
            params,
            dims,
            1,
            [x_values, y_values, x_reversed, y_reversed],
            Some([x_times, y_times, x_reversed_times, y_reversed_times]),
        );
        Ok(Self { costs, series })
    }
}

impl<T: Float> PathPair<T> for TwedPair<'_, T> {
    type Params = TwedParams<T>;
    type Step = Edit<T>;
    type Path = EditPath<T>;

    fn pass_series(&self) -> &PassSeries<T, TwedParams<T>> {
        &self.series
    }

    fn whole(&self) -> SubPair {
        let (n, m) = self.costs.lengths();
        SubPair {
            rows: 0..n + 1,
            cols: 0..m + 1,
        }
    }

    fn is_leaf(&self, part: &SubPair, leaf_cells: usize) -> bool {
        let (rows, cols) = (part.rows.len() - 1, part.cols.len() - 1);
        rows <= 1 || cols <= 1 || (rows as u128 * cols as u128) <= leaf_cells as u128
    }

    /// The forward pass to column `k` from the first corner, and the
    /// backward pass from the last corner to column `k` (in the reversed
    /// series, sample `s` of `x` is stored at `n + 1 - s`).
    fn passes(&self, part: &SubPair) -> [Pass; 2] {
        let (n, m) = self.costs.lengths();
        let (last_row, last_col) = (part.rows.end - 1, part.cols.end - 1);
        let k = middle(part);
        let (row, col) = first_match(part);
        [
            Pass {
                rows: row..last_row + 1,
                cols: col..k + 1,
                reversed: false,
            },
            Pass {
                rows: n + 1 - last_row..n + 2 - part.rows.start,
                cols: m + 1 - last_col..m + 2 - k,
                reversed: true,
            },
        ]
    }

    /// The node of column `k` of least `F + B`: the forward column's entry
    /// `e` is node `row + e` (none above the first match's row), the
    /// backward column's entry `e` is node `last_row - e`.
    fn halves(&self, part: &SubPair, forward: &[T], backward: &[T]) -> Result<[SubPair; 2]> {
        let (row, _) = first_match(part);
        let last_row = part.rows.end - 1;
        let from_start = |i: usize| {
            if i < row {
                T::INFINITY
            } else {
                forward[i - row]
            }
        };
        let totals = part
            .rows
            .clone()
            .map(|i| from_start(i) + backward[last_row - i]);
        let (_, offset) = least(totals)?;
        let (node, k) = (part.rows.start + offset, middle(part));
        Ok([
            SubPair {
                rows: part.rows.start..node + 1,
                cols: part.cols.start..k + 1,
            },
            SubPair {
                rows: node..part.rows.end,
                cols: k..part.cols.end,
            },
        ])
    }

    fn leaf(&self, part: &SubPair) -> Result<(Vec<Edit<T>>, T)> {
        traceback(&self.costs, part)
    }

    fn path(&self, edits: Vec<Edit<T>>, value: T) -> EditPath<T> {
        EditPath {
            edits,
            value,
            on_gpu: false,
        }
    }
}

/// The node column a part splits on, strictly inside it (parts that are
/// split have at least three node columns).
fn middle(part: &SubPair) -> usize {
    part.cols.start + (part.cols.len() - 1) / 2
}

/// The node the forward pass's first match enters: the part's first
/// corner, or `(1, 1)` from the origin.
fn first_match(part: &SubPair) -> (usize, usize) {
    (part.rows.start.max(1), part.cols.start.max(1))
}
