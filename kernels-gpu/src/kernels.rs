//! Kernel entry points (GPU build only). Each is a one-line instantiation of
//! a generic driver for one measure, precision and (for the warp drivers)
//! stripe width; names follow `<measure>_<variant>[<stripe>]_<precision>`,
//! which the host's launcher spells the same way.

use crate::warp::{Warp, LANES};
use crate::{DtwParams, PairsLaunch, PipelineLaunch, Real, SoftDtwParams, TileLaunch, TwedParams};
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
    #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
    fn shfl_down_i32(mask: u32, value: i32, delta: u32, clamp: u32) -> i32;
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    fn shfl_idx_i32(mask: u32, value: i32, lane: u32, clamp: u32) -> i32;
    #[link_name = "llvm.nvvm.nanosleep"]
    fn nanosleep(nanoseconds: u32);
}

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

/// The hardware warp: exchanges are `shfl.sync` instructions, one per 32
/// bits of the value (a sub-warp of all 32 lanes).
type GpuWarp = GpuSubWarp<LANES>;
const GPU_WARP: GpuWarp = GpuSubWarp { part: 0 };

/// Part of a hardware warp, `N` lanes (8, 16 or all 32), as a warp of its
/// own: `32 / N` pairs of short series share a warp, each part running the
/// wavefront over its `N` lanes, which takes `N - 1` steps to fill instead
/// of 31 and gives each lane more columns for the same width. Exchanges
/// stay inside the part (an `N`-lane shuffle segment) and name only its
/// lanes, so the parts may also diverge (pairs of different lengths).
struct GpuSubWarp<const N: usize> {
    /// Which part of the warp: `0..32 / N`.
    part: u32,
}

impl<const N: usize> GpuSubWarp<N> {
    /// The part `global_thread() / N` of the launch: its place in the warp.
    #[inline(always)]
    fn of(sub_warp: u64) -> Self {
        GpuSubWarp {
            part: (sub_warp % (LANES / N) as u64) as u32,
        }
    }

    #[inline(always)]
    fn mask(&self) -> u32 {
        (((1u64 << N) - 1) as u32) << (N as u32 * self.part)
    }

    /// A shuffle's segment operand: segments of `N` lanes, `clamp` the
    /// highest source lane (within the segment).
    #[inline(always)]
    fn segment(clamp: u32) -> u32 {
        ((LANES - N) as u32) << 8 | clamp
    }
}

impl<const N: usize> Warp for GpuSubWarp<N> {
    const LANES: usize = N;

    #[inline(always)]
    fn lane(&self) -> usize {
        // SAFETY: reads a special register.
        unsafe { _thread_idx_x() as usize % N }
    }

    #[inline(always)]
    unsafe fn shuffle_up<T: Real>(&self, value: T) -> T {
        // Clamp 0: the part's lane 0 keeps its own value.
        let (mask, segment) = (self.mask(), Self::segment(0));
        shuffle_words(value, |word| shfl_up_i32(mask, word, 1, segment))
    }

    #[inline(always)]
    unsafe fn shuffle_down<T: Real>(&self, value: T) -> T {
        // Clamp N - 1: the part's last lane keeps its own value.
        let (mask, segment) = (self.mask(), Self::segment(N as u32 - 1));
        shuffle_words(value, |word| shfl_down_i32(mask, word, 1, segment))
    }

    #[inline(always)]
    unsafe fn broadcast<T: Real>(&self, value: T, source: usize) -> T {
        let (mask, segment) = (self.mask(), Self::segment(N as u32 - 1));
        shuffle_words(value, |word| {
            shfl_idx_i32(mask, word, source as u32, segment)
        })
    }

    #[inline(always)]
    unsafe fn load_relaxed(&self, counter: *const u32) -> u32 {
        let value: u32;
        core::arch::asm!(
            "ld.relaxed.gpu.global.u32 {value}, [{counter}];",
            value = out(reg32) value,
            counter = in(reg64) counter,
        );
        value
    }

