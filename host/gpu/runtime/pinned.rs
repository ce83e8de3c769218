//! Pinned host memory and the pipeline's streams, made once per GPU and
//! kept between calls (allocating pinned memory is slow), and the results
//! that come back through it; an upload's values go through it too
//! ([`crate::gpu::transfer::staged_copy`]).

use super::setup::{timed, SetupKind};
use super::wait::wait_stream;
use crate::error::DriverCall;
use crate::gpu::plan::matrix_tiles::{SLOTS, STAGING_BYTES};
use crate::{Float, Result};
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, PinnedHostSlice};
use std::mem::size_of;
use std::sync::{Arc, Mutex};

/// Pinned buffers are allocated in multiples of this, and kept for the
/// next call up to `KEEP_PINNED_BYTES`.
const PINNED_GRANULE: usize = 64 << 10;
const KEEP_PINNED_BYTES: usize = 2 * STAGING_BYTES;

/// Streams and pinned host buffers, made once and kept by the [`Gpu`].
#[derive(Default)]
pub(crate) struct PinnedPool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    streams: Vec<Arc<CudaStream>>,
    /// Write-combined: the host only writes them.
    staging: Vec<Pinned>,
    /// Cached: the host reads them.
    results: Vec<Pinned>,
}

impl PinnedPool {
    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The [`SLOTS`] streams, created on first use.
    pub(crate) fn streams(&self, context: &Arc<CudaContext>) -> Result<Vec<Arc<CudaStream>>> {
        let mut state = self.state();
        if state.streams.len() < SLOTS {
            timed(SetupKind::Streams, Some(context.ordinal()), "", || {
                while state.streams.len() < SLOTS {
                    state
                        .streams
                        .push(context.new_stream().call("creating a stream")?);
                }
                Ok::<_, crate::Error>(())
            })?;
        }
        Ok(state.streams.clone())
    }

    /// A pinned buffer of at least `bytes`: a kept one, or a new one.
    pub(crate) fn take(
        &self,
        context: &Arc<CudaContext>,
        bytes: usize,
        write_combined: bool,
    ) -> Result<Pinned> {
        let kept = {
            let mut state = self.state();
            let pool = if write_combined {
                &mut state.staging
            } else {
                &mut state.results
            };
            let best = pool
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= bytes)
                .min_by_key(|(_, b)| b.len())
                .map(|(k, _)| k);
            best.map(|k| pool.swap_remove(k))
        };
        // A kept buffer comes with its address: asking cudarc for it again
        // costs a driver call (a wait for an event never recorded).
        if let Some(buffer) = kept {
            return Ok(buffer);
        }
        let bytes = bytes.max(1).next_multiple_of(PINNED_GRANULE);
        let flags = if write_combined {
            sys::CU_MEMHOSTALLOC_WRITECOMBINED
        } else {
            0
        };
        let gpu = Some(context.ordinal());
        let mut slice = timed(SetupKind::PinnedBuffer, gpu, bytes.to_string(), || {
            // SAFETY: u8 is valid whatever the memory holds.
            unsafe { context.alloc_pinned_with_flags::<u8>(bytes, flags) }
        })
        .call("allocating page-locked host memory")?;
        let pointer = slice.as_mut_ptr().call("mapping page-locked host memory")?;
        Ok(Pinned {
            slice,
            pointer,
            write_combined,
        })
    }

    /// Keeps `buffer` for later calls, unless it is unusually large or
    /// enough are kept.
    pub(crate) fn give_back(&self, buffer: Pinned) {
        if buffer.slice.len() > KEEP_PINNED_BYTES {
            return;
        }
        let mut state = self.state();
        let pool = if buffer.write_combined {
            &mut state.staging
        } else {
            &mut state.results
        };
        if pool.len() < SLOTS {
            pool.push(buffer);
        }
    }
}

/// Pinned host memory and its address. The pipeline orders every host
/// access after the device's (slot events), so it uses the raw address.
pub(crate) struct Pinned {
    slice: PinnedHostSlice<u8>,
    pointer: *mut u8,
    write_combined: bool,
}

