//! The launches of the kernels that compute many pairs: a thread, a warp
//! or a block a pair ([`PairsLaunch`]), and the stencil, gradient and
//! alignment kernels' additions ([`StencilLaunch`]).

use super::{triangle_pair, Numbering};
pub use crate::drivers::columns::gradient::panel_gradient_workspace;
use crate::drivers::columns::gradient::{panel_gradient, store_len, GradientPanel};
use crate::drivers::columns::long_pair::{pipelined_pair, PanelHandoff, NO_STALL};
use crate::drivers::columns::pair::warp_pair;
use crate::drivers::columns::skewed::skewed_pair;
use crate::drivers::rows::{pair_value, RowPair};
use crate::drivers::sheared_band::{band_in_warp, band_pair};
use crate::drivers::stencil::{stencil_backward, stencil_value, Backward, GRADIENT_RINGS};
use crate::hw::{Scope, Tagged, ThreadBlock, Warp};
use crate::{Differentiable, Real, Recurrence, SetRef};
use core::mem::{size_of, MaybeUninit};
use core::ptr::null_mut;

/// Everything a pair kernel needs, passed by value as its one parameter.
///
/// The launch computes pairs `first_pair .. first_pair + pair_count`,
/// numbered as `numbering` says, and writes each value to `out`: row-major
/// `a.count x b.count` for a matrix or a triangle, `out[k]` for pair `k` of
/// paired batches.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PairsLaunch<T, P> {
    pub a: SetRef<T>,
    pub b: SetRef<T>,
    pub params: P,
    pub out: *mut T,
    /// The naive kernel: two rows of `row_len` values for each of the
    /// `pair_count` pairs, interleaved: element `k` of row `r` of pair `p` at
    /// `(r * row_len + k) * pair_count + p`. The warp kernels: `row_len`
    /// values for each pair, one after the other (the border column between
    /// its panels), or null when no series of `b` needs more than one panel.
    pub workspace: *mut T,
    /// At least the longest series of `a` and of `b`, plus one.
    pub row_len: u64,
    pub first_pair: u64,
    pub pair_count: u64,
    pub numbering: Numbering,
}

impl<T: Real, P: Recurrence<T>> PairsLaunch<T, P> {
    /// The `(i, j)` of this launch's pair `index` (`index < pair_count`).
    #[inline(always)]
    pub fn pair(&self, index: u64) -> (usize, usize) {
        let k = self.first_pair + index;
        let (i, j) = match self.numbering {
            Numbering::Paired => (k, k),
            Numbering::Triangle => triangle_pair(k, self.a.count),
            Numbering::Matrix => (k / self.b.count, k % self.b.count),
        };
        (i as usize, j as usize)
    }

    /// Store the value of pair `(i, j)` (and of `(j, i)` in a triangle).
    ///
    /// # Safety
    /// `(i, j)` is a pair of the launch; `out` as documented.
    #[inline(always)]
    pub unsafe fn write(&self, i: usize, j: usize, value: T) {
        if self.numbering == Numbering::Paired {
            *self.out.add(i) = value;
            return;
        }
        let columns = self.b.count as usize;
        *self.out.add(i * columns + j) = value;
        if self.numbering == Numbering::Triangle && i != j {
            *self.out.add(j * columns + i) = value;
        }
    }

    /// Compute pair `index` with its two rolling rows in `rows` and write
    /// its value.
    ///
    /// # Safety
    /// `index < pair_count`; `rows` holds two rows of at least the pair's
    /// `b` length plus one, used by nobody else; pointers valid as
    /// documented on the fields.
    #[inline(always)]
    pub unsafe fn run_pair_in_rows(&self, index: u64, rows: RowPair<T>) {
        let (i, j) = self.pair(index);
        let value = pair_value(&self.params, &self.a.series(i), &self.b.series(j), rows);
        self.write(i, j, value);
    }

