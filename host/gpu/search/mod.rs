//! The subsequence search on the GPU, its device side
//! (`crate::search::gpu` holds the cascade's policy):
//!
//! ```text
//! device   the query on the device, a chunk at a time: its envelope and
//!          bounds, the survivors of a cutoff compacted, then its
//!          candidates' DTWs, launch by launch
//! ```

mod device;

pub(crate) use device::{ChunkBuffer, ChunkSurvivors, SearchDevice, SearchQuery};
