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

use super::tile_pipeline::{Operand, Pipeline};
use super::workers::{run_plan, Worker};
use crate::gpu::launch::pair_kernel::pair_kernel;
use crate::gpu::plan::blocks::{spread_caps, spread_plan, Cells};
use crate::gpu::plan::layout::image_bytes;
use crate::gpu::plan::matrix_tiles::STAGING_BYTES;
use crate::gpu::plan::matrix_tiles::{resident_plan, streamed_plan, Caps, Side, Sizes};
use crate::gpu::plan::select::band_width;
use crate::gpu::plan::spread::each;
use crate::gpu::runtime::context::{Gpu, KernelParams};
use crate::gpu::runtime::several_gpus::hold;
use crate::gpu::transfer::matrix_output::Output;
use crate::gpu::transfer::uploads::DeviceSeriesSet;
use crate::{Error, Float, Result, SeriesSet, Variant};
use ndarray::Array2;
use std::mem::size_of;
use std::ops::Range;

/// Every series of `a` against every series of `b`, or the upper
/// triangle of `a` against itself, with a naive or warp kernel,
/// streamed (see the module's documentation) on every GPU of `gpus`: the
/// plan is made for the smallest of their budgets, and its blocks (a range
/// of the uploaded side and some of its tiles) handed out from one queue,
/// largest first, several a GPU (`plan::blocks`).
pub(crate) fn matrix_streamed<T: Float, P: KernelParams<T>>(
    gpus: &[&'static Gpu],
    variant: Variant,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    memory_budget: Option<usize>,
) -> Result<Array2<T>> {
    let (_one_at_a_time, budgets) = hold(gpus, memory_budget)?;
    let budget = budgets.into_iter().min().unwrap_or(0);
    let other = b.unwrap_or(a);
    let band_width = band_width(&params, a.lengths(), other.lengths());
    let lengths = (a.max_len(), other.max_len());
    let pairs = a.len() * other.len();
    let kernel =
        |gpu: &Gpu| pair_kernel::<T, P>(gpu, variant, lengths, a.dims(), band_width, pairs);
    let workspace_per_pair = kernel(gpus[0])?.workspace_per_pair;
    // Several GPUs: tiles small enough for several blocks each, the blocks
    // handed out largest first (one GPU: the plan of its budget alone).
    let outputs = match b {
        Some(b) => a.len() * b.len(),
        None => a.len() * (a.len() + 1) / 2,
    };
    let caps = spread_caps(Caps::new(budget, size_of::<T>()), outputs, gpus.len());
    let (rows, cols) = (a.parts().1, other.parts().1);
    let cells = Cells {
        rows,
        cols,
        band: band_width,
    };
    let plan = spread_plan(streamed_plan(a, b, &caps), gpus.len(), |t| cells.of(t));
    let longest = a.max_len().max(other.max_len());
    let sizes = Sizes::new(&plan, a, Some(other), workspace_per_pair, &caps, longest)?;
    let (fixed, streamed) = match plan.fixed {
        Side::Rows => (a, other),
        Side::Cols => (other, a),
    };
    let mut workers = Worker::each(gpus, |_| Operand::Host(streamed));
    let output = Output::new((a.len(), other.len()))?;
    run_plan(&mut workers, (&plan, sizes), fixed, params, kernel, &output)?;
    output.into_matrix()
}

/// Series `range` of `set` uploaded to `gpu` to stay there; an error if it
/// takes more than `memory_budget` bytes (default: 3/4 of the free memory).
pub(crate) fn upload_range<T: Float>(
    gpu: &'static Gpu,
    set: &SeriesSet<T>,
    range: Range<usize>,
    memory_budget: Option<usize>,
) -> Result<DeviceSeriesSet<T>> {
    let (_one_at_a_time, budget) = gpu.begin(memory_budget)?;
    let bytes = image_bytes(set, range.clone());
    if bytes > budget {
        return Err(Error::gpu_memory(format!(
            "the set takes {bytes} bytes of device memory, over the {budget} available; \
             distance_matrix streams sets of any size instead"
        )));
    }
    let sizes = Sizes {
        staging: bytes.min(STAGING_BYTES),
        ..Sizes::default()
    };
    let image = Pipeline::new(gpu, sizes)?.upload(set, range.clone())?;
    let lengths = range.clone().map(|k| set.series_len(k));
    Ok(DeviceSeriesSet {
        image,
        offsets: set.parts().1[range.start..=range.end].to_vec(),
        max_len: lengths.clone().max().unwrap_or(0),
        min_len: lengths.min().unwrap_or(0),
    })
}

/// A resident set as one call reads it: its parts (a GPU, the series it
/// holds and the set there), and the whole set's count and shortest and
/// longest series, which choose the kernel.
pub(crate) struct ResidentParts<'a, T> {
    pub parts: Vec<(&'static Gpu, Range<usize>, &'a DeviceSeriesSet<T>)>,
    /// Every part holds the whole set (else each a slice of it).
    pub replicated: bool,
    pub len: usize,
    pub lengths: (usize, usize),
}

