//! The crate's errors as Python exceptions. The classes are defined once, in
//! `timewarp/_errors.py` (Python's multiple inheritance gives each its
//! builtin base: `ValueError`, `RuntimeError`, `MemoryError`, `OSError`),
//! and imported from there when first raised.

use pyo3::exceptions::{PyBaseException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use timewarp::Error;

pyo3::import_exception!(timewarp._errors, TimewarpError);
pyo3::import_exception!(timewarp._errors, InputError);
pyo3::import_exception!(timewarp._errors, GpuError);
pyo3::import_exception!(timewarp._errors, OutOfMemoryError);
pyo3::import_exception!(timewarp._errors, GpuOutOfMemoryError);
pyo3::import_exception!(timewarp._errors, FileError);

/// `error` as the exception of its kind, with the crate's one-line message.
pub fn py_error(error: Error) -> PyErr {
    let message = error.to_string();
    match error {
        Error::InvalidParameter { .. }
        | Error::InvalidInput(_)
        | Error::DimensionMismatch { .. }
        | Error::Overflow { .. }
        | Error::Parse { .. }
        | Error::NotOnGpu(_) => InputError::new_err(message),
        Error::GpuUnavailable(_)
        | Error::Gpu { .. }
        | Error::Launch { .. }
        | Error::DeviceLost { .. }
        | Error::DeviceWait { .. }
        | Error::GpuFailure(_) => GpuError::new_err(message),
        Error::GpuOutOfMemory { .. } => GpuOutOfMemoryError::new_err(message),
        Error::OutOfMemory { .. } => OutOfMemoryError::new_err(message),
        // Python's own exception for it, which callers already handle, and
        // which `except Exception` does not catch.
        Error::Interrupted => PyKeyboardInterrupt::new_err(message),
        // OSError's arguments, so that `errno`, `strerror` and `filename`
        // are set as Python's own file errors set them.
        Error::Io { path, source } => match source.raw_os_error() {
            Some(errno) => {
                let text = source.to_string();
                let reason = text
                    .strip_suffix(&format!(" (os error {errno})"))
                    .unwrap_or(&text)
                    .to_string();
                FileError::new_err((errno, reason, path.display().to_string()))
            }
            None => FileError::new_err(message),
        },
    }
}

/// Bad input found here rather than by the crate.
pub fn invalid(message: impl Into<String>) -> PyErr {
    InputError::new_err(message.into())
}

/// An error of the crate's kind `kind`, as raised to Python: lets the tests
/// check the mapping of the GPU's errors on machines without one.
#[pyfunction]
#[pyo3(name = "_example_error")]
pub fn example_error(py: Python<'_>, kind: &str) -> PyResult<Py<PyBaseException>> {
    use cudarc::driver::sys::CUresult;
    use timewarp::DriverError;
    let error = match kind {
        "invalid_parameter" => timewarp::SoftDtw::new(-1.0).map(|_| ()).unwrap_err(),
        "gpu_unavailable" => Error::GpuUnavailable("no NVIDIA driver found".into()),
        "gpu" => Error::Gpu {
            call: "copying to the host".into(),
            source: DriverError(CUresult::CUDA_ERROR_INVALID_VALUE),
        },
        "gpu_out_of_memory" => Error::GpuOutOfMemory {
            what: "allocating device memory".into(),
            source: Some(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)),
        },
        "launch" => Error::Launch {
            call: "launching a kernel".into(),
            source: DriverError(CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
        },
        "device_lost" => Error::DeviceLost {
            call: "waiting for the device".into(),
            source: DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        },
        "device_wait" => Error::DeviceWait {
            kernel: "a kernel".into(),
            what: "the device was still busy".into(),
        },
        "gpu_failure" => Error::GpuFailure("a kernel left a result unwritten".into()),
        "interrupted" => Error::Interrupted,
        other => return Err(invalid(format!("no example error {other:?}"))),
    };
    Ok(py_error(error).into_value(py))
}