    /// Pair `index` with its rolling rows in the workspace, interleaved
    /// with the other pairs' (see `workspace`): the `naive` kernels.
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_rows`], the workspace sized for the launch.
    #[inline(always)]
    pub unsafe fn run_pair_with_workspace(&self, index: u64) {
        let rows = RowPair {
            base: self.workspace.add(index as usize),
            len: self.row_len as usize,
            stride: self.pair_count as usize,
        };
        self.run_pair_in_rows(index, rows);
    }

    /// Pair `index` with its rolling rows in a fixed array of the calling
    /// thread's own (`ROW` values a row: on the GPU, local memory): the
    /// `local` kernels.
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_rows`]; every series of `b` has fewer
    /// than `ROW` samples (the host checks).
    #[inline(always)]
    pub unsafe fn run_pair_in_local<const ROW: usize>(&self, index: u64) {
        // Never read before written (see `pair_value`): no initialisation.
        let mut rows = MaybeUninit::<[[T; ROW]; 2]>::uninit();
        let rows = RowPair {
            base: rows.as_mut_ptr().cast::<T>(),
            len: ROW,
            stride: 1,
        };
        self.run_pair_in_rows(index, rows);
    }

    /// Pair `index` with its rolling rows in memory shared by the `threads`
    /// threads of its block, interleaved: element `k` of row `r` of the
    /// block's thread `thread` at `block_rows[(r * row_len + k) * threads +
    /// thread]`, so the threads of a warp touch consecutive words (no bank
    /// conflicts). The `shared` kernels.
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_rows`]; `block_rows` holds `threads *
    /// 2 * row_len` values; `thread < threads`.
    #[inline(always)]
    pub unsafe fn run_pair_in_block_rows(
        &self,
        index: u64,
        block_rows: *mut T,
        thread: usize,
        threads: usize,
    ) {
        let rows = RowPair {
            base: block_rows.add(thread),
            len: self.row_len as usize,
            stride: threads,
        };
        self.run_pair_in_rows(index, rows);
    }

    /// Pair `index` by one warp with the column driver, `S` columns a lane;
    /// `UNIVARIATE` for the univariate twins (see [`SetRef::series_of`]).
    /// The `warp` kernels; warps past the launch's pairs return at once.
    ///
    /// # Safety
    /// All lanes of the warp call it together; pointers valid as documented;
    /// with `UNIVARIATE` the sets are univariate.
    #[inline(always)]
    pub unsafe fn run_pair_in_warp<W: Warp, const S: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        index: u64,
    ) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let a = self.a.series_of::<UNIVARIATE>(i);
        let b = self.b.series_of::<UNIVARIATE>(j);
        let border = self.border_of(index);
        let value = warp_pair::<T, P, W, S>(warp, &self.params, &a, &b, border);
        if warp.lane() == 0 {
            self.write(i, j, value);
        }
    }

    /// The warp kernels' border column of pair `index` in the workspace, or
    /// null when the launch has none.
    ///
    /// # Safety
    /// `index < pair_count`; the workspace as documented.
    #[inline(always)]
    pub(crate) unsafe fn border_of(&self, index: u64) -> *mut T {
        if self.workspace.is_null() {
            self.workspace
        } else {
            self.workspace.add(index as usize * self.row_len as usize)
        }
    }

    /// Pair `index` by one warp with the skewed column driver, `G` groups
    /// of `C` columns a lane: the `skewed` kernels.
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_warp`].
    #[inline(always)]
    pub unsafe fn run_pair_in_skewed_warp<
        W: Warp,
        const G: usize,
        const C: usize,
        const UNIVARIATE: bool,
    >(
        &self,
        warp: &W,
        index: u64,
    ) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let a = self.a.series_of::<UNIVARIATE>(i);
        let b = self.b.series_of::<UNIVARIATE>(j);
        let border = self.border_of(index);
        let value = skewed_pair::<T, P, W, G, C>(warp, &self.params, &a, &b, border);
        if warp.lane() == 0 {
            self.write(i, j, value);
        }
    }

    /// Pair `index` by the warps of one block together, panels of `S`
    /// columns a lane, each warp right behind the panel to its left (the
    /// long-pair pipeline, [`pipelined_pair`]): the `panels` kernels. The
    /// pair's workspace (`row_len` values, zeroed before the launch) holds
    /// its panel counts, then its two border columns
    /// ([`panel_workspace`]).
    ///
    /// # Safety
    /// Every lane of every warp of the block calls it together with the
    /// block's index; pointers valid as documented; with `UNIVARIATE` the
    /// sets are univariate.
    #[inline(always)]
    pub unsafe fn run_pair_in_panels<W: Warp, const S: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        index: u64,
    ) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let a = self.a.series_of::<UNIVARIATE>(i);
        let b = self.b.series_of::<UNIVARIATE>(j);
        let base = self.border_of(index);
        // The count's padding holds the fault word; a wait that gives up
        // makes the pair's value NaN, which the host reports.
        let handoff = PanelHandoff {
            next_panel: base.cast::<u32>(),
            borders: base.cast::<u8>().add(PANEL_COUNT_BYTES).cast::<Tagged>(),
            last_row: null_mut(),
            fault: base.cast::<u32>().add(1),
            stall_panel: NO_STALL,
        };
        let value =
            pipelined_pair::<T, P, W, S>(warp, Scope::Block, &self.params, &a, &b, &handoff);
        if let Some(value) = value {
            if warp.lane() == 0 {
                self.write(i, j, value);
            }
        }
    }

    /// Pair `index` by one warp with the sheared band driver, `S` cells a
    /// lane: the `sheared` kernels, which the host launches for pairs whose
    /// Sakoe-Chiba band fits the warp. A pair whose band does not fit is
    /// left unwritten (its output stays NaN, which the host reports).
    ///
    /// # Safety
    /// As [`PairsLaunch::run_pair_in_warp`].
    #[inline(always)]
    pub unsafe fn run_band_in_warp<W: Warp, const S: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        index: u64,
    ) {
        if index >= self.pair_count {
            return;
        }
        let (i, j) = self.pair(index);
        let a = self.a.series_of::<UNIVARIATE>(i);
        let b = self.b.series_of::<UNIVARIATE>(j);
        if let Some(band) = band_in_warp(&self.params, a.len, b.len, W::LANES, S) {
            let value = band_pair::<T, P, W, S>(warp, &self.params, &a, &b, band);
            if warp.lane() == 0 {
                self.write(i, j, value);
            }
        }
    }
}

/// Bytes before a `panels` kernel's pair's border columns: its count of
/// panels taken, padded to the borders' alignment.
const PANEL_COUNT_BYTES: usize = size_of::<Tagged>();

/// The workspace of a `panels` kernel's pair of `a_len x b_len`, in values
/// of `T`: the count of panels taken, then two border columns of `a_len +
/// 1` tagged values. A multiple of 16 bytes, so that every pair's borders
/// stay 16-byte aligned.
pub fn panel_workspace<T>(a_len: usize) -> usize {
    (PANEL_COUNT_BYTES + 2 * (a_len + 1) * size_of::<Tagged>()) / size_of::<T>()
}

