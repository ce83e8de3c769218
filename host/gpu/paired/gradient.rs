//! The Soft-DTW gradient of paired batches on the GPU, from host batches or
//! resident sets: per pair a forward pass storing the cost matrix, then a
//! backward pass. Pairs whose series `b` fit a warp's stripes take a warp
//! each (`warp_gradient` kernels, the column driver), or a warp a panel of
//! columns up to a block's warps (`panels_gradient` kernels, 1,024 samples
//! in all); longer ones a block each (`gradient` kernels, the stencil
//! driver).
//!
//! Device memory besides the batches: per pair its whole cost matrix
//! (`n * m` values, diagonal-major for the stencil driver; the warp
//! driver's wavefront steps, a little more) and the gradients, laid out
//! like the batches' values ([`crate::soft_dtw_gradient_bytes_per_pair`]).
//! Batches are cut into chunks whose cost matrices fit the budget; the
//! stores are allocated once per call, for the largest chunk, the
//! gradients for the whole batch, and copied back once. The stencil
//! driver's shared memory per block: six anti-diagonals of `min(n, m) + 1`
//! values; the kernels opt into more than the default when a pair needs
//! it, up to the device's limit, past which the rings move to global memory
//! (slower, but any length whose cost matrix fits the device).

use crate::error::DriverCall;
use crate::gpu::launch::stencil::{shared_bytes, stencil_launch};
use crate::gpu::plan::paired_shapes::{operands, GradientKernel, GradientPlan, Shapes};
use crate::gpu::plan::select::{block_threads, gradient_driver, gradient_shape};
use crate::gpu::plan::{chunks, layout::image_bytes, MAX_BLOCKS};
use crate::gpu::runtime::context::{poison_bytes, Gpu, KernelParams};
use crate::gpu::runtime::pinned::outputs_to_host;
use crate::gpu::runtime::several_gpus::{on_one_gpu, spread_pair_blocks};
use crate::gpu::transfer::uploads::{
    upload_ranges, AsyncCopies, DeviceBatch, DeviceSeriesSet, UPLOAD_SLACK,
};
use crate::results::PairedGradients;
use crate::{Error, Float, Result, SeriesSet, Variant};
use cudarc::driver::{result as driver, DevicePtr};
use std::mem::size_of;
use std::ops::Range;
use std::sync::Mutex;
use timewarp_kernels::drivers::stencil::GRADIENT_RINGS;
use timewarp_kernels::hw::LANES;
use timewarp_kernels::launch::pairs::{panel_gradient_workspace, GradientBuffers};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Differentiable, Driver, KernelId, Measure};

/// Warps per block of the `warp_gradient` and `panels_gradient` kernels (a
/// multiple of a pair's warps).
const WARPS_PER_BLOCK: usize = 4;

