//! Which backend a [`Device`] choice resolves to here and now.

use crate::gpu::Gpu;
use crate::{Device, Result};

/// The backend a [`Device`] choice resolves to.
#[derive(Clone, Copy)]
pub enum Backend {
    Cpu,
    Gpu(&'static Gpu),
}

impl Backend {
    /// `Auto` gives the GPU if usable, else the CPU; `Gpu` gives the GPU or
    /// the reason there is none.
    pub fn resolve(device: Device) -> Result<Backend> {
        match device {
            Device::Cpu => Ok(Backend::Cpu),
            Device::Gpu => Gpu::get().map(Backend::Gpu),
            Device::Auto => Ok(Gpu::get().map_or(Backend::Cpu, Backend::Gpu)),
        }
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self, Backend::Gpu(_))
    }
}
