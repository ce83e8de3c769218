//! The stencil kernels (a block a pair, `drivers::stencil`) for distance
//! matrices, in tiles of series whose data and outputs fit the budget: on
//! one GPU each block of rows uploaded once for its tiles; on several the
//! tiles handed out from one queue, largest first.

use crate::error::DriverCall;
use crate::gpu::launch::stencil::{shared_bytes, stencil_launch};
use crate::gpu::plan::blocks::{blocks, spread_side, Cells};
use crate::gpu::plan::matrix_tiles::TilePlan;
use crate::gpu::plan::select::{band_width, block_threads};
use crate::gpu::plan::MAX_BLOCKS;
use crate::gpu::runtime::context::{poison, Gpu, KernelParams};
use crate::gpu::runtime::several_gpus::{hold, spread_blocks};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::call_uploads::{upload_ranges, AsyncCopies};
use crate::gpu::transfer::matrix_output::Output;
use crate::results::zeros;
use crate::{Float, Result, SeriesSet};
use ndarray::{s, Array2};
use std::ops::Range;
use timewarp_kernels::drivers::stencil::{ring_len, VALUE_RINGS};
use timewarp_kernels::launch::{tile_pairs, Numbering};
use timewarp_kernels::SetRef;
use timewarp_kernels::{Driver, KernelId};

/// The longest series of `range` of `set`.
fn longest<T: Float>(set: &SeriesSet<T>, range: &Range<usize>) -> usize {
    range.clone().map(|k| set.series_len(k)).max().unwrap_or(0)
}

/// Every series of `a` against every series of `b` (or the upper triangle
/// of `a` against itself) with the stencil kernel, in tiles that fit
/// `budget` (the caller holds the GPU): each block of rows uploaded once
/// for all its tiles.
pub(crate) fn stencil_matrix<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    budget: usize,
) -> Result<Array2<T>> {
    let plan = TilePlan::new(a, b, budget);
    let triangle_matrix = b.is_none();
    let b = b.unwrap_or(a);
    let mut out = zeros(a.len(), b.len())?;
    for (row_index, rows) in plan.a_blocks.iter().enumerate() {
        let a_upload = upload_ranges(gpu, &[a], rows.clone(), AsyncCopies::Waited)?;
        let a_batch = a_upload.batch(0, a);
        for (column_index, columns) in plan.b_blocks.iter().enumerate() {
            if triangle_matrix && column_index < row_index {
                continue; // the mirror of a tile already computed
            }
            let triangle = triangle_matrix && column_index == row_index;
            let b_upload;
            let b_refs = if triangle {
                a_batch.view(0..rows.len())
            } else {
                b_upload = upload_ranges(gpu, &[b], columns.clone(), AsyncCopies::Waited)?;
                b_upload.batch(0, b).view(0..columns.len())
            };
            let a_refs = a_batch.view(0..rows.len());
            let ring = ring_len(longest(a, rows), longest(b, columns));
            let values = stencil_tile(gpu, params, (a_refs, b_refs), ring, triangle)?;
            let tile =
                Array2::from_shape_vec((rows.len(), columns.len()), values).expect("tile shape");
            out.slice_mut(s![rows.clone(), columns.clone()])
                .assign(&tile);
            if triangle_matrix && !triangle {
                out.slice_mut(s![columns.clone(), rows.clone()])
                    .assign(&tile.t());
            }
        }
    }
    Ok(out)
}

