//! Distance matrices: of two batches (or one against itself), and of
//! queries against a batch kept resident, with their nearest neighbours.

use crate::compute::{cells, compute};
use crate::inputs::{batch, dispatch, metric, mixed_precisions, options, PerPrecision};
use ndarray::Array2;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use timewarp::search::PruningStats;
use timewarp::{ComputeOptions, Float, Metric, ResidentSet, SeriesSet};

/// The distance matrix of `a` against `b` (or `a` against itself).
#[pyfunction]
#[pyo3(signature = (a, b, metric_name, gamma, band, nu, lmbda, degree, divergence, device_name))]
#[allow(clippy::too_many_arguments)]
pub fn cdist<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: Option<&Bound<'py, PyAny>>,
    metric_name: &str,
    gamma: f64,
    band: Option<i64>,
    nu: f64,
    lmbda: f64,
    degree: f64,
    divergence: bool,
    device_name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let metric = metric(metric_name, gamma, band, nu, lmbda, degree, divergence)?;
    let options = options(device_name)?;
    let a = batch(a)?;
    match b.map(batch).transpose()? {
        None => dispatch!(a, |a| matrix(py, &a, None, metric, &options)),
        Some(b) => dispatch!(
            a,
            b,
            |a, b| matrix(py, &a, Some(&b), metric, &options),
            |a, b| Err(mixed_precisions(("a", &a), ("b", &b)))
        ),
    }
}

fn matrix<'py, T: Float + numpy::Element>(
    py: Python<'py>,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    options: &ComputeOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let matrix = compute(py, cells(a, b), || {
        timewarp::distance_matrix(a, b, metric, options)
    })?;
    Ok(matrix.into_pyarray(py).into_any())
}

/// A batch kept where computations run: in GPU memory when uploaded to a
/// GPU, else on the host. Queries are compared with it without moving it.
#[pyclass(module = "timewarp._timewarp", frozen)]
pub struct Resident {
    set: PerPrecision<ResidentSet<f32>, ResidentSet<f64>>,
    device: String,
}

#[pymethods]
impl Resident {
    #[new]
    #[pyo3(signature = (series, device_name))]
    fn new(py: Python<'_>, series: &Bound<'_, PyAny>, device_name: &str) -> PyResult<Self> {
        let options = options(device_name)?;
        let set = dispatch!(batch(series)?, |set| {
            let resident = py.detach(|| timewarp::upload(&set, &options));
            resident
                .map(PerPrecision::from)
                .map_err(crate::errors::py_error)?
        });
        let on_gpu = dispatch!(&set, |set| set.on_gpu());
        let device = if on_gpu { "gpu:0" } else { "cpu" }.to_string();
        Ok(Self { set, device })
    }

    /// Where the batch lives: `"gpu:0"` or `"cpu"`.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    fn __len__(&self) -> usize {
        dispatch!(&self.set, |set| set.len())
    }

    /// `"float32"` or `"float64"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.set.precision()
    }

    /// The distances of `queries` (rows) to the resident series (columns).
    #[pyo3(signature = (queries, metric_name, gamma, band, nu, lmbda, degree))]
    #[allow(clippy::too_many_arguments)]
    fn cdist<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        metric_name: &str,
        gamma: f64,
        band: Option<i64>,
        nu: f64,
        lmbda: f64,
        degree: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let metric = metric(metric_name, gamma, band, nu, lmbda, degree, false)?;
        let options = ComputeOptions::default();
        dispatch!(
            &self.set,
            batch(queries)?,
            |set, queries| {
                let cells = queries.total_samples() as f64 * set.total_samples() as f64;
                let matrix = compute(py, cells, || {
                    timewarp::distance_matrix_resident(&queries, set, metric, &options)
                })?;
                Ok(matrix.into_pyarray(py).into_any())
            },
            |set, queries| Err(mixed_precisions(
                ("the queries", &queries),
                ("the resident series", set)
            ))
        )
    }

    /// The `k` nearest resident series of each query, nearest first (ties
    /// by index): `(distances, indices, pruning)`, `queries x k` each, and
    /// what the lower bounds pruned (a dict of counts; `None` where every
    /// distance was computed: no band, not DTW, the GPU, or
    /// `brute_force`); only a block of the distance matrix exists at a
    /// time.
    #[pyo3(signature = (queries, k, metric_name, gamma, band, nu, lmbda, degree, brute_force=false))]
    #[allow(clippy::too_many_arguments)]
    fn kneighbors<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: usize,
        metric_name: &str,
        gamma: f64,
        band: Option<i64>,
        nu: f64,
        lmbda: f64,
        degree: f64,
        brute_force: bool,
    ) -> PyResult<Neighbours<'py>> {
        let metric = metric(metric_name, gamma, band, nu, lmbda, degree, false)?;
        let options = ComputeOptions {
            brute_force,
            ..ComputeOptions::default()
        };
        let indices = |found: &Array2<usize>| found.mapv(|i| i as i64).into_pyarray(py).into_any();
        dispatch!(
            &self.set,
            batch(queries)?,
            |set, queries| {
                let cells = queries.total_samples() as f64 * set.total_samples() as f64;
                let found = compute(py, cells, || {
                    timewarp::nearest_neighbours(&queries, set, k, metric, &options)
                })?;
                let at = indices(&found.indices);
                let pruning = found.pruning.map(|s| pruning_dict(py, &s)).transpose()?;
                Ok((found.distances.into_pyarray(py).into_any(), at, pruning))
            },
            |set, queries| Err(mixed_precisions(
                ("the queries", &queries),
                ("the resident series", set)
            ))
        )
    }
}

/// `kneighbors`' result: distances, indices, the pruning counts.
type Neighbours<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyDict>>,
);

/// The pruning counts as a dict of the names of [`PruningStats`]' fields.
pub(crate) fn pruning_dict<'py>(py: Python<'py>, s: &PruningStats) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, value) in [
        ("candidates", s.candidates),
        ("kim", s.kim),
        ("keogh_query", s.keogh_query),
        ("keogh_data", s.keogh_data),
        ("dtw", s.dtw),
        ("abandoned", s.abandoned),
    ] {
        dict.set_item(name, value)?;
    }
    Ok(dict)
}

impl From<ResidentSet<f32>> for PerPrecision<ResidentSet<f32>, ResidentSet<f64>> {
    fn from(set: ResidentSet<f32>) -> Self {
        PerPrecision::F32(set)
    }
}

impl From<ResidentSet<f64>> for PerPrecision<ResidentSet<f32>, ResidentSet<f64>> {
    fn from(set: ResidentSet<f64>) -> Self {
        PerPrecision::F64(set)
    }
}
