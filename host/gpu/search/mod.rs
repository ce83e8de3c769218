//! The subsequence search and the open-ended subsequence alignment on the
//! GPU, their device side (`crate::search::gpu` holds the cascade's
//! policy, `crate::search::subsequence_gpu` the alignment's passes):
//!
//! ```text
//! device      the query on the device, a chunk at a time: its envelope and
//!             bounds, the survivors of a cutoff compacted, then its
//!             candidates' DTWs, launch by launch
//! alignment   the query and a chunk at a time: a pass of the alignment's
//!             kernel over its segments, the tiles' best ends, the chunk's
//!             last column carried to the next
//! ```

mod alignment;
mod device;

pub(crate) use alignment::AlignmentDevice;
pub(crate) use device::{ChunkBuffer, ChunkSurvivors, SearchDevice, SearchQuery};
