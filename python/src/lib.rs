//! `timewarp._timewarp`: the Rust side of the Python package. It takes
//! batches the Python layer (`timewarp/_core.py`) has already normalised
//! (a C-contiguous float32 or float64 array of `n x length x dims`, or a
//! list of `length x dims` arrays of one dtype) and calls the timewarp
//! crate with the GIL released. Every error is a `TimewarpError` (a
//! `ValueError`) with the crate's one-line message, but a result too large
//! for the host's memory, a `MemoryError`.

mod paths;
mod search;

use ndarray::Array2;
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2, PyReadonlyArray3, ToPyArray};
use pyo3::create_exception;
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use timewarp::{
    ComputeOptions, Device, Dtw, Error, Float, GpuSet, Metric, ResidentSet, SeriesSet, SoftDtw,
    Twed,
};

// Named by its full module path, so that pickle finds the class again
// (`timewarp._timewarp.TimewarpError`): errors raised in another process (a
// Dask worker, multiprocessing) arrive as this class, not as a copy.
create_exception!(
    timewarp._timewarp,
    TimewarpError,
    PyValueError,
    "Bad input or parameters, no usable GPU, or a failing device: the message says which."
);

fn py_error(error: Error) -> PyErr {
    match error {
        // Python's own exception for it, which callers already handle.
        Error::OutOfMemory { .. } => PyMemoryError::new_err(error.to_string()),
        _ => TimewarpError::new_err(error.to_string()),
    }
}

fn invalid(message: impl Into<String>) -> PyErr {
    TimewarpError::new_err(message.into())
}

/// Work of more cells than this runs on a thread of its own, so that
/// Ctrl-C can stop it; less finishes sooner than the thread would start.
const INTERRUPTIBLE_CELLS: f64 = 1e7;

/// `work` (of about `cells` cells) with the GIL released. Large work runs
/// on a thread of its own while this one checks every 50 ms for a signal
/// (Ctrl-C): then the computation is asked to stop at its next tile
/// (`timewarp::interrupt`), and the signal's exception (KeyboardInterrupt)
/// is raised once it has.
fn compute<T: Send>(
    py: Python<'_>,
    cells: f64,
    work: impl FnOnce() -> timewarp::Result<T> + Send,
) -> PyResult<T> {
    if cells < INTERRUPTIBLE_CELLS {
        return py.detach(work).map_err(py_error);
    }
    std::thread::scope(|scope| {
        let (done, finished) = std::sync::mpsc::channel();
        // Shared with the closures that wait without the GIL.
        let finished = std::sync::Mutex::new(finished);
        let wait = |timeout: Option<std::time::Duration>| {
            let finished = finished
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match timeout {
                Some(timeout) => finished.recv_timeout(timeout),
                None => finished
                    .recv()
                    .map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected),
            }
        };
        scope.spawn(move || {
            let _ = done.send(work());
        });
        loop {
            let waited = py.detach(|| wait(Some(std::time::Duration::from_millis(50))));
            match waited {
                Ok(result) => return result.map_err(py_error),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        // Asked again until the computation ends: the
                        // signal may come before it has started (a busy
                        // machine), when an interrupt reaches nothing.
                        loop {
                            timewarp::interrupt();
                            let waited =
                                py.detach(|| wait(Some(std::time::Duration::from_millis(50))));
                            if !matches!(waited, Err(std::sync::mpsc::RecvTimeoutError::Timeout)) {
                                return Err(signal);
                            }
                        }
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(invalid("the computation's thread ended without a result"));
                }
            }
        }
    })
}

/// Cells of the matrices of `a` against `b` (or itself).
fn cells<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>) -> f64 {
    let a_samples = a.total_samples() as f64;
    match b {
        Some(b) => a_samples * b.total_samples() as f64,
        None => a_samples * a_samples / 2.0,
    }
}

/// A batch of series in one of the two precisions.
enum Batch {
    F32(SeriesSet<f32>),
    F64(SeriesSet<f64>),
}

impl Batch {
    fn precision(&self) -> &'static str {
        match self {
            Batch::F32(_) => "float32",
            Batch::F64(_) => "float64",
        }
    }
}

/// Two batches the Python layer should have given one precision.
fn mixed_precisions(first: (&str, &Batch), second: (&str, &Batch)) -> PyErr {
    invalid(format!(
        "{} is {} but {} is {}: give both the same precision",
        first.0,
        first.1.precision(),
        second.0,
        second.1.precision()
    ))
}

