//! Where a command computes ([`Target`]): the backend and, on the GPU,
//! which GPUs (`--gpus`); the options and the words for it.

use timewarp::gpu::{list_gpus, GpuInfo};
use timewarp::{Backend, ComputeOptions, Device, Error, GpuSet};

/// `--gpus`: `all` or ordinals separated by commas.
pub(super) fn gpus_parser(text: &str) -> Result<GpuSet, String> {
    text.parse().map_err(|e: Error| match e {
        Error::InvalidInput(message) => message,
        other => other.to_string(),
    })
}

/// Where a command computes: the backend, and on the GPU, which GPUs.
#[derive(Clone, Copy)]
pub struct Target {
    pub backend: Backend,
    pub gpus: GpuSet,
}

impl Target {
    pub const CPU: Target = Target {
        backend: Backend::Cpu,
        gpus: GpuSet::all(),
    };

    pub fn is_gpu(&self) -> bool {
        self.backend.is_gpu()
    }
}

/// Options that compute on exactly `target`, whatever the GPU does later.
pub fn options_for(target: Target) -> ComputeOptions {
    ComputeOptions::on(match target.backend {
        Backend::Cpu => Device::Cpu,
        Backend::Gpu(_) => Device::Gpu,
    })
    .with_gpus(target.gpus)
}

/// `cpu`, `gpu 0 (NVIDIA H100 ...)` or `gpus 0,1 (NVIDIA H200, NVIDIA
/// H200)`, for messages: the GPUs of the target as the driver lists them,
/// none opened for it (opening a GPU creates its context, which takes
/// longer than many calls).
pub fn describe(target: Target) -> String {
    let first = match target.backend {
        Backend::Cpu => return "cpu".into(),
        Backend::Gpu(gpu) => gpu.info().clone(),
    };
    let listed = list_gpus().unwrap_or_default().into_iter();
    let gpus: Vec<GpuInfo> = match target.gpus.ordinals() {
        Some(ordinals) => listed.filter(|g| ordinals.contains(&g.ordinal)).collect(),
        None => listed.filter(|g| g.usable().is_ok()).collect(),
    };
    let gpus = if gpus.is_empty() { vec![first] } else { gpus };
    let ordinals: Vec<String> = gpus.iter().map(|g| g.ordinal.to_string()).collect();
    let names: Vec<&str> = gpus.iter().map(|g| g.name.as_str()).collect();
    let noun = if gpus.len() == 1 { "gpu" } else { "gpus" };
    format!("{noun} {} ({})", ordinals.join(","), names.join(", "))
}