    #[inline(always)]
    fn fence_acquire(&self) {
        // GPU scope: the default (system) scope of Rust's atomics makes
        // every fence a system-wide memory barrier, thousands of cycles.
        // SAFETY: a fence, no operands.
        unsafe { core::arch::asm!("fence.acq_rel.gpu;") }
    }

    #[inline(always)]
    unsafe fn store_release(&self, counter: *mut u32, value: u32) {
        core::arch::asm!(
            "st.release.gpu.global.u32 [{counter}], {value};",
            counter = in(reg64) counter,
            value = in(reg32) value,
        );
    }

    #[inline(always)]
    fn spin(&self) {
        // Leave the SM's issue slots to the warps doing work meanwhile.
        // SAFETY: only suspends this warp for about that long.
        unsafe { nanosleep(32) }
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

/// An entry point `$name` whose body is `$body` (taking its one parameter
/// as `$launch`), and its univariate twin `$name_1d`: the same body after
/// both sets' `dims` became the constant 1, so the drivers' multivariate
/// paths fold away, and with them the registers they hold, which otherwise
/// set the whole kernel's register count (and so how many warps fit an SM).
macro_rules! with_univariate_twin {
    ($name:ident, $name_1d:ident, $launch:ident: $ty:ty, $body:block) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name($launch: $ty) $body
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name_1d($launch: $ty) {
            let mut $launch = $launch;
            $launch.a.dims = 1;
            $launch.b.dims = 1;
            $body
        }
    };
}

/// One warp per pair, `$stripe` columns per lane in registers; `$name_1d`
/// for univariate series.
macro_rules! warp_kernel {
    ($name:ident, $name_1d:ident, $t:ty, $params:ty, $stripe:literal) => {
        with_univariate_twin!($name, $name_1d, launch: PairsLaunch<$t, $params>, {
            launch.run_pair_in_warp::<GpuWarp, $stripe>(&GPU_WARP, global_warp());
        });
    };
}

/// One `$lanes`-lane part of a warp per pair, `$stripe` columns per lane
/// in registers.
macro_rules! sub_warp_kernel {
    ($name:ident, $name_1d:ident, $t:ty, $params:ty, $lanes:literal, $stripe:literal) => {
        with_univariate_twin!($name, $name_1d, launch: PairsLaunch<$t, $params>, {
            let sub_warp = global_thread() / $lanes;
            let warp = GpuSubWarp::<$lanes>::of(sub_warp);
            launch.run_pair_in_warp::<_, $stripe>(&warp, sub_warp);
        });
    };
}

/// A long pair: every warp of the launch takes column bands and runs right
/// behind the band to its left; `$stripe` columns per lane.
macro_rules! tiled_kernel {
    ($name:ident, $name_1d:ident, $t:ty, $params:ty, $stripe:literal) => {
        with_univariate_twin!($name, $name_1d, launch: PipelineLaunch<$t, $params>, {
            launch.run::<GpuWarp, $stripe>(&GPU_WARP);
        });
    };
}

/// One anti-diagonal of tiles of a long pair, one warp per tile, `$stripe`
/// columns per lane.
macro_rules! tiled_launches_kernel {
    ($name:ident, $t:ty, $params:ty, $stripe:literal) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: TileLaunch<$t, $params>) {
            launch.run_tile::<GpuWarp, $stripe>(&GPU_WARP, global_warp());
        }
    };
}

naive_kernel!(dtw_naive_f32, f32, DtwParams);
naive_kernel!(dtw_naive_f64, f64, DtwParams);
naive_kernel!(soft_dtw_naive_f32, f32, SoftDtwParams<f32>);
naive_kernel!(soft_dtw_naive_f64, f64, SoftDtwParams<f64>);
naive_kernel!(twed_naive_f32, f32, TwedParams<f32>);
naive_kernel!(twed_naive_f64, f64, TwedParams<f64>);

