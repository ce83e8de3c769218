//! Paired batches (series `k` of `x` against series `k` of `y`) on the
//! GPU: values with the stencil, warp or tiled kernels, from host batches
//! (uploaded for the call, an image a batch and chunk: one allocation and
//! one copy each) or from resident sets. Either way the launches read
//! device batches ([`DeviceBatch`]), and for the soft-DTW divergence the
//! pairs `(x_k, x_k)` and `(y_k, y_k)` are launches over the same two
//! batches, nothing copied. Per pair, a launch's result depends only on the
//! pair (the cells' arithmetic does not change with the block's threads,
//! the warp's shape or the chunk), so every way of cutting and launching a
//! batch gives the same bits.
//!
//! The values go straight into a kept pinned buffer on the host (mapped),
//! or where the call's values are too many for one, into device memory,
//! copied back once per chunk. Device memory besides the batches: those
//! outputs and, for the warp kernel with series wider than one warp's
//! columns, a border of `len + 1` values per pair. Batches are cut into
//! chunks that fit the memory budget; outputs and borders are allocated
//! once per call, for the largest chunk.

use super::streamed_values::streamed_values;
use super::value_launches::{
    launch_lengths, value_border, value_bytes, value_call_bytes, ValuePlan,
};
use crate::error::DriverCall;
use crate::gpu::launch::pipelined_pair::{check_fits, pair_pipelined_on};
use crate::gpu::plan::layout::image_bytes;
use crate::gpu::plan::paired_shapes::{operands, Shapes};
use crate::gpu::plan::select::{paired_variant, pipelined_workspace};
use crate::gpu::plan::{chunks, MAX_BLOCKS};
use crate::gpu::runtime::context::{Gpu, KernelParams};
use crate::gpu::runtime::several_gpus::{least_pairs_a_block, on_one_gpu, spread_pair_blocks};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::call_uploads::{
    upload_bytes, upload_ranges_with, AsyncCopies, UPLOAD_SLACK,
};
use crate::gpu::transfer::uploads::{DeviceBatch, DeviceSeriesSet};
use crate::{Float, Result, SeriesSet, Variant};
use cudarc::driver::result as driver;
use std::cell::Cell;
use std::mem::size_of;
use std::ops::Range;
use std::sync::Mutex;

/// The variant asked for, or the default for `shapes`.
pub(crate) fn choose(asked: Option<Variant>, shapes: &Shapes) -> Result<Variant> {
    paired_variant(asked, shapes.pairs() * shapes.launches(), shapes.shortest())
}

/// The variant paired values of `x` and `y` (and with `divergence` each
/// against itself) compute with: `asked`, or the default.
pub(crate) fn paired_value_variant<T: Float>(
    asked: Option<Variant>,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    divergence: bool,
) -> Result<Variant> {
    choose(asked, &Shapes::of_sets(x, y, divergence))
}

