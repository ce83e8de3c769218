//! `timewarp._timewarp`: the Rust side of the Python package. It takes
//! batches the Python layer (`timewarp/_core.py`) has already normalised
//! (a C-contiguous float32 or float64 array of `n x length x dims`, or a
//! list of `length x dims` arrays of one dtype) and calls the timewarp
//! crate with the GIL released. Errors are raised as the exceptions of
//! `timewarp/_errors.py` ([`errors`]), with the crate's one-line message.
//!
//! By job: [`inputs`] (batches, devices, measures, and the one f32/f64
//! dispatch), [`compute`] (the GIL released, Ctrl-C), [`matrices`]
//! (distance matrices, resident batches), [`soft_dtw`] (paired values and
//! gradients), [`tensors`] (CUDA tensors read in place), [`paths`]
//! (alignments of one pair); here, the module and what describes the
//! installation.

mod compute;
mod errors;
mod inputs;
mod matrices;
mod paths;
mod search;
mod soft_dtw;
mod tensors;

use numpy::{IntoPyArray, PyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// A data file (`.ts`, `.tsv`/`.txt`, `.csv`, `.npy`): the series as
/// float64 arrays of `length x dims`, and the labels (or None).
#[pyfunction]
fn load<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
) -> PyResult<(Bound<'py, PyList>, Option<Vec<String>>)> {
    let dataset = py
        .detach(|| timewarp::formats::read_dataset(&path))
        .map_err(errors::py_error)?;
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
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(matrices::cdist, m)?)?;
    m.add_function(wrap_pyfunction!(soft_dtw::soft_dtw_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(tensors::soft_dtw_pairs_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(tensors::soft_dtw_cuda_output_len, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(paths::dtw_path, m)?)?;
    m.add_function(wrap_pyfunction!(paths::twed_path, m)?)?;
    m.add_function(wrap_pyfunction!(paths::soft_dtw_alignment, m)?)?;
    m.add_function(wrap_pyfunction!(search::search, m)?)?;
    m.add_function(wrap_pyfunction!(search::subsequence_alignment, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_available, m)?)?;
    m.add_function(wrap_pyfunction!(errors::example_error, m)?)?;
    m.add_class::<matrices::Resident>()?;
    Ok(())
}