// The stripes instantiated here are the host's `gpu::warp_stripes`; the
// widest of each list is the widest whose registers do not spill.
warp_kernel!(dtw_warp4_f32, dtw_warp4_1d_f32, f32, DtwParams, 4);
warp_kernel!(dtw_warp16_f32, dtw_warp16_1d_f32, f32, DtwParams, 16);
warp_kernel!(dtw_warp4_f64, dtw_warp4_1d_f64, f64, DtwParams, 4);
warp_kernel!(dtw_warp16_f64, dtw_warp16_1d_f64, f64, DtwParams, 16);
warp_kernel!(
    soft_dtw_warp1_f32,
    soft_dtw_warp1_1d_f32,
    f32,
    SoftDtwParams<f32>,
    1
);
warp_kernel!(
    soft_dtw_warp4_f32,
    soft_dtw_warp4_1d_f32,
    f32,
    SoftDtwParams<f32>,
    4
);
warp_kernel!(
    soft_dtw_warp1_f64,
    soft_dtw_warp1_1d_f64,
    f64,
    SoftDtwParams<f64>,
    1
);
warp_kernel!(
    soft_dtw_warp4_f64,
    soft_dtw_warp4_1d_f64,
    f64,
    SoftDtwParams<f64>,
    4
);
warp_kernel!(twed_warp1_f32, twed_warp1_1d_f32, f32, TwedParams<f32>, 1);
warp_kernel!(twed_warp4_f32, twed_warp4_1d_f32, f32, TwedParams<f32>, 4);
warp_kernel!(twed_warp8_f32, twed_warp8_1d_f32, f32, TwedParams<f32>, 8);
warp_kernel!(twed_warp1_f64, twed_warp1_1d_f64, f64, TwedParams<f64>, 1);
warp_kernel!(twed_warp4_f64, twed_warp4_1d_f64, f64, TwedParams<f64>, 4);
warp_kernel!(twed_warp8_f64, twed_warp8_1d_f64, f64, TwedParams<f64>, 8);
// The (lanes, stripe) pairs instantiated here are the host's
// `gpu::sub_warp_shapes`.
sub_warp_kernel!(dtw_warp8x8_f32, dtw_warp8x8_1d_f32, f32, DtwParams, 8, 8);
sub_warp_kernel!(dtw_warp8x16_f32, dtw_warp8x16_1d_f32, f32, DtwParams, 8, 16);
sub_warp_kernel!(dtw_warp8x8_f64, dtw_warp8x8_1d_f64, f64, DtwParams, 8, 8);
sub_warp_kernel!(dtw_warp8x16_f64, dtw_warp8x16_1d_f64, f64, DtwParams, 8, 16);
sub_warp_kernel!(
    dtw_warp16x16_f32,
    dtw_warp16x16_1d_f32,
    f32,
    DtwParams,
    16,
    16
);
sub_warp_kernel!(
    dtw_warp16x16_f64,
    dtw_warp16x16_1d_f64,
    f64,
    DtwParams,
    16,
    16
);

// The stripes instantiated here are the host's `gpu::tiled_stripes`.
tiled_kernel!(dtw_tiled4_f32, dtw_tiled4_1d_f32, f32, DtwParams, 4);
tiled_kernel!(dtw_tiled16_f32, dtw_tiled16_1d_f32, f32, DtwParams, 16);
tiled_kernel!(dtw_tiled4_f64, dtw_tiled4_1d_f64, f64, DtwParams, 4);
tiled_kernel!(dtw_tiled16_f64, dtw_tiled16_1d_f64, f64, DtwParams, 16);
tiled_kernel!(
    soft_dtw_tiled4_f32,
    soft_dtw_tiled4_1d_f32,
    f32,
    SoftDtwParams<f32>,
    4
);
tiled_kernel!(
    soft_dtw_tiled4_f64,
    soft_dtw_tiled4_1d_f64,
    f64,
    SoftDtwParams<f64>,
    4
);
tiled_kernel!(twed_tiled4_f32, twed_tiled4_1d_f32, f32, TwedParams<f32>, 4);
tiled_kernel!(twed_tiled8_f32, twed_tiled8_1d_f32, f32, TwedParams<f32>, 8);
tiled_kernel!(twed_tiled4_f64, twed_tiled4_1d_f64, f64, TwedParams<f64>, 4);
tiled_kernel!(twed_tiled8_f64, twed_tiled8_1d_f64, f64, TwedParams<f64>, 8);
tiled_launches_kernel!(dtw_tiled_launches4_f32, f32, DtwParams, 4);
tiled_launches_kernel!(dtw_tiled_launches16_f32, f32, DtwParams, 16);
tiled_launches_kernel!(dtw_tiled_launches4_f64, f64, DtwParams, 4);
tiled_launches_kernel!(dtw_tiled_launches16_f64, f64, DtwParams, 16);
tiled_launches_kernel!(soft_dtw_tiled_launches4_f32, f32, SoftDtwParams<f32>, 4);
tiled_launches_kernel!(soft_dtw_tiled_launches4_f64, f64, SoftDtwParams<f64>, 4);
tiled_launches_kernel!(twed_tiled_launches4_f32, f32, TwedParams<f32>, 4);
tiled_launches_kernel!(twed_tiled_launches8_f32, f32, TwedParams<f32>, 8);
tiled_launches_kernel!(twed_tiled_launches4_f64, f64, TwedParams<f64>, 4);
tiled_launches_kernel!(twed_tiled_launches8_f64, f64, TwedParams<f64>, 8);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: trap ends the kernel with an error the host sees at its next sync.
    unsafe { core::arch::nvptx::trap() }
}

