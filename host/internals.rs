//! What the tests and benches reach inside the crate: the CPU backend's
//! lanes and lockstep driver, the pieces of the alignment paths' divide
//! and conquer, the limits that choose between ways of computing, and the
//! GPU runtime's test hooks and counters. Not the API: hidden from the
//! documentation, and free to change with the code.

pub use crate::api::{
    hirschberg, use_gpu_knn_bounds, CpuLastColumn, DtwPair, GpuLastColumn, LastColumn, Pass,
    PassSeries, PathPair, SubPair, TwedPair, GPU_LAST_COLUMN_MIN_CELLS, HIRSCHBERG_LEAF_CELLS,
    KNN_BLOCK_VALUES, PATH_WORKSPACE_BYTES,
};
pub use crate::cpu::lanes::{exp_lanes, ln_lanes, LaneReal, Lanes};
pub use crate::cpu::lockstep;
pub use crate::gpu::internals::force_alignment_shape;
pub use crate::gpu::internals::{
    force_kernel_shape, inject_gpu_fault, inject_stalled_panel, inject_streamed_fault,
    kernels_used, local_max_len, split_resident_pairs, stream_copy, this_thread_busy_time,
    this_thread_streamed_calls, StreamedFault,
};
/// The API's generic functions made in the library (debug builds).
#[cfg(all(debug_assertions, not(fuzzing)))]
pub use crate::instances::api_instances;
pub use crate::search::subsequence_gpu::best_end_on_host as subsequence_best_end_on_host;
