//! Series in device memory: resident sets ([`DeviceSeriesSet`]), the
//! images the streamed pipeline uploads ([`DeviceImage`]), and the ranges
//! of host batches the one-launch-at-a-time launchers upload for a call
//! ([`upload_ranges`], read as [`DeviceBatch`]es).

use super::image_writes::{as_bytes_u64, Image};
use super::staged_copy::{stage_and_copy, Staging};
use crate::error::DriverCall;
use crate::gpu::plan::layout::Layout;
use crate::gpu::plan::paired_shapes::{lengths_range, Shapes};
use crate::gpu::runtime::context::Gpu;
use crate::gpu::runtime::pinned::{keeps, Pinned, PinnedPool};
use crate::gpu::runtime::wait::wait_stream;
use crate::{Float, Result, SeriesSet};
use cudarc::driver::{result as driver, CudaSlice, DevicePtr};
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::SetRef;

/// A batch in device memory, uploaded once by [`crate::upload`] and read by
/// every computation against it until it is dropped.
pub struct DeviceSeriesSet<T> {
    pub(crate) image: DeviceImage<T>,
    /// The `len + 1` sample offsets, also on the host: the lengths the
    /// paired computations plan with.
    pub(crate) offsets: Vec<u64>,
    pub(crate) max_len: usize,
    pub(crate) min_len: usize,
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
            lengths: self.lengths(),
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
    /// The (shortest, longest) of its series, known from what the batch
    /// was made from: planning a small call reads them several times, and
    /// a scan of the offsets would take longer than the rest of the plan.
    lengths: (usize, usize),
    /// Every series' length, when they are all equal and the kernels find
    /// them without offsets in device memory ([`SetRef::uniform_len`]).
    uniform: Option<u64>,
    memory: PhantomData<&'a T>,
}

impl<'a, T> DeviceBatch<'a, T> {
    /// The shapes of the pairs of this batch (`x`) and `y`.
    pub(crate) fn paired_shapes(&self, y: &DeviceBatch<'a, T>, divergence: bool) -> Shapes<'a> {
        Shapes::known(self.offsets, y.offsets, divergence, self.lengths, y.lengths)
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
            lengths: (len as usize, len as usize),
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

impl<T: Float> Uploaded<'_, T> {
    /// Bytes of device memory it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.allocation.len()
    }

    /// Image `index` as the paired kernels read it; `set` is the host
    /// batch it was uploaded from.
    pub(crate) fn batch<'b>(&'b self, index: usize, set: &'b SeriesSet<T>) -> DeviceBatch<'b, T> {
        let (base, values_address, layout, uniform) = self.images[index];
        let offsets = &set.parts().1[self.first..=self.first + layout.count];
        let lengths = if layout.count == set.len() {
            set.lengths()
        } else {
            lengths_range(offsets)
        };
        DeviceBatch {
            base,
            layout,
            values_address,
            uniform,
            offsets,
            lengths,
            memory: PhantomData,
        }
    }
}

/// Series `first .. first + layout.count` of a batch, in device memory.
pub(crate) struct DeviceImage<T> {
    /// Owns the memory `base` addresses.
    pub(crate) _allocation: CudaSlice<u8>,
    pub(crate) base: u64,
    pub(crate) layout: Layout,
    /// Index in the whole batch of the image's first series.
    pub(crate) first: usize,
    pub(crate) element: PhantomData<T>,
}

impl<T> DeviceImage<T> {
    /// The kernels' view of series `range` (indices in the whole batch).
    pub(crate) fn view(&self, range: &Range<usize>) -> SetRef<T> {
        self.layout
            .set_ref(self.base, range.start - self.first, range.len())
    }
}

/// Where each image's values start in an upload of `images` (every
/// image's offsets first), and the upload's bytes.
pub(crate) fn upload_places(images: &[Image]) -> (Vec<usize>, usize) {
    let offsets_bytes: usize = images.iter().map(|image| image.layout.values_at()).sum();
    let mut values_starts = Vec::with_capacity(images.len());
    let mut total = offsets_bytes.next_multiple_of(UPLOAD_ALIGN);
    for image in images {
        values_starts.push(total);
        let layout = image.layout;
        total = (total + layout.bytes() - layout.values_at()).next_multiple_of(UPLOAD_ALIGN);
    }
    (values_starts, total)
}

/// The device memory [`upload_ranges`] of the same sets and range takes.
pub(crate) fn upload_bytes<T: Float>(sets: &[&SeriesSet<T>], range: &Range<usize>) -> usize {
    let images: Vec<Image> = sets.iter().map(|set| Image::new(set, range)).collect();
    upload_places(&images).1.max(1)
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
/// from the batches' own arrays, or staged through a kept pinned buffer.
/// The values go first: from page-locked batches they are on the bus while
/// the offsets are prepared, which then take one copy for all the images,
/// or none when each image's series are all of one length (the kernels
/// then compute where each starts). The caller holds the GPU's lock and
/// runs the kernels that read the images on the same stream.
pub(crate) fn upload_ranges<'g, T: Float>(
    gpu: &'g Gpu,
    sets: &[&SeriesSet<T>],
    range: Range<usize>,
    page_locked: AsyncCopies,
) -> Result<Uploaded<'g, T>> {
    upload_ranges_with(gpu, sets, range, page_locked, || Ok(())).map(|(uploaded, ())| uploaded)
}