/// `SeriesSet` from a normalised batch: a 3-D array or a list of 2-D
/// arrays, float32 or float64.
fn batch(object: &Bound<'_, PyAny>) -> PyResult<Batch> {
    if let Ok(array) = object.extract::<PyReadonlyArray3<'_, f32>>() {
        return SeriesSet::from_multivariate(array.as_array())
            .map(Batch::F32)
            .map_err(py_error);
    }
    if let Ok(array) = object.extract::<PyReadonlyArray3<'_, f64>>() {
        return SeriesSet::from_multivariate(array.as_array())
            .map(Batch::F64)
            .map_err(py_error);
    }
    let list = object
        .cast::<PyList>()
        .map_err(|_| invalid("expected a 3-D float32/float64 array or a list of 2-D arrays"))?;
    if list.is_empty() {
        return Err(invalid("the batch has no series"));
    }
    let first = list.get_item(0)?;
    if first.extract::<PyReadonlyArray2<'_, f32>>().is_ok() {
        series_list::<f32>(list).map(Batch::F32)
    } else {
        series_list::<f64>(list).map(Batch::F64)
    }
}

fn series_list<T: Float + numpy::Element>(list: &Bound<'_, PyList>) -> PyResult<SeriesSet<T>> {
    let arrays = list
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.extract::<PyReadonlyArray2<'_, T>>().map_err(|_| {
                invalid(format!(
                    "series {index} is not a 2-D {} array like the first",
                    T::NAME
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    SeriesSet::from_series(arrays.iter().map(|a| a.as_array())).map_err(py_error)
}

/// `"auto"`, `"cpu"`, `"gpu"` or `"gpu:N"` (`"cuda"` alike): the device,
/// and the GPUs (every usable one, or GPU `N`).
fn device(name: &str) -> PyResult<(Device, GpuSet)> {
    match name {
        "auto" => return Ok((Device::Auto, GpuSet::all())),
        "cpu" => return Ok((Device::Cpu, GpuSet::all())),
        "gpu" | "cuda" => return Ok((Device::Gpu, GpuSet::all())),
        _ => {}
    }
    let ordinal = name
        .strip_prefix("gpu:")
        .or_else(|| name.strip_prefix("cuda:"))
        .and_then(|n| n.parse::<usize>().ok());
    match ordinal {
        Some(ordinal) => Ok((Device::Gpu, GpuSet::one(ordinal).map_err(py_error)?)),
        None => Err(invalid(format!(
            "device {name:?}: expected \"auto\", \"cpu\", \"gpu\" or \"gpu:N\""
        ))),
    }
}

/// The measure from its name and parameters, as the Python API names them.
#[allow(clippy::too_many_arguments)]
fn metric(
    name: &str,
    gamma: f64,
    band: Option<i64>,
    nu: f64,
    lmbda: f64,
    degree: f64,
    divergence: bool,
) -> PyResult<Metric> {
    let band = match band {
        None => None,
        Some(radius) if radius >= 0 => Some(radius as usize),
        Some(radius) => {
            return Err(invalid(format!(
                "band = {radius}: the Sakoe-Chiba radius must be >= 0"
            )))
        }
    };
    let metric = match name {
        "dtw" => Metric::Dtw(band.map_or_else(Dtw::new, Dtw::with_band)),
        "soft_dtw" | "softdtw" | "soft-dtw" => {
            let soft = SoftDtw::new(gamma).map_err(py_error)?;
            let soft = match band {
                Some(radius) => soft.with_band(radius),
                None => soft,
            };
            Metric::SoftDtw(if divergence { soft.divergence() } else { soft })
        }
        "twed" => {
            if band.is_some() {
                return Err(invalid(
                    "band applies to dtw and soft_dtw; TWED has no Sakoe-Chiba band",
                ));
            }
            Metric::Twed(Twed::new(nu, lmbda, degree).map_err(py_error)?)
        }
        other => {
            return Err(invalid(format!(
                "metric {other:?}: expected \"dtw\", \"twed\" or \"soft_dtw\""
            )))
        }
    };
    if divergence && !matches!(metric, Metric::SoftDtw(_)) {
        return Err(invalid(
            "normalize=True is the soft-DTW divergence: metric must be soft_dtw",
        ));
    }
    Ok(metric)
}

fn options(device_name: &str) -> PyResult<ComputeOptions> {
    let (device, gpus) = device(device_name)?;
    Ok(ComputeOptions::on(device).with_gpus(gpus))
}

/// The distance matrix of `a` against `b` (or `a` against itself).
#[pyfunction]
#[pyo3(signature = (a, b, metric_name, gamma, band, nu, lmbda, degree, divergence, device_name))]
#[allow(clippy::too_many_arguments)]
fn cdist<'py>(
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
    let b = b.map(batch).transpose()?;
    match (a, b) {
        (Batch::F32(a), None) => matrix(py, &a, None, metric, &options),
        (Batch::F64(a), None) => matrix(py, &a, None, metric, &options),
        (Batch::F32(a), Some(Batch::F32(b))) => matrix(py, &a, Some(&b), metric, &options),
        (Batch::F64(a), Some(Batch::F64(b))) => matrix(py, &a, Some(&b), metric, &options),
        (a, Some(b)) => Err(mixed_precisions(("a", &a), ("b", &b))),
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

/// Paired Soft-DTW: `sdtw(x_k, y_k)` for every `k`, and with `gradient` the
/// gradients with respect to `x` (and `y` with `with_respect_to_y`), each a
/// 3-D array when the batch's lengths are equal, else a list of 2-D ones.
#[pyfunction]
#[pyo3(signature = (x, y, gamma, band, divergence, device_name, gradient, with_respect_to_y))]
#[allow(clippy::too_many_arguments)]
fn soft_dtw_pairs<'py>(
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
    let Metric::SoftDtw(soft) = metric("soft_dtw", gamma, band, 0.0, 0.0, 1.0, divergence)? else {
        unreachable!("soft_dtw names Soft-DTW")
    };
    let options = options(device_name)?;
    match (batch(x)?, batch(y)?) {
        (Batch::F32(x), Batch::F32(y)) => {
            paired(py, &x, &y, soft, &options, gradient, with_respect_to_y)
        }
        (Batch::F64(x), Batch::F64(y)) => {
            paired(py, &x, &y, soft, &options, gradient, with_respect_to_y)
        }
        (x, y) => Err(mixed_precisions(("x", &x), ("y", &y))),
    }
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

fn device_batch(address: u64, shape: (usize, usize, usize)) -> timewarp::DeviceBatchRef {
    timewarp::DeviceBatchRef {
        address,
        count: shape.0,
        len: shape.1,
        dims: shape.2,
    }
}

fn soft_dtw_outputs(name: &str) -> PyResult<timewarp::SoftDtwOutputs> {
    match name {
        "values" => Ok(timewarp::SoftDtwOutputs::Values),
        "gradient_x" => Ok(timewarp::SoftDtwOutputs::GradientX),
        "gradient_xy" => Ok(timewarp::SoftDtwOutputs::GradientXY),
        other => Err(invalid(format!(
            "outputs {other:?}: expected values, gradient_x or gradient_xy"
        ))),
    }
}

/// Values of the output buffer `soft_dtw_pairs_cuda` writes (layout:
/// `timewarp::soft_dtw_device_output_len`).
#[pyfunction]
fn soft_dtw_cuda_output_len(
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
/// on GPU 0, read in place, results written to the CUDA buffer `out`,
/// after the work queued on `stream`, which is ordered after this work;
/// returns once it is queued. The Python layer passes tensors it has
/// checked (device, dtype, contiguity, finiteness, the output's size) and
/// checks the values.
#[pyfunction]
#[pyo3(signature = (x, x_shape, y, y_shape, precision, gamma, band, divergence, outputs, out, stream))]
#[allow(clippy::too_many_arguments)]
fn soft_dtw_pairs_cuda(
    py: Python<'_>,
    x: u64,
    x_shape: (usize, usize, usize),
    y: u64,
    y_shape: (usize, usize, usize),
    precision: &str,
    gamma: f64,
    band: Option<i64>,
    divergence: bool,
    outputs: &str,
    out: u64,
    stream: u64,
) -> PyResult<()> {
    let Metric::SoftDtw(soft) = metric("soft_dtw", gamma, band, 0.0, 0.0, 1.0, divergence)? else {
        unreachable!("soft_dtw names Soft-DTW")
    };
    let wanted = soft_dtw_outputs(outputs)?;
    let (x, y) = (device_batch(x, x_shape), device_batch(y, y_shape));
    let options = ComputeOptions::on(Device::Gpu);
    // SAFETY: the Python layer passes live, contiguous CUDA tensors of
    // these shapes on GPU 0 (torch's allocations, in the primary context),
    // an output of `soft_dtw_cuda_output_len` values, and torch's current
    // stream of that device, which waits for this work before anything
    // else of torch's runs on it (torch reuses the memory of a freed
    // tensor for work on the stream that allocated it).
    let result = py.detach(|| unsafe {
        match precision {
            "float32" => timewarp::soft_dtw_pairs_on_device::<f32>(
                x,
                y,
                soft,
                wanted,
                out,
                Some(stream),
                &options,
            ),
            "float64" => timewarp::soft_dtw_pairs_on_device::<f64>(
                x,
                y,
                soft,
                wanted,
                out,
                Some(stream),
                &options,
            ),
            other => Err(Error::InvalidInput(format!(
                "precision {other:?}: expected float32 or float64"
            ))),
        }
    });
    result.map_err(py_error)
}

/// A batch kept where computations run: in GPU memory when uploaded to a
/// GPU, else on the host. Queries are compared with it without moving it.
#[pyclass(module = "timewarp._timewarp", frozen)]
struct Resident {
    set: ResidentBatch,
    device: String,
}

enum ResidentBatch {
    F32(ResidentSet<f32>),
    F64(ResidentSet<f64>),
}

#[pymethods]
impl Resident {
    #[new]
    #[pyo3(signature = (series, device_name))]
    fn new(py: Python<'_>, series: &Bound<'_, PyAny>, device_name: &str) -> PyResult<Self> {
        let options = options(device_name)?;
        let set = match batch(series)? {
            Batch::F32(set) => ResidentBatch::F32(
                py.detach(|| timewarp::upload(&set, &options))
                    .map_err(py_error)?,
            ),
            Batch::F64(set) => ResidentBatch::F64(
                py.detach(|| timewarp::upload(&set, &options))
                    .map_err(py_error)?,
            ),
        };
        let on_gpu = match &set {
            ResidentBatch::F32(set) => set.on_gpu(),
            ResidentBatch::F64(set) => set.on_gpu(),
        };
        let device = if on_gpu { "gpu:0" } else { "cpu" }.to_string();
        Ok(Self { set, device })
    }

    /// Where the batch lives: `"gpu:0"` or `"cpu"`.
    #[getter]
    fn device(&self) -> &str {
        &self.device
    }

    fn __len__(&self) -> usize {
        match &self.set {
            ResidentBatch::F32(set) => set.len(),
            ResidentBatch::F64(set) => set.len(),
        }
    }

    /// `"float32"` or `"float64"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        match &self.set {
            ResidentBatch::F32(_) => "float32",
            ResidentBatch::F64(_) => "float64",
        }
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
        match (&self.set, batch(queries)?) {
            (ResidentBatch::F32(set), Batch::F32(queries)) => {
                let cells = queries.total_samples() as f64 * set.total_samples() as f64;
                let matrix = compute(py, cells, || {
                    timewarp::distance_matrix_resident(&queries, set, metric, &options)
                })?;
                Ok(matrix.into_pyarray(py).into_any())
            }
            (ResidentBatch::F64(set), Batch::F64(queries)) => {
                let cells = queries.total_samples() as f64 * set.total_samples() as f64;
                let matrix = compute(py, cells, || {
                    timewarp::distance_matrix_resident(&queries, set, metric, &options)
                })?;
                Ok(matrix.into_pyarray(py).into_any())
            }
            (_, queries) => Err(invalid(format!(
                "the queries are {} but the resident series {}",
                queries.precision(),
                self.dtype()
            ))),
        }
    }

    /// The `k` nearest resident series of each query, nearest first (ties
    /// by index): `(distances, indices)`, `queries x k` each; only a block
    /// of the distance matrix exists at a time.
    #[pyo3(signature = (queries, k, metric_name, gamma, band, nu, lmbda, degree))]
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
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let metric = metric(metric_name, gamma, band, nu, lmbda, degree, false)?;
        let options = ComputeOptions::default();
        let indices = |found: &Array2<usize>| found.mapv(|i| i as i64).into_pyarray(py).into_any();
        match (&self.set, batch(queries)?) {
            (ResidentBatch::F32(set), Batch::F32(queries)) => {
                let cells = queries.total_samples() as f64 * set.total_samples() as f64;
                let found = compute(py, cells, || {
                    timewarp::nearest_neighbours(&queries, set, k, metric, &options)
                })?;
                let at = indices(&found.indices);
                Ok((found.distances.into_pyarray(py).into_any(), at))
            }
            (ResidentBatch::F64(set), Batch::F64(queries)) => {
                let cells = queries.total_samples() as f64 * set.total_samples() as f64;
                let found = compute(py, cells, || {
                    timewarp::nearest_neighbours(&queries, set, k, metric, &options)
                })?;
                let at = indices(&found.indices);
                Ok((found.distances.into_pyarray(py).into_any(), at))
            }
            (_, queries) => Err(invalid(format!(
                "the queries are {} but the resident series {}",
                queries.precision(),
                self.dtype()
            ))),
        }
    }
}

/// A data file (`.ts`, `.tsv`/`.txt`, `.csv`, `.npy`): the series as
/// float64 arrays of `length x dims`, and the labels (or None).
#[pyfunction]
fn load<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
) -> PyResult<(Bound<'py, PyList>, Option<Vec<String>>)> {
    let dataset = py
        .detach(|| timewarp::formats::read_dataset(&path))
        .map_err(py_error)?;
    let series: Vec<Bound<'py, PyArray2<f64>>> = dataset
        .series
        .into_iter()
        .map(|s| s.into_pyarray(py))
        .collect();
    Ok((PyList::new(py, series)?, dataset.labels))
}

