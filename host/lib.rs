//! # timewarp
//!
//! Elastic time-series distances — Time Warp Edit Distance (TWED), Dynamic
//! Time Warping (DTW) and Soft-DTW — on NVIDIA GPUs, with device kernels
//! written in `no_std` Rust and compiled to PTX, a multi-threaded CPU
//! backend, and a plain CPU [`oracle`] that tests check both against.
//!
//! ```
//! use ndarray::array;
//! use timewarp::{distance_matrix, ComputeOptions, Device, Dtw, SeriesSet, Twed};
//!
//! // Three univariate series of length 4 (rows), and two more.
//! let a = SeriesSet::from_univariate(array![[0.0, 1.0, 2.0, 1.0],
//!                                           [0.0, 0.0, 1.0, 2.0],
//!                                           [2.0, 1.0, 0.0, 0.0]].view())?;
//! let b = SeriesSet::from_univariate(array![[0.0, 1.0, 2.0, 1.0],
//!                                           [1.0, 1.0, 1.0, 1.0]].view())?;
//!
//! // Device::Auto uses the GPU when there is a usable one, else the CPU.
//! let options = ComputeOptions::on(Device::Auto);
//! let dtw = distance_matrix(&a, Some(&b), Dtw::new().into(), &options)?;
//! assert_eq!(dtw.dim(), (3, 2));
//! assert_eq!(dtw[[0, 0]], 0.0);
//!
//! // A batch against itself: each symmetric pair is computed once.
//! let twed = distance_matrix(&a, None, Twed::new(0.001, 1.0, 2.0)?.into(), &options)?;
//! assert_eq!(twed[[1, 2]], twed[[2, 1]]);
//! # Ok::<(), timewarp::Error>(())
//! ```

// The layers, each depending only on those before it:
//   error, float, options, metric, storage, series, results   leaf types
//   cpu                                 the CPU backend (kernel crate's drivers;
//                                       cpu::lanes under float's bound)
//   gpu                                 the GPU runtime (kernel crate's catalogue)
//   backend, resident                   where a computation runs; resident sets
//   api                                 the public entry points
//   search                              similarity search (its own cascade, CPU)
//   oracle, formats, data               independent of all the above but the leaf types
//   internals                           what tests and benches reach inside
// The crate root's public names are the user's API, listed by
// tests/suite/architecture.rs: a new one is a deliberate edit there.
mod api;
mod backend;
mod cpu;
pub mod data;
mod error;
mod finite;
mod float;
pub mod formats;
pub mod gpu;
#[doc(hidden)]
#[cfg(all(debug_assertions, not(fuzzing)))]
mod instances;
pub mod internals;
mod interrupt;
mod metric;
mod options;
pub mod oracle;
mod resident;
mod results;
pub mod search;
mod series;
mod storage;

pub use api::{
    distance, distance_matrix, distance_matrix_resident, dtw_path, matrix_variant,
    nearest_neighbours, resident_matrix_variant, soft_dtw_alignment, soft_dtw_device_output_len,
    soft_dtw_gradient, soft_dtw_gradient_bytes_per_pair, soft_dtw_pairs, soft_dtw_pairs_gradient,
    soft_dtw_pairs_gradient_resident, soft_dtw_pairs_gradient_variant, soft_dtw_pairs_on_device,
    soft_dtw_pairs_resident, soft_dtw_pairs_variant, twed_path, Alignment, DeviceBatchRef, Edit,
    EditPath, EditStep, Neighbours, SoftDtwOutputs,
};
pub use backend::Backend;
pub use error::{DriverError, Error, Result};
pub use float::{Float, Precision};
pub use interrupt::interrupt;
pub use metric::{Dtw, Metric, SoftDtw, Twed};
/// The `ndarray` of this crate's API, for callers that do not depend on it
/// themselves.
pub use ndarray;
pub use options::{ComputeOptions, Device, GpuSet, Placement, Variant};
pub use resident::{upload, ResidentSet};
pub use results::{BatchGradient, SoftDtwGradient};
pub use series::SeriesSet;

/// The README's Rust snippets, compiled and run by `cargo test` as doc
/// tests, so that they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