/// Every series of `queries` against every series of the resident
/// `database`, with a naive or warp kernel: the queries uploaded in
/// blocks, the tiles' outputs copied back as the next tiles run. A
/// replicated set shares blocks of queries and columns out between its
/// GPUs, largest first (`plan::blocks`); a sharded one runs every block on
/// every shard, its columns in place.
pub(crate) fn matrix_resident<T: Float, P: KernelParams<T>>(
    variant: Variant,
    params: P,
    queries: &SeriesSet<T>,
    database: &ResidentParts<T>,
    memory_budget: Option<usize>,
) -> Result<Array2<T>> {
    let gpus: Vec<&'static Gpu> = database.parts.iter().map(|part| part.0).collect();
    let (_one_at_a_time, budgets) = hold(&gpus, memory_budget)?;
    let budget = budgets.into_iter().min().unwrap_or(0);
    let band_width = band_width(&params, queries.lengths(), database.lengths);
    let lengths = (queries.max_len(), database.lengths.1);
    let pairs = queries.len() * database.len;
    let kernel =
        |gpu: &Gpu| pair_kernel::<T, P>(gpu, variant, lengths, queries.dims(), band_width, pairs);
    let workspace_per_pair = kernel(gpus[0])?.workspace_per_pair;
    let caps = Caps::new(budget, size_of::<T>());
    let longest = queries.max_len().max(database.lengths.1);
    let output = Output::new((queries.len(), database.len))?;
    let operand = |k: usize| Operand::Device(&database.parts[k].2.image);
    let mut workers = Worker::each(&gpus, operand);
    if database.replicated || database.parts.len() == 1 {
        // Every GPU holds every column: several GPUs split the queries and
        // the columns into blocks, so that even one query uses them all.
        let outputs = queries.len() * database.len;
        let caps = spread_caps(caps, outputs, gpus.len());
        let cells = Cells {
            rows: queries.parts().1,
            cols: database.parts[0].2.offsets(),
            band: band_width,
        };
        let plan = resident_plan(queries, 0..database.len, &caps);
        let plan = spread_plan(plan, gpus.len(), |t| cells.of(t));
        let sizes = Sizes::new(&plan, queries, None, workspace_per_pair, &caps, longest)?;
        run_plan(
            &mut workers,
            (&plan, sizes),
            queries,
            params,
            kernel,
            &output,
        )?;
    } else {
        // Each shard's columns only its GPU holds: a worker each.
        let mut shards = Vec::with_capacity(workers.len());
        for (worker, part) in workers.into_iter().zip(&database.parts) {
            let plan = resident_plan(queries, part.1.clone(), &caps);
            let sizes = Sizes::new(&plan, queries, None, workspace_per_pair, &caps, longest)?;
            shards.push((worker, plan, sizes));
        }
        each(
            &mut shards,
            |(worker, _, _)| worker.gpu.name(),
            |(worker, plan, sizes)| {
                let worker = std::slice::from_mut(worker);
                run_plan(worker, (plan, *sizes), queries, params, kernel, &output)
            },
        )?;
    }
    output.into_matrix()
}
