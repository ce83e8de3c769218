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
//!
//! A pair wider than one warp's stripes can be cut into *panels* of
//! `lanes * S` columns, a warp each, all in one block
//! ([`panel_gradient`]). In the forward pass each panel runs behind the
//! one to its left, reading that panel's last column as it is written
//! (tagged, as in [`super::long_pair::pipelined_pair`]); in the backward
//! pass each runs behind the one to its right, whose first column's
//! derivatives and keys it reads, with the gradient of each row summed
//! over the panels to the right. Only the first panel adds to `a`'s gradient: each row's sum is
//! added up in one order, right to left, whatever the warps' timing.

use super::{settle, stripe_row};
use crate::drivers::stripe_cell;
use crate::hw::{tagged, Scope, Tagged, WaitBound, Warp};
use crate::series::specialised;
use crate::{Differentiable, Neighbours, Real, Series, Window};
use core::array::from_fn;
use core::mem::size_of;
use core::ptr::{null, null_mut};

/// Values a pair's store holds ([`warp_gradient`]): `a_len + used - 1`
/// steps of `used * S` cells, `used = ceil(b_len / S)` lanes.
#[inline(always)]
pub fn store_len(a_len: usize, b_len: usize, stripe: usize) -> usize {
    let used = b_len.div_ceil(stripe);
    (a_len + used - 1) * used * stripe
}

/// Values the store of a pair cut into panels of `width` columns holds
/// ([`panel_gradient`]): each panel's [`store_len`], one after the other,
/// panel `p` at `p * store_len(a_len, width, stripe)`.
#[inline(always)]
pub fn panels_store_len(a_len: usize, b_len: usize, width: usize, stripe: usize) -> usize {
    let full = (b_len - 1) / width;
    full * store_len(a_len, width, stripe) + store_len(a_len, b_len - full * width, stripe)
}

/// The tag of every value the panels of a pair hand on: each border is
/// written once per launch, into memory zeroed before it.
const PANEL_TAG: u32 = 1;

/// How a panel meets the panels beside it ([`panel_gradient`]): the
/// borders, tagged [`Tagged`] values written while the warps run, indexed
/// by the matrix's row.
#[derive(Clone, Copy, Debug)]
pub struct GradientPanel<T> {
    /// The matrix column before the panel's first.
    pub col0: usize,
    /// Forward pass: cell `(i, col0)` at `left[i]` from the panel to the
    /// left, `a.len + 1` values; null for the first panel.
    pub left: *const Tagged,
    /// Forward pass: this panel's last column written for the panel to the
    /// right, as `left`; null for the last panel.
    pub right: *mut Tagged,
    /// Backward pass, from the panel to the right: for row `r` (0-based)
    /// at `r * (2 + a.dims)` the derivative and key of cell `(r + 1, col0 +
    /// width + 1)` and the row's gradient (each dimension) of the panels
    /// to the right; null for the last panel.
    pub from_right: *const Tagged,
    /// Backward pass: the same written for the panel to the left; null for
    /// the first panel.
    pub to_left: *mut Tagged,
    /// Where a panel that is not the first adds its share of the rows'
    /// gradients of multivariate series (`a.len * a.dims` values, zeroed;
    /// the first panel adds to `a`'s gradient).
    pub row_shares: *mut T,
    /// The warps of the pair's panels: one block's, or the launch's.
    pub scope: Scope,
    /// A zeroed word recording a wait that gave up ([`WaitBound`]); null
    /// for a panel that waits for none (the whole pair in one).
    pub fault: *mut u32,
}

/// The borders between panels `q` and `q + 1` of a `panels_gradient`
/// kernel's pair (see [`GradientPanel`]): the forward pass's column of
/// `a_len + 1` tagged values, the backward pass's `a_len` rows of `2 +
/// dims` tagged values, and panel `q + 1`'s `a_len * dims` row shares, each
/// part 16-byte aligned.
struct PanelBoundary<T> {
    forward: *mut Tagged,
    backward: *mut Tagged,
    shares: *mut T,
}

