//! The block driver, shared by every measure: one thread block computes one
//! pair, anti-diagonal by anti-diagonal (the cells of an anti-diagonal do
//! not depend on each other), its threads spread over the cells of each
//! anti-diagonal. Only the current anti-diagonal and the two before it are
//! kept, in shared memory (the "shared-memory stencil" of cuTimeWarp);
//! costs are computed on the fly from the two series through the
//! measure's [`Recurrence`]. Anti-diagonals longer than the block take
//! several cells per thread.
//!
//! The backward pass ([`block_gradient`]) walks the anti-diagonals in
//! reverse over the cost matrix that the forward pass stored
//! (diagonal-major, so that the threads of an anti-diagonal read adjacent
//! addresses), computing the derivative of the pair's value with respect
//! to every cell (Soft-DTW's expected alignment) and from it the gradient
//! with respect to both series' samples.
//!
//! The drivers are generic over [`ThreadBlock`], the four things they need
//! of a block, so the same code runs on the GPU (`_syncthreads`), in the
//! host tests (threads and a barrier), and in the CPU backend (one thread,
//! [`SingleThread`]: cells of an anti-diagonal are independent, so the
//! processor overlaps their exponentials instead of waiting on each).
//!
//! Anti-diagonal `d` holds the cells `(i, d - i)` of the `(n + 1) x (m + 1)`
//! matrix with its boundary row and column 0: rows `max(0, d - m) ..=
//! min(n, d)`, at most `min(n, m) + 1` cells. In the rings, cell `(i, j)`
//! of anti-diagonal `d` is at slot `i - max(0, d - m)`.

use crate::launch::triangle_pair;
use crate::warp::{warp_pair, Warp};
use crate::{Differentiable, Neighbours, Real, Recurrence, Series, SetRef};
use core::ptr::null_mut;

/// What the drivers need of a thread block. Every thread must make the
/// same calls in the same order (barriers are collective).
pub trait ThreadBlock {
    /// This thread's index, `0..self.threads()`.
    fn thread(&self) -> usize;
    /// Threads of the block.
    fn threads(&self) -> usize;
    /// Waits until every thread of the block has come here; what they
    /// wrote before (shared or global memory) is visible after.
    ///
    /// # Safety
    /// Called by all threads together.
    unsafe fn barrier(&self);
    /// The block's shared memory, as many bytes as the launch gave.
    fn shared<T>(&self) -> *mut T;
}

/// A block of one thread whose "shared memory" is a buffer of the caller's:
/// the CPU backend's anti-diagonal order.
#[derive(Clone, Copy, Debug)]
pub struct SingleThread {
    pub memory: *mut u8,
}

impl ThreadBlock for SingleThread {
    #[inline(always)]
    fn thread(&self) -> usize {
        0
    }
    #[inline(always)]
    fn threads(&self) -> usize {
        1
    }
    #[inline(always)]
    unsafe fn barrier(&self) {}
    #[inline(always)]
    fn shared<T>(&self) -> *mut T {
        self.memory as *mut T
    }
}

/// Anti-diagonals the forward pass keeps ([`block_value`]).
pub const VALUE_RINGS: usize = 3;
/// Anti-diagonals the gradient keeps ([`block_gradient`]: the derivative
/// and the key of three anti-diagonals); its forward pass uses the first
/// [`VALUE_RINGS`] of them.
pub const GRADIENT_RINGS: usize = 6;

/// Values per ring anti-diagonal for an `n x m` pair: its longest
/// anti-diagonal with the boundary.
#[inline(always)]
pub fn ring_len(n: usize, m: usize) -> usize {
    n.min(m) + 1
}

