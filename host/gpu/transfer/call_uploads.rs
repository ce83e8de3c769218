//! The ranges of host batches that the one-launch-at-a-time launchers
//! (stencil, paired, gradient, long pairs, anti-diagonal) upload for one
//! call ([`upload_ranges`]), in one allocation, read as
//! [`DeviceBatch`]es.

use super::image_writes::{as_bytes_u64, Image};
use super::staged_copy::{stage_and_copy, Staging};
use super::uploads::DeviceBatch;
use crate::error::DriverCall;
use crate::gpu::plan::layout::Layout;
use crate::gpu::plan::paired_shapes::lengths_range;
use crate::gpu::runtime::context::Gpu;
use crate::gpu::runtime::pinned::{keeps, Pinned, PinnedPool};
use crate::gpu::runtime::wait::wait_stream;
use crate::{Float, Result, SeriesSet};
use cudarc::driver::{result as driver, CudaSlice, DevicePtr};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Range;

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
    let placement = Placement::new(&images, page_locked);
    let mut upload = Upload {
        gpu,
        placement: &placement,
        images: &images,
        allocated: None,
        base: Cell::new(0),
        staging: None,
    };
    let mut meanwhile = Meanwhile {
        work: Some(meanwhile),
        result: None,
    };
    let copied = upload.copy(&mut meanwhile);
    let running = upload.staging.is_some() || images.iter().any(|image| image.page_locked);
    if running && (page_locked == AsyncCopies::Waited || copied.is_err()) {
        // They end here, failed or not, before the caller may drop the
        // batch.
        wait_stream(&gpu.stream, "the upload of the series")?;
    }
    copied?;
    let allocation = match upload.allocated.take() {
        Some(allocation) => allocation,
        // Nothing was staged, nor copied.
        None => allocate(gpu, placement.total, &upload.base)?,
    };
    let base = upload.base.get();
    let result = meanwhile.into_result()?;
    let images = placement
        .placed
        .iter()
        .map(|&(offsets, values, layout, uniform)| {
            (base + offsets as u64, base + values as u64, layout, uniform)
        })
        .collect();
    Ok((
        Uploaded {
            allocation,
            images,
            first: range.start,
            staging: upload.staging.take(),
            element: PhantomData,
        },
        result,
    ))
}

/// Where each image of an upload goes, and which way its bytes travel.
struct Placement {
    /// Each image's offsets and values from the allocation's start, its
    /// layout, and the length of all its series where they are all of one.
    placed: Vec<(usize, usize, Layout, Option<u64>)>,
    total: usize,
    /// Whether any kernel reads offsets: only those of batches whose series
    /// differ in length.
    needs_offsets: bool,
    caller_waits: bool,
    /// Whether the values of batches in ordinary memory go through a kept
    /// pinned buffer.
    stages_values: bool,
}

impl Placement {
    fn new(images: &[Image], page_locked: AsyncCopies) -> Self {
        let (values_starts, total) = upload_places(images);
        let mut offsets_at = 0;
        let placed: Vec<(usize, usize, Layout, Option<u64>)> = images
            .iter()
            .zip(&values_starts)
            .map(|(image, &start)| {
                let offsets = offsets_at;
                offsets_at += image.layout.values_at();
                // A range of a batch whose series are all of one length.
                let uniform =
                    (image.lengths.0 == image.lengths.1).then_some(image.lengths.0 as u64);
                (offsets, start, image.layout, uniform)
            })
            .collect();
        let needs_offsets = placed.iter().any(|&(.., uniform)| uniform.is_none());
        // With the caller waiting, the offsets go through a kept pinned
        // buffer, and so do the values of batches in ordinary memory that
        // fit one: written there (by the staging threads when they are
        // many) and copied on while the rest is written, faster than the
        // driver copies pageable memory (1 MiB: about 50 us against 90).
        // Page-locked batches are copied from where they are.
        let caller_waits = page_locked == AsyncCopies::CallerWaits;
        Placement {
            placed,
            total,
            needs_offsets,
            caller_waits,
            stages_values: caller_waits && keeps(total),
        }
    }

    /// Whether `image` is copied from where it is rather than staged.
    fn direct(&self, image: &Image) -> bool {
        image.page_locked || !self.stages_values
    }
}

/// The caller's work that runs once while an upload gets under way.
struct Meanwhile<F, R> {
    work: Option<F>,
    result: Option<R>,
}

impl<F: FnOnce() -> Result<R>, R> Meanwhile<F, R> {
    /// Runs the work unless it has run.
    fn run(&mut self) -> Result<()> {
        if let Some(work) = self.work.take() {
            self.result = Some(work()?);
        }
        Ok(())
    }

