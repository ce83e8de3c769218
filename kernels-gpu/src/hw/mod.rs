//! What the drivers need of the hardware, as three small traits: a warp
//! ([`Warp`]: lanes, shuffles, values handed between warps with a tag), a thread block
//! ([`ThreadBlock`]: threads, a barrier, shared memory) and a grid of
//! threads that can meet at a barrier ([`Grid`]). The GPU implements them
//! with PTX instructions (`nvptx`, GPU build only); the host tests implement
//! them with threads and barriers, so the drivers' own code is checked
//! against the oracle where there is no GPU, and the CPU backend runs the
//! stencil driver on a one-thread block.

#[cfg(target_arch = "nvptx64")]
pub mod nvptx;

use crate::Real;
use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Lanes of a GPU warp.
pub const LANES: usize = 32;

/// The warps that a [`Tagged`] value is handed among: those of the
/// writer's thread block, or every warp of the launch. Within a block the
/// loads may be served by the SM's L1 cache; across the launch they go to
/// the L2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Block,
    Launch,
}

/// What the warp drivers need of a warp. Every lane must make the same
/// calls in the same order (they are collective).
pub trait Warp {
    /// Lanes of the warp: [`LANES`] for a hardware warp, fewer for a part
    /// of one (a sub-warp); the host tests also emulate narrower ones.
    const LANES: usize;
    /// This lane's index, `0..Self::LANES`.
    fn lane(&self) -> usize;
    /// Every lane gives `value`; each gets the value of lane `lane - 1`
    /// (lane 0 gets its own).
    ///
    /// # Safety
    /// Called by all lanes together.
    unsafe fn shuffle_up<T: Real>(&self, value: T) -> T;
    /// Every lane gives `value`; each gets the value of lane `lane + 1`
    /// (the last lane gets its own).
    ///
    /// # Safety
    /// Called by all lanes together.
    unsafe fn shuffle_down<T: Real>(&self, value: T) -> T;
    /// Every lane gives `value`; each gets the value of lane `source`.
    ///
    /// # Safety
    /// Called by all lanes together, `source < Self::LANES`.
    unsafe fn broadcast<T: Real>(&self, value: T, source: usize) -> T;
    /// Waits until every lane has come here; what the lanes wrote to
    /// memory before is visible to all of them after.
    ///
    /// # Safety
    /// Called by all lanes together.
    unsafe fn sync(&self);
    /// Called in each round of a spin-wait on another warp's progress.
    fn spin(&self) {}
    /// `*border`, each of its two words read atomically at `scope`, with
    /// no ordering (see [`Tagged`]).
    ///
    /// # Safety
    /// `border` is valid and 16-byte aligned.
    unsafe fn load_tagged(&self, _scope: Scope, border: *const Tagged) -> Tagged {
        let words = border as *const u64 as *mut u64;
        [
            AtomicU64::from_ptr(words).load(Ordering::Relaxed),
            AtomicU64::from_ptr(words.add(1)).load(Ordering::Relaxed),
        ]
    }
    /// `*border = value`, each of its two words written atomically at
    /// `scope`, with no ordering.
    ///
    /// # Safety
    /// `border` is valid and 16-byte aligned.
    unsafe fn store_tagged(&self, _scope: Scope, border: *mut Tagged, value: Tagged) {
        let words = border as *mut u64;
        AtomicU64::from_ptr(words).store(value[0], Ordering::Relaxed);
        AtomicU64::from_ptr(words.add(1)).store(value[1], Ordering::Relaxed);
    }
    /// `*count`, which the host raises while the launch runs, read with
    /// acquire ordering at the system's scope: what the host wrote before
    /// it raised the count is visible to this lane after.
    ///
    /// # Safety
    /// `count` is valid and 4-byte aligned, in memory the host maps.
    unsafe fn load_host_count(&self, count: *const u32) -> u32 {
        AtomicU32::from_ptr(count as *mut u32).load(Ordering::Acquire)
    }
    /// `*count` read with acquire ordering among the launch's warps.
    ///
    /// # Safety
    /// `count` is valid and 8-byte aligned.
    unsafe fn load_count(&self, count: *const u64) -> u64 {
        AtomicU64::from_ptr(count as *mut u64).load(Ordering::Acquire)
    }
    /// `*count = value` with release ordering among the launch's warps.
    ///
    /// # Safety
    /// `count` is valid and 8-byte aligned.
    unsafe fn store_count(&self, count: *mut u64, value: u64) {
        AtomicU64::from_ptr(count).store(value, Ordering::Release)
    }
    /// Adds 1 to `*counter` atomically, with acquire and release ordering
    /// at the system's scope (the host's too), and returns the count
    /// before: what this lane wrote before, host memory included, is
    /// visible to whoever sees the count it made, and so on down the line.
    ///
    /// # Safety
    /// `counter` is valid and 8-byte aligned, in device memory.
    unsafe fn count_up(&self, counter: *mut u64) -> u64 {
        AtomicU64::from_ptr(counter).fetch_add(1, Ordering::AcqRel)
    }
    /// `*flag = value`, for the host to read, with release ordering at the
    /// system's scope: what this lane wrote before, or saw another lane
    /// release at that scope, is visible to the host once it sees `value`.
    ///
    /// # Safety
    /// `flag` is valid and 4-byte aligned, in memory the host maps.
    unsafe fn store_host_flag(&self, flag: *mut u32, value: u32) {
        AtomicU32::from_ptr(flag).store(value, Ordering::Release)
    }
    /// A word the host wrote while the launch runs, fetched from memory,
    /// never from a copy cached before the host wrote it.
    ///
    /// # Safety
    /// `word` is valid and 4-byte aligned; the host wrote it before it
    /// raised a count that this lane's acquire has seen: its own
    /// ([`Warp::load_host_count`]), or one that another warp read so and
    /// handed on ([`Warp::store_count`], then this lane's
    /// [`Warp::load_count`]); or another lane of the warp has, and the
    /// warp synchronized since ([`Warp::sync`]).
    unsafe fn load_fresh(&self, word: *const u32) -> u32 {
        core::ptr::read_volatile(word)
    }
    /// Nanoseconds of a clock that runs on by itself; 0 where there is
    /// none (the host tests, which then never give up waiting).
    fn clock_ns(&self) -> u64 {
        0
    }
    /// Suspends the warp for about half a microsecond, between two looks at
    /// what the host has written.
    fn pause(&self) {}
}

