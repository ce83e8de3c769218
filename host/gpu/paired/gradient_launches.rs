//! The launches of a paired Soft-DTW gradient over device batches
//! ([`gradient_into`]): the chunks whose stores fit the budget, the one
//! workspace they share (store offsets, store, rings or borders), and one
//! launch per chunk and operand pair, by the warp or the stencil driver.

use crate::error::DriverCall;
use crate::gpu::launch::stencil::{shared_bytes, stencil_launch};
use crate::gpu::plan::paired_shapes::{operands, GradientKernel, GradientPlan, Shapes};
use crate::gpu::plan::select::{block_threads, gradient_driver};
use crate::gpu::plan::{chunks, MAX_BLOCKS};
use crate::gpu::runtime::context::{poison_bytes, Gpu, KernelParams};
use crate::gpu::transfer::uploads::DeviceBatch;
use crate::{Float, Result};
use cudarc::driver::{result as driver, CudaSlice, DevicePtr};
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::drivers::stencil::GRADIENT_RINGS;
use timewarp_kernels::hw::LANES;
use timewarp_kernels::launch::pairs::{panel_gradient_workspace, GradientBuffers, StencilLaunch};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Differentiable, Driver, KernelId};

/// Warps per block of the `warp_gradient` and `panels_gradient` kernels (a
/// multiple of a pair's warps).
pub(super) const WARPS_PER_BLOCK: usize = 4;

/// The launches of a gradient computation of the pairs `window` of the
/// batches (all of them, or a block of a call spread over several GPUs),
/// writing to the output buffer at device address `out` (laid out as
/// [`GradientPlan`] says for all the pairs; it is zeroed and its values
/// poisoned here first), with the stores of each chunk in `budget`.
/// Returns once the launches are queued on the GPU's stream.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gradient_into<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    divergence: bool,
    with_y: bool,
    budget: usize,
    kernel: GradientKernel,
    (out, window): (u64, Range<usize>),
) -> Result<()> {
    let shapes = x.paired_shapes(y, divergence);
    let (pairs, launches) = (shapes.pairs(), shapes.launches());
    let plan = GradientPlan::new(
        &shapes,
        x.dims(),
        with_y,
        kernel,
        ring_bytes::<T>(kernel, &shapes, x.dims()),
    );
    debug_assert_eq!((plan.x_values, plan.y_values), (x.values(), y.values()));
    let ranges = chunk_ranges::<T>(&plan, &shapes, budget, window)?;
    let stream = &gpu.stream;
    // The values poisoned with NaN (a pair the kernel failed to write
    // cannot pass for a result), the gradients zeroed (the kernel adds to
    // them).
    let value_bytes = launches * pairs * size_of::<T>();
    // SAFETY: the buffer holds `plan.outputs()` values, the values first.
    unsafe {
        driver::memset_d8_async(out, 0, plan.outputs() * size_of::<T>(), stream.cu_stream())
            .call("filling device memory")?;
        poison_bytes(stream, out, value_bytes)?;
    }
    // Each chunk's store offsets, launch after launch, relative to the
    // chunk's store; one store (and rings) for the largest chunk, used by
    // each in turn (the forward pass writes every cell before the backward
    // pass reads it).
    let (store_offsets, starts, store_len) = plan.store_offsets(&shapes, &ranges);
    let workspace = Workspace::new(
        gpu,
        kernel,
        (&shapes, x.dims()),
        &ranges,
        (&store_offsets, store_len),
    )?;
    let at = |values: usize| out + (values * size_of::<T>()) as u64;
    for (range, start) in ranges.iter().zip(starts) {
        let len = range.len();
        for l in 0..launches {
            let (a, b) = operands(l, x, y);
            let (grad_a, grad_b) = plan.gradients(l);
            let buffers = GradientBuffers {
                store: workspace.store as *mut T,
                store_offsets: (workspace.offsets + ((start + l * len) * size_of::<u64>()) as u64)
                    as *const u64,
                grad_a: at(grad_a) as *mut T,
                grad_b: grad_b.map_or(std::ptr::null_mut(), |g| at(g) as *mut T),
                rings: if workspace.global_rings {
                    workspace.rings as *mut T
                } else {
                    std::ptr::null_mut()
                },
                alignment: std::ptr::null_mut(),
                fault: workspace.fault_ptr(stream),
            };
            let mut launch = stencil_launch(
                (a.view(range.clone()), b.view(range.clone())),
                params,
                Numbering::Paired,
                len as u64,
                1,
            );
            launch.pairs.out = at(l * pairs + range.start) as *mut T;
            launch.gradient = buffers;
            match kernel {
                GradientKernel::Warp { warps, stripe } => {
                    let id = KernelId::new(
                        P::MEASURE,
                        gradient_driver((warps, stripe)),
                        x.dims() == 1,
                        T::PRECISION,
                    );
                    launch_warp_gradient(gpu, id, &workspace, (len, warps), launch)?;
                }
                GradientKernel::Stencil { .. } => {
                    let shared_ring = shapes.range(range).ring_len(l);
                    launch_stencil_gradient::<T, P>(gpu, &workspace, (len, shared_ring), launch)?;
                }
            }
        }
    }
    Ok(())
}

