//! The one-thread-per-pair kernels after `naive` in the DTW seed's
//! progression: `local`, whose two rolling rows are a fixed-size array in
//! the thread's local memory, and `shared`, whose rows are in the block's
//! shared memory. Both run the row driver (`rows::pair_value`) through the
//! naive kernel's launch plumbing (`Gpu::tile`); only the kernel, the block
//! size and the shared memory differ.

use super::{Gpu, PairKernel, THREADS_PER_BLOCK};
use crate::{Error, Float, Result};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};

/// Column capacities of the `local` kernels, smallest first: a kernel's
/// rows hold `capacity + 1` values each, so it takes series `b` (the
/// matrix's columns) of up to `capacity` samples; series `a` may be of any
/// length. The host picks the smallest that fits (`kernels.rs`
/// instantiates exactly these).
pub const LOCAL_CAPACITIES: [usize; 2] = [256, 1024];

/// The longest series `b` the `local` variant takes. Its rows take
/// `2 * (capacity + 1)` values of local memory per thread (16 KiB in f64),
/// which the driver reserves for every thread the GPU can hold at once.
pub const LOCAL_MAX_LEN: usize = LOCAL_CAPACITIES[LOCAL_CAPACITIES.len() - 1];

/// Shared memory a block may have without opting in.
const DEFAULT_SHARED_BYTES: usize = 48 * 1024;

/// Threads per block of the `shared` kernel for `bytes_per_thread` of rows,
/// and whether the block needs more than [`DEFAULT_SHARED_BYTES`]: 128, 64
/// or 32 threads if their rows fit the default; else as many threads (up to
/// 32) as fit `opt_in_bytes`, the most a block may ask for; `None` if not
/// even one thread's rows fit.
pub(super) fn shared_threads(bytes_per_thread: usize, opt_in_bytes: usize) -> Option<(u32, bool)> {
    for threads in [THREADS_PER_BLOCK, 64, 32] {
        if threads as usize * bytes_per_thread <= DEFAULT_SHARED_BYTES {
            return Some((threads, false));
        }
    }
    match (opt_in_bytes / bytes_per_thread).min(32) {
        0 => None,
        threads => Some((threads as u32, true)),
    }
}

impl Gpu {
    /// The `local` kernel for series `b` of up to `b_len` samples: the one
    /// with the smallest capacity that holds them, or an error past
    /// [`LOCAL_MAX_LEN`].
    pub(super) fn local_kernel<T: Float>(
        &self,
        measure: &str,
        row_len: usize,
        b_len: usize,
    ) -> Result<PairKernel> {
        let capacity = LOCAL_CAPACITIES
            .into_iter()
            .find(|&c| c >= b_len)
            .ok_or_else(|| {
                Error::InvalidInput(format!(
                    "the local GPU variant keeps its rows in a fixed array for series of up to \
                     {LOCAL_MAX_LEN} samples as the columns (the second batch, or the batch \
                     itself), and one has {b_len}; use the shared, warp, naive or tiled variant"
                ))
            })?;
        Ok(PairKernel {
            function: self.function(&format!("{measure}_local{capacity}_{}", T::NAME))?,
            threads_per_pair: 1,
            row_len,
            workspace_per_pair: 0,
            threads_per_block: THREADS_PER_BLOCK,
            shared_bytes: 0,
        })
    }

    /// The `shared` kernel with rows of `row_len` values: a block of
    /// threads whose rows (`threads * 2 * row_len` values) fit its shared
    /// memory, opting in to more than 48 KiB when even 32 threads' rows need
    /// it; an error when one thread's rows exceed what a block may have.
    pub(super) fn shared_kernel<T: Float>(
        &self,
        measure: &str,
        row_len: usize,
    ) -> Result<PairKernel> {
        let function = self.function(&format!("{measure}_shared_{}", T::NAME))?;
        let bytes_per_thread = 2 * row_len * std::mem::size_of::<T>();
        let opt_in = self
            .context
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(super::gpu_error)? as usize;
        let (threads, opting_in) = shared_threads(bytes_per_thread, opt_in).ok_or_else(|| {
            Error::InvalidInput(format!(
                "the shared GPU variant keeps two rows of {row_len} values per thread in shared \
                 memory, {bytes_per_thread} bytes, over the {opt_in} a block of this GPU may \
                 have; use the warp, naive or tiled variant"
            ))
        })?;
        let shared_bytes = threads as usize * bytes_per_thread;
        if opting_in {
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_bytes as i32,
                )
                .map_err(super::gpu_error)?;
        }
        Ok(PairKernel {
            function,
            threads_per_pair: 1,
            row_len,
            workspace_per_pair: 0,
            threads_per_block: threads,
            shared_bytes: shared_bytes as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_blocks_fit_their_memory() {
        // Length 128 in f32: 1032 bytes a thread, 32 threads fit 48 KiB.
        assert_eq!(shared_threads(1032, 232_448), Some((32, false)));
        // Short rows: 128 threads.
        assert_eq!(shared_threads(2 * 17 * 8, 232_448), Some((128, false)));
        assert_eq!(shared_threads(500, 232_448), Some((64, false)));
        // Length 1000 in f64: 16 016 bytes, opt in to 14 threads.
        assert_eq!(shared_threads(16_016, 232_448), Some((14, true)));
        // Length 14 000 in f64 fits one thread; 15 000 does not.
        assert_eq!(shared_threads(2 * 14_001 * 8, 232_448), Some((1, true)));
        assert_eq!(shared_threads(2 * 15_001 * 8, 232_448), None);
    }
}
