//! `timewarp info`: what this build and this machine offer.

use super::{gpu_unavailable_reason, print, Failure};
use timewarp::gpu::{self, Gpu, GpuInfo};
use timewarp::GPU_VARIANTS;

pub const EXAMPLES: &str = "\
Example:
  $ timewarp info
  timewarp 0.1.0
  kernels: built (PTX sm_70), variants: naive
  GPU 0: NVIDIA H200, compute capability 9.0, 139.8 GiB, usable, kernels loaded
  CPU threads: 16

Without a driver or a GPU it says why (`GPUs: none usable: ...`) and exits 0.";

pub fn run() -> Result<(), Failure> {
    let mut lines = vec![format!("timewarp {}", env!("CARGO_PKG_VERSION"))];
    lines.push(match gpu::kernels_build_error() {
        None => format!(
            "kernels: built (PTX {}), variants: {}",
            gpu::ptx_target(),
            GPU_VARIANTS.join(", ")
        ),
        Some(reason) => format!("kernels: not built: {reason}"),
    });
    match gpu::list_gpus() {
        Err(reason) => lines.push(format!("GPUs: none usable: {reason}")),
        Ok(gpus) if gpus.is_empty() => {
            lines.push("GPUs: none usable: the driver reports no CUDA device".into())
        }
        Ok(gpus) => lines.extend(gpus.iter().map(gpu_line)),
    }
    lines.push(format!("CPU threads: {}", rayon::current_num_threads()));
    print(&(lines.join("\n") + "\n"))
}

/// One GPU: what it is and whether timewarp computes on it (device 0 only).
fn gpu_line(info: &GpuInfo) -> String {
    let status = if info.ordinal == 0 {
        match Gpu::get() {
            Ok(_) => "usable, kernels loaded".into(),
            Err(error) => format!("not usable: {}", gpu_unavailable_reason(error)),
        }
    } else {
        match info.usable() {
            Ok(()) => "usable, idle (timewarp computes on GPU 0)".into(),
            Err(reason) => format!("not usable: {reason}"),
        }
    };
    let (major, minor) = info.compute_capability;
    format!(
        "GPU {}: {}, compute capability {major}.{minor}, {:.1} GiB, {status}",
        info.ordinal,
        info.name,
        info.total_memory as f64 / (1u64 << 30) as f64
    )
}
