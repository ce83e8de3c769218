//! Batches on the device and the pipeline that feeds the pair kernels.
//!
//! Two modes:
//!
//! - **Resident**: [`crate::upload`] copies a batch to the device once
//!   ([`DeviceSeriesSet`]); [`crate::distance_matrix_resident`] then runs any
//!   number of query batches against it without moving it again.
//! - **Streamed** (what [`crate::distance_matrix`] does with the naive and
//!   warp kernels): one side of the matrix is uploaded in blocks, the other
//!   is copied chunk by chunk from the batch's own contiguous arrays into
//!   pinned staging buffers and on to the device, each chunk's copies
//!   overlapping the kernels and result copies of the others.
//!
//! Either way the work is a list of tiles, a range of rows (series of `a`,
//! the queries) against a range of columns (series of `b`, the database).
//! One operand of a tile is a view of a batch already on the device (a
//! resident set, or the block uploaded for the tiles that use it); the other
//! is a view too, or a chunk staged from host memory for that tile. Tiles go
//! round robin to [`SLOTS`] slots, each a stream of its own with its own
//! pinned staging and result buffers, device chunk, output and workspace:
//! for each tile, wait for the slot's previous tile and copy its results
//! into the matrix, fill the staging buffer (on all cores), then enqueue the
//! chunk's copy, the NaN fill of the outputs, the launches and the copy of
//! the results back, all asynchronous on the slot's stream.
//!
//! Memory: of the budget, a quarter for the uploaded block, the rest split
//! between the slots (a quarter each for the chunk and the outputs, half for
//! the workspace), so batches larger than the device run in pieces. Pinned
//! host buffers are kept between calls (allocating them is slow).

use super::{gpu_error, Gpu, KernelParams, PairKernel, Variant};
use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::{
    result as driver, sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, LaunchConfig,
    PinnedHostSlice,
};
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use timewarp_kernels::launch::tile_pairs;
use timewarp_kernels::{PairsLaunch, SetRef};

/// Streams a computation spreads its tiles over.
pub(super) const SLOTS: usize = 4;
/// Largest chunk of a streamed batch (and piece of an upload) staged at
/// once: small enough that the first copy and the last kernel, which
/// nothing overlaps, are short; large enough that a chunk's kernels fill
/// the GPU.
const STAGING_BYTES: usize = 16 << 20;
/// Largest output of one tile.
const RESULT_BYTES: usize = 16 << 20;
/// Streamed chunks get at least this many series (when the other side has
/// that many) before the uploaded block is cut smaller instead.
const MIN_CHUNK_SERIES: usize = 256;
/// Host copies at least this large are spread over threads, in pieces.
const PARALLEL_COPY_BYTES: usize = 1 << 20;
const COPY_PIECE_BYTES: usize = 256 << 10;
/// Pinned buffers are allocated in multiples of this, and kept for the
/// next call up to `KEEP_PINNED_BYTES`.
const PINNED_GRANULE: usize = 64 << 10;
const KEEP_PINNED_BYTES: usize = 2 * STAGING_BYTES;

/// A batch in device memory, uploaded once by [`crate::upload`] and read by
/// every computation against it until it is dropped.
pub struct DeviceSeriesSet<T> {
    image: DeviceImage<T>,
    /// The `len + 1` sample offsets, also on the host: the lengths the
    /// paired computations plan with.
    offsets: Vec<u64>,
    max_len: usize,
    min_len: usize,
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
    pub(super) fn batch(&self) -> DeviceBatch<'_, T> {
        DeviceBatch {
            base: self.image.base,
            layout: self.image.layout,
            offsets: &self.offsets,
            memory: PhantomData,
        }
    }
}

/// Series in device memory as the paired kernels (`soft_dtw.rs`) read
/// them: a device image (a resident set, or a range of a host batch
/// uploaded for one call) and its offsets on the host, from which the host
/// plans launches and sizes outputs. It borrows what owns the image.
pub(super) struct DeviceBatch<'a, T> {
    base: sys::CUdeviceptr,
    layout: Layout,
    /// `len + 1` sample offsets; only their differences count (those of an
    /// uploaded range start where the range starts in its host batch).
    offsets: &'a [u64],
    memory: PhantomData<&'a T>,
}

impl<'a, T> DeviceBatch<'a, T> {
    /// The `len + 1` sample offsets of its series.
    pub(super) fn offsets(&self) -> &'a [u64] {
        self.offsets
    }

    /// Dimensions of each sample.
    pub(super) fn dims(&self) -> usize {
        self.layout.dims
    }

    /// Values of all its samples (`samples * dims`): what a gradient with
    /// respect to it holds, laid out like its values, at the positions the
    /// kernels compute from its device offsets.
    pub(super) fn values(&self) -> usize {
        self.layout.samples * self.layout.dims
    }

    /// The kernels' view of its series `range`.
    pub(super) fn view(&self, range: Range<usize>) -> SetRef<T> {
        self.layout.set_ref(self.base, range.start, range.len())
    }
}

/// Ranges of host batches uploaded for one computation, an image each, in
/// one allocation ([`Gpu::upload_ranges`]).
pub(super) struct Uploaded<T> {
    allocation: CudaSlice<u8>,
    /// Each image's address and layout.
    images: Vec<(sys::CUdeviceptr, Layout)>,
    /// The range's first series in its host batch.
    first: usize,
    element: PhantomData<T>,
}

/// Images of an upload start at multiples of this in its allocation.
const UPLOAD_ALIGN: usize = 256;
/// What an upload of two images may take beyond their bytes: their
/// padding.
pub(super) const UPLOAD_SLACK: usize = 2 * UPLOAD_ALIGN;

impl<T: Float> Uploaded<T> {
    /// Bytes of device memory it holds.
    pub(super) fn bytes(&self) -> usize {
        self.allocation.len()
    }