impl<T> PanelBoundary<T> {
    /// Bytes of one boundary's borders.
    const fn bytes(a_len: usize, dims: usize) -> usize {
        let tagged = size_of::<Tagged>();
        let shares = (a_len * dims * size_of::<T>()).div_ceil(tagged) * tagged;
        (a_len + 1) * tagged + a_len * (2 + dims) * tagged + shares
    }

    /// Boundary `q` of the pair's workspace at `base` (16-byte aligned).
    ///
    /// # Safety
    /// The workspace holds the boundary.
    #[inline(always)]
    unsafe fn at(base: *mut u8, a_len: usize, dims: usize, q: usize) -> Self {
        let start = base.add(q * Self::bytes(a_len, dims));
        let backward = start.add((a_len + 1) * size_of::<Tagged>());
        let shares = backward.add(a_len * (2 + dims) * size_of::<Tagged>());
        PanelBoundary {
            forward: start.cast(),
            backward: backward.cast(),
            shares: shares.cast(),
        }
    }
}

/// The workspace of a `panels_gradient` kernel's pair whose series `a` has
/// up to `a_len` samples of `dims` values, by `warps` warps, in values of
/// `T`: the borders between its panels. A multiple of 16 bytes, so that
/// every pair's borders stay 16-byte aligned.
pub const fn panel_gradient_workspace<T>(a_len: usize, dims: usize, warps: usize) -> usize {
    (warps - 1) * PanelBoundary::<T>::bytes(a_len, dims) / size_of::<T>()
}

impl<T> GradientPanel<T> {
    /// The whole pair as one panel.
    pub const fn whole() -> Self {
        GradientPanel {
            col0: 0,
            left: null(),
            right: null_mut(),
            from_right: null(),
            to_left: null_mut(),
            row_shares: null_mut(),
            scope: Scope::Block,
            fault: null_mut(),
        }
    }

    /// Panel `p` of a pair's `panels` (of `width` columns) whose borders are in the workspace at
    /// `base` (16-byte aligned), for series `a` of `a_len` samples of `dims` values, the panels'
    /// warps in one block, their waits' failures recorded in `fault`.
    ///
    /// # Safety
    /// The workspace holds [`panel_gradient_workspace`] values for at least
    /// `a_len` and `panels` warps.
    #[inline(always)]
    pub unsafe fn in_workspace(
        base: *mut u8,
        (a_len, dims): (usize, usize),
        (p, panels): (usize, usize),
        width: usize,
        fault: *mut u32,
    ) -> Self {
        let boundary = |q: usize| PanelBoundary::<T>::at(base, a_len, dims, q);
        let (before, after) = (boundary(p.max(1) - 1), boundary(p));
        let (first, last) = (p == 0, p + 1 == panels);
        GradientPanel {
            col0: p * width,
            left: if first { null() } else { before.forward },
            right: if last { null_mut() } else { after.forward },
            from_right: if last { null() } else { after.backward },
            to_left: if first { null_mut() } else { before.backward },
            row_shares: if first { null_mut() } else { before.shares },
            scope: Scope::Block,
            fault,
        }
    }
}

/// The value of pair `a, b` (returned on every lane), by one warp, `S` columns a lane; its
/// gradient with respect to `a`'s samples added to `grad_a` (`a.len * a.dims` values) and, if it
/// is not null, with respect to `b`'s added to `grad_b` (`b.len * b.dims` values).
///
/// # Safety
/// All lanes call it together with the same arguments; `1 <= b.len <= W::LANES * S`; `store` holds
/// [`store_len`] values used by this warp only; the gradients are valid and used by this warp
/// only; the series are non-empty and valid.
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
    let whole = GradientPanel::whole();
    panel_gradient::<T, M, W, S>(warp, measure, a, b, &whole, store, grad_a, grad_b)
}