/// Soft-DTW values and gradients of series `k` of `x` against series
/// `k` of `y` (same counts and dims, checked by the caller), and with
/// `divergence` also of `x_k` and `y_k` against themselves (the values
/// as `paired::paired_values` lays them out, the gradients as
/// [`PairedGradients`] says); with respect to `y` only if `with_y`. The
/// batches go to the device in chunks whose cost matrices fit the
/// budget ([`crate::soft_dtw_gradient_bytes_per_pair`]), each chunk's
/// `x` and `y` once. The kernel is chosen for `columns` and `call_pairs`,
/// the whole call's longest series `b` and its pairs a GPU, when `x` and
/// `y` are a part of it ([`gradient_kernel`]).
pub(crate) fn paired_gradient<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    (variant, columns, call_pairs): (Option<Variant>, usize, usize),
    params: P,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    divergence: bool,
    with_y: bool,
    memory_budget: Option<usize>,
) -> Result<PairedGradients<T>> {
    let shapes = Shapes::of_sets(x, y, divergence);
    let dims = x.dims();
    let kernel = gradient_kernel::<T>(
        gpu,
        &shapes,
        P::MEASURE,
        (
            variant,
            columns.max(shapes.longest_columns()),
            call_pairs.max(shapes.pairs()),
        ),
        dims,
    )?;
    let plan = GradientPlan::new(
        &shapes,
        dims,
        with_y,
        kernel,
        ring_bytes::<T>(kernel, &shapes, dims),
    );
    let (pairs, launches) = (shapes.pairs(), shapes.launches());
    // The images and every pair's workspace as the largest: one chunk,
    // without asking the driver for the free memory if the pool holds it.
    let images = image_bytes(x, 0..pairs) + image_bytes(y, 0..pairs) + pairs * 16;
    let needed = (UPLOAD_SLACK + images).saturating_add(gradient_call_bytes::<T>(
        kernel, &shapes, dims, with_y, true,
    ));
    let (_one_at_a_time, budget) = gpu.begin_small(memory_budget, needed)?;
    let ranges = if needed <= budget && pairs as u64 <= MAX_BLOCKS {
        std::iter::once(0..pairs).collect()
    } else {
        let bytes = |k: usize| {
            image_bytes(x, k..k + 1)
                + image_bytes(y, k..k + 1)
                + plan.outputs_of(&shapes, k, dims) * size_of::<T>()
                + plan.workspace_of::<T>(&shapes, k)
        };
        chunks(pairs, budget, UPLOAD_SLACK, bytes, "its Soft-DTW gradient")?
    };
    let whole = ranges.len() == 1;
    let capacity = |values: usize| Vec::with_capacity(if whole { 0 } else { values });
    let mut result = PairedGradients {
        values: vec![T::ZERO; if whole { 0 } else { launches * pairs }],
        grad_x: capacity(plan.x_values),
        grad_y: with_y.then(|| capacity(plan.y_values)),
        grad_xx: divergence.then(|| capacity(plan.x_values)),
        grad_yy: (divergence && with_y).then(|| capacity(plan.y_values)),
    };
    for range in ranges {
        let uploaded = upload_ranges(gpu, &[x, y], range.clone(), AsyncCopies::CallerWaits)?;
        let (x_chunk, y_chunk) = (uploaded.batch(0, x), uploaded.batch(1, y));
        let left = budget.saturating_sub(uploaded.bytes());
        let chunk = gradient_on(
            gpu,
            params,
            (&x_chunk, &y_chunk),
            divergence,
            with_y,
            left,
            kernel,
        );
        // The chunk's images are freed next: no kernel may still read them.
        gpu.settle(chunk.is_err());
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

/// [`paired_gradient`] of two resident sets (same counts
/// and dims, checked by the caller): nothing is uploaded,
/// `memory_budget` bounds what the call allocates besides them.
pub(crate) fn paired_gradient_resident<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    variant: Option<Variant>,
    params: P,
    (x, y): (&DeviceSeriesSet<T>, &DeviceSeriesSet<T>),
    divergence: bool,
    with_y: bool,
    memory_budget: Option<usize>,
) -> Result<PairedGradients<T>> {
    let (xb, yb) = (x.batch(), y.batch());
    let shapes = xb.paired_shapes(&yb, divergence);
    let kernel = gradient_kernel::<T>(
        gpu,
        &shapes,
        P::MEASURE,
        (variant, shapes.longest_columns(), shapes.pairs()),
        x.dims(),
    )?;
    let needed = gradient_call_bytes::<T>(kernel, &shapes, x.dims(), with_y, true);
    let (_one_at_a_time, budget) = gpu.begin_small(memory_budget, needed)?;
    let result = gradient_on(gpu, params, (&xb, &yb), divergence, with_y, budget, kernel);
    gpu.settle(result.is_err());
    result
}

/// The values and gradients of the pairs of two device batches, laid
/// out as [`paired_gradient`] says, by `kernel` (decided for the whole
/// batch), in chunks
/// whose stores fit `budget` besides the outputs. Returns once the
/// results are back: the batches may be freed then.
fn gradient_on<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    divergence: bool,
    with_y: bool,
    budget: usize,
    kernel: GradientKernel,
) -> Result<PairedGradients<T>> {
    let shapes = x.paired_shapes(y, divergence);
    let plan = GradientPlan::new(&shapes, x.dims(), with_y, kernel, 0);
    let (pairs, launches) = (shapes.pairs(), shapes.launches());
    let outputs = plan.outputs();
    let output_bytes = outputs * size_of::<T>();
    if output_bytes > budget {
        return Err(Error::gpu_memory(format!(
            "the values and gradients of {pairs} pairs need {output_bytes} bytes of device memory, over the {budget} available"
        )));
    }
    let stream = &gpu.stream;
    // SAFETY: `gradient_into` writes every output before the copies below
    // read them (on the same stream).
    let results = unsafe { stream.alloc::<T>(outputs) }.call("allocating device memory")?;
    let base = results.device_ptr(stream).0;
    gradient_into(
        gpu,
        params,
        (x, y),
        divergence,
        with_y,
        budget - output_bytes,
        kernel,
        base,
    )?;
    let (grad_x, grad_y) = plan.gradients(0);
    let mut parts = vec![(0, launches * pairs), (grad_x, plan.x_values)];
    parts.extend(grad_y.map(|g| (g, plan.y_values)));
    if divergence {
        parts.push((plan.gradients(1).0, plan.x_values));
        if with_y {
            parts.push((plan.gradients(2).0, plan.y_values));
        }
    }
    let mut parts = outputs_to_host((&gpu.stream, &gpu.pool), &results, &parts)?.into_iter();
    let mut next = || parts.next().expect("one vector a part");
    Ok(PairedGradients {
        values: next(),
        grad_x: next(),
        grad_y: grad_y.map(|_| next()),
        grad_xx: divergence.then(&mut next),
        grad_yy: (divergence && with_y).then(next),
    })
}