/// How long one wait of a warp for a value that other warps publish (a
/// border's next rows, a grid barrier) may last before the warp gives up.
/// Such a wait ends within microseconds on a working GPU: the warps waited
/// for are running (the drivers hand work out in an order that makes sure
/// of it) and a few rows ahead. Only a warp that never publishes (a bug, or
/// the test hook that makes one) or a GPU that stopped reaches the bound.
pub const WAIT_BOUND_NS: u64 = 2_000_000_000;

/// The bound on the waits of one warp (or one grid barrier's participant)
/// for what other warps publish. A wait that reaches [`WAIT_BOUND_NS`]
/// gives up: it records the failure in the fault word, which the host
/// reads after the launch and reports as an error naming the kernel, and
/// from then on this warp waits no more: each of its later waits that does
/// not find its value at once gives up too. The warp then runs to its end
/// with what it has (its results are worthless, and the host discards
/// them), so the launch ends within one bound of the fault, and the GPU
/// stays usable.
pub struct WaitBound {
    fault: *mut u32,
    gave_up: core::cell::Cell<bool>,
}

impl WaitBound {
    /// The bound of waits whose failures go to `fault` (a zeroed word of
    /// global memory that the host reads after the launch).
    #[inline(always)]
    pub fn new(fault: *mut u32) -> Self {
        WaitBound {
            fault,
            gave_up: core::cell::Cell::new(false),
        }
    }

    /// `look()`'s first `Some`, looking again after each [`Warp::spin`]; or
    /// `None` once the wait has reached [`WAIT_BOUND_NS`], or at once if
    /// this warp gave up before.
    ///
    /// # Safety
    /// The fault word given to [`WaitBound::new`] is valid and 4-byte
    /// aligned.
    #[inline(always)]
    pub unsafe fn wait<W: Warp, R>(&self, warp: &W, look: impl FnMut() -> Option<R>) -> Option<R> {
        self.wait_with(|| warp.clock_ns(), || warp.spin(), look)
    }

    /// [`WaitBound::wait`] with the clock `clock_ns` (nanoseconds) and
    /// `spin` between two looks, for a waiter that is no warp.
    ///
    /// # Safety
    /// As [`WaitBound::wait`].
    #[inline(always)]
    pub unsafe fn wait_with<R>(
        &self,
        clock_ns: impl Fn() -> u64,
        spin: impl Fn(),
        mut look: impl FnMut() -> Option<R>,
    ) -> Option<R> {
        if let Some(found) = look() {
            return Some(found);
        }
        if self.gave_up.get() {
            return None;
        }
        let started = clock_ns();
        loop {
            spin();
            if let Some(found) = look() {
                return Some(found);
            }
            if clock_ns().wrapping_sub(started) > WAIT_BOUND_NS {
                self.gave_up.set(true);
                AtomicU32::from_ptr(self.fault).store(1, Ordering::Relaxed);
                // Before anything this warp publishes after it: a warp
                // that reads those (and fences) sees the fault too.
                fence(Ordering::SeqCst);
                return None;
            }
        }
    }

    /// Whether a wait of this launch gave up, as far as this warp has seen:
    /// its own, or one recorded before values that this warp has read.
    ///
    /// # Safety
    /// As [`WaitBound::wait`].
    #[inline(always)]
    pub unsafe fn faulted(&self) -> bool {
        fence(Ordering::SeqCst);
        self.gave_up.get() || AtomicU32::from_ptr(self.fault).load(Ordering::Relaxed) != 0
    }
}

