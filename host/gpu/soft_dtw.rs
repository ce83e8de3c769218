//! Host side of the block driver's kernels (`kernels-gpu/src/block.rs`,
//! launched with a `BlockLaunch`): the stencil variant of every measure for
//! distance matrices, paired batches (series `k` of `a` against series `k`
//! of `b`) with the stencil, warp or tiled kernels, and the Soft-DTW value
//! and gradient of paired batches.
//!
//! Paired batches come from host memory (uploaded for the call, an image a
//! batch and chunk: one allocation and one pinned copy each) or from
//! resident sets ([`crate::upload`]); either way the launches read device
//! batches ([`DeviceBatch`]), and for the soft-DTW divergence the pairs
//! `(x_k, x_k)` and `(y_k, y_k)` are launches over the same two batches,
//! nothing copied. Per pair, a launch's result depends only on the pair
//! (the cells' arithmetic does not change with the block's threads, the
//! warp's stripe or the chunk), so every way of cutting and launching a
//! batch gives the same bits.
//!
//! Device memory besides the batches: values need one output per pair and
//! (warp kernel, series wider than one warp's band) a border of `len + 1`
//! values per pair; the gradient needs, per pair, its whole cost matrix
//! (`n * m` values, diagonal-major) and the gradients, laid out like the
//! batches' values ([`crate::soft_dtw_gradient_bytes_per_pair`]). Batches
//! are cut into chunks that fit the memory budget; outputs, borders and
//! stores are allocated once per call, for the largest chunk (the
//! gradients, for the whole batch), and the results copied back once per
//! chunk (values) or once (gradients). Shared
//! memory per block: three anti-diagonals of `min(n, m) + 1` values for a
//! value, six for a gradient; the kernels opt into more than the default
//! 48 KiB when a pair needs it, up to the device's limit (227 KiB on an
//! H100/H200, so values up to `min(n, m)` of about 19 000 in f32 and 9 600
//! in f64, gradients up to about 9 600 and 4 800). Longer pairs take the
//! warp or tiled kernels for values; for gradients the rings move to global
//! memory (slower, but any length whose cost matrix fits the device).

use super::database::{image_bytes, DeviceBatch, DeviceSeriesSet, UPLOAD_SLACK};
use super::long_pair::{check_fits, pipelined_workspace};
use super::{
    driver, gpu_error, poison, warp_stripe, warp_stripes, DeviceSet, Gpu, KernelArgument, TilePlan,
    Variant, LANES, THREADS_PER_BLOCK, TILED_MAX_PAIRS, TILED_MIN_LENGTH,
};
use crate::soft_dtw::PairedGradients;
use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use ndarray::{s, Array2};
use std::mem::size_of;
use std::ops::Range;
use std::sync::MutexGuard;
use timewarp_kernels::block::{mode, ring_len, GRADIENT_RINGS, VALUE_RINGS};
use timewarp_kernels::launch::tile_pairs;
use timewarp_kernels::{BlockLaunch, SetRef, SoftDtwParams};

// SAFETY: `BlockLaunch` is `#[repr(C)]`, `Copy`, and laid out identically by
// the host and the nvptx64 compiler (same definition, same field types,
// 64-bit pointers on both).
unsafe impl<T: Copy, P: Copy> DeviceRepr for KernelArgument<BlockLaunch<T, P>> {}

/// The entry points of this module's kernels (`kernels-gpu/src/kernels.rs`
/// instantiates exactly these).
pub(super) fn kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for precision in ["f32", "f64"] {
        for measure in ["dtw", "soft_dtw", "twed"] {
            names.push(format!("{measure}_stencil_{precision}"));
        }
        for s in warp_stripes("soft_dtw", precision) {
            names.push(format!("soft_dtw_pairwarp{s}_{precision}"));
        }
        names.push(format!("soft_dtw_gradient_{precision}"));
    }
    names
}

/// Shared memory a kernel may use without opting in.
const DEFAULT_SHARED_BYTES: usize = 48 * 1024;
/// At most this many threads per stencil block: an anti-diagonal longer
/// than that gives each thread several cells.
const MAX_BLOCK_THREADS: usize = 1024;
/// At most this many blocks per launch (the grid's x limit is 2^31 - 1).
const MAX_BLOCKS: u64 = 1 << 30;

/// Bytes of shared memory of a block kernel for pairs of at most
/// `ring_len - 1` samples on their shorter side: `rings` anti-diagonals.
fn shared_bytes<T>(rings: usize, ring_len: usize) -> usize {
    rings * ring_len * std::mem::size_of::<T>()
}

/// Consecutive ranges of pairs whose `bytes(k)` sum, with `per_chunk`
/// bytes more, to at most `budget` each (a single larger pair is an error).
fn chunks(
    pairs: usize,
    budget: usize,
    per_chunk: usize,
    bytes: impl Fn(usize) -> usize,
    what: &str,
) -> Result<Vec<Range<usize>>> {
    let mut result = Vec::new();
    let (mut start, mut used) = (0, per_chunk);
    for k in 0..pairs {
        let size = bytes(k);
        if per_chunk + size > budget {
            return Err(Error::Gpu(format!(
                "pair {k} needs {} bytes of device memory for {what}, over the {budget} available",
                per_chunk + size
            )));
        }
        if k > start && (used + size > budget || (k - start) as u64 == MAX_BLOCKS) {
            result.push(start..k);
            (start, used) = (k, per_chunk);
        }
        used += size;
    }
    result.push(start..pairs);
    Ok(result)
}

