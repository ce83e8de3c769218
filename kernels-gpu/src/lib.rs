//! Device code of timewarp: the recurrences of TWED, DTW and Soft-DTW, each
//! written once, the launch parameters shared with the host, and the kernel
//! entry points.
//!
//! The crate is `no_std` and compiles for two targets:
//! - `nvptx64-nvidia-cuda`, as PTX (built by the host crate's `build.rs`),
//!   where the `kernels` module adds the `extern "ptx-kernel"` entry points;
//! - the host, where the host crate uses the same parameter structs and the
//!   same cell updates in its CPU backend.
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

pub mod band;
pub mod block;
pub mod diagonal;
pub mod dtw;
#[cfg(not(target_arch = "nvptx64"))]
pub mod lanes;
pub mod launch;
mod real;
pub mod rows;
mod series;
pub mod soft_dtw;
pub mod twed;
pub mod warp;

pub use block::{BlockLaunch, ThreadBlock};
pub use dtw::DtwParams;
#[cfg(not(target_arch = "nvptx64"))]
pub use lanes::{lockstep_values, LaneReal, Lanes, Lockstep};
pub use launch::{DiagonalLaunch, PairsLaunch, PipelineLaunch, TileLaunch};
pub use real::Real;
pub use rows::{pair_value, Differentiable, Neighbours, Recurrence, RowPair};
pub use series::{Sample, Series, SetRef};
pub use soft_dtw::SoftDtwParams;
pub use twed::TwedParams;

#[cfg(target_arch = "nvptx64")]
mod kernels;
