//! The pair kernels (naive, warp, local, shared) over whole batches:
//! streamed (`distance_matrix`) or against a resident set
//! (`distance_matrix_resident`), through the pipeline; and the upload of a
//! resident set.
//!
//! Streamed: the side of the matrix with the smaller image is uploaded a
//! range of series at a time; the other is copied chunk by chunk, straight
//! from the batch's contiguous arrays (on all cores, offsets rebased on the
//! way) into pinned staging buffers and on to the device. A batch against
//! itself uploads ranges whose square fits a tile, computes each range's
//! triangle from its upload, and streams the series after the range
//! against it, mirrored. Resident: the queries are uploaded in ranges and
//! run against ranges of the resident set's columns, views into its image.
//!
//! Kernel choice (stripe, rolling-row length) depends on the whole batches'
//! longest series, not on the chunks, so streamed and resident results
//! agree bit for bit however the work is cut.

use super::context::{Gpu, KernelParams, DEFAULT_SHARED_BYTES};
use super::image::DeviceSeriesSet;
use super::layout::image_bytes;
use super::pipeline::{Operand, PairKernel, Pipeline};
use super::plan::matrix::STAGING_BYTES;
use super::plan::matrix::{resident_plan, streamed_plan, Caps, Side, Sizes};
use super::select::{band_width, local_kernel, shared_threads, warp_kernel};
use crate::{Error, Float, Result, SeriesSet, Variant};
use ndarray::Array2;
use std::mem::size_of;
use timewarp_kernels::{Driver, KernelId};

/// Threads per block of the pair kernels but `shared` (4 warps).
const THREADS_PER_BLOCK: u32 = 128;

/// The kernel of `variant` (naive, warp, local or shared) for pairs of
/// series up to `a_len` and `b_len` samples of `dims` dimensions, in a band
/// of up to `band_width` diagonals if any, loaded, and how to launch it.
fn pair_kernel<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    (a_len, b_len): (usize, usize),
    dims: usize,
    band_width: Option<usize>,
) -> Result<PairKernel> {
    let (measure, precision) = (P::MEASURE, T::PRECISION);
    let row_len = a_len.max(b_len) + 1;
    let kernel = |id: KernelId, threads_per_pair: usize, workspace_per_pair: usize| {
        Ok(PairKernel {
            function: gpu.function(id)?,
            threads_per_pair: threads_per_pair as u32,
            row_len,
            workspace_per_pair,
            threads_per_block: THREADS_PER_BLOCK,
            shared_bytes: 0,
        })
    };
    match variant {
        Variant::Naive => {
            let id = KernelId::new(measure, Driver::Naive, false, precision);
            kernel(id, 1, 2 * row_len)
        }
        Variant::Local => kernel(local_kernel(measure, precision, b_len)?, 1, 0),
        Variant::Shared => shared_kernel::<T>(
            gpu,
            KernelId::new(measure, Driver::Shared, false, precision),
            row_len,
        ),
        Variant::Warp => {
            let warp = warp_kernel(measure, precision, (a_len, b_len), dims, band_width);
            kernel(warp.id, warp.lanes, warp.workspace_per_pair)
        }
        other => Err(Error::InvalidInput(format!(
            "GPU variant {other} does not run through the pair pipeline"
        ))),
    }
}

/// The `shared` kernel `id` with rows of `row_len` values: a block of
/// threads whose rows (`threads * 2 * row_len` values) fit its shared
/// memory, opting in to more than the default when even 32 threads' rows
/// need it; an error when one thread's rows exceed what a block may have.
fn shared_kernel<T: Float>(gpu: &Gpu, id: KernelId, row_len: usize) -> Result<PairKernel> {
    let bytes_per_thread = 2 * row_len * size_of::<T>();
    let opt_in = gpu.max_shared_bytes()?;
    let (threads, _) =
        shared_threads(bytes_per_thread, DEFAULT_SHARED_BYTES, opt_in).ok_or_else(|| {
            Error::InvalidInput(format!(
                "the shared GPU variant keeps two rows of {row_len} values per thread in \
                 shared memory, {bytes_per_thread} bytes, over the {opt_in} a block of this \
                 GPU may have; use the warp, naive or tiled variant"
            ))
        })?;
    let shared_bytes = threads as usize * bytes_per_thread;
    let (function, _) = gpu.function_with_shared(id, shared_bytes)?;
    Ok(PairKernel {
        function,
        threads_per_pair: 1,
        row_len,
        workspace_per_pair: 0,
        threads_per_block: threads,
        shared_bytes: shared_bytes as u32,
    })
}

/// Every series of `a` against every series of `b`, or the upper
/// triangle of `a` against itself, with a naive or warp kernel,
/// streamed (see the module's documentation). The caller holds the
/// GPU's lock.
pub(crate) fn streamed<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    budget: usize,
) -> Result<Array2<T>> {
    let other = b.unwrap_or(a);
    let band_width = band_width(&params, a.lengths(), other.lengths());
    let kernel = pair_kernel::<T, P>(
        gpu,
        variant,
        (a.max_len(), other.max_len()),
        a.dims(),
        band_width,
    )?;
    let caps = Caps::new(budget, size_of::<T>());
    let plan = streamed_plan(a, b, &caps);
    let longest = a.max_len().max(other.max_len());
    let sizes = Sizes::new(
        &plan,
        a,
        Some(other),
        kernel.workspace_per_pair,
        &caps,
        longest,
    )?;
    let mut pipeline = Pipeline::new(gpu, sizes)?;
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
    gpu: &Gpu,
    set: &SeriesSet<T>,
    memory_budget: Option<usize>,
) -> Result<DeviceSeriesSet<T>> {
    let (_one_at_a_time, budget) = gpu.begin(memory_budget)?;
    let all = 0..set.len();
    let bytes = image_bytes(set, all.clone());
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
    let image = Pipeline::new(gpu, sizes)?.upload(set, all)?;
    Ok(DeviceSeriesSet {
        image,
        offsets: set.parts().1.to_vec(),
        max_len: set.max_len(),
        min_len: set.min_len(),
    })
}

/// Every series of `queries` against every series of the resident
/// `database`, with a naive or warp kernel: the queries uploaded in
/// blocks, the tiles' outputs copied back as the next tiles run.
pub(crate) fn matrix_resident<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    params: P,
    queries: &SeriesSet<T>,
    database: &DeviceSeriesSet<T>,
    memory_budget: Option<usize>,
) -> Result<Array2<T>> {
    let (_one_at_a_time, budget) = gpu.begin(memory_budget)?;
    let band_width = band_width(&params, queries.lengths(), database.lengths());
    let kernel = pair_kernel::<T, P>(
        gpu,
        variant,
        (queries.max_len(), database.max_len()),
        queries.dims(),
        band_width,
    )?;
    let caps = Caps::new(budget, size_of::<T>());
    let plan = resident_plan(queries, database.len(), &caps);
    let longest = queries.max_len().max(database.max_len());
    let sizes = Sizes::new(
        &plan,
        queries,
        None,
        kernel.workspace_per_pair,
        &caps,
        longest,
    )?;
    let mut pipeline = Pipeline::new(gpu, sizes)?;
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
