//! Series in device memory: resident sets ([`DeviceSeriesSet`]), the
//! images the streamed pipeline uploads ([`DeviceImage`]), and the ranges
//! of host batches the one-launch-at-a-time launchers upload for a call
//! ([`upload_ranges`], read as [`DeviceBatch`]es).

use super::context::Gpu;
use super::device::gpu_error;
use super::layout::{as_bytes_u64, Image, Layout};
use super::staging::{keeps, Pinned, PinnedPool};
use crate::{Float, Result, SeriesSet};
use cudarc::driver::{result as driver, CudaSlice, DevicePtr};
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use timewarp_kernels::SetRef;

/// A batch in device memory, uploaded once by [`crate::upload`] and read by
/// every computation against it until it is dropped.
pub struct DeviceSeriesSet<T> {
    pub(super) image: DeviceImage<T>,
    /// The `len + 1` sample offsets, also on the host: the lengths the
    /// paired computations plan with.
    pub(super) offsets: Vec<u64>,
    pub(super) max_len: usize,
    pub(super) min_len: usize,
}

impl<T: Float> DeviceSeriesSet<T> {
    /// Number of series.
    pub fn len(&self) -> usize {
        self.image.layout.count
    }

    /// Always false: a batch has at least one series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimensions of each sample.
    pub fn dims(&self) -> usize {
        self.image.layout.dims
    }

    /// The longest series' length.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The shortest series' length.
    pub fn min_len(&self) -> usize {
        self.min_len
    }

    /// The shortest and the longest series' lengths.
    pub fn lengths(&self) -> (usize, usize) {
        (self.min_len, self.max_len)
    }

    /// Total number of samples of all series.
    pub fn total_samples(&self) -> usize {
        self.image.layout.samples
    }

    /// Bytes of device memory it holds.
    pub fn device_bytes(&self) -> usize {
        self.image.layout.bytes()
    }

    /// The `len + 1` sample offsets of its series (the first 0).
    pub(crate) fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The set as the paired kernels read it.
    pub(crate) fn batch(&self) -> DeviceBatch<'_, T> {
        DeviceBatch {
            base: self.image.base,
            layout: self.image.layout,
            values_address: self.image.base + self.image.layout.values_at() as u64,
            offsets: &self.offsets,
            uniform: None,
            memory: PhantomData,
        }
    }
}

/// Series in device memory as the one-launch-at-a-time launchers (stencil,
/// paired, gradient, long pairs, anti-diagonal) read them: a device image (a resident set, or a range of a host batch
/// uploaded for one call) and its offsets on the host, from which the host
/// plans launches and sizes outputs. It borrows what owns the image.
pub(crate) struct DeviceBatch<'a, T> {
    base: u64,
    layout: Layout,
    /// Where the values are: in the image, or in memory the caller owns
    /// ([`ForeignBatch`]).
    values_address: u64,
    /// `len + 1` sample offsets; only their differences count (those of an
    /// uploaded range start where the range starts in its host batch).
    offsets: &'a [u64],
    /// Every series' length, when they are all equal and the kernels find
    /// them without offsets in device memory ([`SetRef::uniform_len`]).
    uniform: Option<u64>,
    memory: PhantomData<&'a T>,
}

impl<'a, T> DeviceBatch<'a, T> {
    /// The `len + 1` sample offsets of its series.
    pub(crate) fn offsets(&self) -> &'a [u64] {
        self.offsets
    }

    /// Dimensions of each sample.
    pub(crate) fn dims(&self) -> usize {
        self.layout.dims
    }

    /// Values of all its samples (`samples * dims`): what a gradient with
    /// respect to it holds, laid out like its values, at the positions the
    /// kernels compute from its device offsets.
    pub(crate) fn values(&self) -> usize {
        self.layout.samples * self.layout.dims
    }

    /// The kernels' view of its series `range`.
    pub(crate) fn view(&self, range: Range<usize>) -> SetRef<T> {
        let mut view = self.layout.set_ref(self.base, range.start, range.len());
        view.values = self.values_address as *const T;
        if self.layout.times {
            // The timestamps follow the values, as in an image.
            let after_values = self.layout.times_at() - self.layout.values_at();
            view.times = (self.values_address + after_values as u64) as *const T;
        }
        if let Some(len) = self.uniform {
            view.offsets = std::ptr::null();
            view.uniform_len = len;
            view.uniform_first = range.start as u64;
        }
        view
    }
}

/// `count` series of `len` samples of `dims` values each, C-contiguous in
/// device memory the caller owns and keeps alive (a CUDA tensor's): read in
/// place, never freed. All of one length, the kernels need no offsets of
/// them in device memory.
pub(crate) struct ForeignBatch<T> {
    offsets: Vec<u64>,
    values_address: u64,
    layout: Layout,
    element: PhantomData<T>,
}