// ---------------------------------------------------------------------------
// Anti-diagonal kernels (`diagonal`, `diagonal_step`) and the one-thread-per-
// pair kernels with rows in local (`local<cap>`) or shared (`shared`) memory.
// ---------------------------------------------------------------------------

use crate::diagonal::{generation_barrier, Grid};
use crate::DiagonalLaunch;
use core::arch::nvptx::{_grid_dim_x, _syncthreads};
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;

/// The whole grid of a persistent kernel: every thread of every block, and
/// a grid-wide barrier (block barrier, then thread 0 of each block meets
/// the others' in a generation barrier in global memory, then block
/// barrier). Every block must be resident at once: the host launches it
/// cooperatively, with no more blocks than fit the GPU.
struct GpuGrid {
    /// Two zeroed words in global memory.
    barrier: *mut u32,
}

impl Grid for GpuGrid {
    #[inline(always)]
    fn thread(&self) -> usize {
        // SAFETY: reads special registers.
        unsafe { global_thread() as usize }
    }

    #[inline(always)]
    fn threads(&self) -> usize {
        // SAFETY: reads special registers.
        unsafe { _grid_dim_x() as usize * _block_dim_x() as usize }
    }

    #[inline(always)]
    unsafe fn sync(&self) {
        _syncthreads();
        if _thread_idx_x() == 0 {
            generation_barrier(self.barrier, _grid_dim_x() as u32, || {});
        }
        _syncthreads();
    }
}

/// One pair, one persistent kernel: every anti-diagonal in turn, a
/// grid-wide barrier between two.
macro_rules! diagonal_kernel {
    ($name:ident, $t:ty, $params:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: DiagonalLaunch<$t, $params>) {
            launch.run_pair(&GpuGrid {
                barrier: launch.barrier,
            });
        }
    };
}

/// One anti-diagonal of one pair per launch (cuTWED's scheme).
macro_rules! diagonal_step_kernel {
    ($name:ident, $t:ty, $params:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: DiagonalLaunch<$t, $params>) {
            let threads = _grid_dim_x() as usize * _block_dim_x() as usize;
            launch.run_diagonal(global_thread() as usize, threads);
        }
    };
}

/// One thread per pair, its two rows in a local array for series `b` of up
/// to `$cap` samples.
macro_rules! local_kernel {
    ($name:ident, $t:ty, $params:ty, $cap:literal) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: PairsLaunch<$t, $params>) {
            let index = global_thread();
            if index < launch.pair_count {
                launch.run_pair_in_local::<{ $cap + 1 }>(index);
            }
        }
    };
}

/// One thread per pair, its two rows in the block's dynamic shared memory.
macro_rules! shared_kernel {
    ($name:ident, $t:ty, $params:ty) => {
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $name(launch: PairsLaunch<$t, $params>) {
            let index = global_thread();
            if index < launch.pair_count {
                launch.run_pair_in_block_rows(
                    index,
                    gpu_launch_sized_workgroup_mem::<$t>(),
                    _thread_idx_x() as usize,
                    _block_dim_x() as usize,
                );
            }
        }
    };
}

