//! The column driver's gradient: a pair a warp, `b` no wider than the
//! warp's stripes. The forward pass is the column driver's wavefront (lane
//! `l` computes row `t - l` of its stripe at step `t`), storing every step's
//! cells; the backward pass runs the same wavefront mirrored, from the last
//! row up and from the last lane leftwards, computing the derivative `E` of
//! the pair's value with respect to each cell (see
//! [`Differentiable`]) and from it the gradient with respect to both series.
//!
//! In the backward pass a cell's derivative is a sum over its three
//! successors (below, right, diagonally below-right) of the successor's
//! derivative times a weight that depends on stored values only, so the
//! exponentials of the weights stand off the chain from cell to cell, which
//! is one fused multiply-add: the pass is bound by throughput, not latency.
//!
//! Backward step `s` of lane `l` is row `n - 1 - (s - (used - 1 - l))`
//! (0-based, `used` the lanes holding columns), whose cells the forward pass
//! computed at step `row + l = n + used - 2 - s` for every lane: each
//! backward step reads one forward step's cells. The store keeps them step
//! by step, cell `k` of lane `l`'s stripe at step `t` at `(t * S + k) *
//! used + l` ([`store_len`]), so that both passes' accesses are coalesced.
//!
//! The gradient with respect to `a_i` sums over a row: each lane adds its
//! stripe's share to what the lane to its right passed on for the same row
//! one step earlier (a shuffle, univariate series), and lane 0 writes the
//! row; for multivariate series each lane adds its share to the gradient in
//! memory, the lanes of a row one step apart with a warp barrier between.
//! The gradient with respect to `b_j` sums over a column, which stays in one
//! lane: in registers (univariate) or added to memory row by row.

use super::stripe_row;
use crate::drivers::stripe_cell;
use crate::hw::Warp;
use crate::series::specialised;
use crate::{Differentiable, Neighbours, Real, Series, Window};
use core::array::from_fn;

/// Values a pair's store holds ([`warp_gradient`]): `a_len + used - 1`
/// steps of `used * S` cells, `used = ceil(b_len / S)` lanes.
#[inline(always)]
pub fn store_len(a_len: usize, b_len: usize, stripe: usize) -> usize {
    let used = b_len.div_ceil(stripe);
    (a_len + used - 1) * used * stripe
}

/// The value of pair `a, b` (returned on every lane), by one warp, `S`
/// columns a lane; its gradient with respect to `a`'s samples added to
/// `grad_a` (`a.len * a.dims` values) and, if it is not null, with respect
/// to `b`'s added to `grad_b` (`b.len * b.dims` values).
///
/// # Safety
/// All lanes call it together with the same arguments; `1 <= b.len <=
/// W::LANES * S`; `store` holds [`store_len`] values used by this warp only;
/// the gradients are valid and used by this warp only; the series are
/// non-empty and valid.
#[inline(always)]
pub unsafe fn warp_gradient<T: Real, M: Differentiable<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    store: *mut T,
    grad_a: *mut T,
    grad_b: *mut T,
) -> T {
    specialised(a, b, |a, b| {
        let sweep = Sweep::<T, M, W, S>::new(warp, measure, a, b, store);
        let value = sweep.forward();
        sweep.backward(grad_a, grad_b);
        value
    })
}

/// What every step of both passes needs: one lane's place in the pair.
struct Sweep<'a, T: Real, M: Differentiable<T>, W: Warp, const S: usize> {
    warp: &'a W,
    measure: &'a M,
    a: &'a Series<T>,
    b: &'a Series<T>,
    store: *mut T,
    lane: usize,
    /// Lanes holding columns; the others repeat the last one's columns and
    /// do nothing with them.
    used: usize,
    working: bool,
    /// The matrix column of the stripe's first cell.
    first: usize,
    columns: [M::Column; S],
}

impl<'a, T: Real, M: Differentiable<T>, W: Warp, const S: usize> Sweep<'a, T, M, W, S> {
    #[inline(always)]
    unsafe fn new(
        warp: &'a W,
        measure: &'a M,
        a: &'a Series<T>,
        b: &'a Series<T>,
        store: *mut T,
    ) -> Self {
        let lane = warp.lane();
        let used = b.len.div_ceil(S);
        let first = lane * S + 1;
        Sweep {
            warp,
            measure,
            a,
            b,
            store,
            lane,
            used,
            working: lane < used,
            first,
            // Columns past the last repeat it, keeping the loads in bounds.
            columns: from_fn(|k| measure.column(b, (first + k).min(b.len))),
        }
    }

