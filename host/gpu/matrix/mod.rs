//! Distance matrices on the GPU with any variant: [`matrix`] dispatches to
//! the launcher that runs it, [`matrix_resident`] runs the pair kernels
//! against a resident set. It depends on `launch`, `transfer`, `runtime`
//! and `plan`.
//!
//! The files, each depending only on those before it:
//!
//! ```text
//! tile_pipeline  the streamed tile pipeline that feeds the pair kernels
//!                (naive, warp, local, shared)
//! workers        a plan's blocks on one worker (and pipeline) per GPU
//! pair_kernels   the pair kernels over whole batches, streamed or against
//!                a resident set; a resident set's upload
//! stencil_tiles  the stencil kernels, in tiles of series, on one GPU or
//!                spread over several
//! tiled_pairs    the tiled variants, one long pair after the other
//! antidiagonal   the anti-diagonal variants, one pair after the other
//! mod.rs         the dispatch of a variant to its launcher
//! ```

mod antidiagonal;
mod pair_kernels;
mod stencil_tiles;
mod tile_pipeline;
mod tiled_pairs;
mod workers;

pub(crate) use pair_kernels::{matrix_resident, upload_range, ResidentParts};

use crate::finite::check_finite;
use crate::gpu::runtime::context::{Gpu, KernelParams};
use crate::{Float, Result, SeriesSet, Variant};
use antidiagonal::diagonal_pairs;
use ndarray::Array2;
use pair_kernels::matrix_streamed;
use stencil_tiles::{stencil_matrix, stencil_matrix_spread};
use tiled_pairs::pairs_one_by_one;

/// Every series of `a` against every series of `b` (or the upper triangle
/// of `a` against itself) with `variant`, using at most `memory_budget`
/// bytes of device memory a GPU (default: 3/4 of what is free), in as many
/// tiles and launches as that takes. The pair kernels (naive, warp, local,
/// shared) and the stencil kernel spread over every GPU of `gpus`, in
/// blocks handed out largest first; the tiled and anti-diagonal variants,
/// one long pair after the other, run on the first (a long pair is one
/// GPU's: the tiled kernel spreads it over that GPU).
/// The results are checked ([`check_finite`]): the pair kernels' tile by
/// tile as they come back, the others' here.
pub(crate) fn matrix<T: Float, P: KernelParams<T>>(
    gpus: &[&'static Gpu],
    variant: Variant,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    memory_budget: Option<usize>,
) -> Result<Array2<T>> {
    let gpu = gpus[0];
    let one = || gpu.begin(memory_budget);
    let matrix = match variant {
        Variant::Tiled | Variant::TiledLaunches => {
            let (_one_at_a_time, budget) = one()?;
            pairs_one_by_one(gpu, variant, params, a, b, budget)
        }
        Variant::Diagonal | Variant::DiagonalLaunches => {
            let (_one_at_a_time, budget) = one()?;
            diagonal_pairs(gpu, variant == Variant::Diagonal, params, a, b, budget)
        }
        Variant::Stencil if gpus.len() > 1 => {
            stencil_matrix_spread(gpus, params, a, b, memory_budget)
        }
        Variant::Stencil => {
            let (_one_at_a_time, budget) = one()?;
            stencil_matrix(gpu, params, a, b, budget)
        }
        Variant::Naive | Variant::Warp | Variant::Local | Variant::Shared => {
            return matrix_streamed(gpus, variant, params, a, b, memory_budget);
        }
    }?;
    let values = matrix
        .as_slice()
        .expect("matrices are made in standard layout");
    check_finite(values, true)?;
    Ok(matrix)
}
