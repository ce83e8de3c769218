//! Kernel entry points (GPU build only). Each is a one-line instantiation of
//! a generic body for one measure and precision; names follow
//! `<measure>_<variant>_<precision>`, which the host's launcher spells the
//! same way.

use crate::{DtwParams, PairsLaunch, SoftDtwParams, TwedParams};
use core::arch::nvptx::{_block_dim_x, _block_idx_x, _thread_idx_x};

/// Global index of the calling thread in a 1-D launch.
#[inline(always)]
unsafe fn global_thread() -> u64 {
    _block_idx_x() as u64 * _block_dim_x() as u64 + _thread_idx_x() as u64
}

/// Instantiates the one-thread-per-pair ("naive") kernel: each thread
/// computes a whole pair with two rolling rows in global memory.
macro_rules! naive_kernel {
    ($name:ident, $t:ty, $params:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: PairsLaunch<$t, $params>) {
            let index = global_thread();
            if index < launch.pair_count {
                launch.run_pair_with_workspace(index);
            }
        }
    };
}

naive_kernel!(dtw_naive_f32, f32, DtwParams);
naive_kernel!(dtw_naive_f64, f64, DtwParams);
naive_kernel!(soft_dtw_naive_f32, f32, SoftDtwParams<f32>);
naive_kernel!(soft_dtw_naive_f64, f64, SoftDtwParams<f64>);
naive_kernel!(twed_naive_f32, f32, TwedParams<f32>);
naive_kernel!(twed_naive_f64, f64, TwedParams<f64>);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: trap ends the kernel with an error the host sees at its next sync.
    unsafe { core::arch::nvptx::trap() }
}
