//! Where a batch keeps its values and timestamps ([`Storage`]): ordinary
//! memory, or host memory the driver has page-locked, which the GPU's copy
//! engines read directly (no staging copy, the copy at the bus's speed).

use crate::Float;
use cudarc::driver::{sys, CudaContext, DriverError, PinnedHostSlice};
use rayon::prelude::*;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Values in ordinary memory, or page-locked.
pub(crate) enum Storage<T> {
    Ordinary(Vec<T>),
    PageLocked(PageLocked<T>),
}

impl<T> Storage<T> {
    pub(crate) fn is_page_locked(&self) -> bool {
        matches!(self, Storage::PageLocked(_))
    }
}

impl<T> Deref for Storage<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match self {
            Storage::Ordinary(values) => values,
            Storage::PageLocked(values) => values.as_slice(),
        }
    }
}

/// A clone is in ordinary memory (a copy cannot fail, and page-locking
/// needs a GPU).
impl<T: Clone> Clone for Storage<T> {
    fn clone(&self) -> Self {
        Storage::Ordinary(self.to_vec())
    }
}

/// The same values, wherever they are kept.
impl<T: PartialEq> PartialEq for Storage<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: fmt::Debug> fmt::Debug for Storage<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

/// A copy of some values in page-locked host memory, allocated portable
/// (page-locked for every GPU's context, not only the one that allocated
/// it) and cached (the CPU reads it as fast as ordinary memory). Freed when
/// dropped; the computations that copy from it wait for their copies
/// before they return, so none is in flight by then.
pub(crate) struct PageLocked<T> {
    slice: PinnedHostSlice<T>,
    pointer: *const T,
}

// SAFETY: `pointer` addresses the allocation `slice` owns, which moves with
// it and is only read after it was filled.
unsafe impl<T: Send> Send for PageLocked<T> {}
// SAFETY: shared access only reads.
unsafe impl<T: Sync> Sync for PageLocked<T> {}

impl<T: Float> PageLocked<T> {
    /// `values` copied (on all cores) into page-locked memory allocated in
    /// `context`. At least one value.
    pub(crate) fn copy_of(context: &Arc<CudaContext>, values: &[T]) -> Result<Self, DriverError> {
        assert!(!values.is_empty(), "a batch has values");
        // SAFETY: every value is written below before it is read.
        let mut slice = unsafe {
            context.alloc_pinned_with_flags::<T>(values.len(), sys::CU_MEMHOSTALLOC_PORTABLE)
        }?;
        const PIECE: usize = 1 << 16;
        slice
            .as_mut_slice()?
            .par_chunks_mut(PIECE)
            .zip(values.par_chunks(PIECE))
            .for_each(|(to, from)| to.copy_from_slice(from));
        let pointer = slice.as_ptr()?;
        Ok(PageLocked { slice, pointer })
    }
}

/// The allocation's context is made current on the dropping thread first:
/// the driver frees page-locked memory in a context.
impl<T> Drop for PageLocked<T> {
    fn drop(&mut self) {
        // Best effort: should it fail, so does the free, which cudarc's
        // drop of the slice records in the context.
        let _ = self.slice.context().bind_to_thread();
    }
}

impl<T> PageLocked<T> {
    fn as_slice(&self) -> &[T] {
        // SAFETY: `pointer` addresses `slice.len()` values, all written.
        unsafe { std::slice::from_raw_parts(self.pointer, self.slice.len()) }
    }
}