    /// Image `index` as the paired kernels read it; `set` is the host
    /// batch it was uploaded from.
    pub(super) fn batch<'a>(&'a self, index: usize, set: &'a SeriesSet<T>) -> DeviceBatch<'a, T> {
        let (base, layout) = self.images[index];
        DeviceBatch {
            base,
            layout,
            offsets: &set.parts().1[self.first..=self.first + layout.count],
            memory: PhantomData,
        }
    }
}

/// Bytes of the device image of series `range` of `set` (offsets, values,
/// timestamps): what uploading them takes.
pub(super) fn image_bytes<T: Float>(set: &SeriesSet<T>, range: Range<usize>) -> usize {
    Layout::of(set, &range).bytes()
}

/// Where the parts of a range of series lie in its device image: `count + 1`
/// offsets (u64, rebased to the range's first sample), the values, then the
/// timestamps if the batch has them. Streamed chunks, uploaded blocks and
/// resident sets all take this form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    count: usize,
    dims: usize,
    samples: usize,
    times: bool,
    element: usize,
}

impl Layout {
    fn of<T: Float>(set: &SeriesSet<T>, range: &Range<usize>) -> Layout {
        let (_, offsets, times) = set.parts();
        Layout {
            count: range.len(),
            dims: set.dims(),
            samples: (offsets[range.end] - offsets[range.start]) as usize,
            times: times.is_some(),
            element: size_of::<T>(),
        }
    }

    fn values_at(&self) -> usize {
        (self.count + 1) * size_of::<u64>()
    }

    fn times_at(&self) -> usize {
        self.values_at() + self.samples * self.dims * self.element
    }

    fn bytes(&self) -> usize {
        self.times_at()
            + if self.times {
                self.samples * self.element
            } else {
                0
            }
    }

    /// The kernels' view of series `first .. first + count` of the image at
    /// device address `base`. Offsets count from the image's first sample,
    /// so a sub-range needs only its own offsets pointer.
    fn set_ref<T>(&self, base: sys::CUdeviceptr, first: usize, count: usize) -> SetRef<T> {
        debug_assert!(first + count <= self.count);
        SetRef {
            values: (base + self.values_at() as u64) as *const T,
            offsets: (base + (first * size_of::<u64>()) as u64) as *const u64,
            times: if self.times {
                (base + self.times_at() as u64) as *const T
            } else {
                std::ptr::null()
            },
            count: count as u64,
            dims: self.dims as u64,
        }
    }
}

/// A range of series of a host batch, seen as the bytes of its device
/// image, straight from the batch's arrays (nothing is copied to build it).
struct Image<'a> {
    layout: Layout,
    /// `count + 1` offsets, rebased by subtracting the first.
    offsets: &'a [u64],
    values: &'a [u8],
    times: &'a [u8],
}

fn as_bytes_u64(values: &[u64]) -> &[u8] {
    // SAFETY: u64 is plain bytes with no padding; the length is the
    // slice's own size in bytes.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) }
}

fn as_bytes<T: Float>(values: &[T]) -> &[u8] {
    // SAFETY: f32 and f64 are plain bytes with no padding; the length is
    // the slice's own size in bytes.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) }
}

impl<'a> Image<'a> {
    fn new<T: Float>(set: &'a SeriesSet<T>, range: &Range<usize>) -> Image<'a> {
        let (values, offsets, times) = set.parts();
        let (start, end) = (offsets[range.start] as usize, offsets[range.end] as usize);
        let dims = set.dims();
        Image {
            layout: Layout::of(set, range),
            offsets: &offsets[range.start..=range.end],
            values: as_bytes(&values[start * dims..end * dims]),
            times: times.map_or(&[][..], |t| as_bytes(&t[start..end])),
        }
    }

    /// Writes bytes `start .. start + dst.len()` of the image to `dst`.
    fn write(&self, dst: &mut [u8], start: usize) {
        const WORD: usize = size_of::<u64>();
        let base = self.offsets[0];
        let offset_bytes = self.layout.values_at();
        let mut at = 0;
        while at < dst.len() {
            let position = start + at;
            let rest = &mut dst[at..];
            at += if position < offset_bytes {
                let (k, within) = (position / WORD, position % WORD);
                if within == 0 && rest.len() >= WORD {
                    let n = (rest.len() / WORD).min(self.offsets.len() - k);
                    for (d, &o) in rest[..n * WORD]
                        .chunks_exact_mut(WORD)
                        .zip(&self.offsets[k..k + n])
                    {
                        d.copy_from_slice(&(o - base).to_ne_bytes());
                    }
                    n * WORD
                } else {
                    let word = (self.offsets[k] - base).to_ne_bytes();
                    let n = (WORD - within).min(rest.len());
                    rest[..n].copy_from_slice(&word[within..within + n]);
                    n
                }
            } else {
                let position = position - offset_bytes;
                let (source, position) = if position < self.values.len() {
                    (self.values, position)
                } else {
                    (self.times, position - self.values.len())
                };
                let n = (source.len() - position).min(rest.len());
                rest[..n].copy_from_slice(&source[position..position + n]);
                n
            };
        }
    }

    /// [`Image::write`], spread over threads for large windows.
    fn write_parallel(&self, dst: &mut [u8], start: usize) {
        if dst.len() < PARALLEL_COPY_BYTES {
            return self.write(dst, start);
        }
        dst.par_chunks_mut(COPY_PIECE_BYTES)
            .enumerate()
            .for_each(|(k, piece)| self.write(piece, start + k * COPY_PIECE_BYTES));
    }
}

/// Series `first .. first + layout.count` of a batch, in device memory.
struct DeviceImage<T> {
    /// Owns the memory `base` addresses.
    _allocation: CudaSlice<u8>,
    base: sys::CUdeviceptr,
    layout: Layout,
    /// Index in the whole batch of the image's first series.
    first: usize,
    element: PhantomData<T>,
}

impl<T> DeviceImage<T> {
    /// The kernels' view of series `range` (indices in the whole batch).
    fn view(&self, range: &Range<usize>) -> SetRef<T> {
        self.layout
            .set_ref(self.base, range.start - self.first, range.len())
    }
}

/// Streams and pinned host buffers, made once and kept by the [`Gpu`].
#[derive(Default)]
pub(super) struct Pipelines {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    streams: Vec<Arc<CudaStream>>,
    /// Write-combined: the host only writes them.
    staging: Vec<PinnedHostSlice<u8>>,
    /// Cached: the host reads them.
    results: Vec<PinnedHostSlice<u8>>,
}

impl Pipelines {
    fn state(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The [`SLOTS`] streams, created on first use.
    fn streams(&self, context: &Arc<CudaContext>) -> Result<Vec<Arc<CudaStream>>> {
        let mut state = self.state();
        while state.streams.len() < SLOTS {
            state.streams.push(context.new_stream().map_err(gpu_error)?);
        }
        Ok(state.streams.clone())
    }

    /// A pinned buffer of at least `bytes`: a kept one, or a new one.
    fn take(
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
        let mut slice = match kept {
            Some(slice) => slice,
            None => {
                let bytes = bytes.max(1).next_multiple_of(PINNED_GRANULE);
                let flags = if write_combined {
                    sys::CU_MEMHOSTALLOC_WRITECOMBINED
                } else {
                    0
                };
                // SAFETY: u8 is valid whatever the memory holds.
                unsafe { context.alloc_pinned_with_flags::<u8>(bytes, flags) }.map_err(gpu_error)?
            }
        };
        let pointer = slice.as_mut_ptr().map_err(gpu_error)?;
        Ok(Pinned {
            slice,
            pointer,
            write_combined,
        })
    }

    /// Keeps `buffer` for later calls, unless it is unusually large or
    /// enough are kept.
    fn give_back(&self, buffer: Pinned) {
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
            pool.push(buffer.slice);
        }
    }
}

/// Pinned host memory and its address. The pipeline orders every host
/// access after the device's (slot events), so it uses the raw address.
struct Pinned {
    slice: PinnedHostSlice<u8>,
    pointer: *mut u8,
    write_combined: bool,
}

impl Pinned {
    fn len(&self) -> usize {
        self.slice.len()
    }

