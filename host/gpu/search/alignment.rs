//! The open-ended subsequence alignment's device side: the query and a
//! chunk of the series on the GPU, the `dtw_subsequence` kernel's buffers
//! (checkpoints, tiles' bests, segments' ends and handoffs, the panels'
//! borders, marks and counts), a pass launched and waited for, the bests
//! brought back and the chunk's last column kept on the device for the
//! next chunk. The passes' policy is the caller's
//! (`crate::search::subsequence_gpu`); the kernel is
//! `kernels-gpu/src/launch/subsequence.rs`.

use crate::error::DriverCall;
use crate::gpu::plan::subsequence::{alignment_shape, AlignmentShape, THREADS};
use crate::gpu::runtime::context::{Busy, Gpu};
use crate::gpu::runtime::wait::wait_stream;
use crate::{Error, Result};
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr};
use std::mem::size_of;
use timewarp_kernels::launch::subsequence::{Best, Reach, SubsequenceLaunch};
use timewarp_kernels::KernelId;

/// 64-bit words of a [`Reach`] and of a [`Best`]: the buffers are words,
/// read back and decoded by hand (cudarc's `DeviceRepr` is not the kernel
/// crate's to implement).
const REACH_WORDS: usize = size_of::<Reach>() / 8;
const BEST_WORDS: usize = size_of::<Best>() / 8;

/// An alignment on one GPU, held for its whole length.
pub(crate) struct AlignmentDevice<'g> {
    gpu: &'g Gpu,
    _busy: Busy<'g>,
    shape: AlignmentShape,
    m: usize,
    dims: usize,
    kernel: (KernelId, CudaFunction),
    query: CudaSlice<f64>,
    series: CudaSlice<f64>,
    /// The column before the chunk now on the device.
    carried: CudaSlice<u64>,
    checkpoints: CudaSlice<u64>,
    ends: CudaSlice<u64>,
    handoff: CudaSlice<u64>,
    bests: CudaSlice<u64>,
    /// The panels' borders, where the query takes more than one panel.
    borders: Option<CudaSlice<u64>>,
    dirty: CudaSlice<u32>,
    changed: CudaSlice<u32>,
    /// The chunk now on the device: its columns and its first sample's
    /// index in the series.
    columns: usize,
    first: usize,
}

impl<'g> AlignmentDevice<'g> {
    /// Opens the alignment of `query` (`m x dims`, row-major, finite) in a
    /// series of `n` samples on `gpu`, within `memory_budget` (or 3/4 of
    /// the free memory): the query on the device, the buffers of a chunk
    /// allocated, the column before the series (infinite) carried.
    pub fn open(
        gpu: &'g Gpu,
        query: &[f64],
        dims: usize,
        n: usize,
        memory_budget: Option<usize>,
    ) -> Result<Self> {
        let (busy, budget) = gpu.begin(memory_budget)?;
        let m = query.len() / dims;
        let sms = gpu.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let shape = alignment_shape((m, dims), n, sms, budget)?;
        let id = KernelId::subsequence(shape.rows, dims == 1);
        let function = gpu.function(id)?;
        let stream = &gpu.stream;
        let (segments, slots) = (shape.segments(shape.chunk), shape.slots(shape.chunk));
        let words = |n: usize| {
            stream
                .alloc_zeros::<u64>(n)
                .call("allocating device memory")
        };
        let flags = |n: usize| {
            stream
                .alloc_zeros::<u32>(n)
                .call("allocating device memory")
        };
        let panels = m.div_ceil(32 * shape.rows as usize);
        let infinite: Vec<u64> = (0..m).flat_map(|_| [f64::INFINITY.to_bits(), 0]).collect();
        Ok(AlignmentDevice {
            gpu,
            _busy: busy,
            shape,
            m,
            dims,
            kernel: (id, function),
            query: stream.clone_htod(query).call("copying to the device")?,
            series: stream
                .alloc_zeros::<f64>(shape.chunk * dims)
                .call("allocating device memory")?,
            carried: stream.clone_htod(&infinite).call("copying to the device")?,
            checkpoints: words(slots * m * REACH_WORDS)?,
            ends: words(segments * m * REACH_WORDS)?,
            handoff: words(2 * segments * m * REACH_WORDS)?,
            bests: words(slots * BEST_WORDS)?,
            borders: match panels {
                1 => None,
                _ => Some(words(2 * segments * shape.tile * REACH_WORDS)?),
            },
            dirty: flags(2 * segments)?,
            changed: flags(segments + 1)?,
            columns: 0,
            first: 0,
        })
    }

    /// Columns a chunk holds at most.
    pub fn chunk_columns(&self) -> usize {
        self.shape.chunk
    }

    /// Segments of the chunk now on the device.
    fn segments(&self) -> usize {
        self.shape.segments(self.columns)
    }

