//! Host side of the block driver's kernels (`kernels-gpu/src/block.rs`,
//! launched with a `BlockLaunch`): the stencil variant of every measure for
//! distance matrices, paired batches (series `k` of `a` against series `k`
//! of `b`) with the stencil, warp or tiled kernels, and the Soft-DTW value
//! and gradient of paired batches.
//!
//! Device memory: the stencil and paired warp kernels need the two batches,
//! one value per pair and (warp, series wider than one warp's band) a
//! border of `len + 1` values per pair; the gradient needs, per pair, its
//! whole cost matrix (`n * m` values, diagonal-major) besides the series
//! and the two gradients ([`crate::soft_dtw_gradient_bytes_per_pair`]). Batches are cut
//! into chunks that fit the memory budget. Shared memory per block: three
//! anti-diagonals of `min(n, m) + 1` values for a value, six for a
//! gradient; the kernels opt into more than the default 48 KiB when a pair
//! needs it, up to the device's limit (227 KiB on an H100/H200, so values
//! up to `min(n, m)` of about 19 000 in f32 and 9 600 in f64, gradients up
//! to about 9 600 and 4 800). Longer pairs take the warp or tiled kernels
//! for values; for gradients the rings move to global memory (slower, but
//! any length whose cost matrix fits the device).

use super::{
    driver, gpu_error, poison, warp_stripe, warp_stripes, DeviceSet, Gpu, KernelArgument, TilePlan,
    Variant, LANES, THREADS_PER_BLOCK, TILED_MAX_PAIRS, TILED_MIN_LENGTH,
};
use crate::soft_dtw::Gradients;
use crate::{soft_dtw_gradient_bytes_per_pair, Error, Float, Result, SeriesSet};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use ndarray::{s, Array2};
use std::ops::Range;
use std::sync::MutexGuard;
use timewarp_kernels::block::{mode, ring_len, GRADIENT_RINGS, VALUE_RINGS};
use timewarp_kernels::launch::tile_pairs;
use timewarp_kernels::{BlockLaunch, SoftDtwParams};

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

/// Device memory of one pair for a paired value: both series, the value,
/// offsets, and the warp kernel's border (`row_len` values, or 0).
fn value_bytes_per_pair<T>(n: usize, m: usize, dims: usize, border: usize) -> usize {
    let value = std::mem::size_of::<T>();
    ((n + m) * dims + 1 + border) * value + 2 * std::mem::size_of::<u64>()
}

/// Consecutive ranges of pairs whose `bytes(k)` sum to at most `budget`
/// each (a single larger pair is an error).
fn chunks(
    pairs: usize,
    budget: usize,
    bytes: impl Fn(usize) -> usize,
    what: &str,
) -> Result<Vec<Range<usize>>> {
    let mut result = Vec::new();
    let (mut start, mut used) = (0, 0);
    for k in 0..pairs {
        let size = bytes(k);
        if size > budget {
            return Err(Error::Gpu(format!(
                "pair {k} needs {size} bytes of device memory for {what}, over the {budget} available"
            )));
        }
        if k > start && (used + size > budget || (k - start) as u64 == MAX_BLOCKS) {
            result.push(start..k);
            (start, used) = (k, 0);
        }
        used += size;
    }
    result.push(start..pairs);
    Ok(result)
}

