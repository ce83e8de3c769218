//! A distance matrix on the GPU with any variant: the dispatch to the
//! launcher that runs it.

use super::antidiagonal::diagonal_pairs;
use super::context::{Gpu, KernelParams};
use super::long_pair::pairs_one_by_one;
use super::pairs::streamed;
use super::stencil::stencil_matrix;
use crate::finite::check_finite;
use crate::{Float, Result, SeriesSet, Variant};
use ndarray::Array2;

/// Every series of `a` against every series of `b` (or the upper triangle
/// of `a` against itself) with `variant`, using at most `memory_budget`
/// bytes of device memory a GPU (default: 3/4 of what is free), in as many
/// tiles and launches as that takes. The pair kernels (naive, warp, local,
/// shared) spread over every GPU of `gpus`; the others run on the first.
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
        Variant::Stencil => {
            let (_one_at_a_time, budget) = one()?;
            stencil_matrix(gpu, params, a, b, budget)
        }
        Variant::Naive | Variant::Warp | Variant::Local | Variant::Shared => {
            return streamed(gpus, variant, params, a, b, memory_budget);
        }
    }?;
    let values = matrix
        .as_slice()
        .expect("matrices are made in standard layout");
    check_finite(values, true)?;
    Ok(matrix)
}
