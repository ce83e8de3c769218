//! The subsequence search's device side: the query and its envelope kept
//! on the GPU, a chunk of the series uploaded at a time, its envelope and
//! every start's bounds computed, and only the starts that no bound
//! prunes at the caller's cutoff brought back, with their bounds and the
//! counts of those pruned ([`SearchDevice::bounds`]); then the DTWs of the
//! candidates the caller keeps, launch by launch under the caller's cutoff
//! ([`SearchDevice::dtw`]). The cascade's policy (which candidates, which
//! threshold, the matches) is the caller's (`crate::search::gpu`); the
//! kernels are `kernels-gpu/src/launch/search.rs`.

use crate::error::DriverCall;
use crate::gpu::plan::search::{search_shape, SearchShape};
use crate::gpu::runtime::context::{Busy, Gpu};
use crate::gpu::runtime::pinned::Pinned;
use crate::gpu::runtime::wait::wait_stream;
use crate::{Error, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use std::mem::size_of;
use timewarp_kernels::launch::search::{
    read_tally, SearchLaunch, ABANDONED, BOUNDS_PER_START, TALLY_WORDS,
};
use timewarp_kernels::{Driver, KernelId};

/// Threads a block of the search's kernels.
const THREADS: u32 = 128;

/// The query as the search compares it: normalised as asked, with its
/// envelope for the band's radius, `m x dims` each, row-major.
pub(crate) struct SearchQuery<'a> {
    pub values: &'a [f64],
    pub lower: &'a [f64],
    pub upper: &'a [f64],
    pub m: usize,
    pub dims: usize,
    pub radius: usize,
    pub znorm: bool,
}

/// What a chunk's bounds leave: the starts that no bound prunes at the
/// cutoff (in no particular order), their bounds ([`BOUNDS_PER_START`] a
/// survivor, in the same order), and the starts each bound pruned first
/// (LB_Kim, LB_Keogh on the query's envelope, on the data's).
#[derive(Debug, Default)]
pub(crate) struct ChunkSurvivors {
    pub starts: Vec<u32>,
    pub bounds: Vec<f64>,
    pub pruned: [u64; BOUNDS_PER_START],
}

impl ChunkSurvivors {
    /// The bounds of survivor `i`.
    pub fn bounds_of(&self, i: usize) -> [f64; BOUNDS_PER_START] {
        let mut b = [0.0; BOUNDS_PER_START];
        b.copy_from_slice(&self.bounds[i * BOUNDS_PER_START..(i + 1) * BOUNDS_PER_START]);
        b
    }

    /// Starts of the chunk: the survivors and those pruned.
    pub fn candidates(&self) -> u64 {
        self.starts.len() as u64 + self.pruned.iter().sum::<u64>()
    }
}

/// Page-locked host memory for a chunk's samples, which the bus reads at
/// its full speed (ordinary memory goes through the driver's own staging,
/// at a fraction of it). Taken from the GPU's kept buffers by
/// [`SearchDevice::chunk_buffer`] and given back by
/// [`SearchDevice::give_back`]; the only copy that reads it is
/// [`SearchDevice::bounds`]'s, which has ended when it returns, so that
/// whoever holds the buffer may write it.
pub(crate) struct ChunkBuffer {
    pinned: Pinned,
    values: usize,
}

impl ChunkBuffer {
    /// The buffer's values (room for a whole chunk).
    pub fn values_mut(&mut self) -> &mut [f64] {
        // SAFETY: no copy reads the buffer while it is held (the type's
        // rule), and it has room for `values` f64s.
        unsafe { self.pinned.values_mut::<f64>(self.values) }
    }

    fn values(&self, len: usize) -> &[f64] {
        assert!(len <= self.values);
        // SAFETY: as in `values_mut`; the caller wrote the first `len`.
        unsafe { self.pinned.values::<f64>(len) }
    }
}

/// A search on one GPU, held for its whole length.
pub(crate) struct SearchDevice<'g> {
    gpu: &'g Gpu,
    _busy: Busy<'g>,
    shape: SearchShape,
    m: usize,
    dims: usize,
    radius: usize,
    znorm: bool,
    query: [CudaSlice<f64>; 3],
    /// The chunk's samples and their envelope.
    series: [CudaSlice<f64>; 3],
    /// The survivors of a chunk's bounds: starts, bounds, the tally.
    kept: CudaSlice<u32>,
    bounds: CudaSlice<f64>,
    tally: CudaSlice<u32>,
    candidates: CudaSlice<u32>,
    scratch: CudaSlice<f64>,
    costs: CudaSlice<f64>,
    /// The chunk now on the device: its samples and starts.
    rows: usize,
    starts: usize,
}

