//! The fast CPU backend: the kernels' own recurrences and drivers with
//! linear memory per pair, pairs spread over threads with rayon.
//!
//! Soft-DTW and DTW compute pairs of one shape several at a time in
//! lockstep ([`units`], [`lockstep`]: the stencil driver on one thread and the
//! measure's one cell update, over lanes of 8 `f64` or 16 `f32` pairs,
//! Soft-DTW with vectorised `exp` and `ln`), compiled for AVX2 and FMA
//! where the processor has them. A pair whose shape too few others share,
//! any pair on a processor without them, and TWED run one at a time
//! ([`one_pair`]): DTW and TWED follow the rows, Soft-DTW the
//! anti-diagonals, so that the exponentials of neighbouring cells overlap
//! instead of waiting on each other.
//!
//! A call of fewer pairs than threads computes each long pair on all of
//! them instead ([`wavefront`]: tiles of the pair's matrix, each as soon
//! as the tiles it reads are done), with the same cell updates, so the
//! same values.

mod gradient;
pub(crate) mod lanes;
pub mod lockstep;
mod one_pair;
mod pairs;
mod units;
mod wavefront;

pub(crate) use gradient::paired_gradient;
pub(crate) use pairs::{matrix, paired, value_alone};
pub(crate) use units::CpuMeasure;
