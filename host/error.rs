//! The crate's error type.
//!
//! A failing CUDA driver call keeps the driver's error ([`DriverError`]) as
//! the error's [`source`](std::error::Error::source), classified by its code:
//! out of memory ([`Error::GpuOutOfMemory`]), a launch the driver refused
//! ([`Error::Launch`]), a device that this process can no longer use
//! ([`Error::DeviceLost`]), anything else ([`Error::Gpu`]). The GPU runtime
//! names the call with [`DriverCall::call`] (`stream.alloc(n).call("...")?`).

use cudarc::driver::sys::CUresult;
pub use cudarc::driver::DriverError;
use std::path::PathBuf;

/// Everything that can go wrong, as values: bad parameters, bad input, no
/// usable GPU, a failing device call, files that don't parse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter outside its domain, e.g. a negative `nu`.
    #[error("invalid parameter {name} = {value}: {requirement}")]
    InvalidParameter {
        name: &'static str,
        value: f64,
        requirement: &'static str,
    },
    /// Input data that no measure can take: empty series, NaN or infinite
    /// values, timestamps out of order, shapes that don't agree.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The two batches have samples of different dimensions.
    #[error("dimension mismatch: the first batch has {first} dimensions per sample, the second {second}")]
    DimensionMismatch { first: usize, second: usize },
    /// Finite inputs gave a non-finite distance: the precision overflowed.
    #[error(
        "a distance overflowed {precision} (finite inputs, infinite result); {}",
        overflow_advice(precision)
    )]
    Overflow { precision: &'static str },
    /// The GPU path was asked for but cannot run here.
    #[error("no usable GPU: {0}")]
    GpuUnavailable(String),
    /// A CUDA driver call failed while computing, for a reason none of the
    /// variants below covers (an invalid value, a driver that refuses the
    /// PTX, ...). `call` names it; `source` is the driver's error.
    #[error("GPU error: {call} failed: {}", DriverCode(source))]
    Gpu { call: String, source: DriverError },
    /// The GPU's memory does not hold what the computation needs: the driver
    /// refused an allocation (`source`: its `CUDA_ERROR_OUT_OF_MEMORY`), or
    /// the computation was refused before allocating anything because it
    /// needs more than the memory budget (`source`: `None`). A smaller batch,
    /// budget or tile, or the CPU, may succeed.
    #[error("GPU out of memory: {what}{}", source.as_ref().map(|s| format!(" ({})", DriverCode(s))).unwrap_or_default())]
    GpuOutOfMemory {
        what: String,
        source: Option<DriverError>,
    },
    /// The driver refused to launch a kernel (too many resources asked of
    /// the device, a cooperative grid larger than the device holds, ...).
    #[error("GPU kernel launch failed: {call}: {}", DriverCode(source))]
    Launch { call: String, source: DriverError },
    /// The GPU can no longer be used by this process: a kernel faulted
    /// (an illegal address or instruction), the device reported an
    /// uncorrectable error, or its context is gone. The driver keeps such
    /// errors for the life of the context, so every later call on this GPU
    /// fails too; other GPUs and the CPU still work.
    #[error(
        "the GPU is lost to this process: {call} failed: {}",
        DriverCode(source)
    )]
    DeviceLost { call: String, source: DriverError },
    /// The GPU could not compute the result, as the host found without an
    /// error from the driver: a kernel left a result unwritten, or the GPU
    /// lacks what a variant needs (cooperative launches, shared memory).
    #[error("GPU failure: {0}")]
    GpuFailure(String),
    /// A computation asked for on the GPU that has no GPU implementation
    /// yet (it runs on the CPU with `Device::Cpu` or `Device::Auto`).
    #[error("{0} does not run on the GPU yet: ask for the CPU (Device::Cpu or Device::Auto)")]
    NotOnGpu(&'static str),
    /// A wait for the device passed its bound: a warp of `kernel` waited
    /// longer than `hw::WAIT_BOUND_NS` for another's value, or the host
    /// waited longer than [`crate::gpu::device_wait_bound`] for the device.
    /// The results of the call are discarded; the GPU stays usable.
    #[error("GPU wait past its bound in {kernel}: {what}")]
    DeviceWait { kernel: String, what: String },
    /// A data file that does not parse.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// A result too large for the host's memory, refused before any work
    /// instead of aborting the process.
    #[error("out of memory: the {rows} x {cols} result needs {bytes} bytes, more than the host can allocate")]
    OutOfMemory {
        rows: usize,
        cols: usize,
        bytes: u128,
    },
    /// The computation was stopped by [`crate::interrupt`] (e.g. Ctrl-C).
    #[error("interrupted")]
    Interrupted,
    /// A file that cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Error {
    /// The error of driver call `call` that failed with `source`, its
    /// variant chosen by the driver's code.
    pub(crate) fn driver(call: impl Into<String>, source: DriverError) -> Self {
        let call = call.into();
        match source.0 {
            CUresult::CUDA_ERROR_OUT_OF_MEMORY => Error::GpuOutOfMemory {
                what: call,
                source: Some(source),
            },
            code if is_sticky(code) => Error::DeviceLost { call, source },
            CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
            | CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
            | CUresult::CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING => Error::Launch { call, source },
            _ => Error::Gpu { call, source },
        }
    }

    /// The error of a kernel launch that failed with `source`: a launch
    /// error unless the code says the memory or the device is at fault.
    pub(crate) fn launch(call: impl Into<String>, source: DriverError) -> Self {
        match Error::driver(call, source) {
            Error::Gpu { call, source } => Error::Launch { call, source },
            other => other,
        }
    }

    /// A computation refused before it allocates anything, as it needs more
    /// device memory than it may take (`what` says how much, of what).
    pub(crate) fn gpu_memory(what: impl Into<String>) -> Self {
        Error::GpuOutOfMemory {
            what: what.into(),
            source: None,
        }
    }

    /// Whether the GPU failed, rather than the input or the caller: the
    /// same work may succeed on another GPU or on the CPU. A device wait
    /// past its bound is not counted, as the work that stalled would stall
    /// again.
    pub fn is_gpu_failure(&self) -> bool {
        matches!(
            self,
            Error::Gpu { .. }
                | Error::GpuOutOfMemory { .. }
                | Error::Launch { .. }
                | Error::DeviceLost { .. }
                | Error::GpuFailure(_)
        )
    }

    /// Whether memory ran out: the host's, for a result too large
    /// ([`Error::OutOfMemory`]), or the GPU's ([`Error::GpuOutOfMemory`]).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(
            self,
            Error::OutOfMemory { .. } | Error::GpuOutOfMemory { .. }
        )
    }

    /// The text of a GPU failure that says what failed (the call, what ran
    /// out, the message), for the GPU runtime to say on which GPU; None
    /// for other errors.
    pub(crate) fn gpu_failure_text(&mut self) -> Option<&mut String> {
        match self {
            Error::Gpu { call, .. }
            | Error::Launch { call, .. }
            | Error::DeviceLost { call, .. } => Some(call),
            Error::GpuOutOfMemory { what, .. } => Some(what),
            Error::GpuFailure(message) => Some(message),
            _ => None,
        }
    }
}

