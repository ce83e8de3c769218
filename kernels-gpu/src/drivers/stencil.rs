//! The stencil driver, shared by every measure: one thread block computes
//! one pair, anti-diagonal by anti-diagonal (the cells of an anti-diagonal do
//! not depend on each other), its threads spread over the cells of each
//! anti-diagonal. Only the current anti-diagonal and the two before it are
//! kept, in shared memory (the "shared-memory stencil" of cuTimeWarp);
//! costs are computed on the fly from the two series through the
//! measure's [`Recurrence`]. Anti-diagonals longer than the block take
//! several cells per thread.
//!
//! The backward pass ([`stencil_backward`]) walks the anti-diagonals in
//! reverse over the cost matrix that the forward pass stored
//! (diagonal-major, so that the threads of an anti-diagonal read adjacent
//! addresses), computing the derivative of the pair's value with respect
//! to every cell (Soft-DTW's expected alignment) and from it what the
//! kernel asks for ([`Backward`]): the gradient with respect to both
//! series' samples ([`stencil_gradient`]), or the derivatives themselves,
//! as a matrix.
//!
//! The drivers are generic over [`ThreadBlock`], the four things they need
//! of a block, so the same code runs on the GPU (`_syncthreads`), in the
//! host tests (threads and a barrier), and in the CPU backend (a block of
//! one thread: cells of an anti-diagonal are independent, so the processor
//! overlaps their exponentials instead of waiting on each).
//!
//! Anti-diagonal `d` holds the cells `(i, d - i)` of the `(n + 1) x (m + 1)`
//! matrix with its boundary row and column 0: rows `max(0, d - m) ..=
//! min(n, d)`, at most `min(n, m) + 1` cells. In the rings, cell `(i, j)`
//! of anti-diagonal `d` is at slot `i - max(0, d - m)`.

use super::antidiagonal_rows;
use crate::hw::ThreadBlock;
use crate::{Differentiable, Neighbours, Real, Recurrence, Series, Window};

/// Anti-diagonals the forward pass keeps ([`stencil_value`]).
pub const VALUE_RINGS: usize = 3;
/// Anti-diagonals the backward pass keeps ([`stencil_backward`]: the
/// derivative and the key of three anti-diagonals); its forward pass uses
/// the first [`VALUE_RINGS`] of them.
pub const GRADIENT_RINGS: usize = 6;

/// Values per ring anti-diagonal for an `n x m` pair: its longest
/// anti-diagonal with the boundary.
#[inline(always)]
pub fn ring_len(n: usize, m: usize) -> usize {
    n.min(m) + 1
}

/// Rows `first..=last` of the interior cells (`i, j >= 1`) of anti-diagonal
/// `d`, `2 <= d <= n + m`.
#[inline(always)]
pub fn interior_rows(d: usize, n: usize, m: usize) -> (usize, usize) {
    (d.saturating_sub(m).max(1), (d - 1).min(n))
}

/// Where interior anti-diagonal `d` (`2 <= d <= n + m + 1`) starts in the
/// diagonal-major store of the `n x m` interior cells (cell `(i, j)` at
/// `interior_offset(i + j) + i - interior_rows(i + j).0`); `d = n + m + 1`
/// gives `n * m`, the store's size.
#[inline(always)]
pub fn interior_offset(d: usize, n: usize, m: usize) -> usize {
    let k = d - 2;
    let (short, long) = (n.min(m), n.max(m));
    if k < short {
        // Anti-diagonals of 1, 2, ..., k cells before.
        k * (k + 1) / 2
    } else if k < long {
        short * (short + 1) / 2 + (k - short) * short
    } else {
        // What remains: r, r - 1, ..., 1 cells.
        let r = n + m - 1 - k;
        n * m - r * (r + 1) / 2
    }
}

#[inline(always)]
fn in_window<W: Window>(window: &W, i: usize, j: usize, n: usize, m: usize) -> bool {
    let (lo, hi) = window.columns(i, n, m);
    lo <= j && j <= hi
}

