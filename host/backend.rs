//! Which backend a [`Device`] choice resolves to here and now.

use crate::gpu::Gpu;
use crate::{Device, GpuSet, Result};

/// The backend a [`Device`] choice resolves to.
#[derive(Clone, Copy)]
pub enum Backend {
    Cpu,
    Gpu(&'static Gpu),
}

impl Backend {
    /// `Auto` gives the GPUs if one is usable, else the CPU; `Gpu` gives
    /// the GPUs or the reason there is none. Every usable GPU: see
    /// [`Backend::resolve_on`].
    pub fn resolve(device: Device) -> Result<Backend> {
        Backend::resolve_on(device, GpuSet::all())
    }

    /// As [`Backend::resolve`] on the GPUs of `gpus`: the backend names the
    /// first, the only one opened here ([`Gpu::first`]; a computation that
    /// spreads over several opens the others). A listed GPU that does not
    /// exist or cannot be used is an error even with `Auto`.
    pub fn resolve_on(device: Device, gpus: GpuSet) -> Result<Backend> {
        let first = || Gpu::first(gpus).map(Backend::Gpu);
        match device {
            Device::Cpu => Ok(Backend::Cpu),
            Device::Gpu => first(),
            Device::Auto if gpus.is_all() => Ok(first().unwrap_or(Backend::Cpu)),
            Device::Auto => first(),
        }
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self, Backend::Gpu(_))
    }
}