/// Blocks of [`THREADS`] for `items` threads.
fn blocks(items: usize) -> Result<u32> {
    u32::try_from(items.div_ceil(THREADS as usize))
        .map_err(|_| Error::GpuFailure(format!("a search launch of {items} threads")))
}

impl<'g> SearchDevice<'g> {
    /// Opens the search of `starts` starts (in units of `unit`) on `gpu`
    /// within `memory_budget` (or 3/4 of the free memory): the query on
    /// the device, the buffers of a chunk and of a DTW launch allocated.
    pub fn open(
        gpu: &'g Gpu,
        query: &SearchQuery,
        (starts, unit): (usize, usize),
        memory_budget: Option<usize>,
    ) -> Result<Self> {
        let (busy, budget) = gpu.begin(memory_budget)?;
        let (m, dims) = (query.m, query.dims);
        let shape = search_shape(starts, unit, (m, dims), budget)?;
        let stream = &gpu.stream;
        let upload = |values: &[f64]| stream.clone_htod(values).call("copying to the device");
        let query_parts = [
            upload(query.values)?,
            upload(query.lower)?,
            upload(query.upper)?,
        ];
        let rows = (shape.chunk_starts + m - 1) * dims;
        let zeros = |n: usize| {
            stream
                .alloc_zeros::<f64>(n)
                .call("allocating device memory")
        };
        let series = [zeros(rows)?, zeros(rows)?, zeros(rows)?];
        let bounds = zeros(shape.chunk_starts * BOUNDS_PER_START)?;
        let scratch = zeros(shape.max_batch * SearchLaunch::scratch_values(m, dims))?;
        let costs = zeros(shape.max_batch)?;
        let words = |n: usize| {
            stream
                .alloc_zeros::<u32>(n)
                .call("allocating device memory")
        };
        let (kept, tally) = (words(shape.chunk_starts)?, words(TALLY_WORDS)?);
        let candidates = words(shape.max_batch)?;
        Ok(SearchDevice {
            gpu,
            _busy: busy,
            shape,
            m,
            dims,
            radius: query.radius,
            znorm: query.znorm,
            query: query_parts,
            series,
            kept,
            bounds,
            tally,
            candidates,
            scratch,
            costs,
            rows: 0,
            starts: 0,
        })
    }

    /// Starts a chunk holds at most.
    pub fn chunk_starts(&self) -> usize {
        self.shape.chunk_starts
    }

    /// Candidates a DTW launch takes at most.
    pub fn max_batch(&self) -> usize {
        self.shape.max_batch
    }

    /// A page-locked buffer with room for a chunk's samples.
    pub fn chunk_buffer(&self) -> Result<ChunkBuffer> {
        let values = (self.shape.chunk_starts + self.m - 1) * self.dims;
        let pinned = self
            .gpu
            .pool
            .take(&self.gpu.context, values * size_of::<f64>(), false)?;
        Ok(ChunkBuffer { pinned, values })
    }

    /// Keeps `buffer` for the GPU's next calls (within the pool's limits).
    pub fn give_back(&self, buffer: ChunkBuffer) {
        self.gpu.pool.give_back(buffer.pinned);
    }

    /// The launch parameter with this chunk's buffers, no candidates.
    fn launch(&self) -> SearchLaunch {
        let stream = &self.gpu.stream;
        let at = |slice: &CudaSlice<f64>| slice.device_ptr(stream).0 as *mut f64;
        SearchLaunch {
            series: at(&self.series[0]),
            rows: self.rows as u64,
            dims: self.dims as u64,
            m: self.m as u64,
            radius: self.radius as u64,
            znorm: u64::from(self.znorm),
            query: at(&self.query[0]),
            query_lower: at(&self.query[1]),
            query_upper: at(&self.query[2]),
            lower: at(&self.series[1]),
            upper: at(&self.series[2]),
            starts: self.starts as u64,
            kept: self.kept.device_ptr(stream).0 as *mut u32,
            bounds: at(&self.bounds),
            tally: self.tally.device_ptr(stream).0 as *mut u32,
            cutoff: f64::INFINITY,
            candidates: self.candidates.device_ptr(stream).0 as *const u32,
            candidate_count: 0,
            scratch: at(&self.scratch),
            costs: at(&self.costs),
        }
    }