/// The longest anti-diagonal (with boundary) of pairs `k` of two batches.
fn paired_ring_len<T: Float>(a: &SeriesSet<T>, b: &SeriesSet<T>) -> usize {
    (0..a.len())
        .map(|k| ring_len(a.series_len(k), b.series_len(k)))
        .max()
        .unwrap_or(1)
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
        let null = std::ptr::null_mut();
        BlockLaunch {
            a: a.set_ref(stream),
            b: b.set_ref(stream),
            params,
            out: null,
            workspace: null,
            store: null,
            store_offsets: std::ptr::null(),
            grad_a: null,
            grad_b: null,
            rings: null,
            ring_len: ring_len as u64,
            row_len: (a.max_len.max(b.max_len) + 1) as u64,
            first_pair: 0,
            pair_count,
            mode: launch_mode,
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
        let shortest = a.min_len().min(b.min_len());
        if a.len() <= TILED_MAX_PAIRS && shortest >= TILED_MIN_LENGTH {
            return Ok(Variant::Tiled);
        }
        let shared = shared_bytes::<T>(VALUE_RINGS, paired_ring_len(a, b));
        Ok(if shared <= self.max_shared_bytes()? {
            Variant::Stencil
        } else {
            Variant::Warp
        })
    }

    /// Series `k` of `a` against series `k` of `b` (same counts, checked by
    /// the caller) with the kernels of `measure`, variant `variant`
    /// (default: [`Gpu::choose_paired`]), in chunks that fit the memory
    /// budget.
    pub(crate) fn paired_values<T: Float, P: Copy>(
        &self,
        measure: &str,
        variant: Option<Variant>,
        params: P,
        a: &SeriesSet<T>,
        b: &SeriesSet<T>,
        memory_budget: Option<usize>,
    ) -> Result<Vec<T>> {
        let variant = match variant {
            Some(v) => v,
            None => self.choose_paired(a, b)?,
        };
        let (_one_at_a_time, budget) = self.begin(memory_budget)?;
        let warp = match variant {
            Variant::Naive
            | Variant::TiledLaunches
            | Variant::Diagonal
            | Variant::DiagonalLaunches
            | Variant::Local
            | Variant::Shared => {
                return Err(Error::InvalidInput(format!(
                    "the {} GPU variant computes distance matrices only; paired batches take the stencil, warp or tiled variant",
                    variant.name()
                )))
            }
            Variant::Tiled => {
                return (0..a.len())
                    .map(|k| {
                        let pair = k..k + 1;
                        self.pair_pipelined(measure, params, &a.slice(pair.clone()), &b.slice(pair), budget)
                    })
                    .collect();
            }
            Variant::Warp => true,
            Variant::Stencil => false,
        };
        let dims = a.dims();
        let border = if warp {
            let stripe = warp_stripe(measure, T::NAME, b.max_len());
            let bands = b.max_len().div_ceil(LANES * stripe);
            if bands > 1 {
                a.max_len().max(b.max_len()) + 1
            } else {
                0
            }
        } else {
            0
        };
        let bytes =
            |k: usize| value_bytes_per_pair::<T>(a.series_len(k), b.series_len(k), dims, border);
        let mut values = Vec::with_capacity(a.len());
        for range in chunks(a.len(), budget, bytes, "its value")? {
            let (a_chunk, b_chunk) = (a.slice(range.clone()), b.slice(range.clone()));
            let (a_set, b_set) = (self.upload(&a_chunk)?, self.upload(&b_chunk)?);
            let pairs = range.len();
            let mut out = self.stream.alloc_zeros::<T>(pairs).map_err(gpu_error)?;
            let out_ptr = poison(&self.stream, &mut out)?;
            let ring = paired_ring_len(&a_chunk, &b_chunk);
            let launch = BlockLaunch {
                out: out_ptr as *mut T,
                ..self.block_launch(&a_set, &b_set, params, mode::PAIRED, pairs as u64, ring)
            };
            if warp {
                let stripe = warp_stripe(measure, T::NAME, b_set.max_len);
                let function = self.function(&format!("{measure}_pairwarp{stripe}_{}", T::NAME))?;
                let workspace = match border {
                    0 => None,
                    values => Some(
                        self.stream
                            .alloc_zeros::<T>(pairs * values)
                            .map_err(gpu_error)?,
                    ),
                };
                let launch = BlockLaunch {
                    workspace: workspace.as_ref().map_or(std::ptr::null_mut(), |w| {
                        w.device_ptr(&self.stream).0 as *mut T
                    }),
                    row_len: border.max(1) as u64,
                    ..launch
                };
                let warps_per_block = THREADS_PER_BLOCK as usize / LANES;
                let blocks = pairs.div_ceil(warps_per_block) as u32;
                // SAFETY: as below; the workspace holds `border` values per
                // pair, or none is needed (one band).
                unsafe { self.launch_blocks(&function, blocks, THREADS_PER_BLOCK, 0, launch) }?;
            } else {
                let shared = shared_bytes::<T>(VALUE_RINGS, ring);
                let (function, limit) =
                    self.block_function(&format!("{measure}_stencil_{}", T::NAME), shared)?;
                let threads = block_threads(ring, limit);
                // SAFETY: the chunk's batches are uploaded, `out` holds one
                // value per pair, the kernel was allowed `shared` bytes for
                // rings of `ring` values.
                unsafe { self.launch_blocks(&function, pairs as u32, threads, shared, launch) }?;
            }
            values.extend(self.stream.clone_dtoh(&out).map_err(gpu_error)?);
        }
        Ok(values)
    }

    /// Soft-DTW values and gradients of series `k` of `a` against series
    /// `k` of `b` (same counts and dims, checked by the caller): the
    /// gradients laid out like the batches' values, with respect to `b`
    /// only if `with_b`. In chunks whose cost matrices fit the budget
    /// ([`crate::soft_dtw_gradient_bytes_per_pair`]).
    pub(crate) fn soft_dtw_paired_gradient<T: Float>(
        &self,
        params: SoftDtwParams<T>,
        a: &SeriesSet<T>,
        b: &SeriesSet<T>,
        with_b: bool,
        memory_budget: Option<usize>,
    ) -> Result<Gradients<T>> {
        let (_one_at_a_time, budget) = self.begin(memory_budget)?;
        let dims = a.dims();
        // Rings in global memory when the longest pair's do not fit the
        // block's shared memory (then for every pair of the batch).
        let longest_ring = paired_ring_len(a, b);
        let global_rings =
            shared_bytes::<T>(GRADIENT_RINGS, longest_ring) > self.max_shared_bytes()?;
        let ring_bytes = if global_rings {
            shared_bytes::<T>(GRADIENT_RINGS, longest_ring)
        } else {
            0
        };
        let bytes = |k: usize| {
            soft_dtw_gradient_bytes_per_pair::<T>(a.series_len(k), b.series_len(k), dims)
                + ring_bytes
        };
        let name = format!("soft_dtw_gradient_{}", T::NAME);
        let stream = &self.stream;
        let mut values = Vec::with_capacity(a.len());
        let mut grad_a = Vec::with_capacity(a.total_samples() * dims);
        let mut grad_b = Vec::with_capacity(if with_b { b.total_samples() * dims } else { 0 });
        for range in chunks(a.len(), budget, bytes, "its Soft-DTW gradient")? {
            let (a_chunk, b_chunk) = (a.slice(range.clone()), b.slice(range.clone()));
            let (a_set, b_set) = (self.upload(&a_chunk)?, self.upload(&b_chunk)?);
            let pairs = range.len();
            let ring = paired_ring_len(&a_chunk, &b_chunk);
            let shared = if global_rings {
                0
            } else {
                shared_bytes::<T>(GRADIENT_RINGS, ring)
            };
            let (function, limit) = self.block_function(&name, shared)?;
            let rings = if global_rings {
                Some(
                    stream
                        .alloc_zeros::<T>(pairs * GRADIENT_RINGS * ring)
                        .map_err(gpu_error)?,
                )
            } else {
                None
            };
            let threads = block_threads(ring, limit);
            let mut offsets = Vec::with_capacity(pairs);
            let mut total = 0u64;
            for k in 0..pairs {
                offsets.push(total);
                total += (a_chunk.series_len(k) * b_chunk.series_len(k)) as u64;
            }
            let store = stream.alloc_zeros::<T>(total as usize).map_err(gpu_error)?;
            let store_offsets = stream.clone_htod(&offsets).map_err(gpu_error)?;
            let mut out = stream.alloc_zeros::<T>(pairs).map_err(gpu_error)?;
            let out_ptr = poison(stream, &mut out)?;
            let gradient_a = stream
                .alloc_zeros::<T>(a_chunk.total_samples() * dims)
                .map_err(gpu_error)?;
            let gradient_b = if with_b {
                Some(
                    stream
                        .alloc_zeros::<T>(b_chunk.total_samples() * dims)
                        .map_err(gpu_error)?,
                )
            } else {
                None
            };
            let launch = BlockLaunch {
                out: out_ptr as *mut T,
                store: store.device_ptr(stream).0 as *mut T,
                store_offsets: store_offsets.device_ptr(stream).0 as *const u64,
                grad_a: gradient_a.device_ptr(stream).0 as *mut T,
                grad_b: gradient_b
                    .as_ref()
                    .map_or(std::ptr::null_mut(), |g| g.device_ptr(stream).0 as *mut T),
                rings: rings
                    .as_ref()
                    .map_or(std::ptr::null_mut(), |r| r.device_ptr(stream).0 as *mut T),
                ..self.block_launch(&a_set, &b_set, params, mode::PAIRED, pairs as u64, ring)
            };
            // SAFETY: the chunk's batches are uploaded; `store` holds every
            // pair's n x m cells at its offset; `out` one value per pair; the
            // gradients the chunk's samples, zeroed; the six rings of `ring`
            // values per pair are in `rings` or in the `shared` bytes the
            // kernel was allowed.
            unsafe { self.launch_blocks(&function, pairs as u32, threads, shared, launch) }?;
            values.extend(stream.clone_dtoh(&out).map_err(gpu_error)?);
            grad_a.extend(stream.clone_dtoh(&gradient_a).map_err(gpu_error)?);
            if let Some(g) = &gradient_b {
                grad_b.extend(stream.clone_dtoh(g).map_err(gpu_error)?);
            }
        }
        Ok((values, grad_a, with_b.then_some(grad_b)))
    }
}
