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

use super::gradient_launches::{gradient_into, ring_bytes, WARPS_PER_BLOCK};
use super::result_parts::{block_parts, place_gradients, zero_gradients, BlockParts};
use super::values::{counted_workers, ResidentCopies};
use crate::error::DriverCall;
use crate::gpu::launch::stencil::shared_bytes;
use crate::gpu::plan::blocks::pair_blocks;
use crate::gpu::plan::paired_shapes::{GradientKernel, GradientPlan, Shapes};
use crate::gpu::plan::select::{gradient_driver, gradient_shape};
use crate::gpu::plan::{chunks, layout::image_bytes, MAX_BLOCKS};
use crate::gpu::runtime::context::{Gpu, KernelParams};
use crate::gpu::runtime::pinned::outputs_into;
use crate::gpu::runtime::several_gpus::{on_one_gpu, spread_blocks, spread_pair_blocks};
use crate::gpu::transfer::call_uploads::{upload_ranges, AsyncCopies, UPLOAD_SLACK};
use crate::gpu::transfer::uploads::{DeviceBatch, DeviceSeriesSet};
use crate::results::PairedGradients;
use crate::{Error, Float, Result, SeriesSet, Variant};
use cudarc::driver::DevicePtr;
use std::mem::size_of;
use std::ops::Range;
use std::sync::Mutex;
use timewarp_kernels::drivers::stencil::GRADIENT_RINGS;
use timewarp_kernels::hw::LANES;
use timewarp_kernels::{Differentiable, KernelId, Measure};

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
    let pairs = x.paired_shapes(y, divergence).pairs();
    let flags = (divergence, with_y);
    let (offsets, dims) = ((x.offsets(), y.offsets()), x.dims());
    let mut whole = zero_gradients(offsets, dims, flags);
    let every_pair = std::iter::once(0..pairs).collect::<Vec<_>>();
    let mut parts = block_parts(&mut whole, offsets, dims, &every_pair);
    let out = &mut parts[0];
    gradient_of_pairs(gpu, params, (x, y), flags, budget, kernel, (0..pairs, out))?;
    Ok(whole)
}

/// [`gradient_on`] of the pairs `window` of the batches alone (a block of
/// a call spread over several GPUs that each hold the batches whole),
/// copied into `out`, the window's part of the whole call's results: the
/// device's output buffer is the whole call's, of which only the window's
/// part is written and comes back.
fn gradient_of_pairs<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    (divergence, with_y): (bool, bool),
    budget: usize,
    kernel: GradientKernel,
    (window, out): (Range<usize>, &mut BlockParts<'_, T>),
) -> Result<()> {
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
    // SAFETY: [`gradient_into`] zeroes or poisons every output, then the
    // window's launches write its part, before the copies below read it (on
    // the same stream).
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
        (base, window.clone()),
    )?;
    // The window's values, launch after launch, then its samples' part of
    // each gradient (the kernels write a series' gradient at its samples'
    // offset in the batch).
    let dims = x.dims();
    let samples = |offsets: &[u64]| {
        let (first, end) = (
            offsets[window.start] - offsets[0],
            offsets[window.end] - offsets[0],
        );
        (first as usize * dims, (end - first) as usize * dims)
    };
    let (in_x, in_y) = (samples(x.offsets()), samples(y.offsets()));
    let (grad_x, grad_y) = plan.gradients(0);
    let values = (0..launches).map(|l| (l * pairs + window.start, window.len()));
    let mut wanted: Vec<(usize, usize)> = values.collect();
    wanted.push((grad_x + in_x.0, in_x.1));
    wanted.extend(grad_y.map(|g| (g + in_y.0, in_y.1)));
    if divergence {
        wanted.push((plan.gradients(1).0 + in_x.0, in_x.1));
        if with_y {
            wanted.push((plan.gradients(2).0 + in_y.0, in_y.1));
        }
    }
    let into = out.values.iter_mut().chain(out.gradients.iter_mut());
    let mut parts: Vec<(usize, &mut [T])> = wanted
        .iter()
        .zip(into)
        .map(|(&(start, len), into)| {
            assert_eq!(into.len(), len, "a block's part of the results");
            (start, &mut **into)
        })
        .collect();
    assert_eq!(parts.len(), wanted.len(), "a block's part of every result");
    outputs_into((&gpu.stream, &gpu.pool), &results, &mut parts)
}