diagonal_kernel!(dtw_diagonal_f32, f32, DtwParams);
diagonal_kernel!(dtw_diagonal_f64, f64, DtwParams);
diagonal_kernel!(soft_dtw_diagonal_f32, f32, SoftDtwParams<f32>);
diagonal_kernel!(soft_dtw_diagonal_f64, f64, SoftDtwParams<f64>);
diagonal_kernel!(twed_diagonal_f32, f32, TwedParams<f32>);
diagonal_kernel!(twed_diagonal_f64, f64, TwedParams<f64>);

diagonal_step_kernel!(dtw_diagonal_step_f32, f32, DtwParams);
diagonal_step_kernel!(dtw_diagonal_step_f64, f64, DtwParams);
diagonal_step_kernel!(soft_dtw_diagonal_step_f32, f32, SoftDtwParams<f32>);
diagonal_step_kernel!(soft_dtw_diagonal_step_f64, f64, SoftDtwParams<f64>);
diagonal_step_kernel!(twed_diagonal_step_f32, f32, TwedParams<f32>);
diagonal_step_kernel!(twed_diagonal_step_f64, f64, TwedParams<f64>);

// The capacities instantiated here are the host's `gpu::LOCAL_CAPACITIES`.
local_kernel!(dtw_local256_f32, f32, DtwParams, 256);
local_kernel!(dtw_local1024_f32, f32, DtwParams, 1024);
local_kernel!(dtw_local256_f64, f64, DtwParams, 256);
local_kernel!(dtw_local1024_f64, f64, DtwParams, 1024);
local_kernel!(soft_dtw_local256_f32, f32, SoftDtwParams<f32>, 256);
local_kernel!(soft_dtw_local1024_f32, f32, SoftDtwParams<f32>, 1024);
local_kernel!(soft_dtw_local256_f64, f64, SoftDtwParams<f64>, 256);
local_kernel!(soft_dtw_local1024_f64, f64, SoftDtwParams<f64>, 1024);
local_kernel!(twed_local256_f32, f32, TwedParams<f32>, 256);
local_kernel!(twed_local1024_f32, f32, TwedParams<f32>, 1024);
local_kernel!(twed_local256_f64, f64, TwedParams<f64>, 256);
local_kernel!(twed_local1024_f64, f64, TwedParams<f64>, 1024);

shared_kernel!(dtw_shared_f32, f32, DtwParams);
shared_kernel!(dtw_shared_f64, f64, DtwParams);
shared_kernel!(soft_dtw_shared_f32, f32, SoftDtwParams<f32>);
shared_kernel!(soft_dtw_shared_f64, f64, SoftDtwParams<f64>);
shared_kernel!(twed_shared_f32, f32, TwedParams<f32>);
shared_kernel!(twed_shared_f64, f64, TwedParams<f64>);

// ---------------------------------------------------------------------------
// The block driver (`block.rs`), over `BlockLaunch`: the stencil kernels (a
// block per pair, three anti-diagonals in shared memory) for every measure,
// and for Soft-DTW the paired warp kernels (the warp driver for paired
// batches) and the gradient (forward pass storing the cost matrix, then the
// backward pass, a block per pair). The host's `gpu::soft_dtw` launches them.
// ---------------------------------------------------------------------------

use crate::{BlockLaunch, ThreadBlock};

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
            launch.run_pair_in_warp::<GpuWarp, $stripe>(&GPU_WARP, global_warp());
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
pairwarp_kernel!(soft_dtw_pairwarp1_f64, f64, SoftDtwParams<f64>, 1);
pairwarp_kernel!(soft_dtw_pairwarp4_f64, f64, SoftDtwParams<f64>, 4);

gradient_kernel!(soft_dtw_gradient_f32, f32, SoftDtwParams<f32>);
gradient_kernel!(soft_dtw_gradient_f64, f64, SoftDtwParams<f64>);
