//! What the streamed calls on one GPU keep from one to the next
//! ([`StreamedState`], a field of the GPU's context): apart from
//! `paired::streamed_values`, which takes the GPU, so that the two depend
//! one way.

use crate::error::DriverCall;
use crate::Result;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr};
use std::collections::HashMap;
use std::mem::size_of;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use timewarp_kernels::KernelId;

/// What the streamed calls on one GPU keep from one to the next, so that
/// a call neither allocates nor asks the driver anything before its
/// launch.
#[derive(Default)]
pub(crate) struct StreamedState {
    /// The kernel's `relayed` and `through` words (two `u64`s), allocated
    /// and zeroed by the first call.
    words: OnceLock<CudaSlice<u64>>,
    /// Launches so far: the next one's number.
    launches: AtomicU32,
    /// The blocks a multiprocessor holds at once, by kernel and shared
    /// bytes.
    blocks_per_sm: Mutex<HashMap<(KernelId, usize), usize>>,
}

impl StreamedState {
    /// The device addresses of the kernel's `relayed` and `through` words.
    pub(crate) fn words(&self, stream: &Arc<CudaStream>) -> Result<(u64, u64)> {
        if self.words.get().is_none() {
            let words = stream
                .alloc_zeros::<u64>(2)
                .call("allocating device memory")?;
            // The caller holds the GPU: no other call sets it meanwhile.
            let _ = self.words.set(words);
        }
        let words = self.words.get().expect("set above");
        let at = words.device_ptr(stream).0;
        Ok((at, at + size_of::<u64>() as u64))
    }

    /// The number of the next launch: each differs from the one before.
    pub(crate) fn next_launch(&self) -> u32 {
        self.launches.fetch_add(1, Ordering::Relaxed)
    }

    /// Blocks of `threads` threads and `shared` bytes of kernel `id`
    /// (`function`) that a multiprocessor holds at once.
    pub(crate) fn blocks_per_sm(
        &self,
        (id, function): (KernelId, &CudaFunction),
        threads: usize,
        shared: usize,
    ) -> Result<usize> {
        let mut known = self
            .blocks_per_sm
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(&blocks) = known.get(&(id, shared)) {
            return Ok(blocks);
        }
        let blocks = function
            .occupancy_max_active_blocks_per_multiprocessor(threads as u32, shared, None)
            .call("querying the occupancy of a kernel")? as usize;
        known.insert((id, shared), blocks);
        Ok(blocks)
    }
}