/// The version, the kernel build and the GPUs found.
#[pyfunction]
fn info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use timewarp::gpu;
    let dict = PyDict::new(py);
    dict.set_item("version", env!("CARGO_PKG_VERSION"))?;
    match gpu::kernels_build_error() {
        None => {
            dict.set_item("kernels", "built")?;
            dict.set_item("ptx_target", gpu::ptx_target())?;
            dict.set_item("ptx_hash", gpu::ptx_hash())?;
            dict.set_item("kernel_compiler", gpu::ptx_rustc_version())?;
            dict.set_item("kernel_toolchain", gpu::ptx_toolchain())?;
        }
        Some(reason) => dict.set_item("kernels", format!("not built: {reason}"))?,
    }
    let gpus = PyList::empty(py);
    match gpu::list_gpus() {
        Ok(found) => {
            for info in found {
                let entry = PyDict::new(py);
                entry.set_item("index", info.ordinal)?;
                entry.set_item("name", &info.name)?;
                entry.set_item(
                    "compute_capability",
                    (info.compute_capability.0, info.compute_capability.1),
                )?;
                entry.set_item("memory_bytes", info.total_memory)?;
                let usable = if info.ordinal == 0 {
                    gpu::Gpu::get().map(|_| ()).map_err(|e| e.to_string())
                } else {
                    info.usable()
                };
                entry.set_item("usable", usable.is_ok())?;
                entry.set_item("reason", usable.err())?;
                gpus.append(entry)?;
            }
            dict.set_item("gpu_error", py.None())?;
        }
        Err(reason) => dict.set_item("gpu_error", reason)?,
    }
    dict.set_item("gpus", gpus)?;
    dict.set_item(
        "cpu_threads",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    )?;
    Ok(dict)
}

/// Whether GPU 0 is usable (the driver, a GPU, the kernels built).
#[pyfunction]
fn gpu_available() -> bool {
    timewarp::gpu::Gpu::get().is_ok()
}

#[pymodule]
fn _timewarp(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TimewarpError", m.py().get_type::<TimewarpError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(cdist, m)?)?;
    m.add_function(wrap_pyfunction!(soft_dtw_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(soft_dtw_pairs_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(soft_dtw_cuda_output_len, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(paths::dtw_path, m)?)?;
    m.add_function(wrap_pyfunction!(paths::twed_path, m)?)?;
    m.add_function(wrap_pyfunction!(paths::soft_dtw_alignment, m)?)?;
    m.add_function(wrap_pyfunction!(search::search, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_available, m)?)?;
    m.add_class::<Resident>()?;
    Ok(())
}
