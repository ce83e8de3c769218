//! Alignments of one pair: DTW's warping path, TWED's edit path and
//! Soft-DTW's expected alignment, in float64 (the Python layer,
//! `timewarp/_paths.py`, passes `length x dims` C-contiguous arrays, and
//! TWED's timestamps as contiguous vectors or `None`).

use crate::compute::compute;
use crate::errors::{invalid, py_error};
use crate::inputs::options;
use ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use timewarp::{Dtw, SoftDtw, Twed};

fn band_radius(band: Option<i64>) -> PyResult<Option<usize>> {
    match band {
        Some(r) if r < 0 => Err(invalid(format!("band = {r}: the band radius must be >= 0"))),
        other => Ok(other.map(|r| r as usize)),
    }
}

/// Cells of the pair's matrix: long pairs run where Ctrl-C stops them.
fn pair_cells<T>(x: &ndarray::ArrayView2<T>, y: &ndarray::ArrayView2<T>) -> f64 {
    x.nrows() as f64 * y.nrows() as f64
}

/// `(i, j)` cells as a `k x 2` int64 array.
fn cells<'py>(py: Python<'py>, path: &[(usize, usize)]) -> Bound<'py, PyArray2<i64>> {
    let flat = path
        .iter()
        .flat_map(|&(i, j)| [i as i64, j as i64])
        .collect();
    Array2::from_shape_vec((path.len(), 2), flat)
        .expect("two indices a cell")
        .into_pyarray(py)
}

#[pyfunction]
#[pyo3(signature = (x, y, band, device_name))]
pub fn dtw_path<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    band: Option<i64>,
    device_name: &str,
) -> PyResult<(Bound<'py, PyArray2<i64>>, f64)> {
    let dtw = band_radius(band)?.map_or_else(Dtw::new, Dtw::with_band);
    let options = options(device_name)?;
    let (x, y) = (x.as_array(), y.as_array());
    let alignment = compute(py, pair_cells(&x, &y), || {
        timewarp::dtw_path(x, y, dtw, &options)
    })?;
    Ok((cells(py, &alignment.path), alignment.value))
}

type EditPathParts<'py> = (
    Bound<'py, PyArray2<i64>>,
    Vec<&'static str>,
    Bound<'py, PyArray1<f64>>,
    f64,
);

#[pyfunction]
#[pyo3(signature = (x, y, nu, lmbda, degree, device_name, x_times, y_times))]
#[allow(clippy::too_many_arguments)]
pub fn twed_path<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    nu: f64,
    lmbda: f64,
    degree: f64,
    device_name: &str,
    x_times: Option<PyReadonlyArray1<'py, f64>>,
    y_times: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<EditPathParts<'py>> {
    let twed = Twed::new(nu, lmbda, degree).map_err(py_error)?;
    let options = options(device_name)?;
    let (x, y) = (x.as_array(), y.as_array());
    let (x_times, y_times) = (
        x_times.as_ref().map(|t| t.as_array()),
        y_times.as_ref().map(|t| t.as_array()),
    );
    let path = compute(py, pair_cells(&x, &y), || {
        timewarp::twed_path(x, y, x_times, y_times, twed, &options)
    })?;
    let positions: Vec<(usize, usize)> = path.edits.iter().map(|e| (e.i, e.j)).collect();
    let steps = path.edits.iter().map(|e| e.step.name()).collect();
    let costs: Vec<f64> = path.edits.iter().map(|e| e.cost).collect();
    Ok((
        cells(py, &positions),
        steps,
        costs.into_pyarray(py),
        path.value,
    ))
}

#[pyfunction]
#[pyo3(signature = (x, y, gamma, band, device_name))]
pub fn soft_dtw_alignment<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    gamma: f64,
    band: Option<i64>,
    device_name: &str,
) -> PyResult<(Bound<'py, PyArray2<f64>>, f64)> {
    let soft = SoftDtw::new(gamma).map_err(py_error)?;
    let soft = match band_radius(band)? {
        Some(r) => soft.with_band(r),
        None => soft,
    };
    let options = options(device_name)?;
    let (x, y) = (x.as_array(), y.as_array());
    let (matrix, value) = compute(py, pair_cells(&x, &y), || {
        timewarp::soft_dtw_alignment(x, y, soft, &options)
    })?;
    Ok((matrix.into_pyarray(py), value))
}
