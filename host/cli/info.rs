//! `timewarp info`: what this build and this machine offer.

use super::{gpu_unavailable_reason, kernels_missing, print, ptx_build, Failure};
use std::path::PathBuf;
use timewarp::gpu::{self, Gpu, GpuInfo};
use timewarp::Variant;

pub const EXAMPLES: &str = "\
Examples:
  $ timewarp info
  timewarp 0.1.0
  kernels: built (PTX sm_70), variants: naive
  kernel build: rustc 1.97.0-nightly (e50aa6fba 2026-05-19) [nightly-2026-05-20], target sm_70, PTX hash 0123456789ab
  GPU 0: NVIDIA H200, compute capability 9.0, 139.8 GiB, usable, used by default
  GPU 1: NVIDIA H200, compute capability 9.0, 139.8 GiB, usable, used by default
  CPU threads: 16

  # The embedded PTX, e.g. for `ptxas -v` (tools/ptxas_report.sh)
  $ timewarp info --dump-ptx kernels.ptx

Commands compute on every usable GPU unless --gpus names some (--gpus 0,1).
Without a driver or a GPU it says why (`GPUs: none usable: ...`) and exits 0.
The PTX hash is FNV-1a 64 of the embedded PTX's bytes, the first 12 of its 16
hex digits; the compiler is the toolchain pinned in kernels-gpu/rust-toolchain.toml.";

#[derive(clap::Args)]
pub struct Args {
    /// Write the embedded PTX to FILE (`-`: stdout) instead of the report
    #[arg(long, value_name = "FILE")]
    dump_ptx: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if let Some(file) = args.dump_ptx {
        return dump_ptx(&file);
    }
    let mut lines = vec![format!("timewarp {}", env!("CARGO_PKG_VERSION"))];
    match gpu::kernels_build_error() {
        None => {
            lines.push(format!(
                "kernels: built (PTX {}), variants: {}",
                gpu::ptx_target(),
                Variant::ALL.map(Variant::name).join(", ")
            ));
            lines.push(format!("kernel build: {}", ptx_build()));
        }
        Some(reason) => lines.push(format!("kernels: not built: {reason}")),
    }
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

/// Writes the embedded PTX to `file`, or to stdout for `-`.
fn dump_ptx(file: &std::path::Path) -> Result<(), Failure> {
    let ptx = gpu::ptx().ok_or_else(|| {
        Failure::runtime(format!(
            "no PTX to write: {}",
            kernels_missing(gpu::kernels_build_error().unwrap_or_default())
        ))
    })?;
    if file.as_os_str() == "-" {
        return print(ptx);
    }
    std::fs::write(file, ptx).map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
    eprintln!(
        "wrote the embedded PTX ({} bytes; {}) to {}",
        ptx.len(),
        ptx_build(),
        file.display()
    );
    Ok(())
}

/// One GPU: what it is and whether timewarp computes on it (every usable
/// GPU, unless `--gpus` says otherwise).
fn gpu_line(info: &GpuInfo) -> String {
    let status = match Gpu::ordinal(info.ordinal) {
        Ok(_) => "usable, used by default".into(),
        Err(error) => format!("not usable: {}", gpu_unavailable_reason(error)),
    };
    let (major, minor) = info.compute_capability;
    format!(
        "GPU {}: {}, compute capability {major}.{minor}, {:.1} GiB, {status}",
        info.ordinal,
        info.name,
        info.total_memory as f64 / (1u64 << 30) as f64
    )
}