/// The launches of [`gradient_on`], writing to the output buffer at
/// device address `out` (laid out as [`GradientPlan`] says; it is zeroed
/// and its values poisoned here first), with the stores of each chunk in
/// `budget`. Returns once the launches are queued on the GPU's stream.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gradient_into<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    divergence: bool,
    with_y: bool,
    budget: usize,
    kernel: GradientKernel,
    out: u64,
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
    let global_rings = kernel == GradientKernel::Stencil { global_rings: true };
    debug_assert_eq!((plan.x_values, plan.y_values), (x.values(), y.values()));
    // One chunk, without a pass over the pairs, when every pair's
    // workspace would fit as the largest possible one.
    let all_fit = pairs > 0 && pairs.saturating_mul(plan.largest_workspace::<T>(&shapes)) <= budget;
    let ranges = if all_fit && pairs as u64 <= MAX_BLOCKS {
        std::iter::once(0..pairs).collect()
    } else {
        chunks(
            pairs,
            budget,
            0,
            |k| plan.workspace_of::<T>(&shapes, k),
            "its Soft-DTW gradient",
        )?
    };
    let stream = &gpu.stream;
    let at = |values: usize| out + (values * size_of::<T>()) as u64;
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
    // chunk's store, uploaded together; and one store (and rings) for
    // the largest chunk, used by each in turn (the forward pass writes
    // every cell before the backward pass reads it).
    let (store_offsets, starts, store_len) = plan.store_offsets(&shapes, &ranges);
    let longest_chunk = ranges.iter().map(Range::len).max().unwrap_or(0);
    // Rings in global memory: `ring` values each, per pair of a launch
    // (the launches, one after the other, share them); or the borders
    // between panels, `borders` values a pair, zeroed before each launch.
    let ring = if global_rings {
        shapes.longest_ring()
    } else {
        1
    };
    let borders = match kernel {
        GradientKernel::Warp { warps, .. } if warps > 1 => {
            panel_gradient_workspace::<T>(shapes.longest_rows(), x.dims(), warps)
        }
        _ => 0,
    };
    let ring_values = if global_rings {
        longest_chunk * GRADIENT_RINGS * ring
    } else {
        longest_chunk * borders
    };
    // One allocation: the store offsets, the store, the rings or borders
    // (each 16-byte aligned).
    let offsets_len =
        (store_offsets.len() * size_of::<u64>()).next_multiple_of(16) / size_of::<T>();
    let store_len = store_len.next_multiple_of(16 / size_of::<T>());
    let workspace_len = (offsets_len + store_len + ring_values).max(1);
    // SAFETY: uninitialised, as the drivers read no cell of the store or the rings before writing
    // it: the forward pass writes every interior cell (outside the band as infinity) before the
    // backward pass reads it, and each anti-diagonal of the rings before the next reads it; the
    // offsets are copied in next.
    let workspace = unsafe { stream.alloc::<T>(workspace_len) }.call("allocating device memory")?;
    let offsets_base = workspace.device_ptr(stream).0;
    if !store_offsets.is_empty() {
        // SAFETY: the workspace begins with room for the offsets; from
        // pageable memory, the copy has read them when it returns.
        unsafe { driver::memcpy_htod_async(offsets_base, &store_offsets[..], stream.cu_stream()) }
            .call("copying to the device")?;
    }
    let store = offsets_base + (offsets_len * size_of::<T>()) as u64;
    let rings = store + (store_len * size_of::<T>()) as u64;
    // Records a panel's wait that gave up (the pair's value is then NaN).
    let fault = (borders > 0)
        .then(|| stream.alloc_zeros::<u32>(1))
        .transpose();
    let fault = fault.call("allocating device memory")?;
    let fault_ptr = fault.as_ref().map_or(0, |word| word.device_ptr(stream).0) as *mut u32;
    for (range, start) in ranges.iter().zip(starts) {
        let len = range.len();
        for l in 0..launches {
            let (a, b) = operands(l, x, y);
            let (grad_a, grad_b) = plan.gradients(l);
            let refs = (a.view(range.clone()), b.view(range.clone()));
            let buffers = GradientBuffers {
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
                alignment: std::ptr::null_mut(),
                fault: fault_ptr,
            };
            if let GradientKernel::Warp { warps, stripe } = kernel {
                let driver = gradient_driver((warps, stripe));
                let id = KernelId::new(P::MEASURE, driver, x.dims() == 1, T::PRECISION);
                let function = gpu.function(id)?;
                let mut launch = stencil_launch(refs, params, Numbering::Paired, len as u64, 1);
                launch.pairs.out = at(l * pairs + range.start) as *mut T;
                launch.gradient = buffers;
                if borders > 0 {
                    // SAFETY: the workspace holds `borders` values for
                    // each of the chunk's pairs after the store.
                    unsafe {
                        driver::memset_d8_async(
                            rings,
                            0,
                            len * borders * size_of::<T>(),
                            stream.cu_stream(),
                        )
                        .call("filling device memory")?;
                    }
                    launch.pairs.workspace = rings as *mut T;
                    launch.pairs.row_len = borders as u64;
                }
                let blocks = (len * warps).div_ceil(WARPS_PER_BLOCK) as u32;
                let threads = (WARPS_PER_BLOCK * LANES) as u32;
                // SAFETY: as below; every series `b` of the call fits the kernel's panels, the
                // store holds each pair's `panels_store_len` values at its offset, the workspace
                // each pair's borders, zeroed, and a pair's warps are in one block (`warps`
                // divides the block's).
                unsafe { gpu.launch_blocks(&function, (blocks, threads), 0, launch) }?;
                continue;
            }
            let id = KernelId::new(P::MEASURE, Driver::Gradient, false, T::PRECISION);
            let shared_ring = shapes.range(range).ring_len(l);
            let (ring, shared) = if global_rings {
                (ring, 0)
            } else {
                (shared_ring, shared_bytes::<T>(GRADIENT_RINGS, shared_ring))
            };
            let (function, limit) = gpu.function_with_shared(id, shared)?;
            let threads = block_threads(ring, limit);
            let mut launch = stencil_launch(refs, params, Numbering::Paired, len as u64, ring);
            launch.pairs.out = at(l * pairs + range.start) as *mut T;
            launch.gradient = buffers;
            // SAFETY: the batches are on the device and outlive the launch (the copy below waits
            // for it); the store holds every pair's n x m cells at its offset (launches one after
            // the other on one stream share it); `out` one value per pair; the gradients the whole
            // batches' samples at the positions of their device offsets, zeroed; the six rings of
            // `ring` values per pair are in `rings` or in the `shared` bytes the kernel was
            // allowed.
            unsafe { gpu.launch_blocks(&function, (len as u32, threads), shared, launch) }?;
        }
    }
    Ok(())
}