    /// Steps of each pass.
    #[inline(always)]
    fn steps(&self) -> usize {
        self.a.len + self.used - 1
    }

    /// Where cell `k` of this lane's stripe at forward step `t` is stored
    /// (for a lane past the last working one, the last working one's
    /// place: it reads ahead like the others, and must stay in bounds).
    #[inline(always)]
    unsafe fn stored(&self, t: usize, k: usize) -> *mut T {
        let lane = self.lane.min(self.used - 1);
        self.store.add((t * S + k) * self.used + lane)
    }

    /// `(offset, span)` such that stripe cell `k` of row `i` is a cell of
    /// the matrix inside the window when `offset + k <= span` (unsigned):
    /// one comparison a cell, with the columns past `b.len` out.
    #[inline(always)]
    fn allowed_cells(&self, i: usize) -> (u32, u32) {
        let (lo, hi) = if self.measure.window().is_banded() {
            self.measure.window().columns(i, self.a.len, self.b.len)
        } else {
            (1, self.b.len)
        };
        (
            (self.first as u32).wrapping_sub(lo as u32),
            (hi - lo) as u32,
        )
    }

    /// The forward pass: every cell stored, the value `(n, m)` on every lane.
    #[inline(always)]
    unsafe fn forward(&self) -> T {
        let (warp, measure, a, b) = (self.warp, self.measure, self.a, self.b);
        let row_lane = self.lane.min(self.used - 1);
        let mut cells = [T::INFINITY; S];
        // Cell (0, first - 1): the corner for lane 0, row 0 for the others.
        let mut diag = if self.lane == 0 { T::ZERO } else { T::INFINITY };
        let mut next_row = measure.row(a, 1);
        for t in 0..self.steps() {
            let from_lane_before = warp.shuffle_up(cells[S - 1]);
            let left = if self.lane == 0 {
                T::INFINITY
            } else {
                from_lane_before
            };
            let r = t.wrapping_sub(row_lane);
            if !(self.working && r < a.len) {
                continue;
            }
            let row = next_row;
            next_row = measure.next_row(a, &row, (r + 2).min(a.len));
            let (offset, span) = self.allowed_cells(r + 1);
            let neighbours = Neighbours {
                diag,
                up: T::INFINITY,
                left,
            };
            stripe_row(
                measure,
                a,
                b,
                &row,
                &self.columns,
                &mut cells,
                neighbours,
                |k| offset.wrapping_add(k as u32) <= span,
            );
            diag = left;
            for (k, &cell) in cells.iter().enumerate() {
                *self.stored(t, k) = cell;
            }
        }
        stripe_cell(warp, &cells, b.len - 1)
    }

