//! The hardware traits on an NVIDIA GPU (GPU build only): special
//! registers, warp shuffles, scoped memory ordering, the block barrier and
//! launch-sized shared memory, each one PTX instruction. Every intrinsic
//! states exactly what it requires; the traits' implementations uphold it
//! for the drivers, whose own contract is "all lanes (threads) of the warp
//! (block) make the same calls in the same order".

use super::{generation_barrier, Grid, Scope, Tagged, ThreadBlock, WaitBound, Warp, LANES};
use crate::Real;
use core::arch::nvptx::{_block_dim_x, _block_idx_x, _grid_dim_x, _syncthreads, _thread_idx_x};
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;

extern "C" {
    #[link_name = "llvm.nvvm.shfl.sync.up.i32"]
    fn shfl_up_i32(mask: u32, value: i32, delta: u32, clamp: u32) -> i32;
    #[link_name = "llvm.nvvm.shfl.sync.down.i32"]
    fn shfl_down_i32(mask: u32, value: i32, delta: u32, clamp: u32) -> i32;
    #[link_name = "llvm.nvvm.shfl.sync.idx.i32"]
    fn shfl_idx_i32(mask: u32, value: i32, lane: u32, clamp: u32) -> i32;
    #[link_name = "llvm.nvvm.bar.warp.sync"]
    fn bar_warp_sync(mask: u32);
    #[link_name = "llvm.nvvm.nanosleep"]
    fn nanosleep(nanoseconds: u32);
}

/// `asm!` of the instruction `$before` scope `$after`, the scope being
/// `cta` for [`Scope::Block`] and `gpu` for [`Scope::Launch`]: one template
/// for both scopes.
macro_rules! scoped_asm {
    ($scope:expr, $before:literal, $after:literal, $($operands:tt)*) => {
        match $scope {
            Scope::Block => core::arch::asm!(concat!($before, "cta", $after), $($operands)*),
            Scope::Launch => core::arch::asm!(concat!($before, "gpu", $after), $($operands)*),
        }
    };
}

/// Global index of the calling thread in a 1-D launch: `blockIdx.x *
/// blockDim.x + threadIdx.x`, in 64 bits (a launch may have more than 2^32
/// threads).
#[inline(always)]
pub fn global_thread() -> u64 {
    // SAFETY: reading special registers has no precondition.
    unsafe { _block_idx_x() as u64 * _block_dim_x() as u64 + _thread_idx_x() as u64 }
}

/// Index of the calling thread's block in a 1-D launch.
#[inline(always)]
pub fn block_index() -> u64 {
    // SAFETY: reading a special register has no precondition.
    unsafe { _block_idx_x() as u64 }
}

/// Global index of the calling warp in a 1-D launch whose blocks are whole
/// warps.
#[inline(always)]
pub fn global_warp() -> u64 {
    global_thread() / LANES as u64
}

/// Moves `value` through `shuffle`, 32 bits at a time (`shfl.sync` moves a
/// 32-bit word; an `f64` takes two).
///
/// # Safety
/// As the shuffle's.
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

/// Part of a hardware warp, `N` lanes (8, 16 or all 32), as a warp of its
/// own: `32 / N` pairs of short series share a warp, each part running the
/// wavefront over its `N` lanes, which takes `N - 1` steps to fill instead
/// of 31 and gives each lane more columns for the same width. Exchanges
/// stay inside the part (an `N`-lane shuffle segment) and name only its
/// lanes in their mask, so the parts may diverge (pairs of different
/// lengths).
///
/// The shuffles (`shfl.sync.{up,down,idx}.b32`, PTX ISA 6.0, sm_70 up)
/// require that every lane named in the mask executes the same shuffle
/// with the same mask before any of them continues (otherwise the result
/// is undefined), and that the calling lane is in the mask. The drivers
/// call them from all `N` lanes of the part together, and the mask is the
/// part's `N` lanes.
pub struct GpuSubWarp<const N: usize> {
    /// Which part of the warp: `0..32 / N`.
    part: u32,
}

/// The whole hardware warp.
pub type GpuWarp = GpuSubWarp<LANES>;

impl GpuWarp {
    /// The whole warp of the calling thread.
    #[inline(always)]
    pub const fn whole() -> Self {
        GpuSubWarp { part: 0 }
    }
}