/// Device memory a gradient computation over device batches of `shapes`
/// allocates at most with `kernel` ([`gradient_on`], or without its
/// outputs [`gradient_into`]): every pair's workspace as large as the
/// largest possible, in one chunk.
pub(crate) fn gradient_call_bytes<T: Float>(
    kernel: GradientKernel,
    shapes: &Shapes,
    dims: usize,
    with_y: bool,
    with_outputs: bool,
) -> usize {
    let plan = GradientPlan::new(
        shapes,
        dims,
        with_y,
        kernel,
        ring_bytes::<T>(kernel, shapes, dims),
    );
    let outputs = if with_outputs {
        plan.outputs() * size_of::<T>()
    } else {
        0
    };
    // The workspace's parts are each rounded up to 16 bytes.
    let workspace = shapes
        .pairs()
        .saturating_mul(plan.largest_workspace::<T>(shapes))
        .saturating_add(64);
    outputs.saturating_add(workspace)
}

/// The kernel of a paired gradient call over `shapes` whose longest series `b` has `columns`
/// samples, of `pairs` pairs, samples of `dims` values (the whole call's, when `shapes` is a part
/// of it: every part takes the same kernel, so the bits do not depend on how the call is cut): the
/// column driver's when every series `b` fits its warps' stripes, one warp a pair or panels while
/// their warps fill at most half the GPU (the occupancy API), or the stencil driver's, or the
/// variant `asked` ([`gradient_shape`]); the stencil driver's has its rings in global memory when
/// those of the longest pair do not fit a block's shared memory (then for every pair).
pub(crate) fn gradient_kernel<T: Float>(
    gpu: &Gpu,
    shapes: &Shapes,
    measure: Measure,
    (asked, columns, pairs): (Option<Variant>, usize, usize),
    dims: usize,
) -> Result<GradientKernel> {
    let in_half_a_wave = |shape: (usize, usize)| -> Result<bool> {
        let id = KernelId::new(measure, gradient_driver(shape), dims == 1, T::PRECISION);
        let threads = (WARPS_PER_BLOCK * LANES) as u32;
        let blocks = gpu
            .function_to_query(id)?
            .occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)
            .call("querying the occupancy of a kernel")? as usize;
        let sms = gpu.schedulers()? / 4;
        Ok(2 * pairs * shape.0 <= blocks * WARPS_PER_BLOCK * sms)
    };
    Ok(
        match gradient_shape(measure, asked, columns, in_half_a_wave)? {
            Some((warps, stripe)) => GradientKernel::Warp { warps, stripe },
            None => GradientKernel::Stencil {
                global_rings: shared_bytes::<T>(GRADIENT_RINGS, shapes.longest_ring())
                    > gpu.max_shared_bytes()?,
            },
        },
    )
}