// SAFETY: `pointer` addresses the allocation `slice` owns, which moves
// with it; the pipeline that holds a buffer orders every access to it after
// the device's (slot events), on whichever thread it runs.
unsafe impl Send for Pinned {}

impl Pinned {
    pub(crate) fn len(&self) -> usize {
        self.slice.len()
    }

    /// # Safety
    /// No copy that reads or writes the buffer is in flight.
    pub(crate) unsafe fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len());
        std::slice::from_raw_parts_mut(self.pointer, len)
    }

    /// # Safety
    /// No copy that reads or writes the buffer is in flight.
    pub(crate) unsafe fn values_mut<T: Float>(&mut self, len: usize) -> &mut [T] {
        assert!(len * size_of::<T>() <= self.len());
        // Pinned allocations are page-aligned.
        std::slice::from_raw_parts_mut(self.pointer.cast::<T>(), len)
    }

    /// # Safety
    /// No copy that writes the buffer is in flight; `len` bytes hold `T`s.
    pub(crate) unsafe fn values<T: Float>(&self, len: usize) -> &[T] {
        assert!(len * size_of::<T>() <= self.len());
        // Pinned allocations are page-aligned.
        std::slice::from_raw_parts(self.pointer.cast::<T>(), len)
    }
}

/// Whether a buffer of `bytes` would be kept for later calls (smaller
/// ones are worth taking for a single copy).
pub(crate) fn keeps(bytes: usize) -> bool {
    bytes <= KEEP_PINNED_BYTES
}

/// The `(start, len)` parts of `results` on the host, a vector each, once
/// the work queued on `stream` is done ([`outputs_into`]).
pub(crate) fn outputs_to_host<T: Float>(
    (stream, pool): (&Arc<CudaStream>, &PinnedPool),
    results: &CudaSlice<T>,
    parts: &[(usize, usize)],
) -> Result<Vec<Vec<T>>> {
    let mut back: Vec<Vec<T>> = parts.iter().map(|&(_, len)| vec![T::ZERO; len]).collect();
    let mut into: Vec<(usize, &mut [T])> = parts
        .iter()
        .zip(back.iter_mut())
        .map(|(&(start, _), values)| (start, values.as_mut_slice()))
        .collect();
    outputs_into((stream, pool), results, &mut into)?;
    Ok(back)
}

/// Copies the parts of `results` that start at each `start` into their
/// `destination` (as many values as it holds), once the work queued on
/// `stream` is done: together through a kept pinned buffer when they are
/// small enough (packed, only the parts: one fast copy each, where a copy
/// to ordinary memory goes at a fraction of the bus's speed), else each
/// straight into its destination.
pub(crate) fn outputs_into<T: Float>(
    (stream, pool): (&Arc<CudaStream>, &PinnedPool),
    results: &CudaSlice<T>,
    parts: &mut [(usize, &mut [T])],
) -> Result<()> {
    let total: usize = parts.iter().map(|(_, into)| into.len()).sum();
    let bytes = total * size_of::<T>();
    let part = |start: usize, len: usize| results.slice(start..start + len);
    if !keeps(bytes) {
        wait_stream(stream, "the copy of results to the host")?;
        for (start, into) in parts.iter_mut() {
            stream
                .memcpy_dtoh(&part(*start, into.len()), *into)
                .call("copying to the host")?;
        }
        return wait_stream(stream, "the copy of results to the host");
    }
    let mut pinned = pool.take(stream.context(), bytes, false)?;
    // SAFETY: no copy touches the buffer but these, which the
    // synchronisation ends before the host reads it.
    let copied = unsafe {
        let mut host = pinned.values_mut::<T>(total);
        let mut copies = Ok(());
        for (start, into) in parts.iter() {
            let (here, rest) = host.split_at_mut(into.len());
            host = rest;
            copies = copies.and_then(|()| {
                stream
                    .memcpy_dtoh(&part(*start, here.len()), here)
                    .call("copying to the host")
            });
        }
        copies.and_then(|()| wait_stream(stream, "the copy of results to the host"))
    };
    if copied.is_ok() {
        // SAFETY: the copies are done.
        let mut host = unsafe { pinned.values::<T>(total) };
        for (_, into) in parts.iter_mut() {
            let (here, rest) = host.split_at(into.len());
            into.copy_from_slice(here);
            host = rest;
        }
    }
    pool.give_back(pinned);
    copied
}

