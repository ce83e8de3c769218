//! Kernel entry points (GPU build only). Each is a one-line instantiation of
//! a generic driver for one measure, precision and (for the warp drivers)
//! stripe width; names follow `<measure>_<variant>[<stripe>]_<precision>`,
//! which the host's launcher spells the same way.

use crate::warp::{Warp, LANES};
use crate::{DtwParams, PairsLaunch, Real, SoftDtwParams, TileLaunch, TwedParams};
use core::arch::nvptx::{_block_dim_x, _block_idx_x, _thread_idx_x};

/// Global index of the calling thread in a 1-D launch.
#[inline(always)]
unsafe fn global_thread() -> u64 {
    _block_idx_x() as u64 * _block_dim_x() as u64 + _thread_idx_x() as u64
}

/// Global index of the calling warp in a 1-D launch (blocks are whole warps).
#[inline(always)]
unsafe fn global_warp() -> u64 {
    global_thread() / LANES as u64
}

extern "C" {
    #[link_name = "llvm.nvvm.shfl.sync.up.i32"]
    fn shfl_up_i32(mask: u32, value: i32, delta: u32, clamp: u32) -> i32;
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    fn shfl_idx_i32(mask: u32, value: i32, lane: u32, clamp: u32) -> i32;
}

/// All 32 lanes take part in every shuffle.
const FULL_MASK: u32 = u32::MAX;

/// The hardware warp: exchanges are `shfl.sync` instructions, one per 32
/// bits of the value.
struct GpuWarp;

/// Moves `value` through `shuffle`, 32 bits at a time.
#[inline(always)]
unsafe fn shuffle_words<T: Real>(value: T, shuffle: impl Fn(i32) -> i32) -> T {
    let bits = value.to_bits();
    let low = shuffle(bits as u32 as i32) as u32 as u64;
    if core::mem::size_of::<T>() == 4 {
        T::from_bits(low)
    } else {
        let high = shuffle((bits >> 32) as u32 as i32) as u32 as u64;
        T::from_bits(low | high << 32)
    }
}

impl Warp for GpuWarp {
    const LANES: usize = LANES;

    #[inline(always)]
    fn lane(&self) -> usize {
        // SAFETY: reads a special register.
        unsafe { _thread_idx_x() as usize % LANES }
    }

    #[inline(always)]
    unsafe fn shuffle_up<T: Real>(&self, value: T) -> T {
        // Clamp 0: lane 0 keeps its own value.
        shuffle_words(value, |word| shfl_up_i32(FULL_MASK, word, 1, 0))
    }

    #[inline(always)]
    unsafe fn broadcast<T: Real>(&self, value: T, source: usize) -> T {
        shuffle_words(value, |word| {
            shfl_idx_i32(FULL_MASK, word, source as u32, LANES as u32 - 1)
        })
    }
}

/// One thread per pair, two rolling rows in global memory.
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

/// One warp per pair, `$stripe` columns per lane in registers.
macro_rules! warp_kernel {
    ($name:ident, $t:ty, $params:ty, $stripe:literal) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: PairsLaunch<$t, $params>) {
            launch.run_pair_in_warp::<GpuWarp, $stripe>(&GpuWarp, global_warp());
        }
    };
}

/// One anti-diagonal of tiles of a long pair, one warp per tile, `$stripe`
/// columns per lane.
macro_rules! tiled_kernel {
    ($name:ident, $t:ty, $params:ty, $stripe:literal) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: TileLaunch<$t, $params>) {
            launch.run_tile::<GpuWarp, $stripe>(&GpuWarp, global_warp());
        }
    };
}

naive_kernel!(dtw_naive_f32, f32, DtwParams);
naive_kernel!(dtw_naive_f64, f64, DtwParams);
naive_kernel!(soft_dtw_naive_f32, f32, SoftDtwParams<f32>);
naive_kernel!(soft_dtw_naive_f64, f64, SoftDtwParams<f64>);
naive_kernel!(twed_naive_f32, f32, TwedParams<f32>);
naive_kernel!(twed_naive_f64, f64, TwedParams<f64>);

// The stripes instantiated here are the host's `gpu::WARP_STRIPES`; the
// widest of each list is the widest whose registers do not spill.
warp_kernel!(dtw_warp1_f32, f32, DtwParams, 1);
warp_kernel!(dtw_warp4_f32, f32, DtwParams, 4);
warp_kernel!(dtw_warp16_f32, f32, DtwParams, 16);
warp_kernel!(dtw_warp32_f32, f32, DtwParams, 32);
warp_kernel!(dtw_warp1_f64, f64, DtwParams, 1);
warp_kernel!(dtw_warp4_f64, f64, DtwParams, 4);
warp_kernel!(dtw_warp16_f64, f64, DtwParams, 16);
warp_kernel!(soft_dtw_warp1_f32, f32, SoftDtwParams<f32>, 1);
warp_kernel!(soft_dtw_warp4_f32, f32, SoftDtwParams<f32>, 4);
warp_kernel!(soft_dtw_warp16_f32, f32, SoftDtwParams<f32>, 16);
warp_kernel!(soft_dtw_warp1_f64, f64, SoftDtwParams<f64>, 1);
warp_kernel!(soft_dtw_warp4_f64, f64, SoftDtwParams<f64>, 4);
warp_kernel!(soft_dtw_warp16_f64, f64, SoftDtwParams<f64>, 16);
warp_kernel!(twed_warp1_f32, f32, TwedParams<f32>, 1);
warp_kernel!(twed_warp4_f32, f32, TwedParams<f32>, 4);
warp_kernel!(twed_warp8_f32, f32, TwedParams<f32>, 8);
warp_kernel!(twed_warp1_f64, f64, TwedParams<f64>, 1);
warp_kernel!(twed_warp4_f64, f64, TwedParams<f64>, 4);
warp_kernel!(twed_warp8_f64, f64, TwedParams<f64>, 8);