impl<T: Float> ForeignBatch<T> {
    /// The batch at device address `values`.
    pub(crate) fn new(values: u64, (count, len, dims): (usize, usize, usize)) -> Self {
        let offsets: Vec<u64> = (0..=count).map(|k| (k * len) as u64).collect();
        ForeignBatch {
            offsets,
            values_address: values,
            layout: Layout {
                count,
                dims,
                samples: count * len,
                times: false,
                element: size_of::<T>(),
            },
            element: PhantomData,
        }
    }

    /// The batch as the paired kernels read it.
    pub(crate) fn batch(&self) -> DeviceBatch<'_, T> {
        let len = self.offsets.get(1).copied().unwrap_or(0);
        DeviceBatch {
            base: 0,
            layout: self.layout,
            values_address: self.values_address,
            offsets: &self.offsets,
            uniform: Some(len),
            memory: PhantomData,
        }
    }
}

/// Ranges of host batches uploaded for one computation, in one allocation
/// ([`upload_ranges`]): every image's offsets together, then each image's
/// values and timestamps.
pub(crate) struct Uploaded<'a, T> {
    allocation: CudaSlice<u8>,
    /// Each image's offsets' and values' addresses, its layout, and the
    /// length of all its series if they are all of one (its offsets are
    /// then not copied).
    images: Vec<(u64, u64, Layout, Option<u64>)>,
    /// The range's first series in its host batch.
    first: usize,
    /// The pinned buffer the offsets (and staged values) were copied from,
    /// and its pool: given back when the upload is dropped, after the copies
    /// (the caller waits for them first, [`AsyncCopies::CallerWaits`]).
    staging: Option<(Pinned, &'a PinnedPool)>,
    element: PhantomData<T>,
}

impl<T> Drop for Uploaded<'_, T> {
    fn drop(&mut self) {
        if let Some((buffer, pool)) = self.staging.take() {
            pool.give_back(buffer);
        }
    }
}

/// The parts of an upload start at multiples of this in its allocation.
const UPLOAD_ALIGN: usize = 256;
/// What an upload of two images may take beyond their bytes: the padding
/// after their offsets and after each one's values.
pub(crate) const UPLOAD_SLACK: usize = 3 * UPLOAD_ALIGN;
/// Staged bytes up to which the calling thread writes them all and then
/// copies them; more are written by the copy threads in pieces, each
/// copied to the device as soon as it is written ([`stage_and_copy`]).
const ONE_THREAD_STAGING_BYTES: usize = 256 << 10;
/// The least a staging thread writes at a time.
const STAGING_WORK_BYTES: usize = 64 << 10;

impl<T: Float> Uploaded<'_, T> {
    /// Bytes of device memory it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.allocation.len()
    }

    /// Image `index` as the paired kernels read it; `set` is the host
    /// batch it was uploaded from.
    pub(crate) fn batch<'b>(&'b self, index: usize, set: &'b SeriesSet<T>) -> DeviceBatch<'b, T> {
        let (base, values_address, layout, uniform) = self.images[index];
        DeviceBatch {
            base,
            layout,
            values_address,
            uniform,
            offsets: &set.parts().1[self.first..=self.first + layout.count],
            memory: PhantomData,
        }
    }
}

/// Series `first .. first + layout.count` of a batch, in device memory.
pub(crate) struct DeviceImage<T> {
    /// Owns the memory `base` addresses.
    pub(super) _allocation: CudaSlice<u8>,
    pub(super) base: u64,
    pub(super) layout: Layout,
    /// Index in the whole batch of the image's first series.
    pub(super) first: usize,
    pub(super) element: PhantomData<T>,
}

impl<T> DeviceImage<T> {
    /// The kernels' view of series `range` (indices in the whole batch).
    pub(crate) fn view(&self, range: &Range<usize>) -> SetRef<T> {
        self.layout
            .set_ref(self.base, range.start - self.first, range.len())
    }
}

/// Whether [`upload_ranges`] waits for its copies that run on after they
/// are enqueued: those from page-locked memory (a copy from ordinary memory
/// has read it when it returns).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum AsyncCopies {
    /// Waited for before it returns: the caller may return at once.
    Waited,
    /// Left running, so that the launches that read the images are enqueued
    /// meanwhile; the offsets too go this way, from a pinned buffer. The
    /// caller waits for the stream before it drops the upload or returns,
    /// so that the batches and the buffer outlive the copies.
    CallerWaits,
}

