//! The pipeline that feeds the pair kernels (naive, warp, local, shared)
//! tile after tile, for streamed and resident computations alike.
//!
//! Tiles go round robin to [`SLOTS`] slots, each a stream of its own with
//! its own pinned staging and result buffers, device chunk, output and
//! workspace: for each tile, wait for the slot's previous tile and copy its
//! results into the matrix, fill the staging buffer (on all cores), then
//! enqueue the chunk's copy, the NaN fill of the outputs, the launches and
//! the copy of the results back, all asynchronous on the slot's stream. So
//! the host's copies, the PCIe copies both ways and the kernels of
//! different tiles overlap. A page-locked batch
//! ([`crate::SeriesSet::into_page_locked`]) stages only its chunks'
//! offsets: its values are copied to the device straight from the batch.

use crate::error::DriverCall;
pub(crate) use crate::gpu::launch::pair_kernel::PairKernel;
use crate::gpu::plan::matrix_tiles::STAGING_BYTES;
use crate::gpu::plan::matrix_tiles::{Side, Sizes, Tile, Upload};
use crate::gpu::runtime::context::{poison_bytes, Gpu};
use crate::gpu::runtime::pinned::Pinned;
use crate::gpu::runtime::wait::{wait_event, wait_stream};
use crate::gpu::transfer::image_writes::Image;
use crate::gpu::transfer::matrix_output::Output;
use crate::gpu::transfer::uploads::DeviceImage;
use crate::interrupt;
use crate::{Float, Result, SeriesSet};
use cudarc::driver::{
    result as driver, sys, CudaEvent, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
};
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;
use timewarp_kernels::launch::pairs::PairsLaunch;
use timewarp_kernels::launch::{tile_pairs, Numbering};
use timewarp_kernels::SetRef;

/// An operand of the tiles: series on the device, or a host batch whose
/// ranges are staged tile by tile.
pub(crate) enum Operand<'a, T> {
    Device(&'a DeviceImage<T>),
    Host(&'a SeriesSet<T>),
}

/// A stream and the buffers of the tiles that run on it. Its device
/// buffers are allocated on its own stream at first use.
struct Slot<T> {
    stream: Arc<CudaStream>,
    /// Recorded after the slot's last enqueued operation.
    done: CudaEvent,
    staging: Option<Pinned>,
    results: Option<Pinned>,
    chunk: Option<CudaSlice<u8>>,
    out: Option<CudaSlice<T>>,
    workspace: Option<CudaSlice<T>>,
    /// The tile whose results are on their way into `results`, and its
    /// block.
    pending: Option<(usize, Tile)>,
}

/// The slots of one computation. Dropping it waits for the slots' streams,
/// so no copy or kernel outlives the buffers it uses, then keeps the
/// pinned buffers for the next call.
pub(crate) struct Pipeline<'g, T> {
    gpu: &'g Gpu,
    slots: Vec<Slot<T>>,
    next: usize,
    sizes: Sizes,
    /// The last block's upload (its series' range, and their image), kept
    /// for the next block of the same upload.
    image: Option<(Range<usize>, DeviceImage<T>)>,
    /// The blocks started whose tiles are not all in place yet, each with
    /// the count of those tiles.
    open: Vec<(usize, usize)>,
}

impl<T> Drop for Pipeline<'_, T> {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            // Errors here surface at the context's next call.
            let _ = wait_stream(&slot.stream, "the tile pipeline");
            for buffer in [slot.staging.take(), slot.results.take()]
                .into_iter()
                .flatten()
            {
                self.gpu.pool.give_back(buffer);
            }
        }
    }
}