    /// # Safety
    /// No copy that reads or writes the buffer is in flight.
    unsafe fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len());
        std::slice::from_raw_parts_mut(self.pointer, len)
    }

    /// # Safety
    /// No copy that writes the buffer is in flight; `len` bytes hold `T`s.
    unsafe fn values<T: Float>(&self, len: usize) -> &[T] {
        assert!(len * size_of::<T>() <= self.len());
        // Pinned allocations are page-aligned.
        std::slice::from_raw_parts(self.pointer.cast::<T>(), len)
    }
}

/// One range of rows against one range of columns.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tile {
    rows: Range<usize>,
    cols: Range<usize>,
    /// `rows == cols`, a batch against itself: the upper triangle with its
    /// diagonal, both operands from the rows' device image.
    triangle: bool,
    /// Also write the transpose (a batch against itself, off the diagonal).
    mirror: bool,
}

impl Tile {
    fn outputs(&self) -> usize {
        self.rows.len() * self.cols.len()
    }

    fn pairs(&self) -> u64 {
        tile_pairs(
            self.rows.len() as u64,
            self.cols.len() as u64,
            self.triangle,
        )
    }
}

/// Which operand of the tiles a range of series is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Rows,
    Cols,
}

/// Series uploaded together, and the tiles that use them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    series: Range<usize>,
    tiles: Vec<Tile>,
}

/// A computation as blocks of tiles: the `fixed` side is uploaded a block
/// at a time; the `staged` side, if any, is copied for every tile (with
/// neither, the columns are a resident set).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    fixed: Side,
    staged: Option<Side>,
    blocks: Vec<Block>,
}

impl Plan {
    fn tiles(&self) -> impl Iterator<Item = &Tile> {
        self.blocks.iter().flat_map(|b| b.tiles.iter())
    }
}

/// How a device-memory budget is shared: a quarter for the uploaded block;
/// the rest split between the slots, each a quarter of its share for a
/// staged chunk, a quarter for its outputs (at most [`STAGING_BYTES`] and
/// [`RESULT_BYTES`]) and half for the workspace of its launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Caps {
    fixed_bytes: usize,
    chunk_bytes: usize,
    /// Outputs of one tile (at least 1).
    outputs: usize,
    workspace_bytes: usize,
}

impl Caps {
    fn new(budget: usize, element: usize) -> Caps {
        let fixed_bytes = budget / 4;
        let slot = (budget - fixed_bytes) / SLOTS;
        Caps {
            fixed_bytes,
            chunk_bytes: (slot / 4).min(STAGING_BYTES),
            outputs: ((slot / 4).min(RESULT_BYTES) / element).max(1),
            workspace_bytes: slot / 2,
        }
    }
}

/// Consecutive ranges covering `range` of `set`, each of at most
/// `max_count` series whose image takes at most `max_bytes` (a single
/// larger series gets a range of its own).
fn ranges<T: Float>(
    set: &SeriesSet<T>,
    range: Range<usize>,
    max_bytes: usize,
    max_count: usize,
) -> Vec<Range<usize>> {
    let word = size_of::<u64>();
    let per_sample = (set.dims() + usize::from(set.has_timestamps())) * size_of::<T>();
    let mut result = Vec::new();
    let (mut start, mut bytes) = (range.start, word);
    for k in range.clone() {
        let size = set.series_len(k) * per_sample + word;
        if k > start && (bytes + size > max_bytes || k - start == max_count) {
            result.push(start..k);
            (start, bytes) = (k, word);
        }
        bytes += size;
    }
    if start < range.end {
        result.push(start..range.end);
    }
    result
}

/// `0..count` in consecutive ranges of at most `max_count`.
fn count_ranges(count: usize, max_count: usize) -> Vec<Range<usize>> {
    (0..count)
        .step_by(max_count)
        .map(|start| start..(start + max_count).min(count))
        .collect()
}

