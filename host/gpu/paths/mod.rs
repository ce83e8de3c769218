//! The GPU's part of the alignment paths (`api::paths`): last columns of a
//! long pair's sub-pairs for the divide and conquer, and Soft-DTW's
//! expected alignment of a pair. It depends on `launch`, `transfer`,
//! `runtime` and `plan`.
//!
//! ```text
//! last_columns        a long pair kept on the device, the last columns of
//!                     any two ranges of it (the pipelined launch)
//! expected_alignment  the derivative of a pair's soft-DTW value with
//!                     respect to every cell (the stencil launch)
//! ```

mod expected_alignment;
mod last_columns;

pub(crate) use expected_alignment::pair_alignment;
pub(crate) use last_columns::DevicePathPair;