/// The chunks of the pairs `window` whose stores fit `budget`: one,
/// without a pass over the pairs, when every pair's workspace would fit as
/// the largest possible one.
fn chunk_ranges<T: Float>(
    plan: &GradientPlan,
    shapes: &Shapes,
    budget: usize,
    window: Range<usize>,
) -> Result<Vec<Range<usize>>> {
    let pairs = window.len();
    let all_fit = pairs > 0 && pairs.saturating_mul(plan.largest_workspace::<T>(shapes)) <= budget;
    if all_fit && pairs as u64 <= MAX_BLOCKS {
        return Ok(vec![window]);
    }
    let first = window.start;
    let ranges = chunks(
        pairs,
        budget,
        0,
        |k| plan.workspace_of::<T>(shapes, first + k),
        "its Soft-DTW gradient",
    )?;
    Ok(ranges
        .into_iter()
        .map(|r| first + r.start..first + r.end)
        .collect())
}

/// The device memory the chunks of a gradient computation share, in one
/// allocation (each part 16-byte aligned): the store offsets, the store,
/// and the rings in global memory (`ring` values each, per pair of a
/// launch) or the borders between panels (`borders` values a pair, zeroed
/// before each launch); and the word where a panel's wait that gave up is
/// recorded (the pair's value is then NaN).
struct Workspace<T> {
    _memory: CudaSlice<T>,
    offsets: u64,
    store: u64,
    rings: u64,
    global_rings: bool,
    ring: usize,
    borders: usize,
    fault: Option<CudaSlice<u32>>,
}

impl<T: Float> Workspace<T> {
    fn new(
        gpu: &Gpu,
        kernel: GradientKernel,
        (shapes, dims): (&Shapes, usize),
        ranges: &[Range<usize>],
        (store_offsets, store_len): (&[u64], usize),
    ) -> Result<Self> {
        let stream = &gpu.stream;
        let global_rings = kernel == GradientKernel::Stencil { global_rings: true };
        let longest_chunk = ranges.iter().map(Range::len).max().unwrap_or(0);
        let ring = if global_rings {
            shapes.longest_ring()
        } else {
            1
        };
        let borders = match kernel {
            GradientKernel::Warp { warps, .. } if warps > 1 => {
                panel_gradient_workspace::<T>(shapes.longest_rows(), dims, warps)
            }
            _ => 0,
        };
        let ring_values = if global_rings {
            longest_chunk * GRADIENT_RINGS * ring
        } else {
            longest_chunk * borders
        };
        let offsets_len =
            std::mem::size_of_val(store_offsets).next_multiple_of(16) / size_of::<T>();
        let store_len = store_len.next_multiple_of(16 / size_of::<T>());
        let workspace_len = (offsets_len + store_len + ring_values).max(1);
        // SAFETY: uninitialised, as the drivers read no cell of the store or the rings before
        // writing it: the forward pass writes every interior cell (outside the band as infinity)
        // before the backward pass reads it, and each anti-diagonal of the rings before the next
        // reads it; the offsets are copied in next.
        let memory =
            unsafe { stream.alloc::<T>(workspace_len) }.call("allocating device memory")?;
        let offsets = memory.device_ptr(stream).0;
        if !store_offsets.is_empty() {
            // SAFETY: the workspace begins with room for the offsets; from
            // pageable memory, the copy has read them when it returns.
            unsafe { driver::memcpy_htod_async(offsets, store_offsets, stream.cu_stream()) }
                .call("copying to the device")?;
        }
        let store = offsets + (offsets_len * size_of::<T>()) as u64;
        let fault = (borders > 0)
            .then(|| stream.alloc_zeros::<u32>(1))
            .transpose()
            .call("allocating device memory")?;
        Ok(Workspace {
            _memory: memory,
            offsets,
            store,
            rings: store + (store_len * size_of::<T>()) as u64,
            global_rings,
            ring,
            borders,
            fault,
        })
    }