/// What the gradient and alignment kernels read and write besides the
/// pairs: all null for the stencil kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GradientBuffers<T> {
    /// The stored cost matrices, that of the launch's pair `index` at
    /// `store + store_offsets[index]`.
    pub store: *mut T,
    pub store_offsets: *const u64,
    /// The gradient kernels: the gradient with respect to `a`'s samples,
    /// laid out like `a`'s values and zeroed; and to `b`'s, or null.
    pub grad_a: *mut T,
    pub grad_b: *mut T,
    /// Rings in global memory, `GRADIENT_RINGS * ring_len` values per pair
    /// of the launch, for pairs whose rings do not fit the block's shared
    /// memory; null to use shared memory.
    pub rings: *mut T,
    /// The alignment kernels: each pair's derivative of its value with
    /// respect to every cell, row-major `n x m` at the offset of its cost
    /// matrix in `store` (`alignment + store_offsets[index]`), zeroed (cells
    /// outside the window stay 0). Null for the gradient kernels, which
    /// never read it.
    pub alignment: *mut T,
    /// A zeroed word, set when a wait of the `panels_gradient` kernels'
    /// warps for another's border gave up (`hw::WaitBound`); the host
    /// reads it after the launch. Null for the kernels that never wait.
    pub fault: *mut u32,
}

impl<T> GradientBuffers<T> {
    /// No gradient: the stencil kernels.
    pub const fn none() -> Self {
        GradientBuffers {
            store: null_mut(),
            store_offsets: core::ptr::null(),
            grad_a: null_mut(),
            grad_b: null_mut(),
            rings: null_mut(),
            alignment: null_mut(),
            fault: null_mut(),
        }
    }
}

/// What a gradient or alignment kernel writes besides the values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    /// The gradient with respect to the series' samples.
    Gradient,
    /// The derivative with respect to every cell, as a matrix.
    Alignment,
}

