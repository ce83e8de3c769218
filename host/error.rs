//! The crate's error type.

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
    /// A computation asked for on the GPU that has no GPU implementation
    /// yet (it runs on the CPU with `Device::Cpu` or `Device::Auto`).
    #[error("{0} does not run on the GPU yet: ask for the CPU (Device::Cpu or Device::Auto)")]
    NotOnGpu(&'static str),
    /// A CUDA driver call failed while computing.
    #[error("GPU error: {0}")]
    Gpu(String),
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
