//! The GPU runtime: finds a usable GPU without panicking, loads each kernel
//! of the embedded PTX on first use, and runs the kernels over batches of
//! any size.
//!
//! The folders, each depending only on those listed before it (checked by
//! the architecture test, `tests/suite/architecture.rs`); each folder's
//! `mod.rs` maps its files:
//!
//! ```text
//! plan       policy, no CUDA: budgets cut into ranges, chunks and tiles,
//!            the kernel a launch takes, blocks spread over several GPUs
//! runtime    the GPU itself: PTX, devices, an open GPU and what it keeps
//!            (pinned memory, streams), bounded waits, GPUs held for a call
//! transfer   data between host and device: images, staged copies,
//!            uploads and resident sets, page-locked batches, the matrix
//!            that results come back into
//! launch     the launches several operations share: the stencil launch,
//!            the pipelined launch of one long pair, a pair kernel as the
//!            matrices choose it and its launches over pairs on the device
//! matrix     distance matrices with every variant (api::distance_matrix)
//! paired     paired Soft-DTW values and gradients (api::soft_dtw_pairs*)
//! paths      last columns and expected alignments (api::paths)
//! search     the subsequence search's chunks, bounds and DTWs
//!            (search::subsequences on the GPU); the open-ended
//!            subsequence alignment's chunks and passes
//!            (search::subsequence_alignment on the GPU)
//! neighbours the k-NN's bounds, survivors and their distances by the
//!            brute force's pair kernel (api::nearest_neighbours)
//! ```
//!
//! `matrix`, `paired`, `paths`, `search` and `neighbours` depend on none
//! of each other.

mod launch;
mod matrix;
mod neighbours;
mod paired;
mod paths;
mod plan;
mod runtime;
mod search;
mod transfer;

pub use paired::streamed_fallbacks;
pub use runtime::context::{Gpu, GpuWork};
pub use runtime::device::{list_gpus, GpuInfo};
pub use runtime::ptx::{
    kernels_build_error, min_compute_capability, ptx, ptx_entries, ptx_hash, ptx_rustc_version,
    ptx_target, ptx_toolchain,
};
pub use runtime::setup::{setup_steps, SetupKind, SetupStep};
pub use runtime::wait::device_wait_bound;
pub use transfer::uploads::DeviceSeriesSet;

/// The test hooks and counters of the runtime, for `crate::internals`.
pub(crate) mod internals {
    pub use crate::gpu::launch::pipelined_pair::inject_stalled_panel;
    pub use crate::gpu::paired::{
        inject_streamed_fault, split_resident_pairs, this_thread_streamed_calls, StreamedFault,
    };
    pub use crate::gpu::plan::select::{force_kernel_shape, local_max_len};
    pub use crate::gpu::plan::subsequence::force_alignment_shape;
    pub use crate::gpu::runtime::context::kernels_used;
    pub use crate::gpu::runtime::context::this_thread_busy_time;
    pub use crate::gpu::runtime::several_gpus::inject_gpu_fault;
    pub use crate::gpu::transfer::image_writes::stream_copy;
}

pub(crate) use matrix::{matrix, matrix_resident, upload_range, ResidentParts};
pub(crate) use neighbours::{KnnDevice, KnnQueries, PairSurvivors};
pub(crate) use paired::{
    output_len, paired_gradient_resident_spread, paired_gradient_spread, paired_gradient_variant,
    paired_on_device, paired_value_variant, paired_values_resident_spread, paired_values_spread,
    ForeignShape, ResidentCopies, Wanted,
};
pub(crate) use paths::{pair_alignment, DevicePathPair};
pub(crate) use plan::layout::image_bytes as set_bytes;
pub(crate) use plan::search::{
    auto_min_samples as search_auto_min_samples, auto_on_gpu as search_auto_on_gpu,
    next_batch as search_next_batch,
};
pub(crate) use plan::select::{band_width, matrix_variant, resident_variant};
pub(crate) use plan::spread::{named, shards as plan_shards};
pub(crate) use plan::subsequence::auto_on_gpu as alignment_auto_on_gpu;
pub(crate) use runtime::context::KernelParams;
pub(crate) use runtime::several_gpus::budgets;
pub(crate) use search::{AlignmentDevice, ChunkBuffer, ChunkSurvivors, SearchDevice, SearchQuery};
pub(crate) use transfer::image_writes::copy_threads;