/// Everything a stencil or gradient kernel needs (a block a pair), passed
/// by value as its one parameter.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StencilLaunch<T, P> {
    /// The pairs and their output (`workspace` and `row_len` unused).
    pub pairs: PairsLaunch<T, P>,
    /// Values per ring anti-diagonal in shared memory: at least
    /// `min(n, m) + 1` of every pair.
    pub ring_len: u64,
    pub gradient: GradientBuffers<T>,
}

impl<T: Real, P: Recurrence<T>> StencilLaunch<T, P> {
    /// Pair `index` by the stencil driver in the block's shared memory
    /// (`VALUE_RINGS * ring_len` values): the stencil kernels. Blocks past
    /// the launch's pairs return at once.
    ///
    /// # Safety
    /// All threads of the block call it together; pointers valid as
    /// documented on the fields; the shared memory is large enough.
    #[inline(always)]
    pub unsafe fn run_pair_in_block<B: ThreadBlock>(&self, block: &B, index: u64) {
        let pairs = &self.pairs;
        if index >= pairs.pair_count {
            return;
        }
        let (i, j) = pairs.pair(index);
        let (a, b) = (pairs.a.series(i), pairs.b.series(j));
        let ring = block.shared::<T>();
        let ring_len = self.ring_len as usize;
        let value = stencil_value(block, &pairs.params, &a, &b, ring, ring_len, null_mut());
        if block.thread() == 0 {
            pairs.write(i, j, value);
        }
    }
}

impl<T: Real, P: Differentiable<T>> StencilLaunch<T, P> {
    /// Value and gradient of pair `index` of a paired launch: the forward
    /// pass storing the cost matrix, then the backward pass, with their
    /// rings (`GRADIENT_RINGS * ring_len` values) in the block's shared
    /// memory, or in `gradient.rings` if that is not null. Blocks past the
    /// launch's pairs return at once.
    ///
    /// # Safety
    /// As [`StencilLaunch::run_pair_in_block`]; the numbering is paired;
    /// the gradient buffers valid as documented.
    #[inline(always)]
    pub unsafe fn run_gradient_in_block<B: ThreadBlock>(&self, block: &B, index: u64) {
        self.run_backward_in_block(block, index, Output::Gradient);
    }

    /// Value and derivative with respect to every cell (the expected
    /// alignment) of pair `index` of a paired launch, written to
    /// `gradient.alignment`: as [`StencilLaunch::run_gradient_in_block`],
    /// with no gradient with respect to the samples.
    ///
    /// # Safety
    /// As [`StencilLaunch::run_gradient_in_block`]; `gradient.alignment`
    /// valid as documented, `grad_a` and `grad_b` unused.
    #[inline(always)]
    pub unsafe fn run_alignment_in_block<B: ThreadBlock>(&self, block: &B, index: u64) {
        self.run_backward_in_block(block, index, Output::Alignment);
    }