/// The pairs of a paired computation, by their lengths (read from the
/// batches' sample offsets): `x_k` against `y_k`, and for the soft-DTW
/// divergence also `x_k` against itself and `y_k` against itself, each
/// group a launch of its own over the same two batches ([`operands`]).
#[derive(Clone, Copy)]
struct Shapes<'a> {
    x: &'a [u64],
    y: &'a [u64],
    divergence: bool,
}

/// The batches launch `launch` pairs: `x` with `y`, `x` with itself, `y`
/// with itself.
fn operands<B: Copy>(launch: usize, x: B, y: B) -> (B, B) {
    match launch {
        0 => (x, y),
        1 => (x, x),
        _ => (y, y),
    }
}

/// Series lengths from `len + 1` sample offsets.
fn lengths(offsets: &[u64]) -> impl Iterator<Item = usize> + '_ {
    offsets.windows(2).map(|w| (w[1] - w[0]) as usize)
}

impl<'a> Shapes<'a> {
    fn new(x: &'a [u64], y: &'a [u64], divergence: bool) -> Self {
        debug_assert_eq!(x.len(), y.len());
        Shapes { x, y, divergence }
    }

    fn pairs(&self) -> usize {
        self.x.len() - 1
    }

    /// Launches over the batches: 1, or 3 for the divergence.
    fn launches(&self) -> usize {
        if self.divergence {
            3
        } else {
            1
        }
    }

    /// The lengths `(n, m)` of pair `k` of launch `launch`.
    fn lengths(&self, launch: usize, k: usize) -> (usize, usize) {
        let (a, b) = operands(launch, self.x, self.y);
        ((a[k + 1] - a[k]) as usize, (b[k + 1] - b[k]) as usize)
    }

    /// Pairs `range` only.
    fn range(&self, range: &Range<usize>) -> Shapes<'a> {
        Shapes {
            x: &self.x[range.start..=range.end],
            y: &self.y[range.start..=range.end],
            divergence: self.divergence,
        }
    }

    /// The longest series of each batch of launch `launch`.
    fn longest(&self, launch: usize) -> (usize, usize) {
        let (a, b) = operands(launch, self.x, self.y);
        let max = |o| lengths(o).max().unwrap_or(0);
        (max(a), max(b))
    }

    /// The longest anti-diagonal (with boundary) of launch `launch`'s pairs.
    fn ring_len(&self, launch: usize) -> usize {
        (0..self.pairs())
            .map(|k| {
                let (n, m) = self.lengths(launch, k);
                ring_len(n, m)
            })
            .max()
            .unwrap_or(1)
    }

    /// The longest anti-diagonal of all launches' pairs.
    fn longest_ring(&self) -> usize {
        (0..self.launches())
            .map(|l| self.ring_len(l))
            .max()
            .unwrap_or(1)
    }

    /// The shortest series of both batches.
    fn shortest(&self) -> usize {
        lengths(self.x).chain(lengths(self.y)).min().unwrap_or(0)
    }
}

/// The border the paired warp kernel needs per pair of a launch whose
/// batches' longest series are `longest`: `len + 1` values when the series
/// of the second batch take more than one band, else none.
fn warp_border<T: Float>(measure: &str, (a_max, b_max): (usize, usize)) -> usize {
    let stripe = warp_stripe(measure, T::NAME, b_max);
    if b_max.div_ceil(LANES * stripe) > 1 {
        a_max.max(b_max) + 1
    } else {
        0
    }
}

/// Device memory a paired value computation allocates per pair: its
/// outputs, one a launch, and the warp kernel's border (shared by the
/// launches, which run one after the other); the same for every pair.
fn value_bytes<T: Float>(measure: &str, variant: Variant, shapes: &Shapes) -> usize {
    (shapes.launches() + value_border::<T>(measure, variant, shapes)) * size_of::<T>()
}

/// The border per pair of every launch of `shapes` (0 but for the warp
/// kernel).
fn value_border<T: Float>(measure: &str, variant: Variant, shapes: &Shapes) -> usize {
    if variant != Variant::Warp {
        return 0;
    }
    (0..shapes.launches())
        .map(|l| warp_border::<T>(measure, shapes.longest(l)))
        .max()
        .unwrap_or(0)
}

/// What a paired gradient computation allocates, and where its outputs lie
/// in the one buffer that holds them: the values (launch after launch),
/// then the gradients, laid out like the batches' values: of launch 0 with
/// respect to `x` and (if asked for) `y`, and for the divergence of
/// launches 1 and 2 with respect to their first batch (`x`, `y`).
struct GradientPlan {
    launches: usize,
    pairs: usize,
    x_values: usize,
    y_values: usize,
    with_y: bool,
    /// Bytes of one pair's rings in global memory (all pairs of the call
    /// keep them there when the longest pair's do not fit shared memory),
    /// or 0.
    ring_bytes: usize,
}