/// Series `range` of each of `sets`, uploaded for one computation, in one
/// allocation: every image's offsets (rebased) one after the other, then
/// each image's values and timestamps, copied on the GPU's stream straight
/// from the batches' own arrays. The values go first: from page-locked
/// batches they are on the bus while the offsets are prepared, which then
/// take one copy for all the images, or none when each image's series are
/// all of one length (the kernels then compute where each starts). The
/// caller holds the GPU's lock and runs the kernels that read the images
/// on the same stream.
pub(crate) fn upload_ranges<'g, T: Float>(
    gpu: &'g Gpu,
    sets: &[&SeriesSet<T>],
    range: Range<usize>,
    page_locked: AsyncCopies,
) -> Result<Uploaded<'g, T>> {
    debug_assert!(sets.len() < UPLOAD_SLACK / UPLOAD_ALIGN);
    let images: Vec<Image> = sets.iter().map(|set| Image::new(set, &range)).collect();
    let offsets_bytes: usize = images.iter().map(|image| image.layout.values_at()).sum();
    let mut values_starts = Vec::with_capacity(images.len());
    let mut total = offsets_bytes.next_multiple_of(UPLOAD_ALIGN);
    for image in &images {
        values_starts.push(total);
        let layout = image.layout;
        total = (total + layout.bytes() - layout.values_at()).next_multiple_of(UPLOAD_ALIGN);
    }
    let stream = &gpu.stream;
    // SAFETY: every byte of the images is copied in below before any
    // kernel reads it.
    let allocation = unsafe { stream.alloc::<u8>(total.max(1)) }.map_err(gpu_error)?;
    let base = allocation.device_ptr(stream).0;
    let mut offsets_at = base;
    let placed: Vec<(u64, u64, Layout, Option<u64>)> = images
        .iter()
        .zip(&values_starts)
        .map(|(image, &start)| {
            let offsets = offsets_at;
            offsets_at += image.layout.values_at() as u64;
            // A range of a batch whose series are all of one length.
            let uniform = (image.lengths.0 == image.lengths.1).then_some(image.lengths.0 as u64);
            (offsets, base + start as u64, image.layout, uniform)
        })
        .collect();
    // The kernels read offsets only of batches whose series differ in length.
    let needs_offsets = placed.iter().any(|&(.., uniform)| uniform.is_none());
    // With the caller waiting, the offsets go through a kept pinned buffer,
    // and so do the values of batches in ordinary memory that fit one:
    // written there by the copy threads and copied on while the rest is
    // written, faster than the driver copies pageable memory
    // (docs/benchmarks.md). Page-locked batches are copied from where they
    // are.
    let caller_waits = page_locked == AsyncCopies::CallerWaits;
    let stages_values = caller_waits && keeps(total);
    let direct = |image: &Image| image.page_locked || !stages_values;
    let mut staging = None;
    let copy = |staging: &mut Option<(Pinned, &'g PinnedPool)>| -> Result<()> {
        let to_device = |to: u64, bytes: &[u8]| -> Result<()> {
            if bytes.is_empty() {
                return Ok(());
            }
            // SAFETY: the allocation holds these bytes of the upload at
            // `to`; a copy from pageable memory has read `bytes` when it
            // returns; one from page-locked memory (a batch's, or the
            // staging buffer) ends before they may be dropped
            // (`page_locked`).
            unsafe { driver::memcpy_htod_async(to, bytes, stream.cu_stream()) }.map_err(gpu_error)
        };
        let after_values = |layout: Layout| (layout.times_at() - layout.values_at()) as u64;
        for (image, &(_, values, layout, _)) in images.iter().zip(&placed) {
            if direct(image) {
                to_device(values, image.values)?;
                to_device(values + after_values(layout), image.times)?;
            }
        }
        // Every image's offsets, rebased, one after the other; none when
        // no kernel reads them.
        let offsets: Vec<u64> = images
            .iter()
            .filter(|_| needs_offsets)
            .flat_map(|image| image.offsets.iter().map(|&o| o - image.offsets[0]))
            .collect();
        let offsets = as_bytes_u64(&offsets);
        if !caller_waits {
            return to_device(base, offsets);
        }
        // The offsets, then where each staged image's values go.
        let mut pieces = Vec::with_capacity(images.len() + 1);
        pieces.push(0..offsets.len());
        for (image, &(_, values, layout, _)) in images.iter().zip(&placed) {
            if !direct(image) {
                let start = (values - base) as usize;
                pieces.push(start..start + layout.bytes() - layout.values_at());
            }
        }
        let len = pieces.iter().map(|piece| piece.end).max().unwrap_or(0);
        if len == 0 {
            return Ok(()); // nothing to stage
        }
        let mut buffer = gpu.pool.take(&gpu.context, len, true)?;
        // SAFETY: a buffer taken from the pool has no copy in flight.
        let bytes = unsafe { buffer.bytes_mut(len) };
        bytes[..offsets.len()].copy_from_slice(offsets);
        let at = bytes.as_mut_ptr();
        *staging = Some((buffer, &gpu.pool));
        let staged: Vec<(usize, &Image)> = images
            .iter()
            .filter(|image| !direct(image))
            .zip(&pieces[1..])
            .map(|(image, piece)| (piece.start, image))
            .collect();
        if pieces.len() == images.len() + 1 {
            // Everything is staged: copied whole, padding and all.
            pieces.clear();
            pieces.push(0..len);
        }
        // SAFETY: the buffer holds `len` bytes, which nothing else touches
        // until it goes back to the pool, after the copies; its memory does
        // not move with it.
        unsafe {
            stage_and_copy(Staging(at), &staged, &pieces, |piece| {
                let bytes = std::slice::from_raw_parts(at.add(piece.start), piece.len());
                to_device(base + piece.start as u64, bytes)
            })
        }
    };
    let copied = copy(&mut staging);
    let running = staging.is_some() || images.iter().any(|image| image.page_locked);
    if running && (page_locked == AsyncCopies::Waited || copied.is_err()) {
        // They end here, failed or not, before the caller may drop the
        // batch.
        stream.synchronize().map_err(gpu_error)?;
    }
    copied?;
    Ok(Uploaded {
        allocation,
        images: placed,
        first: range.start,
        staging,
        element: PhantomData,
    })
}