    /// Value and gradient of pair `index` of a paired launch by `WARPS`
    /// warps of one block, panels of `S` columns a lane
    /// ([`panel_gradient`]; with one warp, [`warp_gradient`]): the column
    /// driver's forward and backward passes, each panel's cells stored at
    /// the pair's offset in `gradient.store`, panel `p` `p * store_len(n,
    /// W::LANES * S, S)` values after the first; the borders between the
    /// panels in `pairs.workspace`, `pairs.row_len` values a pair
    /// ([`panel_gradient_workspace`]). Warp `p` of each group of `WARPS`
    /// takes panel `p`; warps past the pair's panels, or past the launch's
    /// pairs, return at once, and so do all of a pair wider than `WARPS`
    /// panels. The `warp_gradient` and `panels_gradient` kernels.
    ///
    /// # Safety
    /// All lanes of the warp call it together with the launch's warp
    /// index, and the `WARPS` warps of a pair are in one block; the
    /// numbering is paired; every series of `b` has at most `WARPS *
    /// W::LANES * S` samples; the store holds
    /// [`crate::drivers::columns::gradient::panels_store_len`] values at
    /// each pair's offset; with more than one warp the workspace holds
    /// [`panel_gradient_workspace`] values a pair for the longest series of
    /// `a`, zeroed; the gradients as documented; with `UNIVARIATE` the sets
    /// are univariate.
    #[inline(always)]
    pub unsafe fn run_gradient_in_panels<
        W: Warp,
        const S: usize,
        const WARPS: usize,
        const UNIVARIATE: bool,
    >(
        &self,
        warp: &W,
        global_warp: u64,
    ) {
        let (pairs, buffers) = (&self.pairs, &self.gradient);
        let index = global_warp / WARPS as u64;
        if index >= pairs.pair_count {
            return;
        }
        let (i, j) = pairs.pair(index);
        let a = pairs.a.series_of::<UNIVARIATE>(i);
        let b = pairs.b.series_of::<UNIVARIATE>(j);
        let width = W::LANES * S;
        let panels = b.len.div_ceil(width);
        let p = (global_warp % WARPS as u64) as usize;
        // A pair wider than the warps' panels is left unwritten (its value
        // stays NaN, which the host reports), not waited for forever.
        if p >= panels || panels > WARPS {
            return;
        }
        let store = buffers
            .store
            .add(*buffers.store_offsets.add(index as usize) as usize)
            .add(p * store_len(a.len, width, S));
        let (grad_a, grad_b) = self.gradients_of(i, j, a.dims);
        let panel = if WARPS == 1 {
            GradientPanel::whole()
        } else {
            let base = pairs.workspace.add(index as usize * pairs.row_len as usize);
            let fault = buffers.fault;
            GradientPanel::in_workspace(base.cast(), (a.len, a.dims), (p, panels), width, fault)
        };
        let value = panel_gradient::<T, P, W, S>(
            warp,
            &pairs.params,
            &a,
            &b,
            &panel,
            store,
            grad_a,
            grad_b,
        );
        // The last panel has the value; any panel whose wait gave up
        // writes NaN in its place.
        if (p + 1 == panels || value.to_f64().is_nan()) && warp.lane() == 0 {
            pairs.write(i, j, value);
        }
    }

    /// Where the gradients of pair `(i, j)` start (`grad_b` null if the
    /// launch has none).
    ///
    /// # Safety
    /// `(i, j)` is a pair of the launch; the gradient buffers as documented.
    #[inline(always)]
    unsafe fn gradients_of(&self, i: usize, j: usize, dims: usize) -> (*mut T, *mut T) {
        let (pairs, buffers) = (&self.pairs, &self.gradient);
        let grad_a = buffers.grad_a.add(pairs.a.start(i) * dims);
        let grad_b = if buffers.grad_b.is_null() {
            buffers.grad_b
        } else {
            buffers.grad_b.add(pairs.b.start(j) * dims)
        };
        (grad_a, grad_b)
    }

    #[inline(always)]
    unsafe fn run_backward_in_block<B: ThreadBlock>(&self, block: &B, index: u64, what: Output) {
        if index >= self.pairs.pair_count {
            return;
        }
        // Two copies of the pair's code, so that each knows where its rings
        // live (shared-memory instructions in the first).
        if self.gradient.rings.is_null() {
            self.backward_with_rings(block, index, block.shared::<T>(), what);
        } else {
            let per_pair = GRADIENT_RINGS * self.ring_len as usize;
            let rings = self.gradient.rings.add(index as usize * per_pair);
            self.backward_with_rings(block, index, rings, what);
        }
    }

    #[inline(always)]
    unsafe fn backward_with_rings<B: ThreadBlock>(
        &self,
        block: &B,
        index: u64,
        ring: *mut T,
        what: Output,
    ) {
        let (pairs, buffers) = (&self.pairs, &self.gradient);
        let (i, j) = pairs.pair(index);
        let (a, b) = (pairs.a.series(i), pairs.b.series(j));
        let ring_len = self.ring_len as usize;
        let offset = *buffers.store_offsets.add(index as usize) as usize;
        let store = buffers.store.add(offset);
        let value = stencil_value(block, &pairs.params, &a, &b, ring, ring_len, store);
        // Every thread has read the value from the ring before the backward
        // pass overwrites it.
        block.barrier();
        let output = match what {
            Output::Gradient => {
                let (grad_a, grad_b) = self.gradients_of(i, j, a.dims);
                Backward::Gradient { grad_a, grad_b }
            }
            Output::Alignment => Backward::Alignment(buffers.alignment.add(offset)),
        };
        stencil_backward(block, &pairs.params, &a, &b, ring, ring_len, store, output);
        if block.thread() == 0 {
            pairs.write(i, j, value);
        }
    }
}
