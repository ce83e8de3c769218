//! The public entry points: distance matrices (host batches or against a
//! resident set), single distances, and Soft-DTW of paired batches with
//! gradients; alignments (paths) of one pair. Each resolves the backend, computes, and checks the result.

mod matrix;
mod neighbours;
mod on_device;
mod paths;
mod soft_dtw;

pub use matrix::{
    distance, distance_matrix, distance_matrix_resident, matrix_variant, resident_matrix_variant,
};
pub use neighbours::{nearest_neighbours, use_gpu_knn_bounds, Neighbours, KNN_BLOCK_VALUES};
pub use on_device::{
    soft_dtw_device_output_len, soft_dtw_pairs_on_device, DeviceBatchRef, SoftDtwOutputs,
};
pub use paths::{
    dtw_path, hirschberg, soft_dtw_alignment, twed_path, Alignment, CpuLastColumn, DtwPair, Edit,
    EditPath, EditStep, GpuLastColumn, LastColumn, Pass, PassSeries, PathPair, SubPair, TwedPair,
    GPU_LAST_COLUMN_MIN_CELLS, HIRSCHBERG_LEAF_CELLS, PATH_WORKSPACE_BYTES,
};
pub use soft_dtw::{
    soft_dtw_gradient, soft_dtw_gradient_bytes_per_pair, soft_dtw_pairs, soft_dtw_pairs_gradient,
    soft_dtw_pairs_gradient_resident, soft_dtw_pairs_gradient_variant, soft_dtw_pairs_resident,
    soft_dtw_pairs_variant,
};
