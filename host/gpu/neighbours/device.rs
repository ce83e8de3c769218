//! The k-NN's device side: the database resident on one GPU, a block of
//! queries uploaded, then chunk by chunk of the database every pair's
//! bounds and the survivors of the caller's cutoffs
//! ([`KnnDevice::bounds`]), and the distances of the pairs the caller
//! keeps ([`KnnDevice::distances`]): both series of each pair gathered
//! into batches of their own, then the pair kernel that the brute force
//! (`matrix_resident`) runs for this block of queries against the whole
//! database, with the pairs numbered `Paired`. A pair's value depends on
//! its two series and the kernel alone, so it is the brute force's, bit
//! for bit. The kernels are `kernels-gpu/src/launch/neighbours.rs`.

use crate::error::DriverCall;
use crate::gpu::launch::pair_kernel::{launch_pairs, pair_kernel, PairKernel};
use crate::gpu::plan::select::band_width;
use crate::gpu::runtime::context::{poison_bytes, Busy, Gpu};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::uploads::DeviceSeriesSet;
use crate::{Error, Float, Result, Variant};
use cudarc::driver::{CudaSlice, DevicePtr};
use std::mem::size_of;
use timewarp_kernels::launch::neighbours::{GatherLaunch, KnnLaunch};
use timewarp_kernels::launch::search::{read_tally, BOUNDS_PER_START, TALLY_WORDS};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Driver, DtwParams, KernelId, SetRef};

/// Threads a block of the k-NN's kernels.
const THREADS: u32 = 128;

/// Pairs a bounds launch takes at most (their codes are `u32`s; each
/// survivor takes 28 bytes of the list).
pub(crate) const MAX_CHUNK_PAIRS: usize = 1 << 23;

/// Pairs a distances batch takes at most.
pub(crate) const MAX_BATCH_PAIRS: usize = 1 << 16;

/// A block of queries as the bounds read them: `f64` values (`dims` a
/// sample), sample offsets (`count + 1`), the envelopes in the values'
/// layout; and the queries in the set's precision, for the distances.
pub(crate) struct KnnQueries<'a, T> {
    pub values: &'a [f64],
    pub offsets: &'a [u64],
    pub lower: &'a [f64],
    pub upper: &'a [f64],
    pub exact: &'a [T],
}

/// What a chunk's bounds leave: the pairs no bound prunes at their
/// query's cutoff (`q * count + j`, in no particular order), their bounds
/// (`BOUNDS_PER_START` a survivor), and the pairs each bound pruned first.
#[derive(Debug, Default)]
pub(crate) struct PairSurvivors {
    pub pairs: Vec<u32>,
    pub bounds: Vec<f64>,
    pub pruned: [u64; BOUNDS_PER_START],
}

impl PairSurvivors {
    /// The bounds of survivor `i`.
    pub fn bounds_of(&self, i: usize) -> [f64; BOUNDS_PER_START] {
        let mut b = [0.0; BOUNDS_PER_START];
        b.copy_from_slice(&self.bounds[i * BOUNDS_PER_START..(i + 1) * BOUNDS_PER_START]);
        b
    }
}

/// The pair kernel the brute force (`matrix_resident`) runs for queries
/// of sample `offsets` against the whole `database`, and the longest
/// query and database series.
fn brute_force_kernel<T: Float>(
    gpu: &Gpu,
    database: &DeviceSeriesSet<T>,
    offsets: &[u64],
    params: DtwParams,
    variant: Variant,
) -> Result<(PairKernel, (usize, usize))> {
    let query_lens = offsets.windows(2).map(|w| (w[1] - w[0]) as usize);
    let q_lengths = (
        query_lens.clone().min().unwrap_or(0),
        query_lens.max().unwrap_or(0),
    );
    let band = band_width::<T, _>(&params, q_lengths, database.lengths());
    let lengths = (q_lengths.1, database.max_len());
    let pairs = (offsets.len() - 1) * database.len();
    let dims = database.dims();
    let kernel = pair_kernel::<T, DtwParams>(gpu, variant, lengths, dims, band, pairs)?;
    Ok((kernel, lengths))
}

/// Blocks of [`THREADS`] for `items` threads.
fn blocks(items: usize) -> Result<u32> {
    u32::try_from(items.div_ceil(THREADS as usize))
        .map_err(|_| Error::GpuFailure(format!("a k-NN launch of {items} threads")))
}

