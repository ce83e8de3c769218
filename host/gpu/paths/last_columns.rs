//! The GPU's part of the alignment paths' divide and conquer: one long
//! pair kept on the device as its measure lays it out (the series forward
//! and reversed, with timestamps for TWED), and the last column of the
//! measure's matrix of any two ranges of them. The pipelined tiled kernel
//! computes the transposed sub-pair (the columns' series as rows: both
//! measures are symmetric in their two series) and writes that matrix's
//! last row, which is the sub-pair's last column.

use crate::error::DriverCall;
use crate::gpu::launch::pipelined_pair::{
    check_fits, enqueue_pipelined, pipelined_bytes, PipelinedRun,
};
use crate::gpu::runtime::context::{Gpu, KernelParams};
use crate::gpu::runtime::wait::wait_stream;
use crate::{Float, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::mem::size_of;
use std::ops::Range;
use std::sync::Arc;
use timewarp_kernels::SetRef;

/// Four series on the device (a pair's `x`, `y`, reversed `x`, reversed
/// `y`), one after the other, `dims` values a sample, with their
/// timestamps if they have any.
pub struct DevicePathPair<T> {
    values: CudaSlice<T>,
    times: Option<CudaSlice<T>>,
    /// Where each series starts and how many samples it has.
    starts: [usize; 4],
    lengths: [usize; 4],
    dims: usize,
    /// The streams the passes of one level run on at once.
    streams: Vec<Arc<CudaStream>>,
}

/// Streams of a pair's passes: enough concurrent passes to fill the GPU
/// when the sub-pairs are narrow (a warp a panel of columns).
const STREAMS: usize = 16;

/// One pass: samples `rows` of series `x` against samples `cols` of series
/// `y` (indices into the four series).
pub type DevicePass = ((usize, Range<usize>), (usize, Range<usize>));

impl<T: Float> DevicePathPair<T> {
    /// Uploads the four series (`dims` values a sample) and their
    /// timestamps (one a sample), if any.
    pub fn upload(
        gpu: &Gpu,
        values: [&[T]; 4],
        times: Option<[&[T]; 4]>,
        dims: usize,
    ) -> Result<Self> {
        let (_one_at_a_time, _budget) = gpu.begin(None)?;
        let lengths = values.map(|v| v.len() / dims);
        let mut starts = [0; 4];
        for k in 1..4 {
            starts[k] = starts[k - 1] + lengths[k - 1];
        }
        let flat = |parts: [&[T]; 4]| parts.concat();
        let values = gpu
            .stream
            .clone_htod(&flat(values))
            .call("copying to the device")?;
        let times = times
            .map(|t| {
                gpu.stream
                    .clone_htod(&flat(t))
                    .call("copying to the device")
            })
            .transpose()?;
        let streams = (0..STREAMS)
            .map(|_| gpu.context.new_stream().call("creating a stream"))
            .collect::<Result<_>>()?;
        // The other streams read the samples.
        wait_stream(&gpu.stream, "the long-pair passes of a path")?;
        Ok(Self {
            values,
            times,
            starts,
            lengths,
            dims,
            streams,
        })
    }

    /// For each pass, `D(i, last)` for every row `i` of the (unbanded)
    /// matrix of `params` of its `x` samples against its `y` samples (and
    /// whatever samples before them the measure reads, which the caller
    /// checked are there). The passes run at once on several streams, as
    /// many as fit the memory budget at a time.
    pub fn last_columns<P: KernelParams<T>>(
        &self,
        gpu: &Gpu,
        params: P,
        passes: &[DevicePass],
    ) -> Result<Vec<Vec<T>>> {
        let (_one_at_a_time, budget) = gpu.begin(None)?;
        let mut columns = Vec::with_capacity(passes.len());
        let mut queued = Vec::new();
        let mut queued_bytes = 0;
        for (k, ((x, rows), (y, cols))) in passes.iter().enumerate() {
            assert!(
                rows.start < rows.end
                    && rows.end <= self.lengths[*x]
                    && cols.start < cols.end
                    && cols.end <= self.lengths[*y],
                "a pass within the pair's series"
            );
            // The launched matrix has y's samples as rows, x's as columns.
            let lengths = (cols.len(), rows.len());
            let bytes = pipelined_bytes::<T>(lengths.0) + (rows.len() + 1) * size_of::<T>();
            if queued_bytes + bytes > budget && !queued.is_empty() {
                finish(&mut queued, &mut columns)?;
                queued_bytes = 0;
            }
            check_fits(lengths.0, lengths.1, bytes, budget)?;
            let stream = &self.streams[k % self.streams.len()];
            let launched = [(*y, cols.clone()), (*x, rows.clone())];
            queued.push(self.enqueue(gpu, stream, params, launched)?);
            queued_bytes += bytes;
        }
        finish(&mut queued, &mut columns)?;
        Ok(columns)
    }

    /// Queues one pass on `stream`: the matrix of the first range (as
    /// rows) against the second.
    fn enqueue<P: KernelParams<T>>(
        &self,
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        params: P,
        launched: [(usize, Range<usize>); 2],
    ) -> Result<QueuedPass<T>> {
        let values = self.values.device_ptr(stream).0;
        let times = self.times.as_ref().map(|t| t.device_ptr(stream).0);
        let offsets: Vec<u64> = launched
            .iter()
            .flat_map(|(_, range)| [0, range.len() as u64])
            .collect();
        let offsets = stream.clone_htod(&offsets).call("copying to the device")?;
        let offsets_at = offsets.device_ptr(stream).0 as *const u64;
        let set = |k: usize| {
            let (which, range) = &launched[k];
            let sample = self.starts[*which] + range.start;
            SetRef {
                values: (values + (sample * self.dims * size_of::<T>()) as u64) as *const T,
                // SAFETY: the add stays inside `offsets`, which holds two
                // offsets a launched pair.
                offsets: unsafe { offsets_at.add(2 * k) },
                times: times.map_or(std::ptr::null(), |t| {
                    (t + (sample * size_of::<T>()) as u64) as *const T
                }),
                count: 1,
                dims: self.dims as u64,
                uniform_len: 0,
                uniform_first: 0,
            }
        };
        let (rows, cols) = (launched[0].1.len(), launched[1].1.len());
        let last_row = stream
            .alloc_zeros::<T>(cols + 1)
            .call("allocating device memory")?;
        let last_row_at = last_row.device_ptr(stream).0 as *mut T;
        let run = enqueue_pipelined(
            gpu,
            stream,
            params,
            (set(0), set(1)),
            (rows, cols),
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
        pass.run.value(&pass.stream)?;
        let mut column = pass
            .stream
            .clone_dtoh(&pass.last_row)
            .call("copying to the host")?;
        column.remove(0);
        columns.push(column);
    }
    Ok(())
}