/// Tiles of a streamed computation. Against itself: blocks of `a` whose
/// square fits a tile's outputs, the triangle of each block from its
/// upload, and the series after the block streamed against it and
/// mirrored. Against `b`: the side with the smaller image is uploaded in
/// blocks, the other streamed against each block.
fn streamed_plan<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>, caps: &Caps) -> Plan {
    let Some(b) = b else {
        let side = ((caps.outputs as f64).sqrt() as usize).max(1);
        let blocks = ranges(a, 0..a.len(), caps.fixed_bytes, side)
            .into_iter()
            .map(|rows| {
                let mut tiles = vec![Tile {
                    rows: rows.clone(),
                    cols: rows.clone(),
                    triangle: true,
                    mirror: false,
                }];
                let per_chunk = (caps.outputs / rows.len()).max(1);
                tiles.extend(
                    ranges(a, rows.end..a.len(), caps.chunk_bytes, per_chunk)
                        .into_iter()
                        .map(|cols| Tile {
                            rows: rows.clone(),
                            cols,
                            triangle: false,
                            mirror: true,
                        }),
                );
                Block {
                    series: rows,
                    tiles,
                }
            })
            .collect();
        return Plan {
            fixed: Side::Rows,
            staged: Some(Side::Cols),
            blocks,
        };
    };
    let image_bytes = |s: &SeriesSet<T>| Layout::of(s, &(0..s.len())).bytes();
    let (fixed, staged, uploaded, streamed) = if image_bytes(a) <= image_bytes(b) {
        (Side::Rows, Side::Cols, a, b)
    } else {
        (Side::Cols, Side::Rows, b, a)
    };
    let max_fixed = (caps.outputs / streamed.len().min(MIN_CHUNK_SERIES)).max(1);
    let blocks = ranges(uploaded, 0..uploaded.len(), caps.fixed_bytes, max_fixed)
        .into_iter()
        .map(|block| {
            let per_chunk = (caps.outputs / block.len()).max(1);
            let tiles = ranges(streamed, 0..streamed.len(), caps.chunk_bytes, per_chunk)
                .into_iter()
                .map(|chunk| {
                    let (rows, cols) = match fixed {
                        Side::Rows => (block.clone(), chunk),
                        Side::Cols => (chunk, block.clone()),
                    };
                    Tile {
                        rows,
                        cols,
                        triangle: false,
                        mirror: false,
                    }
                })
                .collect();
            Block {
                series: block,
                tiles,
            }
        })
        .collect();
    Plan {
        fixed,
        staged: Some(staged),
        blocks,
    }
}

/// Tiles of queries against a resident set of `database` series: the
/// queries uploaded in blocks, the resident set in ranges of columns whose
/// outputs against a block fit a tile.
fn resident_plan<T: Float>(queries: &SeriesSet<T>, database: usize, caps: &Caps) -> Plan {
    let max_fixed = (caps.outputs / database.min(MIN_CHUNK_SERIES)).max(1);
    let blocks = ranges(queries, 0..queries.len(), caps.fixed_bytes, max_fixed)
        .into_iter()
        .map(|rows| {
            let per_tile = (caps.outputs / rows.len()).max(1);
            let tiles = count_ranges(database, per_tile)
                .into_iter()
                .map(|cols| Tile {
                    rows: rows.clone(),
                    cols,
                    triangle: false,
                    mirror: false,
                })
                .collect();
            Block {
                series: rows,
                tiles,
            }
        })
        .collect();
    Plan {
        fixed: Side::Rows,
        staged: None,
        blocks,
    }
}

/// What the slots' buffers must hold for a plan.
#[derive(Clone, Copy, Debug, Default)]
struct Sizes {
    /// Pinned staging bytes: the largest staged chunk, and upload pieces.
    staging: usize,
    /// Device bytes of the largest staged chunk.
    chunk: usize,
    /// Outputs of the largest tile.
    outputs: usize,
    /// Pairs one launch's workspace holds (0: the kernel needs none).
    workspace_pairs: u64,
}

impl Sizes {
    /// Sizes for `plan` over the host batches `rows` and `cols` (`cols` is
    /// `None` for a resident set), for `kernel` within `caps`; an error if
    /// one pair's workspace does not fit.
    fn new<T: Float>(
        plan: &Plan,
        rows: &SeriesSet<T>,
        cols: Option<&SeriesSet<T>>,
        kernel: &PairKernel,
        caps: &Caps,
        longest: usize,
    ) -> Result<Sizes> {
        let set_of = |side: Side| match side {
            Side::Rows => rows,
            Side::Cols => cols.unwrap_or(rows),
        };
        let range_of = |tile: &Tile, side: Side| match side {
            Side::Rows => tile.rows.clone(),
            Side::Cols => tile.cols.clone(),
        };
        let chunk = match plan.staged {
            None => 0,
            Some(side) => plan
                .tiles()
                .filter(|t| !t.triangle)
                .map(|t| Layout::of(set_of(side), &range_of(t, side)).bytes())
                .max()
                .unwrap_or(0),
        };
        let upload = plan
            .blocks
            .iter()
            .map(|b| Layout::of(set_of(plan.fixed), &b.series).bytes())
            .max()
            .unwrap_or(0);
        let pairs = plan.tiles().map(Tile::pairs).max().unwrap_or(0);
        let bytes_per_pair = kernel.workspace_per_pair * size_of::<T>();
        if bytes_per_pair > caps.workspace_bytes {
            return Err(Error::Gpu(format!(
                "a series of {longest} samples needs {bytes_per_pair} bytes of workspace, over the {} available",
                caps.workspace_bytes
            )));
        }
        Ok(Sizes {
            staging: chunk.max(upload.min(STAGING_BYTES)),
            chunk,
            outputs: plan.tiles().map(Tile::outputs).max().unwrap_or(0),
            workspace_pairs: match bytes_per_pair {
                0 => 0,
                bytes => pairs.min((caps.workspace_bytes / bytes) as u64),
            },
        })
    }
}

