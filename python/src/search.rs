//! Subsequence search (`timewarp.search`) and open-ended subsequence
//! alignment (`timewarp.subsequence_alignment`): the Python layer
//! (`timewarp/_search.py`) passes the query as a C-contiguous float64
//! `m x dims` array and the series as a C-contiguous float64 or float32
//! `length x dims` array (float32 is widened unit by unit, not copied).

use super::compute::compute;
use super::errors::invalid;
use super::inputs::device;
use super::matrices::pruning_dict;
use ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use timewarp::search::{
    subsequence_alignment as align, subsequences, Band, SearchOptions, SearchResult,
};

type Found<'py> = (
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<f64>>,
    Bound<'py, PyDict>,
);

/// The `k` best matches: (starts, distances, statistics).
#[pyfunction]
#[pyo3(signature = (query, series, band, band_is_radius, k, znorm, exclusion, device_name))]
#[allow(clippy::too_many_arguments)]
pub fn search<'py>(
    py: Python<'py>,
    query: PyReadonlyArray2<'py, f64>,
    series: &Bound<'py, PyAny>,
    band: f64,
    band_is_radius: bool,
    k: usize,
    znorm: bool,
    exclusion: Option<usize>,
    device_name: &str,
) -> PyResult<Found<'py>> {
    let band = match band_is_radius {
        true if band >= 0.0 => Band::Count(band as usize),
        true => return Err(invalid(format!("band = {band}: a radius is >= 0"))),
        false => Band::Fraction(band),
    };
    let mut options = SearchOptions::default()
        .with_band(band)
        .with_k(k)
        .with_znorm(znorm)
        .on(device(device_name)?.0);
    options.exclusion = exclusion;
    let query = query.as_array();
    let found = if let Ok(wide) = series.extract::<PyReadonlyArray2<'py, f64>>() {
        let wide = wide.as_array();
        let cells = (wide.nrows() * query.nrows()) as f64;
        compute(py, cells, || subsequences(query, &wide, &options))?
    } else {
        let narrow = series.extract::<PyReadonlyArray2<'py, f32>>()?;
        let narrow = narrow.as_array();
        let cells = (narrow.nrows() * query.nrows()) as f64;
        compute(py, cells, || subsequences(query, &narrow, &options))?
    };
    results(py, &found)
}

/// The best match of any length: (start, end, cost, path as `L x 2`).
#[pyfunction]
#[pyo3(signature = (query, series, device_name))]
pub fn subsequence_alignment<'py>(
    py: Python<'py>,
    query: PyReadonlyArray2<'py, f64>,
    series: &Bound<'py, PyAny>,
    device_name: &str,
) -> PyResult<(usize, usize, f64, Bound<'py, PyArray2<i64>>)> {
    let device = device(device_name)?.0;
    let query = query.as_array();
    let found = if let Ok(wide) = series.extract::<PyReadonlyArray2<'py, f64>>() {
        let wide = wide.as_array();
        let cells = wide.nrows() as f64 * query.nrows() as f64;
        compute(py, cells, || align(query, &wide, device))?
    } else {
        let narrow = series.extract::<PyReadonlyArray2<'py, f32>>()?;
        let narrow = narrow.as_array();
        let cells = narrow.nrows() as f64 * query.nrows() as f64;
        compute(py, cells, || align(query, &narrow, device))?
    };
    let flat = found
        .path
        .iter()
        .flat_map(|&(i, j)| [i as i64, j as i64])
        .collect();
    let path = Array2::from_shape_vec((found.path.len(), 2), flat).expect("two indices a cell");
    Ok((found.start, found.end, found.cost, path.into_pyarray(py)))
}

fn results<'py>(py: Python<'py>, found: &SearchResult) -> PyResult<Found<'py>> {
    let starts: Vec<i64> = found.matches.iter().map(|m| m.start as i64).collect();
    let distances: Vec<f64> = found.matches.iter().map(|m| m.distance).collect();
    let stats = pruning_dict(py, &found.stats)?;
    stats.set_item("radius", found.radius as u64)?;
    stats.set_item("exclusion", found.exclusion as u64)?;
    Ok((starts.into_pyarray(py), distances.into_pyarray(py), stats))
}