/// [`stencil_matrix`] on every GPU of `gpus`, each with at most
/// `memory_budget` bytes (default: 3/4 of what is free): tiles small
/// enough for several a GPU, handed out from one queue largest first
/// (`plan::blocks`), each uploading its rows and columns; each GPU's work
/// recorded. Every pair is computed by the same kernel as on one GPU.
pub(crate) fn stencil_matrix_spread<T: Float, P: KernelParams<T>>(
    gpus: &[&'static Gpu],
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    memory_budget: Option<usize>,
) -> Result<Array2<T>> {
    let (_one_at_a_time, budgets) = hold(gpus, memory_budget)?;
    let budget = budgets.into_iter().min().unwrap_or(0);
    let other = b.unwrap_or(a);
    let outputs = match b {
        Some(b) => a.len() * b.len(),
        None => a.len() * (a.len() + 1) / 2,
    };
    let side = spread_side(TilePlan::side::<T>(budget), outputs, gpus.len());
    let tiles = TilePlan::of_side(a, b, budget, side).tiles(b.is_none());
    let band = band_width(&params, a.lengths(), other.lengths());
    let (rows, cols) = (a.parts().1, other.parts().1);
    let cells = Cells { rows, cols, band };
    let costs: Vec<Vec<u64>> = tiles.iter().map(|tile| vec![cells.of(tile)]).collect();
    let order: Vec<usize> = blocks(&costs, gpus.len()).iter().map(|b| b.group).collect();
    let out = Output::new((a.len(), other.len()))?;
    let pairs = |block: usize| tiles[order[block]].pairs();
    spread_blocks(gpus, order.len(), pairs, |gpu, block| {
        let tile = &tiles[order[block]];
        let a_upload = upload_ranges(gpu, &[a], tile.rows.clone(), AsyncCopies::Waited)?;
        let a_refs = a_upload.batch(0, a).view(0..tile.rows.len());
        let b_upload;
        let b_refs = if tile.triangle {
            a_refs
        } else {
            b_upload = upload_ranges(gpu, &[other], tile.cols.clone(), AsyncCopies::Waited)?;
            b_upload.batch(0, other).view(0..tile.cols.len())
        };
        let ring = ring_len(longest(a, &tile.rows), longest(other, &tile.cols));
        let values = stencil_tile(gpu, params, (a_refs, b_refs), ring, tile.triangle)?;
        out.place(tile, &values);
        Ok(())
    })?;
    out.into_matrix()
}

/// One tile of the stencil kernel, `a_refs` against `b_refs` (the upper
/// triangle of a block against itself if `triangle`), rings of `ring`
/// values: its results, row-major.
fn stencil_tile<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    (a_refs, b_refs): (SetRef<T>, SetRef<T>),
    ring: usize,
    triangle: bool,
) -> Result<Vec<T>> {
    let id = KernelId::new(P::MEASURE, Driver::Stencil, false, T::PRECISION);
    let stream = &gpu.stream;
    let shared = shared_bytes::<T>(VALUE_RINGS, ring);
    let (function, limit) = gpu.function_with_shared(id, shared)?;
    let threads = block_threads(ring, limit);
    let (count_a, count_b) = (a_refs.count as usize, b_refs.count as usize);
    let pairs = tile_pairs(count_a as u64, count_b as u64, triangle);
    let mut tile_out = stream
        .alloc_zeros::<T>(count_a * count_b)
        .call("allocating device memory")?;
    let out_ptr = poison(stream, &mut tile_out)?;
    let numbering = if triangle {
        Numbering::Triangle
    } else {
        Numbering::Matrix
    };
    let mut first_pair = 0;
    while first_pair < pairs {
        let pair_count = MAX_BLOCKS.min(pairs - first_pair);
        let mut launch = stencil_launch((a_refs, b_refs), params, numbering, pair_count, ring);
        launch.pairs.out = out_ptr as *mut T;
        launch.pairs.first_pair = first_pair;
        // SAFETY: the batches are uploaded, `out` holds count_a x count_b
        // values, the kernel was allowed `shared` bytes for rings of `ring`
        // values.
        unsafe { gpu.launch_blocks(&function, (pair_count as u32, threads), shared, launch) }?;
        first_pair += pair_count;
    }
    wait_stream(stream, "the stencil kernel")?;
    stream.clone_dtoh(&tile_out).call("copying to the host")
}
