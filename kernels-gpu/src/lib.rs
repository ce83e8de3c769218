//! Device code of timewarp: the recurrences of TWED, DTW and Soft-DTW, each
//! written once, the drivers that compute them in every kernel shape, the
//! launch parameters shared with the host, and the kernel entry points.
//!
//! The layers, each depending only on those below it:
//!
//! ```text
//! entries        the kernel entry points (GPU build only), from the catalogue's table
//! catalogue      KernelId: every entry point, typed, named by Display
//! launch         launch parameters shared with the host; pair numbering
//! drivers        rows · columns · sheared_band · stencil · antidiagonal
//! hw             Warp · ThreadBlock · Grid; their NVPTX implementations
//! measures       dtw · soft_dtw · twed · window (Sakoe-Chiba)
//! recurrence     Recurrence · Window · Differentiable
//! series · real  the data the kernels read; f32 / f64
//! ```
//!
//! The crate is `no_std` and compiles for two targets:
//! - `nvptx64-nvidia-cuda`, as PTX (built by the host crate's `build.rs`),
//!   where `entries` adds the `extern "ptx-kernel"` entry points;
//! - the host, where the host crate uses the same parameter structs, the
//!   same cell updates and drivers in its CPU backend, and its tests run the
//!   drivers on emulated warps and blocks.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        stdarch_nvptx,
        core_intrinsics,
        link_llvm_intrinsics,
        asm_experimental_arch,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    ),
    allow(internal_features)
)]

// The host build uses std's float functions (see `real.rs`); the GPU build
// has only `core`.
#[cfg(not(target_arch = "nvptx64"))]
extern crate std;

pub mod catalogue;
pub mod drivers;
#[cfg(target_arch = "nvptx64")]
mod fast_math;
pub mod hw;
pub mod launch;
pub mod measures;
mod real;
mod recurrence;
mod series;
#[doc(hidden)]
pub mod soft64;

#[cfg(target_arch = "nvptx64")]
mod entries;

pub use catalogue::{Driver, KernelId};
pub use measures::dtw::DtwParams;
pub use measures::soft_dtw::SoftDtwParams;
pub use measures::twed::{BeforeFirst, TwedParams};
pub use measures::window::SakoeChiba;
pub use measures::{Measure, MeasureParams};
pub use real::{min3_of_bits, Precision, Real};
pub use recurrence::{Differentiable, Neighbours, Recurrence, Unbounded, Window};
pub use series::{Sample, Series, SetRef};