/// An operand of the tiles: series on the device, or a host batch whose
/// ranges are staged tile by tile.
enum Operand<'a, T> {
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
    /// The tile whose results are on their way into `results`.
    pending: Option<Tile>,
}

/// The slots of one computation. Dropping it waits for the slots' streams,
/// so no copy or kernel outlives the buffers it uses, then keeps the
/// pinned buffers for the next call.
struct Pipeline<'g, T> {
    gpu: &'g Gpu,
    slots: Vec<Slot<T>>,
    next: usize,
    sizes: Sizes,
}

impl<T> Drop for Pipeline<'_, T> {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            // Errors here surface at the context's next call.
            let _ = slot.stream.synchronize();
            for buffer in [slot.staging.take(), slot.results.take()]
                .into_iter()
                .flatten()
            {
                self.gpu.pipelines.give_back(buffer);
            }
        }
    }
}

impl<'g, T: Float> Pipeline<'g, T> {
    fn new(gpu: &'g Gpu, sizes: Sizes) -> Result<Self> {
        let slots = gpu
            .pipelines
            .streams(&gpu.context)?
            .into_iter()
            .map(|stream| {
                Ok(Slot {
                    stream,
                    done: gpu.context.new_event(None).map_err(gpu_error)?,
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
        })
    }

    /// Series `range` of `set`, uploaded through the staging buffers of all
    /// slots in turn. Call only with no tile pending.
    fn upload(&mut self, set: &SeriesSet<T>, range: Range<usize>) -> Result<DeviceImage<T>> {
        let image = Image::new(set, &range);
        let total = image.layout.bytes();
        let first_stream = self.slots[0].stream.clone();
        // SAFETY: every byte is written below before any kernel reads it.
        let bytes = unsafe { first_stream.alloc::<u8>(total) }.map_err(gpu_error)?;
        let base = bytes.device_ptr(&first_stream).0;
        // The allocation is ordered on its stream; the others copy into it.
        first_stream.synchronize().map_err(gpu_error)?;
        let piece = self.sizes.staging.clamp(1, STAGING_BYTES);
        let result = self.copy_pieces(&image, base, total, piece);
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

    /// Copies the `total` bytes of `image` to device address `base` in
    /// pieces of `piece` bytes, through the slots' staging buffers in turn,
    /// and waits for the copies.
    fn copy_pieces(
        &mut self,
        image: &Image,
        base: sys::CUdeviceptr,
        total: usize,
        piece: usize,
    ) -> Result<()> {
        let (gpu, count) = (self.gpu, self.slots.len());
        let (mut offset, mut k) = (0, 0);
        while offset < total {
            let slot = &mut self.slots[k % count];
            k += 1;
            debug_assert!(slot.pending.is_none());
            slot.done.synchronize().map_err(gpu_error)?;
            let stream = slot.stream.cu_stream();
            let staging = slot.staging(gpu, piece)?;
            let len = staging.len().min(total - offset);
            // SAFETY: the slot's previous copy from its staging is done.
            let staged = unsafe { staging.bytes_mut(len) };
            image.write_parallel(staged, offset);
            // SAFETY: the destination holds `total` bytes; the staging
            // buffer stays untouched until the slot's event says the copy
            // is done.
            unsafe { driver::memcpy_htod_async(base + offset as u64, staged, stream) }
                .map_err(gpu_error)?;
            slot.done.record(&slot.stream).map_err(gpu_error)?;
            offset += len;
        }
        self.slots
            .iter()
            .try_for_each(|slot| slot.done.synchronize().map_err(gpu_error))
    }

    /// Enqueues `tile` on the next slot, after waiting for that slot's
    /// previous tile and copying its results into `out`.
    fn submit<P: Copy>(
        &mut self,
        kernel: &PairKernel,
        params: P,
        rows: &Operand<T>,
        cols: &Operand<T>,
        tile: Tile,
        out: &mut Array2<T>,
    ) -> Result<()> {
        let (gpu, sizes) = (self.gpu, self.sizes);
        let index = self.next;
        self.next = (index + 1) % self.slots.len();
        let slot = &mut self.slots[index];
        slot.finish(out)?;
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
        unsafe {
            driver::memset_d8_async(out_ptr, 0xff, outputs * size_of::<T>(), stream.cu_stream())
        }
        .map_err(gpu_error)?;
        let workspace = slot.workspace(kernel, sizes.workspace_pairs)?;
        gpu.launch_pairs(
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
            .map_err(gpu_error)?;
        slot.done.record(&stream).map_err(gpu_error)?;
        slot.pending = Some(tile);
        Ok(())
    }

    /// Waits for every slot and copies the results still pending into `out`.
    fn drain(&mut self, out: &mut Array2<T>) -> Result<()> {
        self.slots.iter_mut().try_for_each(|slot| slot.finish(out))
    }

    /// Runs `plan` against the `fixed` side uploaded block by block.
    fn run<P: Copy>(
        &mut self,
        kernel: &PairKernel,
        params: P,
        plan: Plan,
        fixed: &SeriesSet<T>,
        other: Operand<T>,
        out: &mut Array2<T>,
    ) -> Result<()> {
        for block in plan.blocks {
            let image = self.upload(fixed, block.series)?;
            let uploaded = Operand::Device(&image);
            let (rows, cols) = match plan.fixed {
                Side::Rows => (&uploaded, &other),
                Side::Cols => (&other, &uploaded),
            };
            let result = block
                .tiles
                .into_iter()
                .try_for_each(|tile| self.submit(kernel, params, rows, cols, tile, out))
                .and_then(|()| self.drain(out));
            if result.is_err() {
                self.wait_all();
            }
            // The block's image is freed next: no kernel reads it any more.
            result?;
        }
        Ok(())
    }

    /// Waits for every slot's stream, ignoring errors (on the way out of a
    /// failed computation, before its buffers are freed).
    fn wait_all(&self) {
        for slot in &self.slots {
            let _ = slot.stream.synchronize();
        }
    }
}

impl<T: Float> Slot<T> {
    /// Waits for the pending tile, if any, and copies its results into `out`.
    fn finish(&mut self, out: &mut Array2<T>) -> Result<()> {
        let Some(tile) = self.pending.take() else {
            return Ok(());
        };
        self.done.synchronize().map_err(gpu_error)?;
        let results = self.results.as_ref().expect("a pending tile has results");
        // SAFETY: the copy into `results` is done (the event), and it
        // wrote `tile.outputs()` values.
        let values = unsafe { results.values::<T>(tile.outputs()) };
        place(out, &tile, values);
        Ok(())
    }

    fn staging(&mut self, gpu: &Gpu, bytes: usize) -> Result<&mut Pinned> {
        if self.staging.as_ref().is_none_or(|s| s.len() < bytes) {
            if let Some(old) = self.staging.take() {
                gpu.pipelines.give_back(old);
            }
            self.staging = Some(gpu.pipelines.take(&gpu.context, bytes, true)?);
        }
        Ok(self.staging.as_mut().expect("just set"))
    }

    fn results(&mut self, gpu: &Gpu, bytes: usize) -> Result<&mut Pinned> {
        if self.results.is_none() {
            self.results = Some(gpu.pipelines.take(&gpu.context, bytes, false)?);
        }
        Ok(self.results.as_mut().expect("just set"))
    }

    /// The device address of the slot's output buffer.
    fn out(&mut self, outputs: usize) -> Result<sys::CUdeviceptr> {
        if self.out.is_none() {
            // SAFETY: every tile fills its part with NaN before launching.
            self.out = Some(unsafe { self.stream.alloc::<T>(outputs.max(1)) }.map_err(gpu_error)?);
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
            self.workspace = Some(self.stream.alloc_zeros::<T>(values).map_err(gpu_error)?);
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
        let bytes = image.layout.bytes();
        if self.chunk.is_none() {
            // SAFETY: each tile copies its chunk in before its launches.
            self.chunk = Some(unsafe { self.stream.alloc::<u8>(sizes.chunk) }.map_err(gpu_error)?);
        }
        let chunk = self.chunk.as_ref().expect("just set");
        assert!(bytes <= chunk.len(), "the plan sized the chunks");
        let chunk = chunk.device_ptr(&self.stream).0;
        let stream = self.stream.cu_stream();
        let staging = self.staging(gpu, sizes.staging)?;
        // SAFETY: `finish` waited for the slot's previous copies.
        let staged = unsafe { staging.bytes_mut(bytes) };
        image.write_parallel(staged, 0);
        // SAFETY: the chunk holds `bytes`; the staging buffer stays
        // untouched until the slot's event says the copy is done.
        unsafe { driver::memcpy_htod_async(chunk, staged, stream) }.map_err(gpu_error)?;
        Ok(image.layout.set_ref(chunk, 0, range.len()))
    }
}

/// Copies a tile's results (row-major) into `out`, and their transpose
/// too for a mirrored tile.
fn place<T: Float>(out: &mut Array2<T>, tile: &Tile, values: &[T]) {
    let view = ArrayView2::from_shape((tile.rows.len(), tile.cols.len()), values)
        .expect("a tile's results");
    copy_into(
        out.slice_mut(s![tile.rows.clone(), tile.cols.clone()]),
        view,
    );
    if tile.mirror {
        copy_into(
            out.slice_mut(s![tile.cols.clone(), tile.rows.clone()]),
            view.t(),
        );
    }
}

/// `target.assign(&source)`, spread over threads when large (the first
/// write to a fresh matrix also takes its page faults).
fn copy_into<T: Float>(mut target: ArrayViewMut2<T>, source: ArrayView2<T>) {
    if source.len() * size_of::<T>() < PARALLEL_COPY_BYTES {
        target.assign(&source);
        return;
    }
    let axis = if target.nrows() >= target.ncols() {
        Axis(0)
    } else {
        Axis(1)
    };
    let piece = target
        .len_of(axis)
        .div_ceil(4 * rayon::current_num_threads())
        .max(1);
    let pieces: Vec<_> = target
        .axis_chunks_iter_mut(axis, piece)
        .zip(source.axis_chunks_iter(axis, piece))
        .collect();
    pieces.into_par_iter().for_each(|(mut t, s)| t.assign(&s));
}

impl Gpu {
    /// The pairs of one tile, `a` against `b` (or the upper triangle of `a`),
    /// on `stream`, in launches whose rows fit the workspace of
    /// `workspace.1` pairs at address `workspace.0`.
    fn launch_pairs<T: Float, P: Copy>(
        &self,
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
                triangle: triangle as u32,
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
            unsafe { self.launch_with(stream, &kernel.function, config, false, launch) }?;
            first_pair += pair_count;
        }
        Ok(())
    }

    /// Every series of `a` against every series of `b`, or the upper
    /// triangle of `a` against itself, with a naive or warp kernel,
    /// streamed (see the module's documentation). The caller holds the
    /// GPU's lock.
    pub(super) fn streamed<T: Float, P: KernelParams>(
        &self,
        measure: &str,
        variant: Variant,
        params: P,
        a: &SeriesSet<T>,
        b: Option<&SeriesSet<T>>,
        budget: usize,
    ) -> Result<Array2<T>> {
        let other = b.unwrap_or(a);
        let band_width = params.band_width(a.lengths(), other.lengths());
        let kernel = self.pair_kernel::<T>(
            measure,
            variant,
            (a.max_len(), other.max_len()),
            a.dims(),
            band_width,
        )?;
        let caps = Caps::new(budget, size_of::<T>());
        let plan = streamed_plan(a, b, &caps);
        let longest = a.max_len().max(other.max_len());
        let sizes = Sizes::new(&plan, a, Some(other), &kernel, &caps, longest)?;
        let mut pipeline = Pipeline::new(self, sizes)?;
        let mut out = Array2::from_elem((a.len(), other.len()), T::ZERO);
        let (fixed, streamed) = match plan.fixed {
            Side::Rows => (a, other),
            Side::Cols => (other, a),
        };
        pipeline.run(
            &kernel,
            params,
            plan,
            fixed,
            Operand::Host(streamed),
            &mut out,
        )?;
        Ok(out)
    }

    /// Uploads `set` to stay on the device; an error if it takes more than
    /// `memory_budget` bytes (default: 3/4 of the free memory).
    pub(crate) fn upload_set<T: Float>(
        &self,
        set: &SeriesSet<T>,
        memory_budget: Option<usize>,
    ) -> Result<DeviceSeriesSet<T>> {
        let _one_at_a_time = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        self.context.bind_to_thread().map_err(gpu_error)?;
        let budget = memory_budget_or_free(memory_budget)?;
        let all = 0..set.len();
        let bytes = Layout::of(set, &all).bytes();
        if bytes > budget {
            return Err(Error::Gpu(format!(
                "the set takes {bytes} bytes of device memory, over the {budget} available; \
                 distance_matrix streams sets of any size instead"
            )));
        }
        let sizes = Sizes {
            staging: bytes.min(STAGING_BYTES),
            ..Sizes::default()
        };
        let image = Pipeline::new(self, sizes)?.upload(set, all)?;
        Ok(DeviceSeriesSet {
            image,
            offsets: set.parts().1.to_vec(),
            max_len: set.max_len(),
            min_len: set.min_len(),
        })
    }

    /// Series `range` of each of `sets`, uploaded for one computation: an
    /// image each, in one allocation, copied on the GPU's stream straight
    /// from the batches' own arrays (their offsets rebased). The caller
    /// holds the GPU's lock and runs the kernels that read the images on
    /// the same stream.
    pub(super) fn upload_ranges<T: Float>(
        &self,
        sets: &[&SeriesSet<T>],
        range: Range<usize>,
    ) -> Result<Uploaded<T>> {
        debug_assert!(sets.len() <= UPLOAD_SLACK / UPLOAD_ALIGN);
        let images: Vec<Image> = sets.iter().map(|set| Image::new(set, &range)).collect();
        let mut starts = Vec::with_capacity(images.len());
        let mut total = 0;
        for image in &images {
            starts.push(total);
            total = (total + image.layout.bytes()).next_multiple_of(UPLOAD_ALIGN);
        }
        let stream = &self.stream;
        // SAFETY: every byte of the images is copied in below before any
        // kernel reads it.
        let allocation = unsafe { stream.alloc::<u8>(total.max(1)) }.map_err(gpu_error)?;
        let base = allocation.device_ptr(stream).0;
        let mut placed = Vec::with_capacity(images.len());
        for (image, start) in images.iter().zip(starts) {
            let at = base + start as u64;
            let first = image.offsets[0];
            let offsets: Vec<u64> = image.offsets.iter().map(|&o| o - first).collect();
            let layout = image.layout;
            for (offset, bytes) in [
                (0, as_bytes_u64(&offsets)),
                (layout.values_at(), image.values),
                (layout.times_at(), image.times),
            ] {
                if !bytes.is_empty() {
                    // SAFETY: the allocation holds the image's bytes at
                    // `at`; the copy from pageable memory has read `bytes`
                    // when it returns.
                    unsafe {
                        driver::memcpy_htod_async(at + offset as u64, bytes, stream.cu_stream())
                    }
                    .map_err(gpu_error)?;
                }
            }
            placed.push((at, layout));
        }
        Ok(Uploaded {
            allocation,
            images: placed,
            first: range.start,
            element: PhantomData,
        })
    }

    /// Every series of `queries` against every series of the resident
    /// `database`, with a naive or warp kernel: the queries uploaded in
    /// blocks, the tiles' outputs copied back as the next tiles run.
    pub(crate) fn matrix_resident<T: Float, P: KernelParams>(
        &self,
        measure: &str,
        variant: Variant,
        params: P,
        queries: &SeriesSet<T>,
        database: &DeviceSeriesSet<T>,
        memory_budget: Option<usize>,
    ) -> Result<Array2<T>> {
        let _one_at_a_time = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        self.context.bind_to_thread().map_err(gpu_error)?;
        let budget = memory_budget_or_free(memory_budget)?;
        let band_width = params.band_width(queries.lengths(), database.lengths());
        let kernel = self.pair_kernel::<T>(
            measure,
            variant,
            (queries.max_len(), database.max_len()),
            queries.dims(),
            band_width,
        )?;
        let caps = Caps::new(budget, size_of::<T>());
        let plan = resident_plan(queries, database.len(), &caps);
        let longest = queries.max_len().max(database.max_len());
        let sizes = Sizes::new(&plan, queries, None, &kernel, &caps, longest)?;
        let mut pipeline = Pipeline::new(self, sizes)?;
        let mut out = Array2::from_elem((queries.len(), database.len()), T::ZERO);
        pipeline.run(
            &kernel,
            params,
            plan,
            queries,
            Operand::Device(&database.image),
            &mut out,
        )?;
        Ok(out)
    }
}

/// `memory_budget`, or 3/4 of the device memory free now.
pub(super) fn memory_budget_or_free(memory_budget: Option<usize>) -> Result<usize> {
    Ok(match memory_budget {
        Some(bytes) => bytes,
        None => driver::mem_get_info().map_err(gpu_error)?.0 / 4 * 3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn set(lengths: &[usize], dims: usize, times: bool) -> SeriesSet<f64> {
        let mut next = 0.0;
        let series: Vec<Array2<f64>> = lengths
            .iter()
            .map(|&n| {
                Array2::from_shape_fn((n, dims), |_| {
                    next += 1.0;
                    next
                })
            })
            .collect();
        let set = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
        if !times {
            return set;
        }
        let stamps: Vec<ndarray::Array1<f64>> = lengths
            .iter()
            .map(|&n| (0..n).map(|t| 0.5 * t as f64).collect())
            .collect();
        set.with_timestamps(stamps.iter().map(|t| t.view()))
            .unwrap()
    }

    /// The image built the plain way: rebased offsets, values, timestamps.
    fn expected_image(set: &SeriesSet<f64>, range: Range<usize>) -> Vec<u8> {
        let (values, offsets, times) = set.parts();
        let (start, end) = (offsets[range.start], offsets[range.end]);
        let mut bytes = Vec::new();
        for &o in &offsets[range.start..=range.end] {
            bytes.extend((o - start).to_ne_bytes());
        }
        let (start, end) = (start as usize, end as usize);
        for v in &values[start * set.dims()..end * set.dims()] {
            bytes.extend(v.to_ne_bytes());
        }
        if let Some(times) = times {
            for t in &times[start..end] {
                bytes.extend(t.to_ne_bytes());
            }
        }
        bytes
    }

    #[test]
    fn images_write_any_window() {
        for (dims, times) in [(1, false), (3, false), (2, true)] {
            let set = set(&[3, 1, 7, 2, 5], dims, times);
            for range in [0..5, 1..4, 2..3, 4..5] {
                let expected = expected_image(&set, range.clone());
                let image = Image::new(&set, &range);
                assert_eq!(image.layout.bytes(), expected.len());
                // Every window, including ones that split an offset.
                for start in 0..expected.len() {
                    for len in [1, 3, 8, 13, expected.len() - start] {
                        let len = len.min(expected.len() - start);
                        let mut window = vec![0u8; len];
                        image.write(&mut window, start);
                        assert_eq!(window, expected[start..start + len]);
                    }
                }
            }
        }
    }

    #[test]
    fn parallel_writes_match() {
        let set = set(&[50_000, 3, 90_000, 1], 2, true);
        let range = 0..4;
        let expected = expected_image(&set, range.clone());
        let image = Image::new(&set, &range);
        let mut all = vec![0u8; expected.len()];
        image.write_parallel(&mut all, 0);
        assert_eq!(all, expected);
        let mut part = vec![0u8; expected.len() - 1001];
        image.write_parallel(&mut part, 1001);
        assert_eq!(part, expected[1001..]);
    }

    /// How many times each output a plan writes.
    fn coverage(plan: &Plan, rows: usize, cols: usize) -> Array2<u32> {
        let mut counts = Array2::zeros((rows, cols));
        for block in &plan.blocks {
            for tile in &block.tiles {
                let fixed = match plan.fixed {
                    Side::Rows => &tile.rows,
                    Side::Cols => &tile.cols,
                };
                assert!(
                    block.series.start <= fixed.start && fixed.end <= block.series.end,
                    "{tile:?} outside its block {:?}",
                    block.series
                );
                for i in tile.rows.clone() {
                    for j in tile.cols.clone() {
                        if tile.triangle && i > j {
                            continue;
                        }
                        counts[[i, j]] += 1;
                        if (tile.triangle || tile.mirror) && i != j {
                            counts[[j, i]] += 1;
                        }
                    }
                }
            }
        }
        counts
    }

    fn check_caps(plan: &Plan, caps: &Caps) {
        for tile in plan.tiles() {
            assert!(
                tile.outputs() <= caps.outputs || tile.outputs() == 1,
                "{tile:?}"
            );
        }
    }

    #[test]
    fn plans_cover_every_pair_once() {
        let a = set(&[5, 1, 17, 3, 40, 2, 2, 9, 30, 1, 6], 2, false);
        let b = set(&[2, 60, 1, 8, 8, 8, 3], 2, true);
        for budget in [64, 1 << 10, 4 << 10, 16 << 10, 1 << 20, 1 << 30] {
            let caps = Caps::new(budget, 8);
            let ones = |r, c| Array2::<u32>::ones((r, c));
            for (x, y) in [(&a, &b), (&b, &a), (&a, &a)] {
                let plan = streamed_plan(x, Some(y), &caps);
                assert_eq!(coverage(&plan, x.len(), y.len()), ones(x.len(), y.len()));
                check_caps(&plan, &caps);
            }
            let plan = streamed_plan(&a, None, &caps);
            assert_eq!(coverage(&plan, a.len(), a.len()), ones(a.len(), a.len()));
            check_caps(&plan, &caps);
            let plan = resident_plan(&a, 23, &caps);
            assert_eq!(coverage(&plan, a.len(), 23), ones(a.len(), 23));
            check_caps(&plan, &caps);
        }
    }

    #[test]
    fn the_smaller_side_is_uploaded_and_tight_budgets_give_many_tiles() {
        let queries = set(&[10], 1, false);
        let database = set(&[10; 40], 1, false);
        let caps = Caps::new(1 << 30, 4);
        let plan = streamed_plan(&queries, Some(&database), &caps);
        assert_eq!((plan.fixed, plan.staged), (Side::Rows, Some(Side::Cols)));
        assert_eq!(plan.tiles().count(), 1);
        let plan = streamed_plan(&database, Some(&queries), &caps);
        assert_eq!((plan.fixed, plan.staged), (Side::Cols, Some(Side::Rows)));
        let tight = Caps::new(4 << 10, 4);
        assert!(
            streamed_plan(&queries, Some(&database), &tight)
                .tiles()
                .count()
                > 4
        );
        assert!(resident_plan(&database, 40, &tight).tiles().count() > 4);
    }

    #[test]
    fn caps_share_the_budget() {
        for (budget, element) in [(1usize << 30, 4), (100 << 30, 8), (16 << 10, 8)] {
            let caps = Caps::new(budget, element);
            let slot = caps.chunk_bytes + caps.outputs * element + caps.workspace_bytes;
            assert!(
                caps.fixed_bytes + SLOTS * slot <= budget,
                "{budget}: {caps:?}"
            );
        }
        let caps = Caps::new(1 << 30, 4);
        assert_eq!(caps.chunk_bytes, STAGING_BYTES);
        assert_eq!(caps.outputs, RESULT_BYTES / 4);
        assert_eq!(Caps::new(64, 8).outputs, 1);
    }
}
