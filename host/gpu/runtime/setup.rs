//! The GPU runtime's one-time work in this process, timed as it happens:
//! what a first call pays and later calls do not (the driver's start, a
//! GPU's context, each kernel's module, the pipeline's streams and pinned
//! buffers). `timewarp bench` prints it beside its first-call times. No
//! CUDA here.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a [`SetupStep`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SetupKind {
    /// The driver's start (`cuInit`) and the list of its GPUs.
    Driver,
    /// A GPU's context, created and made current.
    Context,
    /// A kernel's module text, copied out of the embedded PTX.
    ModuleText,
    /// A kernel's module loaded by the driver: compiled by its JIT from the
    /// PTX, or read from its cache of earlier compilations (`CUDA_CACHE_PATH`).
    ModuleLoad,
    /// The pipeline's streams.
    Streams,
    /// A page-locked host buffer of the pipeline.
    PinnedBuffer,
}

impl SetupKind {
    /// Words for it: `context`, `module load`, ...
    pub fn name(self) -> &'static str {
        match self {
            SetupKind::Driver => "driver start",
            SetupKind::Context => "context",
            SetupKind::ModuleText => "module text",
            SetupKind::ModuleLoad => "module load",
            SetupKind::Streams => "streams",
            SetupKind::PinnedBuffer => "pinned buffers",
        }
    }
}

/// One piece of one-time work and how long it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupStep {
    pub kind: SetupKind,
    /// The GPU's ordinal; `None` for the driver's start.
    pub gpu: Option<usize>,
    /// The kernel's name, or the buffer's bytes; empty for the others.
    pub detail: String,
    pub time: Duration,
}

static STEPS: Mutex<Vec<SetupStep>> = Mutex::new(Vec::new());

/// Every piece of one-time work the GPU runtime did in this process so
/// far, in the order they ended.
pub fn setup_steps() -> Vec<SetupStep> {
    STEPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}

/// `work()`, recorded as a step of `kind` on `gpu` with `detail`.
pub(crate) fn timed<R>(
    kind: SetupKind,
    gpu: Option<usize>,
    detail: impl Into<String>,
    work: impl FnOnce() -> R,
) -> R {
    let start = Instant::now();
    let result = work();
    let step = SetupStep {
        kind,
        gpu,
        detail: detail.into(),
        time: start.elapsed(),
    };
    STEPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(step);
    result
}
