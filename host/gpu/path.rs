//! The GPU's part of the alignment paths' divide and conquer: one long
//! pair kept on the device with both series reversed too, and the last
//! column of the DTW matrix of any of its sub-pairs. The pipelined tiled
//! kernel computes the transposed sub-pair (the columns' series as rows)
//! and writes that matrix's last row, which is the sub-pair's last column.

use super::context::Gpu;
use super::device::gpu_error;
use super::long_pair::{check_fits, enqueue_pipelined, pipelined_bytes, PipelinedRun};
use crate::{Float, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use ndarray::{s, ArrayView2};
use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;
use timewarp_kernels::{DtwParams, Measure, SetRef};

/// A pair on the device: `x`, `y`, reversed `x` and reversed `y`, one
/// after the other, `dims` values a sample.
pub struct DevicePathPair<T> {
    samples: CudaSlice<T>,
    lengths: (usize, usize),
    dims: usize,
    /// The streams the passes of one level run on at once.
    streams: Vec<Arc<CudaStream>>,
}

/// Streams of a pair's passes: enough concurrent passes to fill the GPU
/// when the sub-pairs are narrow (a warp a panel of columns).
const STREAMS: usize = 16;

impl<T: Float> DevicePathPair<T> {
    /// Uploads `x` and `y` (`length x dims` each, equal dims) and their
    /// reverses.
    pub fn upload(gpu: &Gpu, x: ArrayView2<T>, y: ArrayView2<T>) -> Result<Self> {
        let (_one_at_a_time, _budget) = gpu.begin(None)?;
        let samples: Vec<T> = [x, y, x.slice(s![..;-1, ..]), y.slice(s![..;-1, ..])]
            .iter()
            .flat_map(|series| series.iter().copied())
            .collect();
        let samples = gpu.stream.clone_htod(&samples).map_err(gpu_error)?;
        let streams = (0..STREAMS)
            .map(|_| gpu.context.new_stream().map_err(gpu_error))
            .collect::<Result<_>>()?;
        // The other streams read the samples.
        gpu.stream.synchronize().map_err(gpu_error)?;
        Ok(Self {
            samples,
            lengths: (x.nrows(), y.nrows()),
            dims: x.ncols(),
            streams,
        })
    }

    /// For each pass `(rows, cols, reversed)`, `D(i, last)` for every row
    /// `i` of the (unbanded) DTW matrix of `x[rows]` against `y[cols]`, or,
    /// when `reversed`, of the reversed series' `rows` and `cols` (counted
    /// from their own first samples). The passes run at once on several
    /// streams, as many as fit the memory budget at a time.
    pub fn last_columns(
        &self,
        gpu: &Gpu,
        passes: &[(Range<usize>, Range<usize>, bool)],
    ) -> Result<Vec<Vec<T>>> {
        let (n, m) = self.lengths;
        let (_one_at_a_time, budget) = gpu.begin(None)?;
        let mut columns = Vec::with_capacity(passes.len());
        let mut queued = Vec::new();
        let mut queued_bytes = 0;
        for (k, (rows, cols, reversed)) in passes.iter().enumerate() {
            assert!(
                rows.start < rows.end && rows.end <= n && cols.start < cols.end && cols.end <= m,
                "a sub-pair of the pair"
            );
            // The launched matrix has y's samples as rows, x's as columns.
            let lengths = (cols.len(), rows.len());
            let bytes = pipelined_bytes::<T>(Measure::Dtw, lengths.0, lengths.1)
                + (rows.len() + 1) * size_of::<T>();
            if queued_bytes + bytes > budget && !queued.is_empty() {
                finish(&mut queued, &mut columns)?;
                queued_bytes = 0;
            }
            check_fits(lengths.0, lengths.1, bytes, budget)?;
            let stream = &self.streams[k % self.streams.len()];
            queued.push(self.enqueue(gpu, stream, rows.clone(), cols.clone(), *reversed)?);
            queued_bytes += bytes;
        }
        finish(&mut queued, &mut columns)?;
        Ok(columns)
    }

    /// Queues one pass on `stream`.
    fn enqueue(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        rows: Range<usize>,
        cols: Range<usize>,
        reversed: bool,
    ) -> Result<QueuedPass<T>> {
        let (n, m) = self.lengths;
        let base = self.samples.device_ptr(stream).0;
        // The first sample of x, y, reversed x, reversed y.
        let (x_at, y_at) = if reversed { (n + m, 2 * n + m) } else { (0, n) };
        let address = |sample: usize| base + (sample * self.dims * size_of::<T>()) as u64;
        let offsets = [0, cols.len() as u64, 0, rows.len() as u64];
        let offsets = stream.clone_htod(&offsets).map_err(gpu_error)?;
        let offsets_at = offsets.device_ptr(stream).0 as *const u64;
        let set = |sample: usize, which: usize| SetRef {
            values: address(sample) as *const T,
            // SAFETY (of the add): `offsets` holds two pairs.
            offsets: unsafe { offsets_at.add(2 * which) },
            times: std::ptr::null(),
            count: 1,
            dims: self.dims as u64,
        };
        let pair = (set(y_at + cols.start, 0), set(x_at + rows.start, 1));
        let last_row = stream.alloc_zeros::<T>(rows.len() + 1).map_err(gpu_error)?;
        let last_row_at = last_row.device_ptr(stream).0 as *mut T;
        let lengths = (cols.len(), rows.len());
        let run = enqueue_pipelined(
            gpu,
            stream,
            DtwParams::new(None),
            pair,
            lengths,
            last_row_at,
        )?;
        Ok(QueuedPass {
            stream: stream.clone(),
            run,
            last_row,
            _offsets: offsets,
        })
    }
}

/// A pass queued on its stream, and what it reads and writes.
struct QueuedPass<T> {
    stream: Arc<CudaStream>,
    run: PipelinedRun<T>,
    last_row: CudaSlice<T>,
    _offsets: CudaSlice<u64>,
}

/// Waits for the queued passes, in order, and appends their columns.
fn finish<T: Float>(queued: &mut Vec<QueuedPass<T>>, columns: &mut Vec<Vec<T>>) -> Result<()> {
    for pass in queued.drain(..) {
        let mut column = pass.stream.clone_dtoh(&pass.last_row).map_err(gpu_error)?;
        pass.run.value(&pass.stream)?;
        column.remove(0);
        columns.push(column);
    }
    Ok(())
}