/// One panel of pair `a, b` by one warp: columns `panel.col0 + 1 ..= panel.col0 + W::LANES * S`
/// (fewer for the last panel), both passes, the panels beside it run by other warps meanwhile.
/// Adds the panel's share of the gradients as [`warp_gradient`] says (to `grad_a` only from the
/// first panel, which gathers the others' shares) and returns the cell `(a.len, col0 + width)`
/// (the pair's value from the last panel) on every lane.
///
/// # Safety
/// As [`warp_gradient`], for the panel's columns (`col0 < b.len`), `store` holding
/// `store_len(a.len, panel's columns, S)` values; the borders and `row_shares` are valid as
/// documented, zeroed before the launch, and shared only with the pair's other panels, whose warps
/// all run within `panel.scope`; the first panel's `col0` is 0, and the others' are multiples of
/// `W::LANES * S`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn panel_gradient<T: Real, M: Differentiable<T>, W: Warp, const S: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    panel: &GradientPanel<T>,
    store: *mut T,
    grad_a: *mut T,
    grad_b: *mut T,
) -> T {
    // Inlined: a call would keep the launch's parameters in local memory.
    specialised(
        a,
        b,
        #[inline(always)]
        |a, b| {
            let sweep = Sweep::<T, M, W, S>::new(warp, measure, a, b, panel, store);
            let value = sweep.forward();
            sweep.backward(grad_a, grad_b);
            // A wait gave up (this warp's, or one before values it read).
            if !panel.fault.is_null() && sweep.bound.faulted() {
                T::NAN
            } else {
                value
            }
        },
    )
}

/// What every step of both passes needs: one lane's place in the pair.
struct Sweep<'a, T: Real, M: Differentiable<T>, W: Warp, const S: usize> {
    warp: &'a W,
    measure: &'a M,
    a: &'a Series<T>,
    b: &'a Series<T>,
    panel: &'a GradientPanel<T>,
    store: *mut T,
    lane: usize,
    /// The panel's columns.
    cols: usize,
    /// Lanes holding columns; the others repeat the last one's columns and
    /// do nothing with them.
    used: usize,
    working: bool,
    /// The matrix column of the stripe's first cell.
    first: usize,
    columns: [M::Column; S],
    /// The bound on the waits for the borders (over `panel.fault`).
    bound: WaitBound,
}

