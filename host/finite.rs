//! The one check every result passes before it is returned: by the API,
//! or, for distance matrices on the GPU, tile by tile as the results come
//! back (`gpu::pipeline`).

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
    let first_bad = |values: &[T]| {
        if all_finite(values) {
            return None;
        }
        values.iter().copied().find(|v| !v.is_finite())
    };
    // Large results (a query batch against millions of series) on all
    // cores; small ones here, where waking the threads would cost more
    // than the check.
    let bad = if values.len() <= SERIAL_CHECK_MAX {
        first_bad(values)
    } else {
        values.par_chunks(CHECK_PIECE).find_map_first(first_bad)
    };
    match bad {
        None => Ok(()),
        Some(bad) if on_gpu && bad.to_f64().is_nan() => {
            Err(Error::Gpu("a kernel left a result unwritten".into()))
        }
        Some(_) => Err(Error::Overflow { precision: T::NAME }),
    }
}
