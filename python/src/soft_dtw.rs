//! Paired Soft-DTW of host batches: the values, and the gradients with
//! respect to either batch.

use crate::compute::compute;
use crate::inputs::{batch, dispatch, mixed_precisions, options, soft_dtw};
use numpy::{IntoPyArray, PyArray2, ToPyArray};
use pyo3::prelude::*;
use pyo3::types::PyList;
use timewarp::{ComputeOptions, Float, SeriesSet, SoftDtw};

/// Paired Soft-DTW: `sdtw(x_k, y_k)` for every `k`, and with `gradient` the
/// gradients with respect to `x` (and `y` with `with_respect_to_y`), each a
/// 3-D array when the batch's lengths are equal, else a list of 2-D ones.
#[pyfunction]
#[pyo3(signature = (x, y, gamma, band, divergence, device_name, gradient, with_respect_to_y))]
#[allow(clippy::too_many_arguments)]
pub fn soft_dtw_pairs<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    gamma: f64,
    band: Option<i64>,
    divergence: bool,
    device_name: &str,
    gradient: bool,
    with_respect_to_y: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let soft = soft_dtw(gamma, band, divergence)?;
    let options = options(device_name)?;
    dispatch!(
        batch(x)?,
        batch(y)?,
        |x, y| paired(py, &x, &y, soft, &options, gradient, with_respect_to_y),
        |x, y| Err(mixed_precisions(("x", &x), ("y", &y)))
    )
}

fn paired<'py, T: Float + numpy::Element>(
    py: Python<'py>,
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    soft: SoftDtw,
    options: &ComputeOptions,
    gradient: bool,
    with_respect_to_y: bool,
) -> PyResult<Bound<'py, PyAny>> {
    // About the cells of the pairs (every pair as long as the longest).
    let cells = (x.len() * x.max_len() * y.max_len()) as f64;
    if !gradient {
        let values = compute(py, cells, || timewarp::soft_dtw_pairs(x, y, soft, options))?;
        return Ok(values.into_pyarray(py).into_any());
    }
    let result = compute(py, cells, || {
        timewarp::soft_dtw_pairs_gradient(x, y, soft, options, with_respect_to_y)
    })?;
    let grad_x = gradients(py, result.grad_x)?;
    let grad_y = result.grad_y.map(|g| gradients(py, g)).transpose()?;
    let values = result.values.into_pyarray(py).into_any();
    Ok((values, grad_x, grad_y).into_pyobject(py)?.into_any())
}

/// One 3-D array where the lengths are equal (the gradient's own buffer,
/// nothing copied), else a list of 2-D arrays.
fn gradients<'py, T: Float + numpy::Element>(
    py: Python<'py>,
    gradient: timewarp::BatchGradient<T>,
) -> PyResult<Bound<'py, PyAny>> {
    match gradient.into_array3() {
        Ok(array) => Ok(array.into_pyarray(py).into_any()),
        Err(gradient) => {
            let arrays: Vec<Bound<'py, PyArray2<T>>> =
                gradient.iter().map(|a| a.to_pyarray(py)).collect();
            Ok(PyList::new(py, arrays)?.into_any())
        }
    }
}
