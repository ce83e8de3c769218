//! The subsequence search's device side: the query and its envelope kept
//! on the GPU, a chunk of the series uploaded at a time, its envelope and
//! every start's bounds computed and brought back
//! ([`SearchDevice::bounds`]), then the DTWs of the candidates the caller
//! keeps, launch by launch under the caller's cutoff
//! ([`SearchDevice::dtw`]). The cascade's policy (which candidates, which
//! threshold, the matches) is the caller's (`crate::search::gpu`); the
//! kernels are `kernels-gpu/src/launch/search.rs`.

use crate::error::DriverCall;
use crate::gpu::plan::search::{search_shape, SearchShape};
use crate::gpu::runtime::context::{Busy, Gpu};
use crate::gpu::runtime::wait::wait_stream;
use crate::{Error, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use timewarp_kernels::launch::search::{SearchLaunch, ABANDONED, BOUNDS_PER_START};
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
    bounds: CudaSlice<f64>,
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
        let candidates = stream
            .alloc_zeros::<u32>(shape.max_batch)
            .call("allocating device memory")?;
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
            bounds,
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
            bounds: at(&self.bounds),
            candidates: self.candidates.device_ptr(stream).0 as *const u32,
            candidate_count: 0,
            cutoff: f64::INFINITY,
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

    /// Uploads the chunk `x` (its starts and `m - 1` samples more, `dims`
    /// values a sample, finite) and returns its bounds: LB_Kim, LB_Keogh
    /// on the query's envelope and on the data's, a start after another.
    pub fn bounds(&mut self, x: &[f64]) -> Result<Vec<f64>> {
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
        (self.rows, self.starts) = (rows, starts);
        let launch = self.launch();
        self.run(Driver::SearchEnvelope, launch, rows * self.dims)?;
        self.run(Driver::SearchBounds, launch, starts)?;
        wait_stream(&stream, "dtw_search_bounds_f64")?;
        let mut bounds = vec![0.0; starts * BOUNDS_PER_START];
        stream
            .memcpy_dtoh(&self.bounds.slice(..bounds.len()), &mut bounds[..])
            .call("copying to the host")?;
        Ok(bounds)
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
