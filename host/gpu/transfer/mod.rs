//! Data between the host and the device: the image of a range of series
//! written from a batch's arrays, its values staged through pinned memory
//! and copied, the series kept in device memory (resident sets, a call's
//! uploads, batches read in place), batches in page-locked host memory, and
//! the matrix that the tiles' results come back into. It depends on
//! `runtime` and `plan`.
//!
//! The files, each depending only on those before it:
//!
//! ```text
//! image_writes   an image's bytes written straight from the batch's arrays
//!                (no CUDA)
//! staged_copy    an upload's values staged through a kept pinned buffer,
//!                each range copied as soon as it is written
//! uploads        series in device memory: resident sets, the pipeline's
//!                images, the caller's tensors, and the kernels' view of them
//! call_uploads   the ranges of host batches uploaded for one call, in one
//!                allocation
//! page_locked    batches in page-locked host memory
//! matrix_output  the distance matrix the tiles' results are copied into
//! ```

pub(super) mod call_uploads;
pub(super) mod image_writes;
pub(super) mod matrix_output;
pub(super) mod page_locked;
pub(super) mod staged_copy;
pub(super) mod uploads;