/// The k-NN of one block of queries against a database resident on one
/// GPU, the GPU held for its length.
pub(crate) struct KnnDevice<'g, T> {
    gpu: &'g Gpu,
    _busy: Busy<'g>,
    database: SetRef<T>,
    /// The database's sample offsets (from 0).
    database_offsets: Vec<u64>,
    dims: usize,
    radius: usize,
    /// Every database series' length, or 0 when they differ.
    length: usize,
    kernel: PairKernel,
    params: DtwParams,
    query_offsets: Vec<u64>,
    /// The queries: f64 values, offsets, envelopes; the set's precision.
    queries: [CudaSlice<f64>; 3],
    query_offsets_device: CudaSlice<u64>,
    exact: CudaSlice<T>,
    /// A chunk's envelopes, survivors, bounds, tally and cutoffs.
    envelopes: [CudaSlice<T>; 2],
    kept: CudaSlice<u32>,
    bounds: CudaSlice<f64>,
    tally: CudaSlice<u32>,
    cutoffs: CudaSlice<f64>,
    max_chunk: usize,
    /// A batch's indices and offsets (queries, series), gathered series
    /// and values, and the pair kernel's workspace.
    indices: [CudaSlice<u32>; 2],
    offsets: [CudaSlice<u64>; 2],
    gathered: [CudaSlice<T>; 2],
    out: CudaSlice<T>,
    workspace: Option<CudaSlice<T>>,
    max_batch: usize,
}

impl<'g, T: Float> KnnDevice<'g, T> {
    /// Opens the k-NN of `queries` against `database` (on `gpu`) under
    /// DTW with a band of `radius`, with the pair kernel `variant` gives
    /// for this block against the whole database, within
    /// `memory_budget` (or 3/4 of the free memory); `None` where that
    /// budget holds no chunk or batch (the brute force then computes, in
    /// tiles as small as it needs).
    pub fn open(
        gpu: &'g Gpu,
        database: &DeviceSeriesSet<T>,
        queries: &KnnQueries<T>,
        (radius, variant): (usize, Variant),
        memory_budget: Option<usize>,
    ) -> Result<Option<Self>> {
        let (busy, budget) = gpu.begin(memory_budget)?;
        let dims = database.dims();
        let count = queries.offsets.len() - 1;
        let params = DtwParams::new(Some(radius));
        let (kernel, lengths) =
            brute_force_kernel(gpu, database, queries.offsets, params, variant)?;
        let length = if database.min_len() == database.max_len() {
            database.max_len()
        } else {
            0
        };
        let longest = lengths.0.max(lengths.1);
        let t = size_of::<T>();
        // Half the budget for the chunks, a quarter for the batches.
        let per_series = 2 * length * dims * t + count * (4 + 8 * BOUNDS_PER_START);
        let max_chunk = (budget / 2 / per_series.max(1))
            .min(MAX_CHUNK_PAIRS / count)
            .min(database.len());
        let per_pair = 2 * longest * dims * t + 2 * (4 + 8) + t + kernel.workspace_per_pair * t;
        let max_batch = (budget / 4 / per_pair.max(1)).min(MAX_BATCH_PAIRS);
        if max_chunk == 0 || max_batch == 0 {
            return Ok(None);
        }
        let stream = &gpu.stream;
        let copy = |values: &[f64]| stream.clone_htod(values).call("copying to the device");
        let uploaded = [
            copy(queries.values)?,
            copy(queries.lower)?,
            copy(queries.upper)?,
        ];
        let query_offsets_device = stream
            .clone_htod(queries.offsets)
            .call("copying to the device")?;
        let exact = stream
            .clone_htod(queries.exact)
            .call("copying to the device")?;
        let zeros_t = |n: usize| {
            stream
                .alloc_zeros::<T>(n.max(1))
                .call("allocating device memory")
        };
        let zeros_f = |n: usize| {
            stream
                .alloc_zeros::<f64>(n.max(1))
                .call("allocating device memory")
        };
        let words = |n: usize| {
            stream
                .alloc_zeros::<u32>(n.max(1))
                .call("allocating device memory")
        };
        let longs = |n: usize| {
            stream
                .alloc_zeros::<u64>(n.max(1))
                .call("allocating device memory")
        };
        let chunk_values = max_chunk * length * dims;
        let batch_values = max_batch * longest * dims;
        let workspace = match kernel.workspace_per_pair {
            0 => None,
            per_pair => Some(zeros_t(max_batch * per_pair)?),
        };
        let mut offsets: Vec<u64> = database.offsets().to_vec();
        let base = offsets[0];
        offsets.iter_mut().for_each(|o| *o -= base);
        Ok(Some(KnnDevice {
            gpu,
            _busy: busy,
            database: database.image.view(&(0..database.len())),
            database_offsets: offsets,
            dims,
            radius,
            length,
            kernel,
            params,
            query_offsets: queries.offsets.to_vec(),
            queries: uploaded,
            query_offsets_device,
            exact,
            envelopes: [zeros_t(chunk_values)?, zeros_t(chunk_values)?],
            kept: words(max_chunk * count)?,
            bounds: zeros_f(max_chunk * count * BOUNDS_PER_START)?,
            tally: words(TALLY_WORDS)?,
            cutoffs: zeros_f(count)?,
            max_chunk,
            indices: [words(max_batch)?, words(max_batch)?],
            offsets: [longs(max_batch + 1)?, longs(max_batch + 1)?],
            gathered: [zeros_t(batch_values)?, zeros_t(batch_values)?],
            out: zeros_t(max_batch)?,
            workspace,
            max_batch,
        }))
    }