impl<'g, T: Float> Pipeline<'g, T> {
    pub(crate) fn new(gpu: &'g Gpu, sizes: Sizes) -> Result<Self> {
        let slots = gpu
            .pool
            .streams(&gpu.context)?
            .into_iter()
            .map(|stream| {
                Ok(Slot {
                    stream,
                    done: gpu.context.new_event(None).call("creating an event")?,
                    staging: None,
                    results: None,
                    chunk: None,
                    out: None,
                    workspace: None,
                    pending: None,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Pipeline {
            gpu,
            slots,
            next: 0,
            sizes,
            image: None,
            open: Vec::new(),
        })
    }

    /// Series `range` of `set`, uploaded through the staging buffers of all
    /// slots in turn. Call only with no tile pending.
    pub(crate) fn upload(
        &mut self,
        set: &SeriesSet<T>,
        range: Range<usize>,
    ) -> Result<DeviceImage<T>> {
        let image = Image::new(set, &range);
        let total = image.layout.bytes();
        let first_stream = self.slots[0].stream.clone();
        // SAFETY: every byte is written below before any kernel reads it.
        let bytes = unsafe { first_stream.alloc::<u8>(total) }.call("allocating device memory")?;
        let base = bytes.device_ptr(&first_stream).0;
        // The allocation is ordered on its stream; the others copy into it.
        wait_stream(&first_stream, "the tile pipeline")?;
        let piece = self.sizes.staging.clamp(1, STAGING_BYTES);
        let result = self.copy_pieces(&image, base, piece);
        if result.is_err() {
            // Copies into `bytes` may be in flight; it is freed next.
            self.wait_all();
        }
        result?;
        Ok(DeviceImage {
            _allocation: bytes,
            base,
            layout: image.layout,
            first: range.start,
            element: PhantomData,
        })
    }

    /// Copies `image` to device address `base`: its staged bytes in pieces
    /// of `piece` bytes, through the slots' staging buffers in turn, and
    /// the parts a page-locked batch gives directly after them; waits for
    /// the copies.
    fn copy_pieces(&mut self, image: &Image, base: sys::CUdeviceptr, piece: usize) -> Result<()> {
        let (gpu, count) = (self.gpu, self.slots.len());
        let total = image.staged_bytes();
        let (mut offset, mut k) = (0, 0);
        while offset < total {
            let slot = &mut self.slots[k % count];
            k += 1;
            debug_assert!(slot.pending.is_none());
            wait_event(&slot.done, "the tile pipeline")?;
            let stream = slot.stream.cu_stream();
            let staging = slot.staging(gpu, piece)?;
            let len = staging.len().min(total - offset);
            // SAFETY: the slot's previous copy from its staging is done.
            let staged = unsafe { staging.bytes_mut(len) };
            image.write_parallel(staged, offset);
            // SAFETY: the destination holds the image's bytes; the staging
            // buffer stays untouched until the slot's event says the copy
            // is done.
            unsafe { driver::memcpy_htod_async(base + offset as u64, staged, stream) }
                .call("copying to the device")?;
            slot.done.record(&slot.stream).call("recording an event")?;
            offset += len;
        }
        let slot = &self.slots[k % count];
        for (at, bytes) in image.direct() {
            // SAFETY: the destination holds the image's bytes; the batch,
            // which the caller borrows, outlives the copy: it is waited
            // for below, or by the caller on an error.
            unsafe { driver::memcpy_htod_async(base + at as u64, bytes, slot.stream.cu_stream()) }
                .call("copying to the device")?;
            slot.done.record(&slot.stream).call("recording an event")?;
        }
        self.slots
            .iter()
            .try_for_each(|slot| wait_event(&slot.done, "the tile pipeline"))
    }

    /// Enqueues `tile` of `block` on the next slot, after waiting for that
    /// slot's previous tile and copying its results into `out` (its block
    /// into `done` if that was the block's last tile).
    fn submit<P: Copy>(
        &mut self,
        kernel: &PairKernel,
        params: P,
        (rows, cols): (&Operand<T>, &Operand<T>),
        (block, tile): (usize, Tile),
        out: &Output<T>,
        done: &mut Vec<usize>,
    ) -> Result<()> {
        let (gpu, sizes) = (self.gpu, self.sizes);
        let index = self.next;
        self.next = (index + 1) % self.slots.len();
        let placed = self.slots[index].finish(out)?;
        self.placed(placed, done);
        let slot = &mut self.slots[index];
        let (a, b) = if tile.triangle {
            let Operand::Device(image) = rows else {
                unreachable!("a triangle's rows are uploaded")
            };
            (image.view(&tile.rows), image.view(&tile.rows))
        } else {
            (
                slot.operand(gpu, sizes, rows, &tile.rows)?,
                slot.operand(gpu, sizes, cols, &tile.cols)?,
            )
        };
        let stream = slot.stream.clone();
        let outputs = tile.outputs();
        let out_ptr = slot.out(sizes.outputs)?;
        // Poison the outputs with NaN (all bits set), so that a pair the
        // kernel failed to write cannot pass for a result.
        // SAFETY: the slot's output holds at least `outputs` values.
        unsafe { poison_bytes(&stream, out_ptr, outputs * size_of::<T>()) }?;
        let workspace = slot.workspace(kernel, sizes.workspace_pairs)?;
        launch_tile(
            gpu,
            &stream,
            kernel,
            params,
            (a, b, tile.triangle),
            out_ptr,
            (workspace, sizes.workspace_pairs),
        )?;
        let results = slot.results(gpu, sizes.outputs * size_of::<T>())?;
        // SAFETY: the slot's previous results were read by `finish`.
        let results = unsafe { results.bytes_mut(outputs * size_of::<T>()) };
        // SAFETY: `out_ptr` holds `outputs` values; the pinned results stay
        // untouched until the slot's event says the copy is done.
        unsafe { driver::memcpy_dtoh_async(results, out_ptr, stream.cu_stream()) }
            .call("copying to the host")?;
        slot.done.record(&stream).call("recording an event")?;
        slot.pending = Some((block, tile));
        Ok(())
    }

    /// Counts a tile of `block` (if any) as placed; the block goes into
    /// `done` with its last tile.
    fn placed(&mut self, block: Option<usize>, done: &mut Vec<usize>) {
        let Some(block) = block else { return };
        let at = self.open.iter().position(|&(b, _)| b == block);
        let entry = &mut self.open[at.expect("a pending tile's block is open")];
        entry.1 -= 1;
        if entry.1 == 0 {
            self.open.swap_remove(at.expect("found above"));
            done.push(block);
        }
    }

    /// Waits for every slot, copies the results still pending into `out`,
    /// and returns the blocks this completes (every open one).
    pub(crate) fn finish(&mut self, out: &Output<T>) -> Result<Vec<usize>> {
        let result = self.finish_all(out);
        if result.is_err() {
            self.abandon();
        }
        result
    }

    fn finish_all(&mut self, out: &Output<T>) -> Result<Vec<usize>> {
        let mut done = Vec::new();
        for index in 0..self.slots.len() {
            let placed = self.slots[index].finish(out)?;
            self.placed(placed, &mut done);
        }
        debug_assert!(
            self.open.is_empty(),
            "every open block has its tiles placed"
        );
        Ok(done)
    }

    /// Starts block `block` of a plan whose `fixed` side it uploads: its
    /// series of `fixed` (kept from the last block when that uploaded the
    /// same ones), then its tiles against `other`, results into `out`.
    /// Returns the blocks whose results are now all in `out`: a block's
    /// last tiles are still computing when the next block starts, so the
    /// GPU does not idle between blocks ([`Self::finish`] waits for them).
    /// On an error no tile is left running, and no open block is complete.
    pub(crate) fn start_block<P: Copy>(
        &mut self,
        (kernel, params): (&PairKernel, P),
        (block, side, upload): (usize, Side, &Upload),
        fixed: &SeriesSet<T>,
        other: &Operand<T>,
        out: &Output<T>,
    ) -> Result<Vec<usize>> {
        let result =
            self.try_start_block((kernel, params), (block, side, upload), fixed, other, out);
        if result.is_err() {
            self.abandon();
        }
        result
    }

    fn try_start_block<P: Copy>(
        &mut self,
        (kernel, params): (&PairKernel, P),
        (block, side, upload): (usize, Side, &Upload),
        fixed: &SeriesSet<T>,
        other: &Operand<T>,
        out: &Output<T>,
    ) -> Result<Vec<usize>> {
        let mut done = Vec::new();
        let kept = matches!(&self.image, Some((range, _)) if *range == upload.series);
        if !kept {
            // The upload goes through the slots' staging buffers, and the
            // last image is freed: no tile may be in flight.
            done = self.finish_all(out)?;
            self.image = None;
            let image = self.upload(fixed, upload.series.clone())?;
            self.image = Some((upload.series.clone(), image));
        }
        self.open.push((block, upload.tiles.len()));
        let (range, image) = self.image.take().expect("uploaded above");
        let uploaded = Operand::Device(&image);
        let (rows, cols) = match side {
            Side::Rows => (&uploaded, other),
            Side::Cols => (other, &uploaded),
        };
        let submitted = upload.tiles.iter().try_for_each(|tile| {
            interrupt::check()?;
            let tile = (block, tile.clone());
            self.submit(kernel, params, (rows, cols), tile, out, &mut done)
        });
        // Back before any return: an error waits for the tiles that read
        // it before it is freed.
        self.image = Some((range, image));
        submitted?;
        if upload.tiles.is_empty() {
            self.placed_empty(block, &mut done);
        }
        Ok(done)
    }

    /// A block of no tiles is complete as soon as it starts.
    fn placed_empty(&mut self, block: usize, done: &mut Vec<usize>) {
        self.open.retain(|&(b, _)| b != block);
        done.push(block);
    }

    /// After an error: waits for every tile still running, forgets them
    /// and their blocks (none of which is complete), and frees the upload.
    fn abandon(&mut self) {
        self.wait_all();
        for slot in &mut self.slots {
            slot.pending = None;
        }
        self.open.clear();
        self.image = None;
    }

    /// Waits for every slot's stream, ignoring errors (on the way out of a
    /// failed computation, before its buffers are freed).
    fn wait_all(&self) {
        for slot in &self.slots {
            let _ = wait_stream(&slot.stream, "the tile pipeline");
        }
    }
}

impl<T: Float> Slot<T> {
    /// Waits for the pending tile, if any, and copies its results into `out`
    /// (whose part for them is made ready while the GPU computes them);
    /// returns the tile's block.
    fn finish(&mut self, out: &Output<T>) -> Result<Option<usize>> {
        let Some((block, tile)) = self.pending.take() else {
            return Ok(None);
        };
        out.prepare(&tile)?;
        wait_event(&self.done, "the tile pipeline")?;
        let results = self.results.as_ref().expect("a pending tile has results");
        // SAFETY: the copy into `results` is done (the event), and it
        // wrote `tile.outputs()` values.
        let values = unsafe { results.values::<T>(tile.outputs()) };
        out.place(&tile, values);
        Ok(Some(block))
    }

    fn staging(&mut self, gpu: &Gpu, bytes: usize) -> Result<&mut Pinned> {
        if self.staging.as_ref().is_none_or(|s| s.len() < bytes) {
            if let Some(old) = self.staging.take() {
                gpu.pool.give_back(old);
            }
            self.staging = Some(gpu.pool.take(&gpu.context, bytes, true)?);
        }
        Ok(self.staging.as_mut().expect("just set"))
    }

    fn results(&mut self, gpu: &Gpu, bytes: usize) -> Result<&mut Pinned> {
        if self.results.is_none() {
            self.results = Some(gpu.pool.take(&gpu.context, bytes, false)?);
        }
        Ok(self.results.as_mut().expect("just set"))
    }

    /// The device address of the slot's output buffer.
    fn out(&mut self, outputs: usize) -> Result<sys::CUdeviceptr> {
        if self.out.is_none() {
            // SAFETY: every tile fills its part with NaN before launching.
            self.out = Some(
                unsafe { self.stream.alloc::<T>(outputs.max(1)) }
                    .call("allocating device memory")?,
            );
        }
        let out = self.out.as_ref().expect("just set");
        Ok(out.device_ptr(&self.stream).0)
    }

    /// The device address of the slot's workspace, or 0 when the kernel
    /// needs none.
    fn workspace(&mut self, kernel: &PairKernel, pairs: u64) -> Result<sys::CUdeviceptr> {
        if kernel.workspace_per_pair == 0 || pairs == 0 {
            return Ok(0);
        }
        if self.workspace.is_none() {
            let values = pairs as usize * kernel.workspace_per_pair;
            self.workspace = Some(
                self.stream
                    .alloc_zeros::<T>(values)
                    .call("allocating device memory")?,
            );
        }
        let workspace = self.workspace.as_ref().expect("just set");
        Ok(workspace.device_ptr(&self.stream).0)
    }

    /// The kernels' view of series `range` of `operand`: a view of its
    /// device image, or its bytes staged and copied into the slot's chunk.
    fn operand(
        &mut self,
        gpu: &Gpu,
        sizes: Sizes,
        operand: &Operand<T>,
        range: &Range<usize>,
    ) -> Result<SetRef<T>> {
        let set = match operand {
            Operand::Device(image) => return Ok(image.view(range)),
            Operand::Host(set) => set,
        };
        let image = Image::new(set, range);
        if self.chunk.is_none() {
            // SAFETY: each tile copies its chunk in before its launches.
            self.chunk = Some(
                unsafe { self.stream.alloc::<u8>(sizes.chunk) }.call("allocating device memory")?,
            );
        }
        let chunk = self.chunk.as_ref().expect("just set");
        assert!(
            image.layout.bytes() <= chunk.len(),
            "the plan sized the chunks"
        );
        let chunk = chunk.device_ptr(&self.stream).0;
        let stream = self.stream.cu_stream();
        let staging = self.staging(gpu, sizes.staging)?;
        // SAFETY: `finish` waited for the slot's previous copies.
        let staged = unsafe { staging.bytes_mut(image.staged_bytes()) };
        image.write_parallel(staged, 0);
        // SAFETY: the chunk holds the image; the staging buffer stays
        // untouched until the slot's event says the copy is done.
        unsafe { driver::memcpy_htod_async(chunk, staged, stream) }
            .call("copying to the device")?;
        for (at, bytes) in image.direct() {
            // SAFETY: the chunk holds the image; the page-locked batch,
            // which the computation borrows, outlives the copy: the
            // pipeline waits for its slots before it is dropped.
            unsafe { driver::memcpy_htod_async(chunk + at as u64, bytes, stream) }
                .call("copying to the device")?;
        }
        Ok(image.layout.set_ref(chunk, 0, range.len()))
    }
}

/// The pairs of one tile, `a` against `b` (or the upper triangle of `a`),
/// on `stream`, in launches whose rows fit the workspace of `workspace.1`
/// pairs at address `workspace.0`.
fn launch_tile<T: Float, P: Copy>(
    gpu: &Gpu,
    stream: &CudaStream,
    kernel: &PairKernel,
    params: P,
    (a, b, triangle): (SetRef<T>, SetRef<T>, bool),
    out: sys::CUdeviceptr,
    workspace: (sys::CUdeviceptr, u64),
) -> Result<()> {
    let pairs = tile_pairs(a.count, b.count, triangle);
    let chunk = match kernel.workspace_per_pair {
        0 => pairs,
        _ => pairs.min(workspace.1),
    };
    let pairs_per_block = (kernel.threads_per_block / kernel.threads_per_pair) as u64;
    let mut first_pair = 0;
    while first_pair < pairs {
        let pair_count = chunk.min(pairs - first_pair);
        let launch = PairsLaunch {
            a,
            b,
            params,
            out: out as *mut T,
            workspace: workspace.0 as *mut T,
            row_len: kernel.row_len as u64,
            first_pair,
            pair_count,
            numbering: if triangle {
                Numbering::Triangle
            } else {
                Numbering::Matrix
            },
        };
        let config = LaunchConfig {
            grid_dim: (pair_count.div_ceil(pairs_per_block) as u32, 1, 1),
            block_dim: (kernel.threads_per_block, 1, 1),
            shared_mem_bytes: kernel.shared_bytes,
        };
        // SAFETY: `a` and `b` view live device images; `out` holds
        // a.count x b.count values; the workspace holds `workspace.1`
        // >= pair_count pairs, or the kernel needs none; the shared
        // memory is what the kernel was sized for.
        unsafe { gpu.launch(stream, &kernel.function, config, false, launch) }?;
        first_pair += pair_count;
    }
    Ok(())
}