/// A value handed from one warp to another while both run, with the
/// writer's tag: each 32-bit half of the value's bits travels in a 64-bit
/// word whose other half is the tag, and every word is stored and loaded
/// atomically. A reader that finds its writer's tag in both words has that
/// writer's value, whatever the order the words arrive in: no fence, no
/// count to publish, and no invalidated L1 cache. Tags are never 0, the
/// value of memory zeroed before the launch.
pub type Tagged = [u64; 2];

/// `value` tagged with `tag` (not 0).
#[inline(always)]
pub fn tagged<T: Real>(value: T, tag: u32) -> Tagged {
    let bits = value.to_bits();
    let tag = (tag as u64) << 32;
    [tag | (bits & 0xffff_ffff), tag | (bits >> 32)]
}

/// The value of `words` if both carry `tag`.
#[inline(always)]
pub fn untagged<T: Real>(words: Tagged, tag: u32) -> Option<T> {
    let tag = tag as u64;
    if words[0] >> 32 == tag && words[1] >> 32 == tag {
        Some(T::from_bits((words[0] & 0xffff_ffff) | (words[1] << 32)))
    } else {
        None
    }
}

/// Adds `value` to `*counter` atomically, with no ordering, and returns
/// the count before it, so that threads adding 1 each get distinct counts
/// (on the GPU: `atom.add.u32`, at the launch's scope). What else the
/// threads write is ordered for the host, or a later launch of the stream,
/// by the launch's end.
///
/// # Safety
/// `counter` is valid and 4-byte aligned, and every access to it while
/// others may add to it is atomic.
#[inline(always)]
pub unsafe fn add_u32(counter: *mut u32, value: u32) -> u32 {
    AtomicU32::from_ptr(counter).fetch_add(value, Ordering::Relaxed)
}

/// `value` of lane `source`, for integers (shuffles move bits).
///
/// # Safety
/// As [`Warp::broadcast`].
#[inline(always)]
pub unsafe fn broadcast_u32<W: Warp>(warp: &W, value: u32, source: usize) -> u32 {
    warp.broadcast(f32::from_bits(value), source).to_bits()
}

/// What the stencil driver needs of a thread block. Every thread must make
/// the same calls in the same order (barriers are collective).
pub trait ThreadBlock {
    /// This thread's index, `0..self.threads()`.
    fn thread(&self) -> usize;
    /// Threads of the block.
    fn threads(&self) -> usize;
    /// Waits until every thread of the block has come here; what they
    /// wrote before (shared or global memory) is visible after.
    ///
    /// # Safety
    /// Called by all threads together.
    unsafe fn barrier(&self);
    /// The block's shared memory, as many bytes as the launch gave.
    fn shared<T>(&self) -> *mut T;
}

/// What the persistent anti-diagonal driver needs of the threads that run
/// it.
pub trait Grid {
    /// This thread's number, `0..self.threads()`.
    fn thread(&self) -> usize;
    /// Threads that run the driver together.
    fn threads(&self) -> usize;
    /// Waits until every thread has called it; memory written by any thread
    /// before its call is visible to every thread after the return.
    ///
    /// # Safety
    /// Called by all threads together.
    unsafe fn sync(&self);
}

/// A generation-counting barrier of `parties` participants over three words
/// of memory, `[count, generation, fault]`, all zero before first use (and again
/// zero and some generation after every completed barrier, so the words can
/// serve any number of barriers and launches). Each participant (on the
/// GPU: thread 0 of each block, after the block's barrier) reads the
/// generation, arrives by incrementing the count; the last to arrive resets
/// the count and advances the generation, the others wait for it to
/// advance, calling `pause` while they spin.
///
/// The fences make it a full memory barrier between the participants:
/// everything written before arriving (by the participant, or by threads
/// whose writes it has observed, such as its block through the block
/// barrier) is visible to every participant after it returns.
///
/// A participant's wait is bounded by `bound` (whose fault word is
/// `state[2]`), timed by `clock_ns`: a participant that never arrives makes
/// the others give up (and the fault word say so) rather than hang.
///
/// # Safety
/// `state` points to three `u32` used only by this barrier's participants;
/// `bound` is this participant's, over `state[2]`; exactly `parties`
/// participants call it each time, all of them resident at once (on the
/// GPU: a cooperative launch).
#[inline(always)]
pub unsafe fn generation_barrier(
    state: *mut u32,
    parties: u32,
    bound: &WaitBound,
    clock_ns: impl Fn() -> u64,
    pause: impl Fn(),
) {
    let count = AtomicU32::from_ptr(state);
    let generation = AtomicU32::from_ptr(state.add(1));
    // The current generation: it cannot advance before this participant
    // arrives, and this thread saw the last advance (or its own).
    let current = generation.load(Ordering::Relaxed);
    fence(Ordering::SeqCst);
    if count.fetch_add(1, Ordering::AcqRel) == parties - 1 {
        count.store(0, Ordering::Relaxed);
        generation.store(current.wrapping_add(1), Ordering::Release);
    } else {
        let advanced = || (generation.load(Ordering::Acquire) != current).then_some(());
        // Given up: the fault word says so, and the results are discarded.
        let _ = bound.wait_with(clock_ns, pause, advanced);
    }
    fence(Ordering::SeqCst);
}