impl GradientPlan {
    /// The plan of the pairs of `shapes` (samples of `dims` values), with
    /// `ring_bytes` of rings per pair in global memory (or 0).
    fn new(shapes: &Shapes, dims: usize, with_y: bool, ring_bytes: usize) -> Self {
        let pairs = shapes.pairs();
        GradientPlan {
            launches: shapes.launches(),
            pairs,
            x_values: (shapes.x[pairs] - shapes.x[0]) as usize * dims,
            y_values: (shapes.y[pairs] - shapes.y[0]) as usize * dims,
            with_y,
            ring_bytes,
        }
    }

    /// Offsets in the output buffer of the gradients of launch `launch`
    /// with respect to its first and (or null) second batch.
    fn gradients(&self, launch: usize) -> (usize, Option<usize>) {
        let values = self.launches * self.pairs;
        let grad_y = values + self.x_values;
        let after_y = grad_y + if self.with_y { self.y_values } else { 0 };
        match launch {
            0 => (values, self.with_y.then_some(grad_y)),
            1 => (after_y, None),
            _ => (after_y + self.x_values, None),
        }
    }

    /// Values of the output buffer.
    fn outputs(&self) -> usize {
        let (first, second) = self.gradients(self.launches - 1);
        match (self.launches, second) {
            (3, _) => first + self.y_values,
            (_, Some(grad_y)) => grad_y + self.y_values,
            (_, None) => first + self.x_values,
        }
    }

    /// Output values of pair `k` alone (its values and its share of the
    /// gradients), for chunking a host batch: the plan of a chunk holds
    /// the sum of its pairs'.
    fn outputs_of(&self, shapes: &Shapes, k: usize, dims: usize) -> usize {
        let (n, m) = shapes.lengths(0, k);
        let y_grads = usize::from(self.with_y) + usize::from(self.launches == 3);
        self.launches + (n * (1 + usize::from(self.launches == 3)) + m * y_grads) * dims
    }

    /// Workspace bytes of pair `k`: every launch's cost matrix, its
    /// offset in the store, and its rings if they are in global memory.
    fn workspace_of<T: Float>(&self, shapes: &Shapes, k: usize) -> usize {
        (0..self.launches)
            .map(|l| {
                let (n, m) = shapes.lengths(l, k);
                n * m * size_of::<T>() + size_of::<u64>() + self.ring_bytes
            })
            .sum()
    }
}

/// Threads of a block for pairs whose anti-diagonals have up to
/// `ring_len - 1` interior cells: one per cell, whole warps, at most
/// `limit` (the boundary cell of the longest anti-diagonal goes to thread
/// 0 as a second cell, rather than to a warp of its own).
fn block_threads(ring_len: usize, limit: usize) -> u32 {
    let limit = (limit.min(MAX_BLOCK_THREADS) / LANES).max(1) * LANES;
    let cells = ring_len.saturating_sub(1).max(1);
    (cells.div_ceil(LANES) * LANES).min(limit) as u32
}

impl Gpu {
    /// One computation at a time, with the context bound to this thread and
    /// the memory budget resolved (default: 3/4 of what is free).
    fn begin(&self, memory_budget: Option<usize>) -> Result<(MutexGuard<'_, ()>, usize)> {
        let guard = self
            .busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.context.bind_to_thread().map_err(gpu_error)?;
        let budget = match memory_budget {
            Some(bytes) => bytes,
            None => driver::mem_get_info().map_err(gpu_error)?.0 / 4 * 3,
        };
        Ok((guard, budget))
    }

    /// Shared memory a block may opt into on this device.
    pub fn max_shared_bytes(&self) -> Result<usize> {
        let attribute = CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
        Ok(self.context.attribute(attribute).map_err(gpu_error)? as usize)
    }

    /// Kernel `name`, allowed `shared` bytes of dynamic shared memory, and
    /// the most threads a block of it may have.
    fn block_function(&self, name: &str, shared: usize) -> Result<(CudaFunction, usize)> {
        let function = self.function(name)?;
        let limit = self.max_shared_bytes()?;
        if shared > limit {
            return Err(Error::Gpu(format!(
                "kernel {name} needs {shared} bytes of shared memory per block, over the device's {limit}"
            )));
        }
        if shared > DEFAULT_SHARED_BYTES {
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
                .map_err(gpu_error)?;
        }
        let threads = function.max_threads_per_block().map_err(gpu_error)? as usize;
        Ok((function, threads))
    }