    fn fault_ptr(&self, stream: &cudarc::driver::CudaStream) -> *mut u32 {
        self.fault
            .as_ref()
            .map_or(0, |word| word.device_ptr(stream).0) as *mut u32
    }
}

/// One chunk's launch by the warp driver: a warp per pair or a panel of
/// its columns, `warps` a pair; its borders zeroed first.
fn launch_warp_gradient<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    id: KernelId,
    workspace: &Workspace<T>,
    (len, warps): (usize, usize),
    mut launch: StencilLaunch<T, P>,
) -> Result<()> {
    let stream = &gpu.stream;
    let function = gpu.function(id)?;
    let borders = workspace.borders;
    if borders > 0 {
        // SAFETY: the workspace holds `borders` values for each of the
        // chunk's pairs after the store.
        unsafe {
            driver::memset_d8_async(
                workspace.rings,
                0,
                len * borders * size_of::<T>(),
                stream.cu_stream(),
            )
            .call("filling device memory")?;
        }
        launch.pairs.workspace = workspace.rings as *mut T;
        launch.pairs.row_len = borders as u64;
    }
    let blocks = (len * warps).div_ceil(WARPS_PER_BLOCK) as u32;
    let threads = (WARPS_PER_BLOCK * LANES) as u32;
    // SAFETY: as in `launch_stencil_gradient`; every series `b` of the call fits the kernel's
    // panels, the store holds each pair's `panels_store_len` values at its offset, the workspace
    // each pair's borders, zeroed, and a pair's warps are in one block (`warps` divides the
    // block's).
    unsafe { gpu.launch_blocks(&function, (blocks, threads), 0, launch) }
}

/// One chunk's launch by the stencil driver: a block per pair, its six
/// rings of `shared_ring` values in shared memory, or of the workspace's
/// `ring` values in global memory.
fn launch_stencil_gradient<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    workspace: &Workspace<T>,
    (len, shared_ring): (usize, usize),
    mut launch: StencilLaunch<T, P>,
) -> Result<()> {
    let id = KernelId::new(P::MEASURE, Driver::Gradient, false, T::PRECISION);
    let (ring, shared) = if workspace.global_rings {
        (workspace.ring, 0)
    } else {
        (shared_ring, shared_bytes::<T>(GRADIENT_RINGS, shared_ring))
    };
    let (function, limit) = gpu.function_with_shared(id, shared)?;
    let threads = block_threads(ring, limit);
    launch.ring_len = ring as u64;
    // SAFETY: the batches are on the device and outlive the launch (the copy of the results waits
    // for it); the store holds every pair's n x m cells at its offset (launches one after the
    // other on one stream share it); `out` one value per pair; the gradients the whole batches'
    // samples at the positions of their device offsets, zeroed; the six rings of `ring` values
    // per pair are in `rings` or in the `shared` bytes the kernel was allowed.
    unsafe { gpu.launch_blocks(&function, (len as u32, threads), shared, launch) }
}

/// Bytes of one pair's workspace besides its store under `kernel`: its
/// stencil rings in global memory, or the borders between its panels, or 0.
pub(super) fn ring_bytes<T: Float>(kernel: GradientKernel, shapes: &Shapes, dims: usize) -> usize {
    match kernel {
        GradientKernel::Stencil { global_rings: true } => {
            shared_bytes::<T>(GRADIENT_RINGS, shapes.longest_ring())
        }
        GradientKernel::Warp { warps, .. } if warps > 1 => {
            panel_gradient_workspace::<T>(shapes.longest_rows(), dims, warps) * size_of::<T>()
        }
        _ => 0,
    }
}
