//! The k nearest neighbours with lower bounds on the GPU, their device
//! side (`crate::search::gpu_knn` holds the cascade's policy):
//!
//! ```text
//! device   a block of queries on the device against a resident database,
//!          a chunk at a time: the series' envelopes, every pair's bounds,
//!          the survivors of the queries' cutoffs compacted; then the
//!          distances of the pairs the caller keeps, gathered and run
//!          through the brute force's own pair kernel
//! ```

mod device;

pub(crate) use device::{KnnDevice, KnnQueries, PairSurvivors};