    /// Launches `function` on `blocks` blocks of `threads` with `shared`
    /// bytes of dynamic shared memory and `argument` as its one parameter.
    ///
    /// # Safety
    /// `argument` is the kernel's parameter type and its pointers are valid;
    /// the kernel was allowed `shared` bytes.
    unsafe fn launch_blocks<A: Copy>(
        &self,
        function: &CudaFunction,
        blocks: u32,
        threads: u32,
        shared: usize,
        argument: A,
    ) -> Result<()>
    where
        KernelArgument<A>: DeviceRepr,
    {
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared as u32,
        };
        let argument = KernelArgument(argument);
        self.stream
            .launch_builder(function)
            .arg(&argument)
            .launch(config)
            .map(|_| ())
            .map_err(gpu_error)
    }

    /// A launch of `pair_count` pairs with no output, workspace or
    /// gradient yet.
    fn block_launch<T: Float, P: Copy>(
        &self,
        a: &DeviceSet<T>,
        b: &DeviceSet<T>,
        params: P,
        launch_mode: u32,
        pair_count: u64,
        ring_len: usize,
    ) -> BlockLaunch<T, P> {
        let stream = &self.stream;
        let refs = (a.set_ref(stream), b.set_ref(stream));
        BlockLaunch {
            row_len: (a.max_len.max(b.max_len) + 1) as u64,
            ..block_launch_of(refs, params, launch_mode, pair_count, ring_len)
        }
    }

    /// Every series of `a` against every series of `b` (or the upper
    /// triangle of `a` against itself) with the stencil kernel of
    /// `measure`, in tiles that fit `budget` (the caller holds the lock).
    pub(super) fn stencil_matrix<T: Float, P: Copy>(
        &self,
        measure: &str,
        params: P,
        a: &SeriesSet<T>,
        b: Option<&SeriesSet<T>>,
        budget: usize,
    ) -> Result<Array2<T>> {
        let plan = TilePlan::new(a, b, budget, std::mem::size_of::<T>());
        let triangle_matrix = b.is_none();
        let b = b.unwrap_or(a);
        let name = format!("{measure}_stencil_{}", T::NAME);
        let mut out = Array2::from_elem((a.len(), b.len()), T::ZERO);
        for (block_index, rows) in plan.a_blocks.iter().enumerate() {
            let a_block = self.upload(&a.slice(rows.clone()))?;
            for (column_index, columns) in plan.b_blocks.iter().enumerate() {
                if triangle_matrix && column_index < block_index {
                    continue; // the mirror of a tile already computed
                }
                let triangle = triangle_matrix && column_index == block_index;
                let b_upload;
                let b_block = if triangle {
                    &a_block
                } else {
                    b_upload = self.upload(&b.slice(columns.clone()))?;
                    &b_upload
                };
                let ring = ring_len(a_block.max_len, b_block.max_len);
                let shared = shared_bytes::<T>(VALUE_RINGS, ring);
                let (function, limit) = self.block_function(&name, shared)?;
                let threads = block_threads(ring, limit);
                let pairs = tile_pairs(a_block.count as u64, b_block.count as u64, triangle);
                let mut tile_out = self
                    .stream
                    .alloc_zeros::<T>(a_block.count * b_block.count)
                    .map_err(gpu_error)?;
                let out_ptr = poison(&self.stream, &mut tile_out)?;
                let launch_mode = if triangle {
                    mode::TRIANGLE
                } else {
                    mode::MATRIX
                };
                let mut first_pair = 0;
                while first_pair < pairs {
                    let pair_count = MAX_BLOCKS.min(pairs - first_pair);
                    let launch = BlockLaunch {
                        out: out_ptr as *mut T,
                        first_pair,
                        ..self.block_launch(
                            &a_block,
                            b_block,
                            params,
                            launch_mode,
                            pair_count,
                            ring,
                        )
                    };
                    // SAFETY: the batches are uploaded, `out` holds a.count x
                    // b.count values, the kernel was allowed `shared` bytes for
                    // rings of `ring` values.
                    unsafe {
                        self.launch_blocks(&function, pair_count as u32, threads, shared, launch)
                    }?;
                    first_pair += pair_count;
                }
                let values = self.stream.clone_dtoh(&tile_out).map_err(gpu_error)?;
                let tile = Array2::from_shape_vec((a_block.count, b_block.count), values)
                    .expect("tile shape");
                out.slice_mut(s![rows.clone(), columns.clone()])
                    .assign(&tile);
                if triangle_matrix && !triangle {
                    out.slice_mut(s![columns.clone(), rows.clone()])
                        .assign(&tile.t());
                }
            }
        }
        Ok(out)
    }

    /// The variant [`Gpu::paired_values`] takes by default: the tiled
    /// kernel for one or two long pairs, else the stencil where its shared
    /// memory fits, else the warp kernel.
    pub fn choose_paired<T: Float>(&self, a: &SeriesSet<T>, b: &SeriesSet<T>) -> Result<Variant> {
        self.choose_for::<T>(&Shapes::new(a.parts().1, b.parts().1, false))
    }

    fn choose_for<T: Float>(&self, shapes: &Shapes) -> Result<Variant> {
        let pairs = shapes.pairs() * shapes.launches();
        if pairs <= TILED_MAX_PAIRS && shapes.shortest() >= TILED_MIN_LENGTH {
            return Ok(Variant::Tiled);
        }
        let shared = shared_bytes::<T>(VALUE_RINGS, shapes.longest_ring());
        Ok(if shared <= self.max_shared_bytes()? {
            Variant::Stencil
        } else {
            Variant::Warp
        })
    }

    /// `variant`, or the default for `shapes`; an error for a variant that
    /// computes distance matrices only.
    fn paired_variant<T: Float>(
        &self,
        variant: Option<Variant>,
        shapes: &Shapes,
    ) -> Result<Variant> {
        let variant = match variant {
            Some(v) => v,
            None => self.choose_for::<T>(shapes)?,
        };
        match variant {
            Variant::Stencil | Variant::Warp | Variant::Tiled => Ok(variant),
            _ => Err(Error::InvalidInput(format!(
                "the {} GPU variant computes distance matrices only; paired batches take the stencil, warp or tiled variant",
                variant.name()
            ))),
        }
    }

    /// Series `k` of `x` against series `k` of `y` (same counts, checked by
    /// the caller) with the kernels of `measure`, variant `variant`
    /// (default: [`Gpu::choose_paired`]), and with `divergence` also `x_k`
    /// against itself and `y_k` against itself: the values of `x_k, y_k`,
    /// then of `x_k, x_k`, then of `y_k, y_k`. The batches go to the
    /// device in chunks that fit the memory budget with what the launches
    /// allocate (for the tiled kernel, a pair at a time), each chunk's
    /// `x` and `y` once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn paired_values<T: Float, P: Copy>(
        &self,
        measure: &str,
        variant: Option<Variant>,
        params: P,
        x: &SeriesSet<T>,
        y: &SeriesSet<T>,
        divergence: bool,
        memory_budget: Option<usize>,
    ) -> Result<Vec<T>> {
        let shapes = Shapes::new(x.parts().1, y.parts().1, divergence);
        let variant = self.paired_variant::<T>(variant, &shapes)?;
        let (_one_at_a_time, budget) = self.begin(memory_budget)?;
        let series = |k: usize| image_bytes(x, k..k + 1) + image_bytes(y, k..k + 1);
        let ranges = if variant == Variant::Tiled {
            for k in 0..shapes.pairs() {
                for l in 0..shapes.launches() {
                    let (n, m) = shapes.lengths(l, k);
                    let (borders, flags) = pipelined_workspace(measure, T::NAME, n, m);
                    let workspace = (borders + 1) * size_of::<T>() + flags * size_of::<u32>();
                    check_fits(n, m, UPLOAD_SLACK + series(k) + workspace, budget)?;
                }
            }
            (0..shapes.pairs()).map(|k| k..k + 1).collect()
        } else {
            let per_pair = value_bytes::<T>(measure, variant, &shapes);
            chunks(
                shapes.pairs(),
                budget,
                UPLOAD_SLACK,
                |k| series(k) + per_pair,
                "its value",
            )?
        };
        let (pairs, launches) = (shapes.pairs(), shapes.launches());
        let mut values = vec![T::ZERO; launches * pairs];
        for range in ranges {
            let uploaded = self.upload_ranges(&[x, y], range.clone())?;
            let (x_chunk, y_chunk) = (uploaded.batch(0, x), uploaded.batch(1, y));
            let left = budget.saturating_sub(uploaded.bytes());
            let chunk = self.values_on(
                measure,
                variant,
                params,
                (&x_chunk, &y_chunk),
                divergence,
                left,
            );
            // The chunk's images are freed next: no kernel may still read them.
            self.settle(chunk.is_err());
            let chunk = chunk?;
            if range.len() == pairs {
                return Ok(chunk);
            }
            for l in 0..launches {
                let from = &chunk[l * range.len()..(l + 1) * range.len()];
                values[l * pairs + range.start..l * pairs + range.end].copy_from_slice(from);
            }
        }
        Ok(values)
    }

    /// [`Gpu::paired_values`] of two resident sets (same counts, checked by
    /// the caller): nothing is uploaded, `memory_budget` bounds what the
    /// call allocates besides them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn paired_values_resident<T: Float, P: Copy>(
        &self,
        measure: &str,
        variant: Option<Variant>,
        params: P,
        x: &DeviceSeriesSet<T>,
        y: &DeviceSeriesSet<T>,
        divergence: bool,
        memory_budget: Option<usize>,
    ) -> Result<Vec<T>> {
        let shapes = Shapes::new(x.offsets(), y.offsets(), divergence);
        let variant = self.paired_variant::<T>(variant, &shapes)?;
        let (_one_at_a_time, budget) = self.begin(memory_budget)?;
        let values = self.values_on(
            measure,
            variant,
            params,
            (&x.batch(), &y.batch()),
            divergence,
            budget,
        );
        self.settle(values.is_err());
        values
    }

    /// After a computation: on failure, waits for what it left running
    /// (errors ignored), before the buffers it used are freed.
    fn settle(&self, failed: bool) {
        if failed {
            let _ = self.stream.synchronize();
        }
    }

    /// The values of the pairs of two device batches, as
    /// [`Gpu::paired_values`] lays them out, with `variant` (stencil, warp
    /// or tiled); what the launches allocate fits `budget`, in chunks.
    /// Returns once the values are back: the batches may be freed then.
    fn values_on<T: Float, P: Copy>(
        &self,
        measure: &str,
        variant: Variant,
        params: P,
        (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
        divergence: bool,
        budget: usize,
    ) -> Result<Vec<T>> {
        let shapes = Shapes::new(x.offsets(), y.offsets(), divergence);
        let (pairs, launches) = (shapes.pairs(), shapes.launches());
        if variant == Variant::Tiled {
            let mut values = Vec::with_capacity(launches * pairs);
            for l in 0..launches {
                let (a, b) = operands(l, x, y);
                for k in 0..pairs {
                    let pair = (a.view(k..k + 1), b.view(k..k + 1));
                    let value = self.pair_pipelined_on(
                        measure,
                        params,
                        pair,
                        shapes.lengths(l, k),
                        budget,
                    )?;
                    values.push(value);
                }
            }
            return Ok(values);
        }
        let warp = variant == Variant::Warp;
        let border = value_border::<T>(measure, variant, &shapes);
        let per_pair = value_bytes::<T>(measure, variant, &shapes);
        let ranges = chunks(pairs, budget, 0, |_| per_pair, "its value")?;
        let longest_chunk = ranges.iter().map(Range::len).max().unwrap_or(0);
        // One buffer for every chunk in turn: the chunk's outputs, launch
        // after launch, then the warp kernel's borders (zeroed once: each
        // band writes the border rows the next one reads).
        let stream = &self.stream;
        let outputs = launches * longest_chunk;
        let buffer = stream
            .alloc_zeros::<T>(outputs + border * longest_chunk)
            .map_err(gpu_error)?;
        let base = buffer.device_ptr(stream).0;
        let at = |values: usize| base + (values * size_of::<T>()) as u64;
        let workspace = if border == 0 {
            std::ptr::null_mut()
        } else {
            at(outputs) as *mut T
        };
        let mut values = vec![T::ZERO; launches * pairs];
        let mut back = vec![T::ZERO; outputs];
        for range in ranges {
            let len = range.len();
            let chunk = shapes.range(&range);
            // Poison the chunk's outputs with NaN (all bits set), so that a
            // pair the kernel failed to write cannot pass for a result.
            // SAFETY: the buffer holds at least `launches * len` values.
            unsafe {
                driver::memset_d8_async(
                    base,
                    0xff,
                    launches * len * size_of::<T>(),
                    stream.cu_stream(),
                )
            }
            .map_err(gpu_error)?;
            for l in 0..launches {
                let (a, b) = operands(l, x, y);
                let ring = chunk.ring_len(l);
                let launch = BlockLaunch {
                    out: at(l * len) as *mut T,
                    ..block_launch_of(
                        (a.view(range.clone()), b.view(range.clone())),
                        params,
                        mode::PAIRED,
                        len as u64,
                        ring,
                    )
                };
                if warp {
                    let stripe = warp_stripe(measure, T::NAME, chunk.longest(l).1);
                    let function =
                        self.function(&format!("{measure}_pairwarp{stripe}_{}", T::NAME))?;
                    let launch = BlockLaunch {
                        workspace,
                        row_len: border.max(1) as u64,
                        ..launch
                    };
                    let warps_per_block = THREADS_PER_BLOCK as usize / LANES;
                    let blocks = len.div_ceil(warps_per_block) as u32;
                    // SAFETY: as below; the workspace holds `border` values
                    // per pair, at least the longest series of the launch
                    // plus one, or none is needed (one band).
                    unsafe { self.launch_blocks(&function, blocks, THREADS_PER_BLOCK, 0, launch) }?;
                } else {
                    let shared = shared_bytes::<T>(VALUE_RINGS, ring);
                    let (function, limit) =
                        self.block_function(&format!("{measure}_stencil_{}", T::NAME), shared)?;
                    let threads = block_threads(ring, limit);
                    // SAFETY: the batches are on the device and outlive the
                    // launch (the copy below waits for it); `out` holds one
                    // value per pair; the kernel was allowed `shared` bytes
                    // for rings of `ring` values.
                    unsafe { self.launch_blocks(&function, len as u32, threads, shared, launch) }?;
                }
            }
            // Returns once the copy (and so the launches) is done.
            let back = &mut back[..launches * len];
            stream
                .memcpy_dtoh(&buffer.slice(..launches * len), back)
                .map_err(gpu_error)?;
            for l in 0..launches {
                values[l * pairs + range.start..l * pairs + range.end]
                    .copy_from_slice(&back[l * len..(l + 1) * len]);
            }
        }
        Ok(values)
    }

    /// Soft-DTW values and gradients of series `k` of `x` against series
    /// `k` of `y` (same counts and dims, checked by the caller), and with
    /// `divergence` also of `x_k` and `y_k` against themselves (the values
    /// as [`Gpu::paired_values`] lays them out, the gradients as
    /// [`PairedGradients`] says); with respect to `y` only if `with_y`. The
    /// batches go to the device in chunks whose cost matrices fit the
    /// budget ([`crate::soft_dtw_gradient_bytes_per_pair`]), each chunk's
    /// `x` and `y` once.
    pub(crate) fn soft_dtw_paired_gradient<T: Float>(
        &self,
        params: SoftDtwParams<T>,
        x: &SeriesSet<T>,
        y: &SeriesSet<T>,
        divergence: bool,
        with_y: bool,
        memory_budget: Option<usize>,
    ) -> Result<PairedGradients<T>> {
        let shapes = Shapes::new(x.parts().1, y.parts().1, divergence);
        let (_one_at_a_time, budget) = self.begin(memory_budget)?;
        let dims = x.dims();
        let global_rings = self.global_rings::<T>(&shapes)?;
        let ring_bytes = if global_rings {
            shared_bytes::<T>(GRADIENT_RINGS, shapes.longest_ring())
        } else {
            0
        };
        let plan = GradientPlan::new(&shapes, dims, with_y, ring_bytes);
        let bytes = |k: usize| {
            image_bytes(x, k..k + 1)
                + image_bytes(y, k..k + 1)
                + plan.outputs_of(&shapes, k, dims) * size_of::<T>()
                + plan.workspace_of::<T>(&shapes, k)
        };
        let (pairs, launches) = (shapes.pairs(), shapes.launches());
        let mut result = PairedGradients {
            values: vec![T::ZERO; launches * pairs],
            grad_x: Vec::with_capacity(plan.x_values),
            grad_y: with_y.then(|| Vec::with_capacity(plan.y_values)),
            grad_xx: divergence.then(|| Vec::with_capacity(plan.x_values)),
            grad_yy: (divergence && with_y).then(|| Vec::with_capacity(plan.y_values)),
        };
        let ranges = chunks(pairs, budget, UPLOAD_SLACK, bytes, "its Soft-DTW gradient")?;
        let whole = ranges.len() == 1;
        for range in ranges {
            let uploaded = self.upload_ranges(&[x, y], range.clone())?;
            let (x_chunk, y_chunk) = (uploaded.batch(0, x), uploaded.batch(1, y));
            let left = budget.saturating_sub(uploaded.bytes());
            let chunk = self.gradient_on(
                params,
                (&x_chunk, &y_chunk),
                divergence,
                with_y,
                left,
                global_rings,
            );
            // The chunk's images are freed next: no kernel may still read them.
            self.settle(chunk.is_err());
            let chunk = chunk?;
            if whole {
                return Ok(chunk);
            }
            for l in 0..launches {
                result.values[l * pairs + range.start..l * pairs + range.end]
                    .copy_from_slice(&chunk.values[l * range.len()..(l + 1) * range.len()]);
            }
            result.grad_x.extend(chunk.grad_x);
            for (all, part) in [
                (&mut result.grad_y, chunk.grad_y),
                (&mut result.grad_xx, chunk.grad_xx),
                (&mut result.grad_yy, chunk.grad_yy),
            ] {
                if let (Some(all), Some(part)) = (all, part) {
                    all.extend(part);
                }
            }
        }
        Ok(result)
    }

    /// [`Gpu::soft_dtw_paired_gradient`] of two resident sets (same counts
    /// and dims, checked by the caller): nothing is uploaded,
    /// `memory_budget` bounds what the call allocates besides them.
    pub(crate) fn soft_dtw_paired_gradient_resident<T: Float>(
        &self,
        params: SoftDtwParams<T>,
        x: &DeviceSeriesSet<T>,
        y: &DeviceSeriesSet<T>,
        divergence: bool,
        with_y: bool,
        memory_budget: Option<usize>,
    ) -> Result<PairedGradients<T>> {
        let (_one_at_a_time, budget) = self.begin(memory_budget)?;
        let shapes = Shapes::new(x.offsets(), y.offsets(), divergence);
        let global_rings = self.global_rings::<T>(&shapes)?;
        let result = self.gradient_on(
            params,
            (&x.batch(), &y.batch()),
            divergence,
            with_y,
            budget,
            global_rings,
        );
        self.settle(result.is_err());
        result
    }

    /// The values and gradients of the pairs of two device batches, laid
    /// out as [`Gpu::soft_dtw_paired_gradient`] says, the rings in global
    /// memory if `global_rings` (decided for the whole batch), in chunks
    /// whose stores fit `budget` besides the outputs. Returns once the
    /// results are back: the batches may be freed then.
    fn gradient_on<T: Float>(
        &self,
        params: SoftDtwParams<T>,
        (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
        divergence: bool,
        with_y: bool,
        budget: usize,
        global_rings: bool,
    ) -> Result<PairedGradients<T>> {
        let shapes = Shapes::new(x.offsets(), y.offsets(), divergence);
        let (pairs, launches) = (shapes.pairs(), shapes.launches());
        let ring_bytes = if global_rings {
            shared_bytes::<T>(GRADIENT_RINGS, shapes.longest_ring())
        } else {
            0
        };
        let plan = GradientPlan::new(&shapes, x.dims(), with_y, ring_bytes);
        debug_assert_eq!((plan.x_values, plan.y_values), (x.values(), y.values()));
        let outputs = plan.outputs();
        let output_bytes = outputs * size_of::<T>();
        if output_bytes > budget {
            return Err(Error::Gpu(format!(
                "the values and gradients of {pairs} pairs need {output_bytes} bytes of device memory, over the {budget} available"
            )));
        }
        let ranges = chunks(
            pairs,
            budget - output_bytes,
            0,
            |k| plan.workspace_of::<T>(&shapes, k),
            "its Soft-DTW gradient",
        )?;
        let stream = &self.stream;
        // Every output in one buffer (copied back part by part into the
        // vectors returned): the values poisoned with NaN (a pair the
        // kernel failed to write cannot pass for a result), the gradients
        // zeroed (the kernel adds to them).
        let results = stream.alloc_zeros::<T>(outputs).map_err(gpu_error)?;
        let base = results.device_ptr(stream).0;
        let at = |values: usize| base + (values * size_of::<T>()) as u64;
        // SAFETY: the buffer begins with the `launches * pairs` values.
        unsafe {
            driver::memset_d8_async(
                base,
                0xff,
                launches * pairs * size_of::<T>(),
                stream.cu_stream(),
            )
        }
        .map_err(gpu_error)?;
        // Each chunk's store offsets, launch after launch, relative to the
        // chunk's store, uploaded together; and one store (and rings) for
        // the largest chunk, used by each in turn (the forward pass writes
        // every cell before the backward pass reads it).
        let mut store_offsets = Vec::with_capacity(launches * pairs);
        let mut store_len = 0;
        let mut starts = Vec::with_capacity(ranges.len());
        for range in &ranges {
            starts.push(store_offsets.len());
            let mut total = 0u64;
            for l in 0..launches {
                for k in range.clone() {
                    store_offsets.push(total);
                    let (n, m) = shapes.lengths(l, k);
                    total += (n * m) as u64;
                }
            }
            store_len = store_len.max(total as usize);
        }
        let longest_chunk = ranges.iter().map(Range::len).max().unwrap_or(0);
        // Rings in global memory: `ring` values each, per pair of a launch
        // (the launches, one after the other, share them).
        let ring = shapes.longest_ring();
        let ring_values = if global_rings {
            longest_chunk * GRADIENT_RINGS * ring
        } else {
            0
        };
        let store_offsets = stream.clone_htod(&store_offsets).map_err(gpu_error)?;
        let offsets_base = store_offsets.device_ptr(stream).0;
        let workspace = stream
            .alloc_zeros::<T>((store_len + ring_values).max(1))
            .map_err(gpu_error)?;
        let store = workspace.device_ptr(stream).0;
        let rings = store + (store_len * size_of::<T>()) as u64;
        let name = format!("soft_dtw_gradient_{}", T::NAME);
        for (range, start) in ranges.iter().zip(starts) {
            let len = range.len();
            let chunk = shapes.range(range);
            for l in 0..launches {
                let (a, b) = operands(l, x, y);
                let (grad_a, grad_b) = plan.gradients(l);
                let shared_ring = chunk.ring_len(l);
                let (ring, shared) = if global_rings {
                    (ring, 0)
                } else {
                    (shared_ring, shared_bytes::<T>(GRADIENT_RINGS, shared_ring))
                };
                let (function, limit) = self.block_function(&name, shared)?;
                let threads = block_threads(ring, limit);
                let launch = BlockLaunch {
                    out: at(l * pairs + range.start) as *mut T,
                    store: store as *mut T,
                    store_offsets: (offsets_base + ((start + l * len) * size_of::<u64>()) as u64)
                        as *const u64,
                    grad_a: at(grad_a) as *mut T,
                    grad_b: grad_b.map_or(std::ptr::null_mut(), |g| at(g) as *mut T),
                    rings: if global_rings {
                        rings as *mut T
                    } else {
                        std::ptr::null_mut()
                    },
                    ..block_launch_of(
                        (a.view(range.clone()), b.view(range.clone())),
                        params,
                        mode::PAIRED,
                        len as u64,
                        ring,
                    )
                };
                // SAFETY: the batches are on the device and outlive the
                // launch (the copy below waits for it); the store holds
                // every pair's n x m cells at its offset (launches one
                // after the other on one stream share it); `out` one value
                // per pair; the gradients the whole batches' samples at the
                // positions of their device offsets, zeroed; the six rings
                // of `ring` values per pair are in `rings` or in the
                // `shared` bytes the kernel was allowed.
                unsafe { self.launch_blocks(&function, len as u32, threads, shared, launch) }?;
            }
        }
        // Each part straight into its own vector (the first copy waits for
        // the launches).
        let part = |start: usize, len: usize| {
            stream
                .clone_dtoh(&results.slice(start..start + len))
                .map_err(gpu_error)
        };
        let (grad_x, grad_y) = plan.gradients(0);
        Ok(PairedGradients {
            values: part(0, launches * pairs)?,
            grad_x: part(grad_x, plan.x_values)?,
            grad_y: grad_y.map(|g| part(g, plan.y_values)).transpose()?,
            grad_xx: divergence
                .then(|| part(plan.gradients(1).0, plan.x_values))
                .transpose()?,
            grad_yy: (divergence && with_y)
                .then(|| part(plan.gradients(2).0, plan.y_values))
                .transpose()?,
        })
    }

    /// Whether the gradient's rings go to global memory: when those of the
    /// longest pair of `shapes` do not fit a block's shared memory (then
    /// for every pair).
    fn global_rings<T: Float>(&self, shapes: &Shapes) -> Result<bool> {
        Ok(shared_bytes::<T>(GRADIENT_RINGS, shapes.longest_ring()) > self.max_shared_bytes()?)
    }
}

/// A block launch of `pair_count` pairs of `a` and `b` with no output,
/// workspace or gradient yet (`row_len` 1: the warp kernels set theirs).
fn block_launch_of<T: Float, P: Copy>(
    (a, b): (SetRef<T>, SetRef<T>),
    params: P,
    launch_mode: u32,
    pair_count: u64,
    ring_len: usize,
) -> BlockLaunch<T, P> {
    let null = std::ptr::null_mut();
    BlockLaunch {
        a,
        b,
        params,
        out: null,
        workspace: null,
        store: null,
        store_offsets: std::ptr::null(),
        grad_a: null,
        grad_b: null,
        rings: null,
        ring_len: ring_len as u64,
        row_len: 1,
        first_pair: 0,
        pair_count,
        mode: launch_mode,
    }
}