    /// The backward pass, adding the gradients (see [`warp_gradient`]).
    #[inline(always)]
    unsafe fn backward(&self, grad_a: *mut T, grad_b: *mut T) {
        let (warp, measure, a, b) = (self.warp, self.measure, self.a, self.b);
        let (n, m) = (a.len, b.len);
        let univariate = a.dims == 1;
        // How many steps after the last working lane this lane starts.
        let behind = self.used - 1 - self.lane.min(self.used - 1);
        let last_working = self.lane + 1 == self.used;
        // Row n + 1, outside the matrix: derivatives 0, keys -inf (weight
        // 0). The derivative of cell (n, m) is 1: its diagonal successor
        // (n + 1, m + 1) is given derivative 1 and key +inf (weight 1), in
        // the stripe's next cell or, past the stripe, in `diag`; column m +
        // 1 is outside the matrix, so no other cell reads it.
        let seed = (m + 1).wrapping_sub(self.first);
        let mut derivatives: [T; S] = from_fn(|k| if k == seed { T::ONE } else { T::ZERO });
        let mut keys: [T; S] = from_fn(|k| if k == seed { T::INFINITY } else { -T::INFINITY });
        let (mut diag_derivative, mut diag_key) = if seed == S {
            (T::ONE, T::INFINITY)
        } else {
            (T::ZERO, -T::INFINITY)
        };
        // Univariate: the row's gradient share passed leftwards, and the
        // stripe's columns' gradients.
        let mut row_share = T::ZERO;
        let mut column_sums = [T::ZERO; S];
        // The next row's stored cells and sample, fetched a step ahead to
        // hide the loads' latency: this lane starts at row n - 1 (0-based).
        let fetch = |r: usize| -> [T; S] {
            let t = r + self.lane.min(self.used - 1);
            from_fn(|k| *self.stored(t, k))
        };
        let mut next_values = fetch(n - 1);
        let mut next_row = measure.row(a, n);
        for s in 0..self.steps() {
            // Cell (i, first + S) and the row's share from the lane to the
            // right, which computed row i a step ago.
            let right_derivative = warp.shuffle_down(derivatives[0]);
            let right_key = warp.shuffle_down(keys[0]);
            let from_right = if univariate {
                warp.shuffle_down(row_share)
            } else {
                // The lane to the right added its share of this row to
                // `grad_a` a step ago: its writes are visible after this.
                warp.sync();
                T::ZERO
            };
            let (right_derivative, right_key, from_right) = if last_working {
                (T::ZERO, -T::INFINITY, T::ZERO)
            } else {
                (right_derivative, right_key, from_right)
            };
            // Row r (0-based) at step `behind + n - 1 - r`; wraps before.
            let r = (n - 1 + behind).wrapping_sub(s);
            if !(self.working && r < n) {
                continue;
            }
            let i = r + 1;
            let (values, row) = (next_values, next_row);
            // Row r - 1's, or row 0's again after the last (in bounds).
            let above = r.max(1) - 1;
            next_values = fetch(above);
            next_row = measure.row(a, above + 1);
            let (offset, span) = self.allowed_cells(i);
            let inside = |k: usize| offset.wrapping_add(k as u32) <= span;
            let mut right = (right_derivative, right_key);
            let mut diagonal = (diag_derivative, diag_key);
            for k in (0..S).rev() {
                let value = values[k];
                let below = (derivatives[k], keys[k]);
                let off_chain = below.0 * measure.partial(below.1, value)
                    + diagonal.0 * measure.partial(diagonal.1, value);
                let derivative = right
                    .0
                    .mul_add_fast(measure.partial(right.1, value), off_chain);
                let key = measure.key(&row, &self.columns[k], a, b, value);
                let (derivative, key) = if inside(k) {
                    (derivative, key)
                } else {
                    (T::ZERO, -T::INFINITY)
                };
                diagonal = below;
                right = (derivative, key);
                derivatives[k] = derivative;
                keys[k] = key;
            }
            diag_derivative = right_derivative;
            diag_key = right_key;
            let gradient = |k: usize, d: usize| {
                derivatives[k] * measure.cost_gradient(&row, &self.columns[k], a, b, d)
            };
            if univariate {
                let mut share = T::ZERO;
                for (k, sum) in column_sums.iter_mut().enumerate() {
                    if inside(k) {
                        let g = gradient(k, 0);
                        share = share + g;
                        *sum = *sum - g;
                    }
                }
                row_share = share + from_right;
                if self.lane == 0 {
                    *grad_a.add(r) = *grad_a.add(r) + row_share;
                }
            } else {
                let dims = a.dims;
                for d in 0..dims {
                    let mut share = T::ZERO;
                    for k in 0..S {
                        if inside(k) {
                            let g = gradient(k, d);
                            share = share + g;
                            if !grad_b.is_null() {
                                let to_b = grad_b.add((self.first + k - 1) * dims + d);
                                *to_b = *to_b - g;
                            }
                        }
                    }
                    let to_a = grad_a.add(r * dims + d);
                    *to_a = *to_a + share;
                }
            }
        }
        if univariate && self.working && !grad_b.is_null() {
            for (k, &sum) in column_sums.iter().enumerate() {
                let j = self.first + k;
                if j <= m {
                    *grad_b.add(j - 1) = *grad_b.add(j - 1) + sum;
                }
            }
        }
    }
}
