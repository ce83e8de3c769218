//! Paired Soft-DTW over batches already in GPU memory that the caller owns,
//! such as CUDA tensors: read in place, with the values and gradients
//! written to a device buffer of the caller's, ordered after the caller's
//! stream. The Python package's PyTorch path runs on this.

use super::soft_dtw::params;
use crate::gpu::{self, ForeignShape, Wanted};
use crate::{Backend, ComputeOptions, Device, Error, Float, Result, SoftDtw};

/// `count` series of `len` samples of `dims` values each, C-contiguous
/// (`count x len x dims`) at device address `address` on the GPU the call
/// computes on ([`soft_dtw_pairs_on_device`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceBatchRef {
    pub address: u64,
    pub count: usize,
    pub len: usize,
    pub dims: usize,
}

/// What [`soft_dtw_pairs_on_device`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftDtwOutputs {
    /// The values only.
    Values,
    /// The values and the gradients with respect to `x`.
    GradientX,
    /// The values and the gradients with respect to `x` and `y`.
    GradientXY,
}

impl SoftDtwOutputs {
    fn wanted(self) -> Wanted {
        match self {
            SoftDtwOutputs::Values => Wanted::Values,
            SoftDtwOutputs::GradientX => Wanted::Gradients { with_y: false },
            SoftDtwOutputs::GradientXY => Wanted::Gradients { with_y: true },
        }
    }
}

fn shape(batch: &DeviceBatchRef) -> ForeignShape {
    ForeignShape {
        address: batch.address,
        count: batch.count,
        len: batch.len,
        dims: batch.dims,
    }
}

/// The values an output buffer of [`soft_dtw_pairs_on_device`] holds, in
/// this order (`p` pairs, `x` and `y` values of `count * len * dims`):
///
/// - the values: `p` of `sdtw(x_k, y_k)`; for the divergence then `p` of
///   `sdtw(x_k, x_k)` and `p` of `sdtw(y_k, y_k)`;
/// - with gradients: that of `sdtw(x_k, y_k)` with respect to `x` (laid out
///   like `x`), then with respect to `y` if asked for; for the divergence
///   then that of `sdtw(x_k, x_k)` with respect to its first argument
///   (laid out like `x`), and that of `sdtw(y_k, y_k)` (like `y`).
///
/// The divergence is `v_xy - (v_xx + v_yy) / 2`, its gradient with
/// respect to `x` `g_xy - g_xx` (and likewise for `y`): Soft-DTW is
/// symmetric, so both arguments of `sdtw(x, x)` contribute equally.
pub fn soft_dtw_device_output_len(
    x: &DeviceBatchRef,
    y: &DeviceBatchRef,
    divergence: bool,
    outputs: SoftDtwOutputs,
) -> usize {
    gpu::output_len(&shape(x), &shape(y), divergence, outputs.wanted())
}

/// Soft-DTW of series `k` of `x` against series `k` of `y` for every `k`
/// (the divergence's three values with [`SoftDtw::divergence`]), and with
/// `outputs` their gradients, computed on the first GPU of `options.gpus`
/// (GPU 0 by default: a tensor on `cuda:N` asks for `GpuSet::one(N)`) from
/// the batches where they are and written to the buffer at device address `out`, laid out as
/// [`soft_dtw_device_output_len`] says. The work starts after what was
/// queued on `wait_for` (a CUDA stream handle of the same context, e.g. a
/// framework's current stream; 0 is the legacy default stream), and the
/// call returns once it is queued, with `wait_for` ordered after it: what
/// the caller queues there next sees the results, and the caller's CPU
/// work meanwhile overlaps the GPU's. Without `wait_for` the call returns
/// when the work is done. The kernels are the paired kernels'
/// (`options.gpu_variant`: `stencil`, `warp` or `tiled`; for the gradient
/// `warp` or `stencil`), memory besides the caller's in
/// `options.gpu_memory_budget`.
///
/// Nothing is read on the host, so nothing is checked there: the caller
/// checks the batches for NaN or infinite values before (a NaN sample can
/// vanish in a minimum) and the values after (they overflow the precision
/// as `inf`), on its stream.
///
/// Errors: batches that differ in count or dims or are empty, a device
/// other than the GPU, no usable GPU, a failing device.
///
/// # Safety
/// `x.address` and `y.address` hold their batches and `out` holds
/// [`soft_dtw_device_output_len`] values of `T`, all device memory of the
/// primary context of the first GPU of `options.gpus` (the one CUDA runtimes such as PyTorch's use),
/// valid until the work queued on `wait_for` after the call has run (the
/// call's own work is ordered before it) and not written by others
/// meanwhile; `wait_for` is a stream of that context.
pub unsafe fn soft_dtw_pairs_on_device<T: Float>(
    x: DeviceBatchRef,
    y: DeviceBatchRef,
    metric: SoftDtw,
    outputs: SoftDtwOutputs,
    out: u64,
    wait_for: Option<u64>,
    options: &ComputeOptions,
) -> Result<()> {
    if x.count != y.count {
        return Err(Error::InvalidInput(format!(
            "paired batches need as many series in x as in y: x has {}, y has {}",
            x.count, y.count
        )));
    }
    if x.dims != y.dims {
        return Err(Error::DimensionMismatch {
            first: x.dims,
            second: y.dims,
        });
    }
    for (name, batch) in [("x", &x), ("y", &y)] {
        if batch.count == 0 || batch.len == 0 || batch.dims == 0 {
            return Err(Error::InvalidInput(format!(
                "{name} is empty ({} series of {} samples of {} values)",
                batch.count, batch.len, batch.dims
            )));
        }
        if batch.len > u32::MAX as usize {
            return Err(Error::InvalidInput(format!(
                "{name} has series of {} samples; at most {} are supported",
                batch.len,
                u32::MAX
            )));
        }
    }
    if options.device == Device::Cpu {
        return Err(Error::InvalidInput(
            "batches in GPU memory are computed on the GPU; device must be the GPU or auto".into(),
        ));
    }
    let Backend::Gpu(gpu) = Backend::resolve_on(Device::Gpu, options.gpus)? else {
        unreachable!("Device::Gpu resolves to a GPU or an error")
    };
    let params = params::<T>(&metric)?;
    let shapes = (shape(&x), shape(&y));
    let wait_for = wait_for.map(|stream| stream as cudarc::driver::sys::CUstream);
    // SAFETY: passed on from the caller.
    unsafe {
        gpu::paired_on_device(
            gpu,
            options.gpu_variant,
            params,
            shapes,
            metric.is_divergence(),
            outputs.wanted(),
            out,
            wait_for,
            options.gpu_memory_budget,
        )
    }
}