/// Rows `first..=last` of anti-diagonal `d` of the matrix with boundary.
#[inline(always)]
pub fn diagonal_rows(d: usize, n: usize, m: usize) -> (usize, usize) {
    (d.saturating_sub(m), d.min(n))
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
fn in_band<T: Real, M: Recurrence<T>>(measure: &M, i: usize, j: usize, n: usize, m: usize) -> bool {
    let (lo, hi) = measure.columns(i, n, m);
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
pub unsafe fn block_value<T: Real, M: Recurrence<T>, B: ThreadBlock>(
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
    let banded = measure.banded();
    let storing = !store.is_null();
    for d in 0..=n + m {
        let current = ring.add(d % 3 * ring_len);
        // Anti-diagonals d - 1 and d - 2 and their first rows; read only
        // by interior cells, which exist from d = 2 on.
        let previous = ring.add((d + 2) % 3 * ring_len);
        let before = ring.add((d + 1) % 3 * ring_len);
        let previous_first = d.saturating_sub(m + 1);
        let before_first = d.saturating_sub(m + 2);
        let (first, last) = diagonal_rows(d, n, m);
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
            } else if banded && !in_band(measure, i, j, n, m) {
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

/// The backward pass: from the cost matrix that [`block_value`] stored,
/// the derivative `E[i][j]` of the pair's value with respect to every cell
/// (`E[n][m] = 1`; `E[i][j] = sum over the successors s in the matrix and
/// the band of E[s] * d s / d (i, j)`), anti-diagonal by anti-diagonal from
/// the last, and the gradient: `grad_a[i - 1][k] += sum_j E[i][j] * d
/// cost(i, j) / d a_i[k]`, and likewise for `b` if `grad_b` is not null.
///
/// # Safety
/// All threads call it together with the same arguments, after
/// `block_value` stored this pair in `store` and a barrier; `ring` holds
/// `GRADIENT_RINGS * ring_len` values (`ring_len >= min(n, m) + 1`);
/// `grad_a` holds `a.len * a.dims` values and `grad_b` is null or holds
/// `b.len * b.dims`; both are added to (the caller zeroes them).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn block_gradient<T: Real, M: Differentiable<T>, B: ThreadBlock>(
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
    let (n, m, dims) = (a.len, b.len, a.dims);
    let (first_thread, threads) = (block.thread(), block.threads());
    let banded = measure.banded();
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
            let (derivative, key) = if banded && !in_band(measure, i, j, n, m) {
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
                for k in 0..dims {
                    let g = derivative * measure.cost_gradient(&row, &column, a, b, k);
                    let to_a = grad_a.add((i - 1) * dims + k);
                    *to_a = *to_a + g;
                    if !grad_b.is_null() {
                        let to_b = grad_b.add((j - 1) * dims + k);
                        *to_b = *to_b - g;
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

/// How a [`BlockLaunch`] numbers its pairs.
pub mod mode {
    /// Every series of `a` against every series of `b`, row-major.
    pub const MATRIX: u32 = 0;
    /// `a` against itself, the upper triangle with its diagonal, row-major.
    pub const TRIANGLE: u32 = 1;
    /// Series `k` of `a` against series `k` of `b` (same counts).
    pub const PAIRED: u32 = 2;
}

/// Everything a launch of the block kernels (stencil, gradient) or of the
/// paired warp kernels needs, passed by value as their one parameter.
/// The launch computes pairs `first_pair .. first_pair + pair_count`,
/// numbered as `mode` says, one per block (or warp).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    /// Values: `out[k]` for pair `k` (of the whole numbering) when paired,
    /// else row-major `a.count x b.count`.
    pub out: *mut T,
    /// The paired warp kernels: `row_len` values per pair of the launch
    /// (the border between column bands), or null when no pair needs more
    /// than one band.
    pub workspace: *mut T,
    /// The gradient kernels: the stored cost matrices, that of the
    /// launch's pair `index` at `store + store_offsets[index]`.
    pub store: *mut T,
    pub store_offsets: *const u64,
    /// The gradient kernels (paired): the gradient with respect to `a`'s
    /// samples, laid out like `a`'s values and zeroed; and to `b`'s, or null.
    pub grad_a: *mut T,
    pub grad_b: *mut T,
    /// The gradient kernels: rings in global memory, `GRADIENT_RINGS *
    /// ring_len` values per pair of the launch, for pairs whose rings do
    /// not fit the block's shared memory; null to use shared memory.
    pub rings: *mut T,
    /// Values per ring anti-diagonal in shared memory: at least
    /// `min(n, m) + 1` of every pair.
    pub ring_len: u64,
    /// The paired warp kernels: at least the longest series of `a` plus one.
    pub row_len: u64,
    pub first_pair: u64,
    pub pair_count: u64,
    /// One of [`mode`].
    pub mode: u32,
}

impl<T: Real, P: Recurrence<T>> BlockLaunch<T, P> {
    /// The `(i, j)` of this launch's pair `index` (`index < pair_count`).
    #[inline(always)]
    pub fn pair(&self, index: u64) -> (usize, usize) {
        let k = self.first_pair + index;
        let (i, j) = match self.mode {
            mode::PAIRED => (k, k),
            mode::TRIANGLE => triangle_pair(k, self.a.count),
            _ => (k / self.b.count, k % self.b.count),
        };
        (i as usize, j as usize)
    }

    /// Store the value of pair `(i, j)` (and of `(j, i)` in a triangle).
    #[inline(always)]
    unsafe fn write(&self, i: usize, j: usize, value: T) {
        if self.mode == mode::PAIRED {
            *self.out.add(i) = value;
            return;
        }
        let columns = self.b.count as usize;
        *self.out.add(i * columns + j) = value;
        if self.mode == mode::TRIANGLE && i != j {
            *self.out.add(j * columns + i) = value;
        }
    }

    /// Compute pair `index` with the block driver in the block's shared
    /// memory (`VALUE_RINGS * ring_len` values) and write its value: one
    /// block's whole job in the stencil kernels. Blocks past the launch's
    /// pairs return at once.
    ///
    /// # Safety
    /// All threads of the block call it together; pointers valid as
    /// documented on the fields; the shared memory is large enough.
    #[inline(always)]
    pub unsafe fn run_pair_in_block<B: ThreadBlock>(&self, block: &B, index: u64) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let (a, b) = (self.a.series(i), self.b.series(j));
        let ring = block.shared::<T>();
        let value = block_value(
            block,
            &self.params,
            &a,
            &b,
            ring,
            self.ring_len as usize,
            null_mut(),
        );
        if block.thread() == 0 {
            self.write(i, j, value);
        }
    }

    /// Compute pair `index` with the warp driver, `S` columns per lane, and
    /// write its value: one warp's whole job in the paired warp kernels.
    ///
    /// # Safety
    /// All lanes of the warp call it together; pointers valid as documented.
    #[inline(always)]
    pub unsafe fn run_pair_in_warp<W: Warp, const S: usize>(&self, warp: &W, index: u64) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let (a, b) = (self.a.series(i), self.b.series(j));
        let border = if self.workspace.is_null() {
            self.workspace
        } else {
            self.workspace.add(index as usize * self.row_len as usize)
        };
        let value = warp_pair::<T, P, W, S>(warp, &self.params, &a, &b, border);
        if warp.lane() == 0 {
            self.write(i, j, value);
        }
    }
}

impl<T: Real, P: Differentiable<T>> BlockLaunch<T, P> {
    /// Value and gradient of pair `index` of a paired launch: the forward
    /// pass storing the cost matrix, then the backward pass, with their
    /// rings (`GRADIENT_RINGS * ring_len` values) in the block's shared
    /// memory, or in `rings` if that is not null. Blocks past the launch's
    /// pairs return at once.
    ///
    /// # Safety
    /// As [`BlockLaunch::run_pair_in_block`]; `mode` is paired; `store`,
    /// `store_offsets`, `grad_a` (and `grad_b`, `rings` if not null) valid
    /// as documented.
    #[inline(always)]
    pub unsafe fn run_gradient_in_block<B: ThreadBlock>(&self, block: &B, index: u64) {
        if index >= self.pair_count {
            return;
        }
        // Two copies of the pair's code, so that each knows where its rings
        // live (shared-memory instructions in the first).
        if self.rings.is_null() {
            self.gradient_with_rings(block, index, block.shared::<T>());
        } else {
            let per_pair = GRADIENT_RINGS * self.ring_len as usize;
            let rings = self.rings.add(index as usize * per_pair);
            self.gradient_with_rings(block, index, rings);
        }
    }

    #[inline(always)]
    unsafe fn gradient_with_rings<B: ThreadBlock>(&self, block: &B, index: u64, ring: *mut T) {
        let (i, j) = self.pair(index);
        let (a, b) = (self.a.series(i), self.b.series(j));
        let ring_len = self.ring_len as usize;
        let store = self
            .store
            .add(*self.store_offsets.add(index as usize) as usize);
        let value = block_value(block, &self.params, &a, &b, ring, ring_len, store);
        // Every thread has read the value from the ring before the backward
        // pass overwrites it.
        block.barrier();
        let grad_a = self.grad_a.add(*self.a.offsets.add(i) as usize * a.dims);
        let grad_b = if self.grad_b.is_null() {
            self.grad_b
        } else {
            self.grad_b.add(*self.b.offsets.add(j) as usize * b.dims)
        };
        block_gradient(
            block,
            &self.params,
            &a,
            &b,
            ring,
            ring_len,
            store,
            grad_a,
            grad_b,
        );
        if block.thread() == 0 {
            self.write(i, j, value);
        }
    }
}