impl<const N: usize> GpuSubWarp<N> {
    /// Part `sub_warp` of a launch numbered in parts of `N` lanes
    /// (`global_thread() / N`): its place in its warp.
    #[inline(always)]
    pub fn of(sub_warp: u64) -> Self {
        GpuSubWarp {
            part: (sub_warp % (LANES / N) as u64) as u32,
        }
    }

    /// The part's lanes as a shuffle mask.
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
        // SAFETY: reading a special register has no precondition.
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

    /// `bar.warp.sync` (sm_70 up) requires every lane named in the mask to
    /// execute a `bar.warp.sync` with the same mask, and the calling lane
    /// to be in it: the mask is the part's lanes, which the drivers' callers
    /// all make. It orders memory among them.
    #[inline(always)]
    unsafe fn sync(&self) {
        bar_warp_sync(self.mask())
    }

    /// `ld.relaxed.{cta,gpu}.global.v2.u64`: requires `border` to be a
    /// 16-byte aligned address in global memory (the caller's contract);
    /// each element of a vector access is a single-copy atomic access.
    #[inline(always)]
    unsafe fn load_tagged(&self, scope: Scope, border: *const Tagged) -> Tagged {
        let (low, high): (u64, u64);
        scoped_asm!(
            scope,
            "ld.relaxed.",
            ".global.v2.u64 {{{low}, {high}}}, [{border}];",
            low = out(reg64) low,
            high = out(reg64) high,
            border = in(reg64) border,
        );
        [low, high]
    }

    /// `st.relaxed.{cta,gpu}.global.v2.u64`: requires `border` to be a
    /// 16-byte aligned address in global memory (the caller's contract).
    #[inline(always)]
    unsafe fn store_tagged(&self, scope: Scope, border: *mut Tagged, value: Tagged) {
        scoped_asm!(
            scope,
            "st.relaxed.",
            ".global.v2.u64 [{border}], {{{low}, {high}}};",
            border = in(reg64) border,
            low = in(reg64) value[0],
            high = in(reg64) value[1],
        );
    }

    /// `nanosleep.u32` (sm_70 up): suspends this warp for about that long,
    /// leaving the SM's issue slots to the warps doing work meanwhile.
    #[inline(always)]
    fn spin(&self) {
        // SAFETY: suspending the calling warp has no precondition.
        unsafe { nanosleep(32) }
    }

    /// `ld.acquire.sys.global.u32` (sm_70 up): requires `count` to be a
    /// 4-byte aligned global address (mapped host memory is global); the
    /// acquire at the system's scope pairs with the host's release store.
    #[inline(always)]
    unsafe fn load_host_count(&self, count: *const u32) -> u32 {
        let value: u32;
        core::arch::asm!(
            "ld.acquire.sys.global.u32 {value}, [{count}];",
            value = out(reg32) value,
            count = in(reg64) count,
        );
        value
    }

    /// `ld.acquire.gpu.global.u64`: requires an 8-byte aligned global
    /// address.
    #[inline(always)]
    unsafe fn load_count(&self, count: *const u64) -> u64 {
        let value: u64;
        core::arch::asm!(
            "ld.acquire.gpu.global.u64 {value}, [{count}];",
            value = out(reg64) value,
            count = in(reg64) count,
        );
        value
    }

    /// `st.release.gpu.global.u64`: requires an 8-byte aligned global
    /// address.
    #[inline(always)]
    unsafe fn store_count(&self, count: *mut u64, value: u64) {
        core::arch::asm!(
            "st.release.gpu.global.u64 [{count}], {value};",
            count = in(reg64) count,
            value = in(reg64) value,
        );
    }

    /// `atom.acq_rel.sys.global.add.u64` (sm_70 up): requires an 8-byte
    /// aligned global address in device memory (atomics on mapped host
    /// memory need the host's support, which PCIe hosts lack).
    #[inline(always)]
    unsafe fn count_up(&self, counter: *mut u64) -> u64 {
        let before: u64;
        core::arch::asm!(
            "atom.acq_rel.sys.global.add.u64 {before}, [{counter}], 1;",
            before = out(reg64) before,
            counter = in(reg64) counter,
        );
        before
    }

