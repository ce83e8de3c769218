//! Series in device memory: resident sets ([`DeviceSeriesSet`]), the
//! images the streamed pipeline uploads ([`DeviceImage`]), and the ranges
//! of host batches the one-launch-at-a-time launchers upload for a call
//! ([`upload_ranges`], read as [`DeviceBatch`]es).

use super::context::Gpu;
use super::device::gpu_error;
use super::layout::{as_bytes_u64, Image, Layout};
use super::staging::{Pinned, PinnedPool};
use crate::{Float, Result, SeriesSet};
use cudarc::driver::{result as driver, CudaSlice, DevicePtr};
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
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
        view
    }
}

/// `count` series of `len` samples of `dims` values each, C-contiguous in
/// device memory the caller owns and keeps alive (a CUDA tensor's), with
/// their offsets in an allocation of ours: read in place, never freed.
pub(crate) struct ForeignBatch<T> {
    offsets_on_device: CudaSlice<u64>,
    offsets: Vec<u64>,
    values_address: u64,
    layout: Layout,
    element: PhantomData<T>,
}

impl<T: Float> ForeignBatch<T> {
    /// The batch at device address `values`; its offsets are uploaded on
    /// the GPU's stream.
    pub(crate) fn new(
        gpu: &Gpu,
        values: u64,
        (count, len, dims): (usize, usize, usize),
    ) -> Result<Self> {
        let offsets: Vec<u64> = (0..=count).map(|k| (k * len) as u64).collect();
        let offsets_on_device = gpu.stream.clone_htod(&offsets).map_err(gpu_error)?;
        Ok(ForeignBatch {
            offsets_on_device,
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
        })
    }

    /// The batch as the paired kernels read it.
    pub(crate) fn batch(&self, gpu: &Gpu) -> DeviceBatch<'_, T> {
        DeviceBatch {
            base: self.offsets_on_device.device_ptr(&gpu.stream).0,
            layout: self.layout,
            values_address: self.values_address,
            offsets: &self.offsets,
            memory: PhantomData,
        }
    }
}

/// Ranges of host batches uploaded for one computation, an image each, in
/// one allocation ([`upload_ranges`]).
pub(crate) struct Uploaded<'a, T> {
    allocation: CudaSlice<u8>,
    /// Each image's address and layout.
    images: Vec<(u64, Layout)>,
    /// The range's first series in its host batch.
    first: usize,
    /// The pinned buffer the offsets were copied from, and its pool: given
    /// back when the upload is dropped, after the copies (the caller waits
    /// for them first, [`AsyncCopies::CallerWaits`]).
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

/// Images of an upload start at multiples of this in its allocation.
const UPLOAD_ALIGN: usize = 256;
/// What an upload of two images may take beyond their bytes: their
/// padding.
pub(crate) const UPLOAD_SLACK: usize = 2 * UPLOAD_ALIGN;

impl<T: Float> Uploaded<'_, T> {
    /// Bytes of device memory it holds.
    pub(crate) fn bytes(&self) -> usize {
        self.allocation.len()
    }

    /// Image `index` as the paired kernels read it; `set` is the host
    /// batch it was uploaded from.
    pub(crate) fn batch<'b>(&'b self, index: usize, set: &'b SeriesSet<T>) -> DeviceBatch<'b, T> {
        let (base, layout) = self.images[index];
        DeviceBatch {
            base,
            layout,
            values_address: base + layout.values_at() as u64,
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

/// Series `range` of each of `sets`, uploaded for one computation: an image
/// each, in one allocation, copied on the GPU's stream straight from the
/// batches' own arrays (their offsets rebased), the values first. The
/// caller holds the GPU's lock and runs the kernels that read the images
/// on the same stream.
pub(crate) fn upload_ranges<'g, T: Float>(
    gpu: &'g Gpu,
    sets: &[&SeriesSet<T>],
    range: Range<usize>,
    page_locked: AsyncCopies,
) -> Result<Uploaded<'g, T>> {
    debug_assert!(sets.len() <= UPLOAD_SLACK / UPLOAD_ALIGN);
    let images: Vec<Image> = sets.iter().map(|set| Image::new(set, &range)).collect();
    let mut starts = Vec::with_capacity(images.len());
    let mut total = 0;
    for image in &images {
        starts.push(total);
        total = (total + image.layout.bytes()).next_multiple_of(UPLOAD_ALIGN);
    }
    // Every image's offsets, rebased, one after the other.
    let offsets: Vec<u64> = images
        .iter()
        .flat_map(|image| image.offsets.iter().map(|&o| o - image.offsets[0]))
        .collect();
    let mut staging = None;
    let offsets: &[u8] = if page_locked == AsyncCopies::CallerWaits {
        let bytes = as_bytes_u64(&offsets);
        let mut buffer = gpu.pool.take(&gpu.context, bytes.len(), true)?;
        // SAFETY: a buffer taken from the pool has no copy in flight.
        let staged = unsafe { buffer.bytes_mut(bytes.len()) };
        staged.copy_from_slice(bytes);
        let (at, len) = (staged.as_ptr(), staged.len());
        staging = Some((buffer, &gpu.pool));
        // SAFETY: the buffer (its memory does not move with it) is not
        // written again before it goes back to the pool, after the copies.
        unsafe { std::slice::from_raw_parts(at, len) }
    } else {
        as_bytes_u64(&offsets)
    };
    let stream = &gpu.stream;
    // SAFETY: every byte of the images is copied in below before any
    // kernel reads it.
    let allocation = unsafe { stream.alloc::<u8>(total.max(1)) }.map_err(gpu_error)?;
    let base = allocation.device_ptr(stream).0;
    let placed: Vec<(u64, Layout)> = images
        .iter()
        .zip(&starts)
        .map(|(image, &start)| (base + start as u64, image.layout))
        .collect();
    let copy = || -> Result<()> {
        let mut copies = Vec::with_capacity(3 * images.len());
        let mut offsets_at = 0;
        for (image, &(at, layout)) in images.iter().zip(&placed) {
            let offsets_len = (layout.count + 1) * size_of::<u64>();
            copies.push((at + layout.values_at() as u64, image.values));
            copies.push((at + layout.times_at() as u64, image.times));
            copies.push((at, &offsets[offsets_at..offsets_at + offsets_len]));
            offsets_at += offsets_len;
        }
        // The values first: the larger copies start while the rest is
        // enqueued.
        copies.sort_by_key(|&(_, bytes)| std::cmp::Reverse(bytes.len()));
        for (to, bytes) in copies {
            if !bytes.is_empty() {
                // SAFETY: the allocation holds the image's bytes at `to`; a
                // copy from pageable memory has read `bytes` when it
                // returns; one from page-locked memory (a batch's, or the
                // staged offsets) ends before they may be dropped
                // (`page_locked`).
                unsafe { driver::memcpy_htod_async(to, bytes, stream.cu_stream()) }
                    .map_err(gpu_error)?;
            }
        }
        Ok(())
    };
    let copied = copy();
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
