//! The public API's generic functions made for `f32` and `f64` in the
//! library itself, in builds with debug assertions (the dev and test
//! profiles; not the fuzz targets', whose instrumented build would compile
//! them all for nothing). Below opt-level 2 rustc shares generic code between crates
//! (`-Z share-generics`, on by default there), so the binary, the test
//! binaries, the examples and the Python extension link these instead of
//! each compiling the whole call tree again: that was most of their build
//! time. Optimised builds make their own, inlined where it pays.

use crate::{
    distance, distance_matrix, distance_matrix_resident, nearest_neighbours, soft_dtw_alignment,
    soft_dtw_gradient, soft_dtw_pairs, soft_dtw_pairs_gradient, soft_dtw_pairs_gradient_resident,
    soft_dtw_pairs_resident, upload,
};

macro_rules! instances {
    ($($t:ty),*) => {
        /// The instances' addresses: taking them makes them (nothing calls
        /// this).
        pub fn api_instances() -> Vec<*const ()> {
            vec![$(
                distance::<$t> as *const (),
                distance_matrix::<$t> as *const (),
                distance_matrix_resident::<$t> as *const (),
                nearest_neighbours::<$t> as *const (),
                soft_dtw_alignment::<$t> as *const (),
                soft_dtw_gradient::<$t> as *const (),
                soft_dtw_pairs::<$t> as *const (),
                soft_dtw_pairs_gradient::<$t> as *const (),
                soft_dtw_pairs_gradient_resident::<$t> as *const (),
                soft_dtw_pairs_resident::<$t> as *const (),
                upload::<$t> as *const (),
            )*]
        }
    };
}

instances!(f32, f64);