    /// Launches the search kernel of `driver` on `threads` threads.
    fn run(&self, driver: Driver, launch: SearchLaunch, threads: usize) -> Result<()> {
        let id = KernelId::search(driver);
        let function = self.gpu.function(id)?;
        // SAFETY: the search kernels take a `SearchLaunch`, whose pointers
        // are this session's buffers, sized for a chunk of `chunk_starts`
        // starts and a launch of `max_batch` candidates (checked by the
        // callers); each thread checks its index against its count.
        unsafe {
            self.gpu
                .launch_blocks(&function, (blocks(threads)?, THREADS), 0, launch)
        }
    }

    /// Uploads the chunk in the first `len` values of `buffer` (its starts
    /// and `m - 1` samples more, `dims` values a sample, finite), computes
    /// every start's bounds (LB_Kim, LB_Keogh on the query's envelope and
    /// on the data's) and returns those that survive `cutoff`, with the
    /// counts of those pruned. The copy from `buffer` has ended when it
    /// returns, with or without an error.
    pub fn bounds(
        &mut self,
        buffer: &ChunkBuffer,
        len: usize,
        cutoff: f64,
    ) -> Result<ChunkSurvivors> {
        let copied = self.bounds_of(buffer.values(len), cutoff);
        if copied.is_err() {
            // The copy may still read the buffer: wait for it (an error
            // here leaves the stream's own failure to report).
            let _ = wait_stream(&self.gpu.stream, "the copy of a chunk");
        }
        copied
    }

    fn bounds_of(&mut self, x: &[f64], cutoff: f64) -> Result<ChunkSurvivors> {
        let rows = x.len() / self.dims;
        let starts = rows + 1 - self.m;
        assert!(
            starts >= 1 && starts <= self.shape.chunk_starts,
            "a chunk of the planned size"
        );
        let stream = self.gpu.stream.clone();
        stream
            .memcpy_htod(x, &mut self.series[0])
            .call("copying to the device")?;
        stream
            .memset_zeros(&mut self.tally)
            .call("zeroing device memory")?;
        (self.rows, self.starts) = (rows, starts);
        let launch = SearchLaunch {
            cutoff,
            ..self.launch()
        };
        self.run(Driver::SearchEnvelope, launch, rows * self.dims)?;
        self.run(Driver::SearchBounds, launch, starts)?;
        wait_stream(&stream, "dtw_search_bounds_f64")?;
        self.survivors()
    }

    /// The survivors the bounds kernel left in the chunk now on the
    /// device: the tally, then as many starts and bounds as it counts.
    fn survivors(&self) -> Result<ChunkSurvivors> {
        let stream = &self.gpu.stream;
        let mut tally = vec![0; TALLY_WORDS];
        stream
            .memcpy_dtoh(&self.tally, &mut tally[..])
            .call("copying to the host")?;
        let (count, pruned) = read_tally(&tally);
        let counted = count as u64 + pruned.iter().sum::<u64>();
        if counted != self.starts as u64 {
            return Err(Error::GpuFailure(format!(
                "the search's bounds counted {counted} of {} starts",
                self.starts
            )));
        }
        let mut found = ChunkSurvivors {
            starts: vec![0; count],
            bounds: vec![0.0; count * BOUNDS_PER_START],
            pruned,
        };
        if count > 0 {
            stream
                .memcpy_dtoh(&self.kept.slice(..count), &mut found.starts[..])
                .call("copying to the host")?;
            stream
                .memcpy_dtoh(
                    &self.bounds.slice(..found.bounds.len()),
                    &mut found.bounds[..],
                )
                .call("copying to the host")?;
        }
        Ok(found)
    }

    /// The DTW costs of `candidates` (starts of the chunk last given to
    /// [`SearchDevice::bounds`], at most a batch), `None` for those
    /// abandoned above `cutoff`.
    pub fn dtw(&mut self, candidates: &[u32], cutoff: f64) -> Result<Vec<Option<f64>>> {
        let count = candidates.len();
        assert!(
            count >= 1
                && count <= self.shape.max_batch
                && candidates.iter().all(|&s| (s as usize) < self.starts),
            "candidates of the chunk, at most a batch"
        );
        let stream = self.gpu.stream.clone();
        stream
            .memcpy_htod(candidates, &mut self.candidates)
            .call("copying to the device")?;
        let launch = SearchLaunch {
            candidate_count: count as u64,
            cutoff,
            ..self.launch()
        };
        self.run(Driver::SearchDtw, launch, count)?;
        wait_stream(&stream, "dtw_search_dtw_f64")?;
        let mut costs = vec![0.0; count];
        stream
            .memcpy_dtoh(&self.costs.slice(..count), &mut costs[..])
            .call("copying to the host")?;
        Ok(costs
            .into_iter()
            .map(|c| (c != ABANDONED).then_some(c))
            .collect())
    }
}
