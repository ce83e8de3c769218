//! Paired batches (series `k` of `x` against series `k` of `y`) on the
//! GPU: Soft-DTW values and gradients, from host batches, resident sets or
//! the caller's own device memory. It depends on `launch`, `transfer`,
//! `runtime` and `plan`.
//!
//! The files, each depending only on those before it:
//!
//! ```text
//! value_launches   value launches planned from the pairs' lengths, then
//!                  run over device batches
//! streamed_chunks  the order a streamed call writes the pairs in: chunks,
//!                  each followed by the count of pairs written
//! streamed_values  values computed while the host still writes the pairs
//!                  into pinned memory
//! values           the entry of paired values: host batches (uploaded or
//!                  streamed), resident sets, several GPUs
//! gradient_launches  a gradient's launches over device batches: chunks,
//!                  their shared workspace, the warp or stencil driver
//! result_parts     a gradient call's results on the host, and the parts
//!                  of them each block of pairs owns
//! gradient         the gradients: a forward pass storing the cost matrix,
//!                  then a backward pass
//! caller_memory    values and gradients over the caller's device memory
//!                  (CUDA tensors), read in place
//! ```

mod caller_memory;
mod gradient;
mod gradient_launches;
mod result_parts;
mod streamed_chunks;
mod streamed_values;
mod value_launches;
mod values;

pub(crate) use caller_memory::{output_len, paired_on_device, ForeignShape, Wanted};
pub(crate) use gradient::{
    paired_gradient_resident_spread, paired_gradient_spread, paired_gradient_variant,
};
pub use streamed_values::{
    inject_streamed_fault, streamed_fallbacks, this_thread_streamed_calls, StreamedFault,
};
pub use values::split_resident_pairs;
pub(crate) use values::{
    paired_value_variant, paired_values_resident_spread, paired_values_spread, ResidentCopies,
};