/// A pinned staging buffer's address, shared by the copy threads that
/// write its pieces.
#[derive(Clone, Copy)]
struct Staging(*mut u8);

// SAFETY: each thread writes its own bytes of the buffer (`stage_and_copy`).
unsafe impl Send for Staging {}
unsafe impl Sync for Staging {}

impl Staging {
    /// The buffer's bytes `range`.
    ///
    /// # Safety
    /// They are in the buffer, and nothing else touches them meanwhile.
    unsafe fn bytes<'b>(self, range: Range<usize>) -> &'b mut [u8] {
        std::slice::from_raw_parts_mut(self.0.add(range.start), range.len())
    }
}

/// A piece of staging work: bytes `to` of the buffer, from image position
/// `from` on, part of the device copy `copy`.
struct StagingWork<'i, 'a> {
    image: &'i Image<'a>,
    to: Range<usize>,
    from: usize,
    copy: usize,
}

/// Says that a piece of staging work is done, also if it panicked (the copy
/// waiting for it then goes ahead with the bytes it has, and the scope
/// passes the panic on).
struct WorkDone<'c>(&'c AtomicUsize);

impl Drop for WorkDone<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// The threads that write an upload's values into staging memory: a few,
/// a pool of their own. Waking more (the copy threads, one a core) cost a
/// call more than they saved (`docs/benchmarks.md`, fourteenth session).
fn staging_threads() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.min(4))
            .thread_name(|k| format!("timewarp-staging-{k}"))
            .build()
            .expect("the staging threads start")
    })
}

