//! Paired Soft-DTW of CUDA tensors read in place (torch's), its results
//! written to a CUDA buffer of the caller's.

use crate::errors::{invalid, py_error};
use crate::inputs::{dispatch, precision, soft_dtw};
use pyo3::prelude::*;
use timewarp::{ComputeOptions, Device, DeviceBatchRef, GpuSet, SoftDtwOutputs};

fn device_batch(address: u64, shape: (usize, usize, usize)) -> DeviceBatchRef {
    DeviceBatchRef {
        address,
        count: shape.0,
        len: shape.1,
        dims: shape.2,
    }
}

fn soft_dtw_outputs(name: &str) -> PyResult<SoftDtwOutputs> {
    match name {
        "values" => Ok(SoftDtwOutputs::Values),
        "gradient_x" => Ok(SoftDtwOutputs::GradientX),
        "gradient_xy" => Ok(SoftDtwOutputs::GradientXY),
        other => Err(invalid(format!(
            "outputs {other:?}: expected values, gradient_x or gradient_xy"
        ))),
    }
}

/// Values of the output buffer `soft_dtw_pairs_cuda` writes (layout:
/// `timewarp::soft_dtw_device_output_len`).
#[pyfunction]
pub fn soft_dtw_cuda_output_len(
    x_shape: (usize, usize, usize),
    y_shape: (usize, usize, usize),
    divergence: bool,
    outputs: &str,
) -> PyResult<usize> {
    Ok(timewarp::soft_dtw_device_output_len(
        &device_batch(0, x_shape),
        &device_batch(0, y_shape),
        divergence,
        soft_dtw_outputs(outputs)?,
    ))
}

/// Paired Soft-DTW of two C-contiguous `count x len x dims` CUDA tensors
/// on GPU `gpu` (the tensors' `cuda:N`), read in place, results written to the CUDA buffer `out`,
/// after the work queued on `stream`, which is ordered after this work;
/// returns once it is queued. The Python layer passes tensors it has
/// checked (device, dtype, contiguity, finiteness, the output's size) and
/// checks the values.
#[pyfunction]
#[pyo3(signature = (x, x_shape, y, y_shape, precision_name, gamma, band, divergence, outputs, out, stream, gpu))]
#[allow(clippy::too_many_arguments)]
pub fn soft_dtw_pairs_cuda(
    py: Python<'_>,
    x: u64,
    x_shape: (usize, usize, usize),
    y: u64,
    y_shape: (usize, usize, usize),
    precision_name: &str,
    gamma: f64,
    band: Option<i64>,
    divergence: bool,
    outputs: &str,
    out: u64,
    stream: u64,
    gpu: usize,
) -> PyResult<()> {
    let soft = soft_dtw(gamma, band, divergence)?;
    let wanted = soft_dtw_outputs(outputs)?;
    let precision = precision(precision_name)?;
    let (x, y) = (device_batch(x, x_shape), device_batch(y, y_shape));
    let options = ComputeOptions::on(Device::Gpu).with_gpus(GpuSet::one(gpu).map_err(py_error)?);
    let result = py.detach(|| {
        dispatch!(precision, |()| {
            // SAFETY: the Python layer passes live, contiguous CUDA tensors
            // of these shapes on GPU `gpu` (torch's allocations, in its
            // primary context), an output of `soft_dtw_cuda_output_len` values, and
            // torch's current stream of that device, which waits for this
            // work before anything else of torch's runs on it (torch reuses
            // the memory of a freed tensor for work on the stream that
            // allocated it).
            unsafe {
                timewarp::soft_dtw_pairs_on_device::<T>(
                    x,
                    y,
                    soft,
                    wanted,
                    out,
                    Some(stream),
                    &options,
                )
            }
        })
    });
    result.map_err(py_error)
}