/// Values the kernels write straight into a kept pinned buffer, which the
/// host poisoned first (every bit set: NaN), so that a call needs no device
/// buffer for them, nor a fill and a copy back on the stream. The kernels
/// write it at the host's own addresses: with unified addressing, which
/// every GPU the kernels run on has (64-bit, compute capability 7.0 on),
/// page-locked memory from `cuMemHostAlloc` is mapped for the device at the
/// address the host sees. Waits for the stream before the buffer goes back
/// to the pool, so that no kernel still writes it.
pub(crate) struct MappedOutputs<'a> {
    buffer: Option<Pinned>,
    pool: &'a PinnedPool,
    stream: &'a CudaStream,
    bytes: usize,
    /// The stream's work that writes the buffer is known to be done.
    done: bool,
}

impl<'a> MappedOutputs<'a> {
    /// `values` values of `T`, poisoned; `None` when they are too many for
    /// a kept buffer (the caller then copies them back from the device).
    pub(crate) fn take<T: Float>(
        (stream, pool): (&'a Arc<CudaStream>, &'a PinnedPool),
        values: usize,
    ) -> Result<Option<Self>> {
        let bytes = values * size_of::<T>();
        if !keeps(bytes) {
            return Ok(None);
        }
        let mut buffer = pool.take(stream.context(), bytes, false)?;
        // SAFETY: a buffer taken from the pool has no copy in flight and no
        // kernel writing it.
        unsafe { buffer.bytes_mut(bytes) }.fill(0xff);
        Ok(Some(MappedOutputs {
            buffer: Some(buffer),
            pool,
            stream,
            bytes,
            done: false,
        }))
    }

    /// The device address of value `index` (of `T`).
    pub(crate) fn address<T: Float>(&self, index: usize) -> u64 {
        debug_assert!((index + 1) * size_of::<T>() <= self.bytes);
        let buffer = self.buffer.as_ref().expect("held until dropped");
        buffer.pointer as u64 + (index * size_of::<T>()) as u64
    }

    /// The values, once the stream's work (the kernels that write them) is
    /// done: waits for it.
    pub(crate) fn read<T: Float>(mut self) -> Result<Vec<T>> {
        wait_stream(self.stream, "the copy of results to the host")?;
        self.done = true;
        let buffer = self.buffer.as_ref().expect("held until dropped");
        // SAFETY: the kernels that wrote it are done; it holds `bytes`
        // bytes of `T`s.
        Ok(unsafe { buffer.values::<T>(self.bytes / size_of::<T>()) }.to_vec())
    }

    /// The values, which the kernel that writes them has said are written
    /// (in host memory, read with acquire ordering): no wait for the
    /// stream's work to end.
    ///
    /// # Safety
    /// Every value was written before that word, and nothing on the stream
    /// writes the buffer after it.
    pub(crate) unsafe fn read_finished<T: Float>(mut self) -> Vec<T> {
        self.done = true;
        let buffer = self.buffer.as_ref().expect("held until dropped");
        buffer.values::<T>(self.bytes / size_of::<T>()).to_vec()
    }
}

impl Drop for MappedOutputs<'_> {
    fn drop(&mut self) {
        if !self.done && wait_stream(self.stream, "the copy of results to the host").is_err() {
            // A kernel may still write it: never reuse it (nor free it).
            std::mem::forget(self.buffer.take());
            return;
        }
        if let Some(buffer) = self.buffer.take() {
            self.pool.give_back(buffer);
        }
    }
}