/// The pair's value, cell `(n, m)`, on every thread, computed anti-diagonal
/// by anti-diagonal in `ring` (three anti-diagonals of `ring_len` values).
/// If `store` is not null, every interior cell is also written there,
/// diagonal-major ([`interior_offset`]), for the backward pass.
///
/// # Safety
/// All threads call it together with the same arguments; `ring` holds
/// `VALUE_RINGS * ring_len` values, `ring_len >= min(n, m) + 1`, used by
/// this block only; `store` is null or holds `n * m` values; the series
/// are non-empty and valid.
#[inline(always)]
pub unsafe fn stencil_value<T: Real, M: Recurrence<T>, B: ThreadBlock>(
    block: &B,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    ring: *mut T,
    ring_len: usize,
    store: *mut T,
) -> T {
    let (n, m) = (a.len, b.len);
    let (first_thread, threads) = (block.thread(), block.threads());
    let window = measure.window();
    let banded = window.is_banded();
    let storing = !store.is_null();
    for d in 0..=n + m {
        let current = ring.add(d % 3 * ring_len);
        // Anti-diagonals d - 1 and d - 2 and their first rows; read only
        // by interior cells, which exist from d = 2 on.
        let previous = ring.add((d + 2) % 3 * ring_len);
        let before = ring.add((d + 1) % 3 * ring_len);
        let previous_first = d.saturating_sub(m + 1);
        let before_first = d.saturating_sub(m + 2);
        let (first, last) = antidiagonal_rows(d, n, m);
        let (stored, stored_first) = if storing && d >= 2 {
            (
                store.add(interior_offset(d, n, m)),
                interior_rows(d, n, m).0,
            )
        } else {
            (store, 1)
        };
        let mut i = first + first_thread;
        while i <= last {
            let j = d - i;
            let interior = i > 0 && j > 0;
            let value = if !interior {
                if d == 0 {
                    T::ZERO
                } else {
                    T::INFINITY
                }
            } else if banded && !in_window(&window, i, j, n, m) {
                T::INFINITY
            } else {
                let neighbours = Neighbours {
                    diag: *before.add(i - 1 - before_first),
                    up: *previous.add(i - 1 - previous_first),
                    left: *previous.add(i - previous_first),
                };
                let (row, column) = (measure.row(a, i), measure.column(b, j));
                measure.cell(&row, &column, a, b, neighbours)
            };
            *current.add(i - first) = value;
            if storing && interior {
                *stored.add(i - stored_first) = value;
            }
            i += threads;
        }
        block.barrier();
    }
    // The last anti-diagonal is the single cell (n, m).
    *ring.add((n + m) % 3 * ring_len)
}

/// What the backward pass ([`stencil_backward`]) makes of the derivative
/// `E[i][j]` of the pair's value with respect to each cell of the window.
#[derive(Clone, Copy)]
pub enum Backward<T> {
    /// The gradient with respect to the samples: `grad_a[i - 1][k] += sum_j
    /// E[i][j] * d cost(i, j) / d a_i[k]` (`a.len * a.dims` values, zeroed
    /// by the caller), and likewise for `b` if `grad_b` is not null.
    Gradient { grad_a: *mut T, grad_b: *mut T },
    /// `E` itself (for Soft-DTW, the expected alignment), row-major `a.len
    /// x b.len`: `E[i][j]` at `(i - 1) * b.len + j - 1`. Cells outside the
    /// window are left as they are (the caller zeroes them).
    Alignment(*mut T),
}