// The stripes instantiated here are the host's `gpu::TILED_STRIPES`.
tiled_kernel!(dtw_tiled4_f32, f32, DtwParams, 4);
tiled_kernel!(dtw_tiled16_f32, f32, DtwParams, 16);
tiled_kernel!(dtw_tiled4_f64, f64, DtwParams, 4);
tiled_kernel!(dtw_tiled16_f64, f64, DtwParams, 16);
tiled_kernel!(soft_dtw_tiled4_f32, f32, SoftDtwParams<f32>, 4);
tiled_kernel!(soft_dtw_tiled16_f32, f32, SoftDtwParams<f32>, 16);
tiled_kernel!(soft_dtw_tiled4_f64, f64, SoftDtwParams<f64>, 4);
tiled_kernel!(soft_dtw_tiled16_f64, f64, SoftDtwParams<f64>, 16);
tiled_kernel!(twed_tiled4_f32, f32, TwedParams<f32>, 4);
tiled_kernel!(twed_tiled8_f32, f32, TwedParams<f32>, 8);
tiled_kernel!(twed_tiled4_f64, f64, TwedParams<f64>, 4);
tiled_kernel!(twed_tiled8_f64, f64, TwedParams<f64>, 8);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: trap ends the kernel with an error the host sees at its next sync.
    unsafe { core::arch::nvptx::trap() }
}

// ---------------------------------------------------------------------------
// The block driver (`block.rs`), over `BlockLaunch`: the stencil kernels (a
// block per pair, three anti-diagonals in shared memory) for every measure,
// and for Soft-DTW the paired warp kernels (the warp driver for paired
// batches) and the gradient (forward pass storing the cost matrix, then the
// backward pass, a block per pair). The host's `gpu::soft_dtw` launches them.
// ---------------------------------------------------------------------------

use crate::{BlockLaunch, ThreadBlock};
use core::arch::nvptx::_syncthreads;

/// The hardware block: `_syncthreads` and the launch's dynamic shared memory.
struct GpuBlock;

impl ThreadBlock for GpuBlock {
    #[inline(always)]
    fn thread(&self) -> usize {
        // SAFETY: reads a special register.
        unsafe { _thread_idx_x() as usize }
    }

    #[inline(always)]
    fn threads(&self) -> usize {
        // SAFETY: reads a special register.
        unsafe { _block_dim_x() as usize }
    }

    #[inline(always)]
    unsafe fn barrier(&self) {
        _syncthreads()
    }

    #[inline(always)]
    fn shared<T>(&self) -> *mut T {
        core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
    }
}

/// One block per pair, anti-diagonals in shared memory.
macro_rules! stencil_kernel {
    ($name:ident, $t:ty, $params:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: BlockLaunch<$t, $params>) {
            launch.run_pair_in_block(&GpuBlock, _block_idx_x() as u64);
        }
    };
}

/// One warp per pair of a `BlockLaunch` (paired batches), `$stripe` columns
/// per lane.
macro_rules! pairwarp_kernel {
    ($name:ident, $t:ty, $params:ty, $stripe:literal) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: BlockLaunch<$t, $params>) {
            launch.run_pair_in_warp::<GpuWarp, $stripe>(&GpuWarp, global_warp());
        }
    };
}

/// One block per pair: value and gradient.
macro_rules! gradient_kernel {
    ($name:ident, $t:ty, $params:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: BlockLaunch<$t, $params>) {
            launch.run_gradient_in_block(&GpuBlock, _block_idx_x() as u64);
        }
    };
}

stencil_kernel!(dtw_stencil_f32, f32, DtwParams);
stencil_kernel!(dtw_stencil_f64, f64, DtwParams);
stencil_kernel!(soft_dtw_stencil_f32, f32, SoftDtwParams<f32>);
stencil_kernel!(soft_dtw_stencil_f64, f64, SoftDtwParams<f64>);
stencil_kernel!(twed_stencil_f32, f32, TwedParams<f32>);
stencil_kernel!(twed_stencil_f64, f64, TwedParams<f64>);

// The stripes are the host's `gpu::warp_stripes("soft_dtw", ..)`.
pairwarp_kernel!(soft_dtw_pairwarp1_f32, f32, SoftDtwParams<f32>, 1);
pairwarp_kernel!(soft_dtw_pairwarp4_f32, f32, SoftDtwParams<f32>, 4);
pairwarp_kernel!(soft_dtw_pairwarp16_f32, f32, SoftDtwParams<f32>, 16);
pairwarp_kernel!(soft_dtw_pairwarp1_f64, f64, SoftDtwParams<f64>, 1);
pairwarp_kernel!(soft_dtw_pairwarp4_f64, f64, SoftDtwParams<f64>, 4);
pairwarp_kernel!(soft_dtw_pairwarp16_f64, f64, SoftDtwParams<f64>, 16);

gradient_kernel!(soft_dtw_gradient_f32, f32, SoftDtwParams<f32>);
gradient_kernel!(soft_dtw_gradient_f64, f64, SoftDtwParams<f64>);
