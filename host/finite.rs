//! The one check every result passes before it is returned: by the API,
//! or, for distance matrices on the GPU, tile by tile as the results come
//! back (`gpu::matrix::tile_pipeline`).

use crate::float::all_finite;
use crate::{Error, Float, Result};
use rayon::prelude::*;

/// Results of up to this many values are checked on the calling thread
/// (in cache, the check reads a few bytes a nanosecond; waking the pool's
/// threads costs more than the check below this size).
const SERIAL_CHECK_MAX: usize = 1 << 19;

/// Larger results are checked in pieces of this many values on all threads.
const CHECK_PIECE: usize = 1 << 16;

/// Finite inputs give finite results unless the precision overflowed; a
/// NaN from the GPU means a value was never written (outputs are poisoned
/// with NaN before each launch), which is a failure, never a result.
pub(crate) fn check_finite<T: Float>(values: &[T], on_gpu: bool) -> Result<()> {
    // Large results (a query batch against millions of series) on all
    // cores; small ones here, where waking the threads would cost more
    // than the check.
    let bad = if values.len() <= SERIAL_CHECK_MAX {
        first_bad(values)
    } else {
        values.par_chunks(CHECK_PIECE).find_map_first(first_bad)
    };
    bad.map_or(Ok(()), |bad| Err(not_finite(bad, on_gpu)))
}

/// [`check_finite`] on the calling thread, for a caller that has already
/// spread its work over threads.
pub(crate) fn check_finite_here<T: Float>(values: &[T], on_gpu: bool) -> Result<()> {
    first_bad(values).map_or(Ok(()), |bad| Err(not_finite(bad, on_gpu)))
}

/// The first value of `values` that is not finite.
fn first_bad<T: Float>(values: &[T]) -> Option<T> {
    if all_finite(values) {
        return None;
    }
    values.iter().copied().find(|v| !v.is_finite())
}

/// The error of a result that is not finite.
fn not_finite<T: Float>(bad: T, on_gpu: bool) -> Error {
    if on_gpu && bad.to_f64().is_nan() {
        Error::GpuFailure(
            "a kernel left a result unwritten, or a wait of its warps for each other passed \
             its bound"
                .into(),
        )
    } else {
        Error::Overflow { precision: T::NAME }
    }
}