impl<'a, T: Real, M: Differentiable<T>, W: Warp, const S: usize> Sweep<'a, T, M, W, S> {
    #[inline(always)]
    unsafe fn new(
        warp: &'a W,
        measure: &'a M,
        a: &'a Series<T>,
        b: &'a Series<T>,
        panel: &'a GradientPanel<T>,
        store: *mut T,
    ) -> Self {
        let lane = warp.lane();
        let cols = (b.len - panel.col0).min(W::LANES * S);
        let used = cols.div_ceil(S);
        let first = panel.col0 + lane * S + 1;
        Sweep {
            warp,
            measure,
            a,
            b,
            panel,
            store,
            lane,
            cols,
            used,
            working: lane < used,
            first,
            // Columns past the last repeat it, keeping the loads in bounds.
            columns: from_fn(|k| measure.column(b, (first + k).min(b.len))),
            bound: WaitBound::new(panel.fault),
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

    /// The forward pass: every cell stored, the cell `(n, col0 + cols)`
    /// on every lane.
    #[inline(always)]
    unsafe fn forward(&self) -> T {
        let (warp, measure, a, b, panel) = (self.warp, self.measure, self.a, self.b, self.panel);
        let row_lane = self.lane.min(self.used - 1);
        let mut cells = [T::INFINITY; S];
        // Cell (0, first - 1): the corner for the first lane of the first
        // panel, row 0 (infinite) for the others.
        let mut diag = if self.lane == 0 && panel.col0 == 0 {
            T::ZERO
        } else {
            T::INFINITY
        };
        // Lane 0 of a panel after the first: the left border's next row,
        // fetched a row ahead.
        let follows = self.lane == 0 && !panel.left.is_null();
        let mut next_left = if follows {
            warp.load_tagged(panel.scope, panel.left.add(1))
        } else {
            [0; 2]
        };
        let last_lane = self.lane == W::LANES - 1 && !panel.right.is_null();
        let mut next_row = measure.row(a, 1);
        for t in 0..self.steps() {
            let from_lane_before = warp.shuffle_up(cells[S - 1]);
            let r = t.wrapping_sub(row_lane);
            if !(self.working && r < a.len) {
                continue;
            }
            let left = if follows {
                let border = panel.left.add(r + 1);
                let value = settle(warp, panel.scope, border, next_left, PANEL_TAG, &self.bound);
                let next = panel.left.add((r + 2).min(a.len));
                next_left = warp.load_tagged(panel.scope, next);
                value
            } else if self.lane == 0 {
                T::INFINITY
            } else {
                from_lane_before
            };
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
            if last_lane {
                let value = tagged(cells[S - 1], PANEL_TAG);
                warp.store_tagged(panel.scope, panel.right.add(r + 1), value);
            }
        }
        stripe_cell(warp, &cells, self.cols - 1)
    }

    /// The backward pass, adding the gradients (see [`warp_gradient`]).
    // One function: split into helpers, even inlined ones, it compiles to other PTX.
    #[allow(clippy::too_many_lines)]
    #[inline(always)]
    unsafe fn backward(&self, grad_a: *mut T, grad_b: *mut T) {
        let (warp, measure, a, b, panel) = (self.warp, self.measure, self.a, self.b, self.panel);
        let (n, m) = (a.len, b.len);
        let univariate = a.dims == 1;
        // How many steps after the last working lane this lane starts.
        let behind = self.used - 1 - self.lane.min(self.used - 1);
        let last_working = self.lane + 1 == self.used;
        // The last lane of a panel before the last takes the cells right of
        // its stripe from the next panel's border, `2 + dims` values a row;
        // lane 0 of a panel after the first writes its border.
        let follows = last_working && !panel.from_right.is_null();
        let leads = self.lane == 0 && !panel.to_left.is_null();
        let border_row = 2 + a.dims;
        // Where the lanes add the rows' gradients of multivariate series.
        let row_sums = if panel.to_left.is_null() {
            grad_a
        } else {
            panel.row_shares
        };
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
        // The border from the right: the next row's derivative, key and
        // (univariate) gradient share as loaded, settled when used.
        let fetch_border = |r: usize| -> [Tagged; 3] {
            if follows {
                from_fn(|v| {
                    let at = panel.from_right.add(r * border_row + v.min(border_row - 1));
                    warp.load_tagged(panel.scope, at)
                })
            } else {
                [[0; 2]; 3]
            }
        };
        let mut next_border = fetch_border(n - 1);
        for s in 0..self.steps() {
            // Cell (i, first + S) and the row's share from the lane to the
            // right, which computed row i a step ago.
            let right_derivative = warp.shuffle_down(derivatives[0]);
            let right_key = warp.shuffle_down(keys[0]);
            let from_right = if univariate {
                warp.shuffle_down(row_share)
            } else {
                // The lane to the right added its share of this row to
                // `row_sums` a step ago: its writes are visible after this.
                warp.sync();
                T::ZERO
            };
            // Row r (0-based) at step `behind + n - 1 - r`; wraps before.
            let r = (n - 1 + behind).wrapping_sub(s);
            if !(self.working && r < n) {
                continue;
            }
            let (right_derivative, right_key, from_right) = if follows {
                let border = next_border;
                next_border = fetch_border(r.max(1) - 1);
                let at = |v: usize| panel.from_right.add(r * border_row + v);
                let settled =
                    |v: usize| settle(warp, panel.scope, at(v), border[v], PANEL_TAG, &self.bound);
                let share = if univariate { settled(2) } else { T::ZERO };
                (settled(0), settled(1), share)
            } else if last_working {
                (T::ZERO, -T::INFINITY, T::ZERO)
            } else {
                (right_derivative, right_key, from_right)
            };
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
            let to_left = |v: usize, value: T| {
                let at = panel.to_left.add(r * border_row + v);
                warp.store_tagged(panel.scope, at, tagged(value, PANEL_TAG));
            };
            if leads {
                to_left(0, derivatives[0]);
                to_left(1, keys[0]);
            }
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
                if leads {
                    to_left(2, row_share);
                } else if self.lane == 0 {
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
                    if follows {
                        let at = panel.from_right.add(r * border_row + 2 + d);
                        let words = warp.load_tagged(panel.scope, at);
                        share =
                            share + settle(warp, panel.scope, at, words, PANEL_TAG, &self.bound);
                    }
                    let to_a = row_sums.add(r * dims + d);
                    let sum = *to_a + share;
                    *to_a = sum;
                    if leads {
                        to_left(2 + d, sum);
                    }
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
