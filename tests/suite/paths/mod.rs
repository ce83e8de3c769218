//! Alignments: the library's DTW and TWED paths and Soft-DTW's expected
//! alignment against the oracle's full-matrix versions, Hirschberg's
//! divide and conquer against the full-matrix traceback, and `timewarp
//! align` and the plots end to end (`cli`).

mod cli;
mod dtw;
mod emulated;
mod gpu;
mod gpu_twed;
mod soft_dtw;
mod twed;

use ndarray::Array2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use timewarp::Float;

/// A random `len x dims` series in precision `T`, and the same rounded
/// values in f64 (what the oracle is given).
pub fn pair_series<T: Float>(
    rng: &mut StdRng,
    len: usize,
    dims: usize,
) -> (Array2<T>, Array2<f64>) {
    let values = Array2::from_shape_simple_fn((len, dims), || {
        T::from_f64(rng.sample::<f64, _>(StandardNormal))
    });
    let exact = values.mapv(|v| v.to_f64());
    (values, exact)
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// The shapes every measure is checked on: lengths 1 and 2, unequal
/// lengths both ways, a longer pair; univariate and multivariate.
pub const SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (1, 6, 1),
    (6, 1, 2),
    (2, 2, 1),
    (2, 5, 3),
    (9, 4, 1),
    (17, 23, 2),
    (40, 31, 1),
    (64, 64, 3),
];