    /// `st.release.sys.global.u32` (sm_70 up): requires a 4-byte aligned
    /// global address.
    #[inline(always)]
    unsafe fn store_host_flag(&self, flag: *mut u32, value: u32) {
        core::arch::asm!(
            "st.release.sys.global.u32 [{flag}], {value};",
            flag = in(reg64) flag,
            value = in(reg32) value,
        );
    }

    /// `ld.global.cv.u32`: requires a 4-byte aligned global address; `.cv`
    /// takes no cached copy of a line of system memory (one cached before
    /// the host wrote it would be stale) and fetches it again.
    #[inline(always)]
    unsafe fn load_fresh(&self, word: *const u32) -> u32 {
        let value: u32;
        core::arch::asm!(
            "ld.global.cv.u32 {value}, [{word}];",
            value = out(reg32) value,
            word = in(reg64) word,
        );
        value
    }

    /// `mov.u64 %globaltimer` (sm_30 up): a nanosecond clock; no
    /// precondition.
    #[inline(always)]
    fn clock_ns(&self) -> u64 {
        global_timer_ns()
    }

    #[inline(always)]
    fn pause(&self) {
        // SAFETY: suspending the calling warp has no precondition.
        unsafe { nanosleep(500) }
    }
}

/// The hardware thread block: `bar.sync 0` and the launch's dynamic shared
/// memory.
///
/// `bar.sync 0` (`_syncthreads`) requires every non-exited thread of the
/// block to reach the same barrier instruction, or the block hangs or the
/// result is undefined; the stencil driver calls it from every thread, with
/// the same arguments, after loops whose trip counts are the same for all.
pub struct GpuBlock;

impl ThreadBlock for GpuBlock {
    #[inline(always)]
    fn thread(&self) -> usize {
        // SAFETY: reading a special register has no precondition.
        unsafe { _thread_idx_x() as usize }
    }

    #[inline(always)]
    fn threads(&self) -> usize {
        // SAFETY: reading a special register has no precondition.
        unsafe { _block_dim_x() as usize }
    }

    #[inline(always)]
    unsafe fn barrier(&self) {
        _syncthreads()
    }

    /// The `.extern .shared` array: as many bytes as the launch's
    /// `shared_mem_bytes`, 16-byte aligned; reading past them is undefined.
    #[inline(always)]
    fn shared<T>(&self) -> *mut T {
        gpu_launch_sized_workgroup_mem::<T>()
    }
}

/// The whole grid of a persistent kernel: every thread of every block, and
/// a grid-wide barrier (block barrier, then thread 0 of each block meets
/// the others' in a [`generation_barrier`] in global memory, then block
/// barrier). That barrier requires every block to be resident at once: the
/// host launches the kernel cooperatively (`cuLaunchCooperativeKernel`),
/// with no more blocks than fit the GPU, which the driver checks.
pub struct GpuGrid {
    /// Three zeroed words in global memory: the barrier's count and
    /// generation, and the fault word of its bound.
    barrier: *mut u32,
    bound: WaitBound,
}

impl GpuGrid {
    /// The grid whose barrier is at `barrier` (three zeroed words of
    /// global memory, shared by the launch).
    #[inline(always)]
    pub fn new(barrier: *mut u32) -> Self {
        GpuGrid {
            barrier,
            // SAFETY of the later waits: the barrier's third word.
            bound: WaitBound::new(barrier.wrapping_add(2)),
        }
    }
}

/// `mov.u64 %globaltimer` (sm_30 up): a nanosecond clock; no precondition.
#[inline(always)]
fn global_timer_ns() -> u64 {
    let now: u64;
    // SAFETY: reading a special register has no precondition.
    unsafe {
        core::arch::asm!("mov.u64 {now}, %globaltimer;", now = out(reg64) now);
    }
    now
}

impl Grid for GpuGrid {
    #[inline(always)]
    fn thread(&self) -> usize {
        global_thread() as usize
    }

    #[inline(always)]
    fn threads(&self) -> usize {
        // SAFETY: reading special registers has no precondition.
        unsafe { _grid_dim_x() as usize * _block_dim_x() as usize }
    }

    #[inline(always)]
    unsafe fn sync(&self) {
        _syncthreads();
        if _thread_idx_x() == 0 {
            generation_barrier(
                self.barrier,
                _grid_dim_x() as u32,
                &self.bound,
                global_timer_ns,
                || {},
            );
        }
        _syncthreads();
    }
}
