//! Paired Soft-DTW over batches in device memory the caller owns (CUDA
//! tensors): read in place, results written to the caller's buffer, in
//! order after the work the caller's stream has queued.

use super::gradient::{gradient_call_bytes, gradient_kernel};
use super::gradient_launches::gradient_into;
use super::value_launches::value_call_bytes;
use super::values::{choose, values_on};
use crate::error::DriverCall;
use crate::gpu::plan::paired_shapes::{GradientKernel, GradientPlan, Shapes};
use crate::gpu::runtime::context::{Gpu, KernelParams};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::uploads::ForeignBatch;
use crate::{Float, Result, Variant};
use cudarc::driver::{result as driver, sys};
use timewarp_kernels::Differentiable;

/// A batch of equal-length series in device memory: `count x len x dims`
/// values, C-contiguous, at `address`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ForeignShape {
    pub address: u64,
    pub count: usize,
    pub len: usize,
    pub dims: usize,
}

/// What to compute: values, or values and gradients (with respect to `y`
/// too if `with_y`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wanted {
    Values,
    Gradients { with_y: bool },
}

fn offsets(batch: &ForeignShape) -> Vec<u64> {
    (0..=batch.count).map(|k| (k * batch.len) as u64).collect()
}

/// Values of the output buffer [`paired_on_device`] writes.
pub(crate) fn output_len(
    x: &ForeignShape,
    y: &ForeignShape,
    divergence: bool,
    wanted: Wanted,
) -> usize {
    let (x_offsets, y_offsets) = (offsets(x), offsets(y));
    let shapes = Shapes::new(&x_offsets, &y_offsets, divergence);
    match wanted {
        Wanted::Values => shapes.launches() * shapes.pairs(),
        Wanted::Gradients { with_y } => GradientPlan::new(
            &shapes,
            x.dims,
            with_y,
            GradientKernel::Stencil {
                global_rings: false,
            },
            0,
        )
        .outputs(),
    }
}

/// Series `k` of `x` against series `k` of `y`, written to the buffer at
/// `out` (laid out as `GradientPlan` says, or the values alone), after
/// the work queued on the caller's stream `wait_for`. Returns once the
/// work is queued, with `wait_for` ordered after it (without a stream of
/// the caller's, once it is done): the caller's next work on that stream
/// sees the results, and the caller's CPU work overlaps the GPU's.
///
/// # Safety
/// `x`, `y` and `out` address device memory of the GPU's context (the
/// device's primary context, which CUDA runtimes share) that stays valid
/// for the call; `out` holds the outputs `wanted` needs; `wait_for` is a
/// stream of that context (or the legacy default stream, 0).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn paired_on_device<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    variant: Option<Variant>,
    params: P,
    (x, y): (ForeignShape, ForeignShape),
    divergence: bool,
    wanted: Wanted,
    out: u64,
    wait_for: Option<sys::CUstream>,
    memory_budget: Option<usize>,
) -> Result<()> {
    let xs = ForeignBatch::<T>::new(x.address, (x.count, x.len, x.dims));
    let ys = ForeignBatch::<T>::new(y.address, (y.count, y.len, y.dims));
    let (xb, yb) = (xs.batch(), ys.batch());
    let shapes = xb.paired_shapes(&yb, divergence);
    // The kernels first: what they allocate decides whether the driver is
    // asked for the free memory.
    let (kernels, needed) = match wanted {
        Wanted::Values => {
            let variant = choose(variant, &shapes)?;
            let needed = value_call_bytes::<T, P>(&params, variant, &shapes, x.dims);
            (Kernels::Values(variant), needed)
        }
        Wanted::Gradients { with_y } => {
            let kernel = gradient_kernel::<T>(
                gpu,
                &shapes,
                P::MEASURE,
                (variant, shapes.longest_columns(), shapes.pairs()),
                x.dims,
            )?;
            let needed = gradient_call_bytes::<T>(kernel, &shapes, x.dims, with_y, false);
            (Kernels::Gradients(kernel, with_y), needed)
        }
    };
    let (_one_at_a_time, budget) = gpu.begin_small(memory_budget, needed)?;
    if let Some(stream) = wait_for {
        let event = gpu.context.new_event(None).call("creating an event")?;
        // SAFETY: the caller vouches for the stream; the event is ours.
        unsafe { driver::event::record(event.cu_event(), stream) }.call("recording an event")?;
        gpu.stream
            .wait(&event)
            .call("ordering a stream after an event")?;
    }
    let result = (|| {
        match kernels {
            Kernels::Values(variant) => {
                values_on(
                    gpu,
                    variant,
                    params,
                    (&xb, &yb),
                    divergence,
                    budget,
                    Some(out),
                )?;
            }
            Kernels::Gradients(kernel, with_y) => {
                gradient_into(
                    gpu,
                    params,
                    (&xb, &yb),
                    divergence,
                    with_y,
                    budget,
                    kernel,
                    (out, 0..xb.paired_shapes(&yb, false).pairs()),
                )?;
            }
        }
        finish_after(gpu, wait_for)
    })();
    gpu.settle(result.is_err());
    result
}

/// What [`paired_on_device`] launches.
enum Kernels {
    Values(Variant),
    /// The kernel, and whether with respect to `y` too.
    Gradients(GradientKernel, bool),
}

/// Orders the caller's stream after the work queued on the GPU's stream
/// (an event, no waiting on the host), or waits for that work when there
/// is no stream of the caller's. What the launches allocated is freed in
/// the stream's order, after them.
fn finish_after(gpu: &Gpu, wait_for: Option<sys::CUstream>) -> Result<()> {
    let Some(stream) = wait_for else {
        return wait_stream(&gpu.stream, "the paired kernels on the caller's tensors");
    };
    let done = gpu.stream.record_event(None).call("recording an event")?;
    // SAFETY: the caller vouches for the stream; the event is ours, and
    // destroying it once waited on is allowed before it completes.
    unsafe {
        driver::stream::wait_event(
            stream,
            done.cu_event(),
            sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
    .call("ordering a stream after an event")
}