    /// Database series a chunk holds at most.
    pub fn max_chunk(&self) -> usize {
        self.max_chunk
    }

    /// Pairs a distances batch holds at most.
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// Queries of the block.
    fn queries_count(&self) -> usize {
        self.query_offsets.len() - 1
    }

    /// Launches the k-NN kernel of `driver` on `threads` threads.
    fn run<A: Copy>(&self, driver: Driver, launch: A, threads: usize) -> Result<()>
    where
        crate::gpu::runtime::kernel_argument::KernelArgument<A>: cudarc::driver::DeviceRepr,
    {
        if threads == 0 {
            return Ok(());
        }
        let function = self.gpu.function(KernelId::knn(driver, T::PRECISION))?;
        // SAFETY: the k-NN's kernels take the launch struct of their
        // driver, whose pointers are this session's buffers, sized for a
        // chunk of `max_chunk` series and a batch of `max_batch` pairs
        // (checked by the callers); each thread checks its index.
        unsafe {
            self.gpu
                .launch_blocks(&function, (blocks(threads)?, THREADS), 0, launch)
        }
    }

    /// The bounds of every query of the block against database series
    /// `first .. first + count` (at most [`KnnDevice::max_chunk`]), and the
    /// pairs that survive `cutoffs` (one a query).
    pub fn bounds(&mut self, first: usize, count: usize, cutoffs: &[f64]) -> Result<PairSurvivors> {
        let queries = self.queries_count();
        assert!(count >= 1 && count <= self.max_chunk && cutoffs.len() == queries);
        let stream = self.gpu.stream.clone();
        stream
            .memcpy_htod(cutoffs, &mut self.cutoffs)
            .call("copying to the device")?;
        stream
            .memset_zeros(&mut self.tally)
            .call("zeroing device memory")?;
        let f = |s: &CudaSlice<f64>| s.device_ptr(&stream).0 as *const f64;
        let launch = KnnLaunch {
            database: self.database,
            first: first as u64,
            count: count as u64,
            dims: self.dims as u64,
            radius: self.radius as u64,
            length: self.length as u64,
            queries: f(&self.queries[0]),
            query_offsets: self.query_offsets_device.device_ptr(&stream).0 as *const u64,
            query_lower: f(&self.queries[1]),
            query_upper: f(&self.queries[2]),
            query_count: queries as u64,
            lower: self.envelopes[0].device_ptr(&stream).0 as *mut T,
            upper: self.envelopes[1].device_ptr(&stream).0 as *mut T,
            cutoffs: f(&self.cutoffs),
            kept: self.kept.device_ptr(&stream).0 as *mut u32,
            bounds: self.bounds.device_ptr(&stream).0 as *mut f64,
            tally: self.tally.device_ptr(&stream).0 as *mut u32,
        };
        self.run(Driver::KnnEnvelope, launch, count * self.length * self.dims)?;
        self.run(Driver::KnnBounds, launch, count * queries)?;
        wait_stream(&stream, "dtw_knn_bounds")?;
        let mut tally = vec![0; TALLY_WORDS];
        stream
            .memcpy_dtoh(&self.tally, &mut tally[..])
            .call("copying to the host")?;
        let (kept, pruned) = read_tally(&tally);
        let counted = kept as u64 + pruned.iter().sum::<u64>();
        if counted != (count * queries) as u64 {
            return Err(Error::GpuFailure(format!(
                "the k-NN's bounds counted {counted} of {} pairs",
                count * queries
            )));
        }
        let mut found = PairSurvivors {
            pairs: vec![0; kept],
            bounds: vec![0.0; kept * BOUNDS_PER_START],
            pruned,
        };
        if kept > 0 {
            stream
                .memcpy_dtoh(&self.kept.slice(..kept), &mut found.pairs[..])
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

    /// The distances of `pairs` (query of the block, database series), at
    /// most [`KnnDevice::max_batch`], as the brute force computes them.
    pub fn distances(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<T>> {
        let n = pairs.len();
        assert!(n >= 1 && n <= self.max_batch);
        let stream = self.gpu.stream.clone();
        let (mut query_at, mut series_at) = (vec![0u64; n + 1], vec![0u64; n + 1]);
        let mut longest = 0;
        let mut indices = [Vec::with_capacity(n), Vec::with_capacity(n)];
        for (p, &(q, j)) in pairs.iter().enumerate() {
            let (q, j) = (q as usize, j as usize);
            let q_len = self.query_offsets[q + 1] - self.query_offsets[q];
            let c_len = self.database_offsets[j + 1] - self.database_offsets[j];
            query_at[p + 1] = query_at[p] + q_len;
            series_at[p + 1] = series_at[p] + c_len;
            longest = longest.max(q_len.max(c_len));
            indices[0].push(q as u32);
            indices[1].push(j as u32);
        }
        let sources = [
            SetRef {
                values: self.exact.device_ptr(&stream).0 as *const T,
                offsets: self.query_offsets_device.device_ptr(&stream).0 as *const u64,
                times: std::ptr::null(),
                count: self.queries_count() as u64,
                dims: self.dims as u64,
                uniform_len: 0,
                uniform_first: 0,
            },
            self.database,
        ];
        let mut gathered = [self.database; 2];
        for (side, at) in [query_at, series_at].iter().enumerate() {
            stream
                .memcpy_htod(&indices[side], &mut self.indices[side])
                .call("copying to the device")?;
            stream
                .memcpy_htod(at, &mut self.offsets[side])
                .call("copying to the device")?;
            let launch = GatherLaunch {
                source: sources[side],
                indices: self.indices[side].device_ptr(&stream).0 as *const u32,
                count: n as u64,
                offsets: self.offsets[side].device_ptr(&stream).0 as *const u64,
                max_len: longest,
                out: self.gathered[side].device_ptr(&stream).0 as *mut T,
            };
            self.run(Driver::KnnGather, launch, n * longest as usize)?;
            gathered[side] = SetRef {
                values: launch.out,
                offsets: launch.offsets,
                times: std::ptr::null(),
                count: n as u64,
                dims: self.dims as u64,
                uniform_len: 0,
                uniform_first: 0,
            };
        }
        let out = self.out.device_ptr(&stream).0;
        let workspace = match &self.workspace {
            Some(w) => (w.device_ptr(&stream).0, self.max_batch as u64),
            None => (0, 0),
        };
        // SAFETY: `out` holds `max_batch >= n` values.
        unsafe { poison_bytes(&stream, out, n * size_of::<T>()) }?;
        // SAFETY: the gathered batches live in this session's buffers, no
        // series longer than the kernel was chosen for (the block's
        // queries and the database); `out` and the workspace hold
        // `max_batch >= n` pairs.
        unsafe {
            launch_pairs(
                self.gpu,
                &stream,
                &self.kernel,
                self.params,
                (gathered[0], gathered[1], Numbering::Paired, n as u64),
                out,
                workspace,
            )
        }?;
        wait_stream(&stream, "the k-NN's distances")?;
        let mut values = vec![T::default(); n];
        stream
            .memcpy_dtoh(&self.out.slice(..n), &mut values[..])
            .call("copying to the host")?;
        crate::finite::check_finite(&values, true)?;
        Ok(values)
    }
}