/// [`paired_values`] on every GPU of `gpus`: the pairs in contiguous
/// blocks handed out from one queue (a few per GPU), each block's values
/// put in place, so the result is the one GPU's. The variant is chosen
/// once for the whole batches; a pair's value does not depend on the block.
pub(crate) fn paired_values_spread<T: Float, P: KernelParams<T>>(
    gpus: &[&'static Gpu],
    variant: Option<Variant>,
    params: P,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    divergence: bool,
    memory_budget: Option<usize>,
) -> Result<Vec<T>> {
    let pairs = x.len();
    if gpus.len() == 1 || pairs < 2 {
        return on_one_gpu(gpus[0], |gpu| {
            paired_values(gpu, variant, params, (x, y), divergence, memory_budget)
        });
    }
    let shapes = Shapes::of_sets(x, y, divergence);
    let variant = Some(choose(variant, &shapes)?);
    let launches = shapes.launches();
    let values = Mutex::new(vec![T::ZERO; launches * pairs]);
    let cost = |k: usize| (x.series_len(k) * y.series_len(k)) as u64;
    let least = least_pairs_a_block(gpus)?;
    spread_pair_blocks(
        gpus,
        (pairs, cost, least),
        launches,
        |gpu, range| {
            let part = (&x.slice(range.clone()), &y.slice(range));
            paired_values(gpu, variant, params, part, divergence, memory_budget)
        },
        |range, got| place_values(&values, pairs, range, &got),
    )?;
    Ok(values.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Series `k` of `x` against series `k` of `y` (same counts, checked by the
/// caller) with `variant` (default: the tiled kernel for one or two long
/// pairs, else the warp kernel), and with `divergence` also `x_k` against itself and `y_k`
/// against itself: the values of `x_k, y_k`, then of `x_k, x_k`, then of
/// `y_k, y_k`. The batches go to the device in chunks that fit the memory
/// budget with what the launches allocate (for the tiled kernel, a pair at
/// a time), each chunk's `x` and `y` once.
pub(crate) fn paired_values<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Option<Variant>,
    params: P,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    divergence: bool,
    memory_budget: Option<usize>,
) -> Result<Vec<T>> {
    let shapes = Shapes::of_sets(x, y, divergence);
    let variant = choose(variant, &shapes)?;
    let series = |k: usize| image_bytes(x, k..k + 1) + image_bytes(y, k..k + 1);
    let pairs = shapes.pairs();
    let (_one_at_a_time, budget, ranges) = if variant == Variant::Tiled {
        let (busy, budget) = gpu.begin(memory_budget)?;
        for k in 0..pairs {
            for l in 0..shapes.launches() {
                let (n, m) = shapes.lengths(l, k);
                let workspace = pipelined_workspace(n) + size_of::<T>();
                check_fits(n, m, UPLOAD_SLACK + series(k) + workspace, budget)?;
            }
        }
        (busy, budget, (0..pairs).map(|k| k..k + 1).collect())
    } else {
        let launches = launch_lengths(&shapes);
        let border = value_border::<T, P>(&params, variant, &launches, x.dims());
        let per_pair = value_bytes::<T>(launches.len(), border);
        // What the pairs take one by one (`series`: their images, each
        // with two offsets more than a part of the whole images) and what
        // the launches allocate: chunks are cut only where that passes
        // the budget, found without asking the driver for a small call.
        let images = image_bytes(x, 0..pairs) + image_bytes(y, 0..pairs);
        let needed = UPLOAD_SLACK + images + pairs * (size_of::<u64>() * 2 + per_pair);
        let (busy, budget) = gpu.begin_small(memory_budget, needed)?;
        let ranges = if needed <= budget && pairs as u64 <= MAX_BLOCKS {
            std::iter::once(0..pairs).collect()
        } else {
            let bytes = |k| series(k) + per_pair;
            chunks(pairs, budget, UPLOAD_SLACK, bytes, "its value")?
        };
        (busy, budget, ranges)
    };
    // Pairs from ordinary memory in one chunk: computed while they are
    // written, where the streamed kernel applies.
    if ranges.len() == 1 && variant == Variant::Warp {
        if let Some(values) = streamed_values(gpu, params, (x, y), &shapes, budget)? {
            return Ok(values);
        }
    }
    let launches = shapes.launches();
    let mut values = vec![T::ZERO; launches * pairs];
    for range in ranges {
        let left = budget.saturating_sub(upload_bytes(&[x, y], &range));
        // Everything but the tiled kernel is planned while the upload gets
        // under way, so that the launches follow the copies at once.
        let plan = || match variant {
            Variant::Tiled => Ok(None),
            _ => {
                let shapes = shapes.range(&range);
                ValuePlan::new(gpu, variant, params, &shapes, x.dims(), left, None).map(Some)
            }
        };
        // Copies from page-locked batches run on while the launches are
        // enqueued: the values come back once the copy back is done (and
        // so the launches and the copies before them), `settle` on failure.
        let mode = AsyncCopies::CallerWaits;
        let (uploaded, plan) = upload_ranges_with(gpu, &[x, y], range.clone(), mode, plan)?;
        let (x_chunk, y_chunk) = (uploaded.batch(0, x), uploaded.batch(1, y));
        let batches = (&x_chunk, &y_chunk);
        let chunk = match plan {
            Some(plan) => plan.run(batches),
            None => values_on(gpu, variant, params, batches, divergence, left, None),
        };
        // The chunk's images are freed next: no kernel may still read them.
        gpu.settle(chunk.is_err());
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

/// [`paired_values`] of two resident sets (same counts, checked by the
/// caller): nothing is uploaded, `memory_budget` bounds what the call
/// allocates besides them.
pub(crate) fn paired_values_resident<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Option<Variant>,
    params: P,
    (x, y): (&DeviceSeriesSet<T>, &DeviceSeriesSet<T>),
    divergence: bool,
    memory_budget: Option<usize>,
) -> Result<Vec<T>> {
    let (xl, yl) = (x.lengths(), y.lengths());
    let shapes = Shapes::known(x.offsets(), y.offsets(), divergence, xl, yl);
    let variant = choose(variant, &shapes)?;
    let needed = value_call_bytes::<T, P>(&params, variant, &shapes, x.dims());
    let (_one_at_a_time, budget) = gpu.begin_small(memory_budget, needed)?;
    let batches = (&x.batch(), &y.batch());
    let values = values_on(gpu, variant, params, batches, divergence, budget, None);
    gpu.settle(values.is_err());
    values
}

thread_local! {
    /// Workers a GPU of a resident spread counts as ([`split_resident_pairs`]).
    static WORKERS_A_GPU: Cell<usize> = const { Cell::new(1) };
}

/// Test hook: this thread's paired values and gradients of resident sets
/// are spread as if each GPU were `workers` GPUs (its blocks cut and computed one after
/// another on it), so that one GPU runs the several-GPU path; 1 undoes it.
pub fn split_resident_pairs(workers: usize) {
    WORKERS_A_GPU.with(|w| w.set(workers.max(1)));
}

/// `copies`, each GPU as many times as [`split_resident_pairs`] counts it.
pub(super) fn counted_workers<'a, T>(
    copies: &[ResidentCopies<'a, T>],
) -> Vec<ResidentCopies<'a, T>> {
    let workers = WORKERS_A_GPU.with(Cell::get);
    copies
        .iter()
        .flat_map(|copy| std::iter::repeat_n(*copy, workers))
        .collect()
}

/// [`paired_values_resident`] on every GPU of `copies` (each GPU with its
/// copies of both sets, whole): blocks of pairs handed out from one queue
/// as [`paired_values_spread`] hands them out, so the result is one
/// GPU's. The variant is chosen once for the whole sets.
pub(crate) fn paired_values_resident_spread<T: Float, P: KernelParams<T>>(
    copies: &[ResidentCopies<'_, T>],
    variant: Option<Variant>,
    params: P,
    divergence: bool,
    memory_budget: Option<usize>,
) -> Result<Vec<T>> {
    let copies = counted_workers(copies);
    let (gpu, x, y) = copies[0];
    let pairs = x.offsets().len() - 1;
    if copies.len() == 1 || pairs < 2 {
        return paired_values_resident(gpu, variant, params, (x, y), divergence, memory_budget);
    }
    let (xl, yl) = (x.lengths(), y.lengths());
    let shapes = Shapes::known(x.offsets(), y.offsets(), divergence, xl, yl);
    let variant = choose(variant, &shapes)?;
    let launches = shapes.launches();
    let gpus: Vec<&'static Gpu> = copies.iter().map(|copy| copy.0).collect();
    let values = Mutex::new(vec![T::ZERO; launches * pairs]);
    let length = |offsets: &[u64], k: usize| offsets[k + 1] - offsets[k];
    let cost = |k: usize| length(x.offsets(), k) * length(y.offsets(), k);
    let least = least_pairs_a_block(&gpus)?;
    spread_pair_blocks(
        &gpus,
        (pairs, cost, least),
        launches,
        |gpu, range| {
            let (gpu, x, y) = *copies
                .iter()
                .find(|copy| std::ptr::eq(copy.0, gpu))
                .expect("every GPU of the spread holds both sets");
            let (xs, ys) = (x.offsets(), y.offsets());
            let block = range.start..=range.end;
            let shapes = Shapes::new(&xs[block.clone()], &ys[block], divergence);
            let needed = value_call_bytes::<T, P>(&params, variant, &shapes, x.dims());
            let (_one_at_a_time, budget) = gpu.begin_small(memory_budget, needed)?;
            let batches = (&x.batch(), &y.batch());
            let values = values_of_pairs(gpu, variant, params, batches, range, divergence, budget);
            gpu.settle(values.is_err());
            values
        },
        |range, got| place_values(&values, pairs, range, &got),
    )?;
    Ok(values.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// Puts the values of the pairs `range` (launch after launch, as a call of
/// just them lays them out) in place in the whole call's (`pairs` a launch).
fn place_values<T: Float>(values: &Mutex<Vec<T>>, pairs: usize, range: Range<usize>, got: &[T]) {
    let mut values = values.lock().unwrap_or_else(|p| p.into_inner());
    for (l, part) in got.chunks(range.len()).enumerate() {
        values[l * pairs + range.start..l * pairs + range.end].copy_from_slice(part);
    }
}

/// A GPU and its copies of two resident sets, whole.
pub(crate) type ResidentCopies<'a, T> =
    (&'static Gpu, &'a DeviceSeriesSet<T>, &'a DeviceSeriesSet<T>);

/// The values of the pairs of two device batches, as [`paired_values`]
/// lays them out, with `variant` (stencil, warp or tiled); what the
/// launches allocate fits `budget`, in chunks. Returned, or with
/// `device_out` written to the device buffer at that address (and none
/// returned). Returns once the values are where they go: the batches may
/// be freed then.
pub(crate) fn values_on<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    divergence: bool,
    budget: usize,
    device_out: Option<u64>,
) -> Result<Vec<T>> {
    let shapes = x.paired_shapes(y, divergence);
    if variant == Variant::Tiled {
        return tiled_values_on(gpu, params, (x, y), (&shapes, 0), budget, device_out);
    }
    let plan = ValuePlan::new(gpu, variant, params, &shapes, x.dims(), budget, device_out)?;
    plan.run((x, y))
}

/// [`values_on`] of the pairs `pairs` of two device batches alone, laid
/// out as [`paired_values`] lays out those of batches of just them.
fn values_of_pairs<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    pairs: Range<usize>,
    divergence: bool,
    budget: usize,
) -> Result<Vec<T>> {
    let block = pairs.start..=pairs.end;
    let shapes = Shapes::new(&x.offsets()[block.clone()], &y.offsets()[block], divergence);
    let first = pairs.start;
    if variant == Variant::Tiled {
        return tiled_values_on(gpu, params, (x, y), (&shapes, first), budget, None);
    }
    let plan = ValuePlan::new(gpu, variant, params, &shapes, x.dims(), budget, None)?;
    plan.starting_at_pair(first).run((x, y))
}

/// [`values_on`] with the tiled kernel: a pair at a time.
fn tiled_values_on<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&DeviceBatch<T>, &DeviceBatch<T>),
    (shapes, first): (&Shapes, usize),
    budget: usize,
    device_out: Option<u64>,
) -> Result<Vec<T>> {
    let (pairs, launches) = (shapes.pairs(), shapes.launches());
    let mut values = Vec::with_capacity(launches * pairs);
    for l in 0..launches {
        let (a, b) = operands(l, x, y);
        for k in 0..pairs {
            let series = first + k..first + k + 1;
            let pair = (a.view(series.clone()), b.view(series));
            let lengths = shapes.lengths(l, k);
            values.push(pair_pipelined_on(gpu, params, pair, lengths, budget)?);
        }
    }
    let Some(out) = device_out else {
        return Ok(values);
    };
    // SAFETY: `out` holds `launches * pairs` values; the copy from
    // pageable memory has read `values` when it returns.
    unsafe { driver::memcpy_htod_async(out, &values[..], gpu.stream.cu_stream()) }
        .call("copying to the device")?;
    wait_stream(&gpu.stream, "the paired values")?;
    Ok(Vec::new())
}