/// Whether the driver keeps error `code` for the rest of the context's
/// life (its "sticky" errors: a faulting kernel, a failing device, a
/// context gone), so that the GPU is lost to this process.
fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
            | CUresult::CUDA_ERROR_DEINITIALIZED
            | CUresult::CUDA_ERROR_DEVICE_UNAVAILABLE
    )
}

/// A driver error as its code's name and, where the driver library is
/// loaded, the driver's description. `DriverError`'s own `Display` asks
/// the driver for the description unconditionally, and cudarc panics when
/// the library is absent, so an error made without a driver (in tests, or
/// kept and shown on another machine) is shown by its code alone.
struct DriverCode<'a>(&'a DriverError);

impl std::fmt::Display for DriverCode<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0 .0)?;
        if driver_loaded() {
            if let Ok(description) = self.0.error_string() {
                write!(f, ", {}", description.to_string_lossy())?;
            }
        }
        Ok(())
    }
}

/// Whether the CUDA driver library can be loaded (probed once).
fn driver_loaded() -> bool {
    static LOADED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only probes whether the library loads; nothing is called in it.
    *LOADED.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

/// A driver call's result as the crate's: the call named, the driver's
/// error kept as the source (`stream.alloc_zeros(n).call("allocating the
/// outputs")?`).
pub(crate) trait DriverCall<T> {
    fn call(self, call: &str) -> Result<T>;
}

impl<T> DriverCall<T> for std::result::Result<T, DriverError> {
    fn call(self, call: &str) -> Result<T> {
        self.map_err(|source| Error::driver(call, source))
    }
}

/// What to do about an overflow in `precision`.
fn overflow_advice(precision: &str) -> &'static str {
    if precision == "f64" {
        "rescale the data"
    } else {
        "use f64 or rescale the data"
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn driver_error(code: CUresult) -> DriverError {
        DriverError(code)
    }

    /// The driver's error, as the error's source.
    fn source_of(error: &Error) -> Option<DriverError> {
        error.source()?.downcast_ref::<DriverError>().copied()
    }

    #[test]
    fn the_drivers_out_of_memory_is_the_out_of_memory_variant() {
        let oom = driver_error(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        let error = Error::driver("allocating device memory", oom);
        assert!(
            matches!(&error, Error::GpuOutOfMemory { what, source: Some(s) }
                if what == "allocating device memory" && *s == oom),
            "{error:?}"
        );
        assert!(error.is_out_of_memory() && error.is_gpu_failure());
        assert_eq!(source_of(&error), Some(oom));
        let shown = error.to_string();
        assert!(
            shown.starts_with(
                "GPU out of memory: allocating device memory (CUDA_ERROR_OUT_OF_MEMORY"
            ),
            "{shown}"
        );
        // At a launch too: the memory is at fault, not the launch.
        let at_launch = Error::launch("launching a kernel", oom);
        assert!(
            matches!(at_launch, Error::GpuOutOfMemory { .. }),
            "{at_launch:?}"
        );
    }

    #[test]
    fn the_display_names_the_call_and_the_drivers_code() {
        let invalid = driver_error(CUresult::CUDA_ERROR_INVALID_VALUE);
        let error = Error::driver("copying to the host", invalid);
        assert!(
            matches!(&error, Error::Gpu { call, source } if call == "copying to the host" && *source == invalid),
            "{error:?}"
        );
        let shown = error.to_string();
        assert!(
            shown.starts_with("GPU error: copying to the host failed: CUDA_ERROR_INVALID_VALUE"),
            "{shown}"
        );
        assert_eq!(source_of(&error), Some(invalid));
        assert!(!error.is_out_of_memory());
    }

    #[test]
    fn codes_choose_the_variant() {
        let lost = Error::driver(
            "waiting for the device",
            driver_error(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        );
        assert!(matches!(lost, Error::DeviceLost { .. }), "{lost:?}");
        assert!(
            lost.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"),
            "{lost}"
        );
        let resources = Error::driver(
            "launching a kernel",
            driver_error(CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES),
        );
        assert!(matches!(resources, Error::Launch { .. }), "{resources:?}");
        // Any other code at a launch is the launch's failure ...
        let refused = Error::launch(
            "launching a kernel",
            driver_error(CUresult::CUDA_ERROR_INVALID_VALUE),
        );
        assert!(matches!(refused, Error::Launch { .. }), "{refused:?}");
        assert!(
            refused.to_string().contains("launching a kernel"),
            "{refused}"
        );
        // ... but a faulted kernel before it makes the device lost.
        let after_fault = Error::launch(
            "launching a kernel",
            driver_error(CUresult::CUDA_ERROR_LAUNCH_FAILED),
        );
        assert!(
            matches!(after_fault, Error::DeviceLost { .. }),
            "{after_fault:?}"
        );
        for error in [lost, resources, refused, after_fault] {
            assert!(error.is_gpu_failure() && !error.is_out_of_memory());
            assert!(source_of(&error).is_some());
        }
    }

    #[test]
    fn driver_calls_keep_the_drivers_error() {
        let code = CUresult::CUDA_ERROR_NOT_READY;
        let failed: std::result::Result<(), DriverError> = Err(driver_error(code));
        let error = failed.call("querying a stream").unwrap_err();
        assert!(matches!(&error, Error::Gpu { call, .. } if call == "querying a stream"));
        assert_eq!(source_of(&error), Some(driver_error(code)));
        assert_eq!(Ok::<_, DriverError>(7).call("anything").unwrap(), 7);
    }

    #[test]
    fn a_budget_refusal_is_out_of_memory_without_a_driver_error() {
        let error = Error::gpu_memory("a pair needs 8 MiB, over the 4 MiB available");
        assert!(matches!(error, Error::GpuOutOfMemory { source: None, .. }));
        assert!(error.is_out_of_memory() && error.is_gpu_failure());
        assert!(error.source().is_none());
        assert_eq!(
            error.to_string(),
            "GPU out of memory: a pair needs 8 MiB, over the 4 MiB available"
        );
    }

    #[test]
    fn the_gpu_is_named_in_the_text_of_gpu_failures_only() {
        let mut failure = Error::GpuFailure("a kernel left a result unwritten".into());
        *failure.gpu_failure_text().unwrap() = "GPU 1: lost".into();
        assert_eq!(failure.to_string(), "GPU failure: GPU 1: lost");
        for mut other in [
            Error::Interrupted,
            Error::InvalidInput("x".into()),
            Error::DeviceWait {
                kernel: "k".into(),
                what: "w".into(),
            },
        ] {
            assert!(other.gpu_failure_text().is_none() && !other.is_gpu_failure());
        }
    }
}