/// Writes the values and timestamps of each `(at, image)` of `staged` into
/// the staging buffer from byte `at` on, and calls `copy` with each range
/// of `copies` (in order) once every staged byte in it is written. Few
/// bytes are written on this thread; more by the staging threads, and each
/// range is cut into a few copies, so that the device copies the first
/// while the threads write the rest.
///
/// # Safety
/// `buffer` holds every byte of `copies` and of the staged images, and
/// nothing else reads or writes it meanwhile.
unsafe fn stage_and_copy(
    buffer: Staging,
    staged: &[(usize, &Image)],
    copies: &[Range<usize>],
    mut copy: impl FnMut(Range<usize>) -> Result<()>,
) -> Result<()> {
    let values_bytes = |image: &Image| image.layout.bytes() - image.layout.values_at();
    let staged_bytes: usize = staged.iter().map(|(_, image)| values_bytes(image)).sum();
    if staged_bytes <= ONE_THREAD_STAGING_BYTES {
        for &(at, image) in staged {
            let to = buffer.bytes(at..at + values_bytes(image));
            image.write(to, image.layout.values_at());
        }
        return copies.iter().try_for_each(|range| copy(range.clone()));
    }
    // Two copies for a few MiB (the copy of the first half hides the
    // writing of the second), pieces of up to 4 MiB beyond.
    let piece = (staged_bytes / 2).clamp(ONE_THREAD_STAGING_BYTES, 4 << 20);
    let copies: Vec<Range<usize>> = copies
        .iter()
        .flat_map(|range| {
            (range.start..range.end)
                .step_by(piece)
                .map(move |start| start..(start + piece).min(range.end))
        })
        .collect();
    let pool = staging_threads();
    // A piece of work a thread for each copy.
    let work_bytes = (piece / pool.current_num_threads()).max(STAGING_WORK_BYTES);
    let mut work = Vec::new();
    for (k, range) in copies.iter().enumerate() {
        for &(at, image) in staged {
            let end = at + values_bytes(image);
            let (start, stop) = (range.start.max(at), range.end.min(end));
            for to in (start..stop).step_by(work_bytes) {
                let to = to..(to + work_bytes).min(stop);
                let from = image.layout.values_at() + (to.start - at);
                work.push(StagingWork {
                    image,
                    to,
                    from,
                    copy: k,
                });
            }
        }
    }
    let mut pending: Vec<AtomicUsize> = (0..copies.len()).map(|_| AtomicUsize::new(0)).collect();
    for piece in &work {
        *pending[piece.copy].get_mut() += 1;
    }
    pool.in_place_scope_fifo(|scope| {
        for piece in &work {
            let pending = &pending[piece.copy];
            scope.spawn_fifo(move |_| {
                let _done = WorkDone(pending);
                // SAFETY: the pieces are disjoint bytes of the buffer
                // (the caller's promise covers them).
                let to = unsafe { buffer.bytes(piece.to.clone()) };
                piece.image.write(to, piece.from);
            });
        }
        for (range, pending) in copies.iter().zip(&pending) {
            let mut spins = 0u32;
            while pending.load(Ordering::Acquire) != 0 {
                spins += 1;
                // Spin briefly, then give the core to the threads.
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            // On an error the threads still finish their pieces before the
            // scope ends; nothing more is copied.
            copy(range.clone())?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::super::layout::test_sets::set;
    use super::*;

    /// The values then the timestamps of a whole batch, as bytes.
    fn values_and_times(set: &SeriesSet<f64>) -> Vec<u8> {
        let (values, _, times) = set.parts();
        let times = times.unwrap_or(&[]);
        values
            .iter()
            .chain(times)
            .flat_map(|v| v.to_ne_bytes())
            .collect()
    }

    /// Each copy finds every staged byte of its range written, the copies
    /// come in order and cover their ranges exactly, on this thread (few
    /// bytes) and on the copy threads (more, in pieces).
    #[test]
    fn staged_bytes_are_written_before_they_are_copied() {
        for lengths in [&[3, 1, 7][..], &[40_000, 3, 25_000, 1]] {
            let sets = [set(lengths, 2, true), set(&lengths[1..], 1, false)];
            let images: Vec<Image> = sets
                .iter()
                .map(|set| Image::new(set, &(0..set.len())))
                .collect();
            let expected: Vec<Vec<u8>> = sets.iter().map(values_and_times).collect();
            // As an upload lays them out: 64 bytes of offsets, each image's
            // values at the next multiple of 256.
            let first = 256;
            let second = (first + expected[0].len()).next_multiple_of(256);
            let len = second + expected[1].len();
            let staged = [(first, &images[0]), (second, &images[1])];
            let whole = Range { start: 0, end: len };
            for copies in [
                vec![whole],
                vec![0..64, first..first + expected[0].len(), second..len],
            ] {
                let mut buffer = vec![0u8; len];
                let at = buffer.as_mut_ptr();
                let mut copied = Vec::new();
                // SAFETY: the buffer holds every range; only the staging
                // writes it while the copies read it.
                unsafe {
                    stage_and_copy(Staging(at), &staged, &copies, |range| {
                        // Only the range: the threads may still write others.
                        let bytes = std::slice::from_raw_parts(at.add(range.start), range.len());
                        for (&(start, _), expected) in staged.iter().zip(&expected) {
                            let end = start + expected.len();
                            let (from, to) = (range.start.max(start), range.end.min(end));
                            if from < to {
                                assert_eq!(
                                    bytes[from - range.start..to - range.start],
                                    expected[from - start..to - start]
                                );
                            }
                        }
                        copied.push(range);
                        Ok(())
                    })
                }
                .unwrap();
                let mut covered = copied.iter().flat_map(|range| range.clone());
                let wanted = copies.iter().flat_map(|range| range.clone());
                assert!(
                    covered.by_ref().eq(wanted),
                    "the copies cover their ranges in order"
                );
                if lengths.len() > 3 {
                    assert!(copied.len() > copies.len(), "large stagings go in pieces");
                }
            }
        }
    }
}