/// The variant of [`gradient_kernel`]'s choice for paired batches `x`
/// and `y`: `warp` or `stencil`.
pub(crate) fn paired_gradient_variant<T: Float>(
    asked: Option<Variant>,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    divergence: bool,
) -> Result<Variant> {
    let shapes = Shapes::of_sets(x, y, divergence);
    Ok(
        match gradient_shape(Measure::SoftDtw, asked, shapes.longest_columns(), |_| {
            Ok(true)
        })? {
            Some(_) => Variant::Warp,
            None => Variant::Stencil,
        },
    )
}

/// Bytes of one pair's workspace besides its store under `kernel`: its
/// stencil rings in global memory, or the borders between its panels, or 0.
fn ring_bytes<T: Float>(kernel: GradientKernel, shapes: &Shapes, dims: usize) -> usize {
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

/// [`paired_gradient`] on every GPU of `gpus`: blocks of pairs handed out
/// from one queue (a few per GPU), each block's values and gradients put
/// in place, so the result is the one GPU's (a pair's gradient does not
/// depend on its block). A GPU that fails is named; its blocks go to the
/// others while any is left working (`plan::spread`).
pub(crate) fn paired_gradient_spread<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpus: &[&'static Gpu],
    variant: Option<Variant>,
    params: P,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    divergence: bool,
    with_y: bool,
    memory_budget: Option<usize>,
) -> Result<PairedGradients<T>> {
    let pairs = x.len();
    // The whole call's longest series b, and its pairs a GPU: every block
    // takes the kernel they choose.
    let columns = Shapes::of_sets(x, y, divergence).longest_columns();
    let per_gpu = pairs.div_ceil(gpus.len());
    if gpus.len() == 1 || pairs < 2 {
        return on_one_gpu(gpus[0], |gpu| {
            paired_gradient(
                gpu,
                (variant, columns, per_gpu),
                params,
                (x, y),
                divergence,
                with_y,
                memory_budget,
            )
        });
    }
    let launches = if divergence { 3 } else { 1 };
    let dims = x.dims();
    let (x_offsets, y_offsets) = (x.parts().1, y.parts().1);
    // The values of a range of pairs in a batch laid out like its values.
    let samples = |offsets: &[u64], range: &Range<usize>| {
        offsets[range.start] as usize * dims..offsets[range.end] as usize * dims
    };
    let zeros = |offsets: &[u64]| vec![T::ZERO; offsets[pairs] as usize * dims];
    let whole = Mutex::new(PairedGradients {
        values: vec![T::ZERO; launches * pairs],
        grad_x: zeros(x_offsets),
        grad_y: with_y.then(|| zeros(y_offsets)),
        grad_xx: divergence.then(|| zeros(x_offsets)),
        grad_yy: (divergence && with_y).then(|| zeros(y_offsets)),
    });
    spread_pair_blocks(
        gpus,
        pairs,
        launches,
        |gpu, range| {
            let part = (&x.slice(range.clone()), &y.slice(range));
            paired_gradient(
                gpu,
                (variant, columns, per_gpu),
                params,
                part,
                divergence,
                with_y,
                memory_budget,
            )
        },
        |range, got| {
            let mut guard = whole.lock().unwrap_or_else(|p| p.into_inner());
            let whole = &mut *guard;
            for l in 0..launches {
                whole.values[l * pairs + range.start..l * pairs + range.end]
                    .copy_from_slice(&got.values[l * range.len()..(l + 1) * range.len()]);
            }
            let (in_x, in_y) = (samples(x_offsets, &range), samples(y_offsets, &range));
            whole.grad_x[in_x.clone()].copy_from_slice(&got.grad_x);
            let parts = [
                (whole.grad_y.as_mut(), got.grad_y.as_ref(), in_y.clone()),
                (whole.grad_xx.as_mut(), got.grad_xx.as_ref(), in_x),
                (whole.grad_yy.as_mut(), got.grad_yy.as_ref(), in_y),
            ];
            for (into, from, at) in parts {
                if let (Some(into), Some(from)) = (into, from) {
                    into[at].copy_from_slice(from);
                }
            }
        },
    )?;
    Ok(whole.into_inner().unwrap_or_else(|p| p.into_inner()))
}
