//! Batches in page-locked host memory ([`SeriesSet::into_page_locked`]),
//! which the pipeline and the uploads copy to the GPU straight from.

use crate::gpu::runtime::context::Gpu;
use crate::storage::PageLocked;
use crate::{Error, Float, GpuSet, Result, SeriesSet};

impl<T: Float> SeriesSet<T> {
    /// The same batch with its values and timestamps copied into host
    /// memory the GPU driver page-locks (portable: for every GPU's
    /// context), freed when the batch is dropped.
    ///
    /// Streamed to a GPU (a distance matrix with the pair kernels, whose
    /// streamed side goes chunk by chunk; an upload of a resident set; the
    /// host batches of paired Soft-DTW on one GPU), its values go straight
    /// from there to the device at the bus's speed, where a batch in
    /// ordinary memory is first copied into the GPU's staging buffers (the
    /// offsets, a small part, are staged either way). Results are the same
    /// bits. It costs one copy of the values and page-locking as much
    /// memory, once, and that memory cannot be swapped out while the batch
    /// lives: worth it for a batch streamed many times, or so large that
    /// the staging copy bounds the transfer. [`SeriesSet::slice`] and
    /// clones are in ordinary memory. A batch already page-locked comes
    /// back as it is.
    ///
    /// Errors: no usable GPU ([`Error::GpuUnavailable`]: page-locked memory
    /// is the driver's to give; a batch stays in ordinary memory only by
    /// not calling this), or the driver refusing the allocation
    /// ([`Error::GpuOutOfMemory`], or another GPU error).
    pub fn into_page_locked(self) -> Result<Self> {
        let gpu = Gpu::first(GpuSet::all()).map_err(|error| match error {
            Error::GpuUnavailable(reason) => Error::GpuUnavailable(format!(
                "page-locked host memory is allocated by the GPU driver: {reason}"
            )),
            other => other,
        })?;
        self.with_page_locked(|values| {
            PageLocked::copy_of(&gpu.context, values).map_err(|e| {
                let bytes = std::mem::size_of_val(values);
                Error::driver(format!("page-locking {bytes} bytes of host memory"), e)
            })
        })
    }
}
