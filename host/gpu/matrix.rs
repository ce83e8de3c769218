//! A distance matrix on the GPU with any variant: the dispatch to the
//! launcher that runs it.

use super::antidiagonal::diagonal_pairs;
use super::context::{Gpu, KernelParams};
use super::long_pair::pairs_one_by_one;
use super::pairs::streamed;
use super::stencil::stencil_matrix;
use crate::{Float, Result, SeriesSet, Variant};
use ndarray::Array2;

/// Every series of `a` against every series of `b` (or the upper triangle
/// of `a` against itself) with `variant`, using at most `memory_budget`
/// bytes of device memory (default: 3/4 of what is free), in as many tiles
/// and launches as that takes.
pub(crate) fn matrix<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    memory_budget: Option<usize>,
) -> Result<Array2<T>> {
    let (_one_at_a_time, budget) = gpu.begin(memory_budget)?;
    match variant {
        Variant::Tiled | Variant::TiledLaunches => {
            pairs_one_by_one(gpu, variant, params, a, b, budget)
        }
        Variant::Diagonal | Variant::DiagonalLaunches => {
            diagonal_pairs(gpu, variant == Variant::Diagonal, params, a, b, budget)
        }
        Variant::Stencil => stencil_matrix(gpu, params, a, b, budget),
        Variant::Naive | Variant::Warp | Variant::Local | Variant::Shared => {
            streamed(gpu, variant, params, a, b, budget)
        }
    }
}