/// [`upload_ranges`], running `meanwhile` on this thread while the upload
/// gets under way: once the copies of page-locked batches are queued, or,
/// where every image is staged, while the staging threads write the first
/// piece (before the device allocation, which the first copy needs). The
/// caller plans its launches there, off the upload's path.
pub(crate) fn upload_ranges_with<'g, T: Float, R>(
    gpu: &'g Gpu,
    sets: &[&SeriesSet<T>],
    range: Range<usize>,
    page_locked: AsyncCopies,
    meanwhile: impl FnOnce() -> Result<R>,
) -> Result<(Uploaded<'g, T>, R)> {
    debug_assert!(sets.len() < UPLOAD_SLACK / UPLOAD_ALIGN);
    let images: Vec<Image> = sets.iter().map(|set| Image::new(set, &range)).collect();
    let (values_starts, total) = upload_places(&images);
    // Where each image's offsets and values go, from the allocation's start.
    let mut offsets_at = 0;
    let placed: Vec<(usize, usize, Layout, Option<u64>)> = images
        .iter()
        .zip(&values_starts)
        .map(|(image, &start)| {
            let offsets = offsets_at;
            offsets_at += image.layout.values_at();
            // A range of a batch whose series are all of one length.
            let uniform = (image.lengths.0 == image.lengths.1).then_some(image.lengths.0 as u64);
            (offsets, start, image.layout, uniform)
        })
        .collect();
    // The kernels read offsets only of batches whose series differ in length.
    let needs_offsets = placed.iter().any(|&(.., uniform)| uniform.is_none());
    // With the caller waiting, the offsets go through a kept pinned buffer,
    // and so do the values of batches in ordinary memory that fit one:
    // written there (by the staging threads when they are many) and copied
    // on while the rest is written, faster than the driver copies pageable
    // memory (1 MiB: about 50 us against 90). Page-locked batches are
    // copied from where they are.
    let caller_waits = page_locked == AsyncCopies::CallerWaits;
    let stages_values = caller_waits && keeps(total);
    let direct = |image: &Image| image.page_locked || !stages_values;
    // Where every image is staged, the allocation waits for the staging
    // threads to be under way.
    let allocate_first = images.iter().any(direct);
    let stream = &gpu.stream;
    // The allocation's address, once there is one.
    let base_at = std::cell::Cell::new(0u64);
    let allocate = || -> Result<CudaSlice<u8>> {
        // SAFETY: every byte of the images is copied in below before any
        // kernel reads it.
        let allocation =
            unsafe { stream.alloc::<u8>(total.max(1)) }.call("allocating device memory")?;
        base_at.set(allocation.device_ptr(stream).0);
        Ok(allocation)
    };
    let to_device = |to: u64, bytes: &[u8]| -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the allocation holds these bytes of the upload at `to`; a
        // copy from pageable memory has read `bytes` when it returns; one
        // from page-locked memory (a batch's, or the staging buffer) ends
        // before they may be dropped (`page_locked`).
        unsafe { driver::memcpy_htod_async(to, bytes, stream.cu_stream()) }
            .call("copying to the device")
    };
    let mut allocated = None;
    let mut staging = None;
    let mut meanwhile = Some(meanwhile);
    let mut result = None;
    let mut copy = || -> Result<()> {
        if allocate_first {
            allocated = Some(allocate()?);
            let base = base_at.get();
            let after_values = |layout: Layout| layout.times_at() - layout.values_at();
            for (image, &(_, values, layout, _)) in images.iter().zip(&placed) {
                if direct(image) {
                    let values = base + values as u64;
                    to_device(values, image.values)?;
                    to_device(values + after_values(layout) as u64, image.times)?;
                }
            }
        }
        // Every image's offsets, rebased, one after the other; none when no
        // kernel reads them.
        let offsets: Vec<u64> = images
            .iter()
            .filter(|_| needs_offsets)
            .flat_map(|image| image.offsets.iter().map(|&o| o - image.offsets[0]))
            .collect();
        let offsets = as_bytes_u64(&offsets);
        if allocate_first {
            // The copies of page-locked batches run on meanwhile.
            result = Some((meanwhile.take().expect("run once"))()?);
            if !caller_waits {
                return to_device(base_at.get(), offsets);
            }
        }
        // The offsets, then where each staged image's values go.
        let mut pieces = Vec::with_capacity(images.len() + 1);
        pieces.push(0..offsets.len());
        for (image, &(_, values, layout, _)) in images.iter().zip(&placed) {
            if !direct(image) {
                pieces.push(values..values + layout.bytes() - layout.values_at());
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
        staging = Some((buffer, &gpu.pool));
        let staged: Vec<(usize, &Image)> = images
            .iter()
            .filter(|image| !direct(image))
            .zip(&pieces[1..])
            .map(|(image, piece)| (piece.start, image))
            .collect();
        if pieces.len() == images.len() + 1 {
            // Everything is staged: copied whole, padding and all, from the
            // first values on when no offsets go.
            let start = pieces.iter().find(|piece| !piece.is_empty());
            let whole = start.map_or(0, |piece| piece.start)..len;
            pieces.clear();
            pieces.push(whole);
        }
        // While the staging threads write the first piece: the allocation
        // the copies go to.
        let prepare = || -> Result<()> {
            if allocated.is_none() {
                allocated = Some(allocate()?);
            }
            Ok(())
        };
        // While the bus carries the first piece: the call's own work.
        let after_first = || -> Result<()> {
            if let Some(meanwhile) = meanwhile.take() {
                result = Some(meanwhile()?);
            }
            Ok(())
        };
        // SAFETY: the buffer holds `len` bytes, which nothing else touches
        // until it goes back to the pool, after the copies; its memory does
        // not move with it.
        unsafe {
            stage_and_copy(
                Staging(at),
                &staged,
                &pieces,
                prepare,
                after_first,
                |piece| {
                    let bytes = std::slice::from_raw_parts(at.add(piece.start), piece.len());
                    to_device(base_at.get() + piece.start as u64, bytes)
                },
            )
        }
    };
    let copied = copy();
    let running = staging.is_some() || images.iter().any(|image| image.page_locked);
    if running && (page_locked == AsyncCopies::Waited || copied.is_err()) {
        // They end here, failed or not, before the caller may drop the
        // batch.
        wait_stream(stream, "the upload of the series")?;
    }
    copied?;
    let allocation = match allocated {
        Some(allocation) => allocation,
        None => allocate()?, // nothing was staged, nor copied
    };
    let base = base_at.get();
    let result = match result {
        Some(result) => result,
        None => (meanwhile.take().expect("run once"))()?,
    };
    let images = placed
        .into_iter()
        .map(|(offsets, values, layout, uniform)| {
            (base + offsets as u64, base + values as u64, layout, uniform)
        })
        .collect();
    Ok((
        Uploaded {
            allocation,
            images,
            first: range.start,
            staging,
            element: PhantomData,
        },
        result,
    ))
}