    /// Uploads the chunk `x` (whole samples, finite, at most a chunk)
    /// whose first sample is the series' `first`, and zeroes the marks and
    /// counts; returns its segments.
    pub fn load(&mut self, first: usize, x: &[f64]) -> Result<usize> {
        let columns = x.len() / self.dims;
        assert!(
            columns >= 1 && columns <= self.shape.chunk,
            "a chunk of the planned size"
        );
        let stream = self.gpu.stream.clone();
        stream
            .memcpy_htod(x, &mut self.series)
            .call("copying to the device")?;
        stream
            .memset_zeros(&mut self.dirty)
            .call("zeroing device memory")?;
        stream
            .memset_zeros(&mut self.changed)
            .call("zeroing device memory")?;
        (self.columns, self.first) = (columns, first);
        Ok(self.segments())
    }

    /// The launch parameter of pass `pass` over the chunk now on the
    /// device.
    fn launch(&self, pass: u32) -> SubsequenceLaunch {
        let stream = &self.gpu.stream;
        let words = |slice: &CudaSlice<u64>| slice.device_ptr(stream).0;
        let flags = |slice: &CudaSlice<u32>| slice.device_ptr(stream).0 as *mut u32;
        SubsequenceLaunch {
            query: self.query.device_ptr(stream).0 as *const f64,
            m: self.m as u64,
            dims: self.dims as u64,
            series: self.series.device_ptr(stream).0 as *const f64,
            columns: self.columns as u64,
            first: self.first as u64,
            segment: self.shape.segment as u64,
            tile: self.shape.tile as u64,
            segments: self.segments() as u64,
            pass: u64::from(pass),
            carried: words(&self.carried) as *const Reach,
            checkpoints: words(&self.checkpoints) as *mut Reach,
            ends: words(&self.ends) as *mut Reach,
            handoff: words(&self.handoff) as *mut Reach,
            bests: words(&self.bests) as *mut Best,
            borders: self
                .borders
                .as_ref()
                .map_or(std::ptr::null_mut(), |b| words(b) as *mut Reach),
            dirty: flags(&self.dirty),
            changed: flags(&self.changed),
        }
    }

    /// Pass `pass` over the chunk (a warp a segment), waited for: the
    /// segments whose last column changed and that have a successor.
    pub fn pass(&mut self, pass: u32) -> Result<u32> {
        let segments = self.segments();
        assert!(pass as usize <= segments, "at most a pass a segment");
        let blocks = u32::try_from((segments * 32).div_ceil(THREADS))
            .map_err(|_| Error::GpuFailure(format!("an alignment of {segments} segments")))?;
        let (id, function) = &self.kernel;
        // SAFETY: the kernel takes a `SubsequenceLaunch`, whose pointers are
        // this alignment's buffers, allocated for a chunk of `shape.chunk`
        // columns (its segments and tiles) and a query of `m` samples of
        // `dims` values, and the chunk now loaded has at most that many
        // columns; the univariate twin is taken only where `dims` is 1; a
        // warp a segment, and the kernel checks its warp's index against
        // the segments.
        unsafe {
            self.gpu
                .launch_blocks(function, (blocks, THREADS as u32), 0, self.launch(pass))
        }?;
        let stream = self.gpu.stream.clone();
        wait_stream(&stream, &id.to_string())?;
        let mut changed = [0u32];
        stream
            .memcpy_dtoh(
                &self.changed.slice(pass as usize..=pass as usize),
                &mut changed[..],
            )
            .call("copying to the host")?;
        Ok(changed[0])
    }

    /// The chunk's tiles' slots of best ends (every segment's `segment /
    /// tile` slots, in order), and its last column carried to the next
    /// chunk.
    pub fn finish(&mut self) -> Result<Vec<Best>> {
        let stream = self.gpu.stream.clone();
        let slots = self.shape.slots(self.columns);
        let mut words = vec![0u64; slots * BEST_WORDS];
        stream
            .memcpy_dtoh(&self.bests.slice(..words.len()), &mut words[..])
            .call("copying to the host")?;
        let cells = self.m * REACH_WORDS;
        let last = (self.segments() - 1) * cells;
        stream
            .memcpy_dtod(
                &self.ends.slice(last..last + cells),
                &mut self.carried.slice_mut(..),
            )
            .call("copying on the device")?;
        Ok(words
            .chunks_exact(BEST_WORDS)
            .map(|w| Best {
                cost: f64::from_bits(w[0]),
                end: w[1],
                start: w[2],
            })
            .collect())
    }

    /// Tile and segment columns.
    pub fn tiles(&self) -> (usize, usize) {
        (self.shape.tile, self.shape.segment)
    }

    /// Columns of the chunk now on the device.
    pub fn columns(&self) -> usize {
        self.columns
    }
}