    fn into_result(mut self) -> Result<R> {
        self.run()?;
        Ok(self.result.expect("the work has run"))
    }
}

/// An upload under way: its allocation once made (its address in `base`),
/// and the pinned buffer it staged through.
struct Upload<'g, 'i> {
    gpu: &'g Gpu,
    placement: &'i Placement,
    images: &'i [Image<'i>],
    allocated: Option<CudaSlice<u8>>,
    base: Cell<u64>,
    staging: Option<(Pinned, &'g PinnedPool)>,
}

/// The upload's device memory, `total` bytes; its address goes to `base`.
fn allocate(gpu: &Gpu, total: usize, base: &Cell<u64>) -> Result<CudaSlice<u8>> {
    // SAFETY: every byte of the images is copied in before any kernel
    // reads it.
    let allocation =
        unsafe { gpu.stream.alloc::<u8>(total.max(1)) }.call("allocating device memory")?;
    base.set(allocation.device_ptr(&gpu.stream).0);
    Ok(allocation)
}

/// Copies `bytes` to device address `to` on `gpu`'s stream.
fn to_device(gpu: &Gpu, to: u64, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    // SAFETY: the allocation holds these bytes of the upload at `to`; a
    // copy from pageable memory has read `bytes` when it returns; one from
    // page-locked memory (a batch's, or the staging buffer) ends before they
    // may be dropped (`page_locked`).
    unsafe { driver::memcpy_htod_async(to, bytes, gpu.stream.cu_stream()) }
        .call("copying to the device")
}

impl<'g> Upload<'g, '_> {
    /// Every image's bytes on their way: the direct copies first (after the
    /// allocation), then the offsets and the staged values through a pinned
    /// buffer; `meanwhile` runs while the first of them are under way.
    fn copy<F: FnOnce() -> Result<R>, R>(&mut self, meanwhile: &mut Meanwhile<F, R>) -> Result<()> {
        let placement = self.placement;
        // Where every image is staged, the allocation waits for the staging
        // threads to be under way.
        let allocate_first = self.images.iter().any(|image| placement.direct(image));
        if allocate_first {
            self.allocated = Some(allocate(self.gpu, placement.total, &self.base)?);
            self.copy_direct()?;
        }
        // Every image's offsets, rebased, one after the other; none when no
        // kernel reads them.
        let offsets: Vec<u64> = self
            .images
            .iter()
            .filter(|_| placement.needs_offsets)
            .flat_map(|image| image.offsets.iter().map(|&o| o - image.offsets[0]))
            .collect();
        let offsets = as_bytes_u64(&offsets);
        if allocate_first {
            // The copies of page-locked batches run on meanwhile.
            meanwhile.run()?;
            if !placement.caller_waits {
                return to_device(self.gpu, self.base.get(), offsets);
            }
        }
        self.stage(offsets, meanwhile)
    }

    /// The values and timestamps of the images copied from where they are.
    fn copy_direct(&self) -> Result<()> {
        let base = self.base.get();
        let after_values = |layout: Layout| layout.times_at() - layout.values_at();
        for (image, &(_, values, layout, _)) in self.images.iter().zip(&self.placement.placed) {
            if self.placement.direct(image) {
                let values = base + values as u64;
                to_device(self.gpu, values, image.values)?;
                to_device(self.gpu, values + after_values(layout) as u64, image.times)?;
            }
        }
        Ok(())
    }

    /// The offsets, then the staged images' values, written into a kept
    /// pinned buffer and copied on as each piece is written.
    fn stage<F: FnOnce() -> Result<R>, R>(
        &mut self,
        offsets: &[u8],
        meanwhile: &mut Meanwhile<F, R>,
    ) -> Result<()> {
        let (gpu, placement, images) = (self.gpu, self.placement, self.images);
        // The offsets, then where each staged image's values go.
        let mut pieces = Vec::with_capacity(images.len() + 1);
        pieces.push(0..offsets.len());
        for (image, &(_, values, layout, _)) in images.iter().zip(&placement.placed) {
            if !placement.direct(image) {
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
        self.staging = Some((buffer, &gpu.pool));
        let staged: Vec<(usize, &Image)> = images
            .iter()
            .filter(|image| !placement.direct(image))
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
        let (allocated, base) = (&mut self.allocated, &self.base);
        // While the staging threads write the first piece: the allocation
        // the copies go to.
        let prepare = || -> Result<()> {
            if allocated.is_none() {
                *allocated = Some(allocate(gpu, placement.total, base)?);
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
                // While the bus carries the first piece: the call's own work.
                || meanwhile.run(),
                |piece| {
                    let bytes = std::slice::from_raw_parts(at.add(piece.start), piece.len());
                    to_device(gpu, base.get() + piece.start as u64, bytes)
                },
            )
        }
    }
}