/// The backward pass: from the cost matrix that [`stencil_value`] stored,
/// the derivative `E[i][j]` of the pair's value with respect to every cell
/// (`E[n][m] = 1`; `E[i][j] = sum over the successors s in the matrix and
/// the band of E[s] * d s / d (i, j)`), anti-diagonal by anti-diagonal from
/// the last, and from it what `output` asks for. The kernels pass `output`
/// as a constant, so each keeps the code of its own case only.
///
/// # Safety
/// All threads call it together with the same arguments, after
/// `stencil_value` stored this pair in `store` and a barrier; `ring` holds
/// `GRADIENT_RINGS * ring_len` values (`ring_len >= min(n, m) + 1`);
/// `output`'s pointers hold the values its case says.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn stencil_backward<T: Real, M: Differentiable<T>, B: ThreadBlock>(
    block: &B,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    ring: *mut T,
    ring_len: usize,
    store: *const T,
    output: Backward<T>,
) {
    let (n, m, dims) = (a.len, b.len, a.dims);
    let (first_thread, threads) = (block.thread(), block.threads());
    let window = measure.window();
    let banded = window.is_banded();
    let derivatives = ring;
    let keys = ring.add(3 * ring_len);
    for d in (2..=n + m).rev() {
        let current = d % 3 * ring_len;
        // Anti-diagonals d + 1 (the cells below and to the right) and
        // d + 2 (diagonally), and their first interior rows.
        let next = (d + 1) % 3 * ring_len;
        let after = (d + 2) % 3 * ring_len;
        let next_first = (d + 1).saturating_sub(m).max(1);
        let after_first = (d + 2).saturating_sub(m).max(1);
        let (first, last) = interior_rows(d, n, m);
        let values = store.add(interior_offset(d, n, m));
        let mut i = first + first_thread;
        while i <= last {
            let j = d - i;
            let (derivative, key) = if banded && !in_window(&window, i, j, n, m) {
                (T::ZERO, -T::INFINITY)
            } else {
                let value = *values.add(i - first);
                let (row, column) = (measure.row(a, i), measure.column(b, j));
                let derivative = if i == n && j == m {
                    T::ONE
                } else {
                    let from = |slot: usize| {
                        *derivatives.add(slot) * measure.partial(*keys.add(slot), value)
                    };
                    let mut sum = T::ZERO;
                    if i < n {
                        sum = sum + from(next + i + 1 - next_first);
                    }
                    if j < m {
                        sum = sum + from(next + i - next_first);
                    }
                    if i < n && j < m {
                        sum = sum + from(after + i + 1 - after_first);
                    }
                    sum
                };
                // The cells of an anti-diagonal differ in their rows and in
                // their columns: no two threads write the same place.
                match output {
                    Backward::Gradient { grad_a, grad_b } => {
                        for k in 0..dims {
                            let g = derivative * measure.cost_gradient(&row, &column, a, b, k);
                            let to_a = grad_a.add((i - 1) * dims + k);
                            *to_a = *to_a + g;
                            if !grad_b.is_null() {
                                let to_b = grad_b.add((j - 1) * dims + k);
                                *to_b = *to_b - g;
                            }
                        }
                    }
                    Backward::Alignment(alignment) => {
                        *alignment.add((i - 1) * m + j - 1) = derivative;
                    }
                }
                (derivative, measure.key(&row, &column, a, b, value))
            };
            *derivatives.add(current + i - first) = derivative;
            *keys.add(current + i - first) = key;
            i += threads;
        }
        block.barrier();
    }
}

/// [`stencil_backward`] to the gradient with respect to the samples.
///
/// # Safety
/// As [`stencil_backward`]; `grad_a` holds `a.len * a.dims` values and
/// `grad_b` is null or holds `b.len * b.dims`; both are added to (the
/// caller zeroes them).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn stencil_gradient<T: Real, M: Differentiable<T>, B: ThreadBlock>(
    block: &B,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    ring: *mut T,
    ring_len: usize,
    store: *const T,
    grad_a: *mut T,
    grad_b: *mut T,
) {
    let output = Backward::Gradient { grad_a, grad_b };
    stencil_backward(block, measure, a, b, ring, ring_len, store, output);
}