/// Device memory a gradient computation over device batches of `shapes`
/// allocates at most with `kernel` ([`gradient_on`], or without its
/// outputs [[`gradient_into`]]): every pair's workspace as large as the
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

/// [`paired_gradient_resident`] on every GPU of `copies` (each GPU with
/// its copies of both sets, whole): blocks of pairs handed out from one
/// queue as [`paired_gradient_spread`] hands them out, the kernel chosen
/// once for the whole sets, so the result is one GPU's.
pub(crate) fn paired_gradient_resident_spread<T, P>(
    copies: &[ResidentCopies<'_, T>],
    variant: Option<Variant>,
    params: P,
    (divergence, with_y): (bool, bool),
    memory_budget: Option<usize>,
) -> Result<PairedGradients<T>>
where
    T: Float,
    P: KernelParams<T> + Differentiable<T>,
{
    let copies = counted_workers(copies);
    let (gpu, x, y) = copies[0];
    let pairs = x.offsets().len() - 1;
    if copies.len() == 1 || pairs < 2 {
        return paired_gradient_resident(
            gpu,
            variant,
            params,
            (x, y),
            divergence,
            with_y,
            memory_budget,
        );
    }
    let (xb, yb) = (x.batch(), y.batch());
    let shapes = xb.paired_shapes(&yb, divergence);
    // The kernel one GPU would take for the whole sets.
    let choice = (variant, shapes.longest_columns(), pairs);
    let kernel = gradient_kernel::<T>(gpu, &shapes, P::MEASURE, choice, x.dims())?;
    let needed = gradient_call_bytes::<T>(kernel, &shapes, x.dims(), with_y, true);
    let gpus: Vec<&'static Gpu> = copies.iter().map(|copy| copy.0).collect();
    let length = |offsets: &[u64], k: usize| offsets[k + 1] - offsets[k];
    let cost = |k: usize| length(x.offsets(), k) * length(y.offsets(), k);
    let blocks = pair_blocks(pairs, gpus.len(), cost, 1);
    let (offsets, dims, flags) = ((x.offsets(), y.offsets()), x.dims(), (divergence, with_y));
    let mut whole = zero_gradients(offsets, dims, flags);
    // Each block copies its results straight into its own part of them.
    let parts: Vec<Mutex<_>> = block_parts(&mut whole, offsets, dims, &blocks)
        .into_iter()
        .map(Mutex::new)
        .collect();
    let pairs_of = |block: usize| (blocks[block].len() * shapes.launches()) as u64;
    spread_blocks(&gpus, blocks.len(), pairs_of, |gpu, block| {
        let (gpu, x, y) = *copies
            .iter()
            .find(|copy| std::ptr::eq(copy.0, gpu))
            .expect("every GPU of the spread holds both sets");
        let (_one_at_a_time, budget) = gpu.begin_small(memory_budget, needed)?;
        let batches = (&x.batch(), &y.batch());
        // Only this block's worker takes its part (again, if a failed GPU
        // left it to another).
        let mut part = parts[block].lock().unwrap_or_else(|p| p.into_inner());
        let window = (blocks[block].clone(), &mut *part);
        let result = gradient_of_pairs(gpu, params, batches, flags, budget, kernel, window);
        gpu.settle(result.is_err());
        result
    })?;
    drop(parts);
    Ok(whole)
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
    let offsets = (x.parts().1, y.parts().1);
    let whole = Mutex::new(zero_gradients(offsets, dims, (divergence, with_y)));
    let cost = |k: usize| (x.series_len(k) * y.series_len(k)) as u64;
    spread_pair_blocks(
        gpus,
        (pairs, cost, 1),
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
            place_gradients(&mut guard, offsets, dims, range, got);
        },
    )?;
    Ok(whole.into_inner().unwrap_or_else(|p| p.into_inner()))
}
