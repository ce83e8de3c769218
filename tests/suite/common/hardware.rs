//! Runs the device crate's warp drivers on the host: each lane of an
//! emulated warp is a thread, and an exchange between lanes (a shuffle on
//! the GPU) is a store to a shared slot, a barrier, a load, a barrier. The
//! drivers' code is the GPU's own (generic over `Warp`), so the host tests
//! check its logic (borders, bands, tiles, wavefront order) in CI, where
//! there is no GPU. Warps narrower than 32 lanes exercise the same code with
//! fewer threads. Thread blocks (the block driver) are emulated the same
//! way: a thread per GPU thread, a [`LaneBarrier`] for `_syncthreads`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread::Thread;
use timewarp_kernels::hw::Warp;
use timewarp_kernels::Real;

/// A barrier for many more threads than cores (a warp's 32 lanes on CI's
/// 2 cores): a waiting thread yields its core a few times, so the lanes
/// still to arrive run, and then sleeps until the last one wakes it.
/// `std::sync::Barrier` puts every waiter to sleep at once and wakes them
/// all onto one mutex: the emulated tests spent most of their time
/// switching threads, 2 to 9 times as long.
pub struct LaneBarrier {
    count: usize,
    generation: AtomicU64,
    /// Arrivals of this generation, and the threads asleep in it.
    state: Mutex<(usize, Vec<Thread>)>,
}

/// How often a thread waiting at a [`LaneBarrier`] yields before it sleeps.
const YIELDS_BEFORE_SLEEP: u32 = 64;

impl LaneBarrier {
    pub fn new(count: usize) -> Self {
        LaneBarrier {
            count,
            generation: AtomicU64::new(0),
            state: Mutex::new((0, Vec::new())),
        }
    }

    pub fn wait(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 += 1;
        if state.0 == self.count {
            state.0 = 0;
            let sleepers = std::mem::take(&mut state.1);
            // Under the lock: no thread of this generation is between its
            // arrival and its first look at the generation.
            self.generation.fetch_add(1, Ordering::Release);
            drop(state);
            sleepers.iter().for_each(Thread::unpark);
            return;
        }
        let generation = self.generation.load(Ordering::Relaxed);
        state.1.push(std::thread::current());
        drop(state);
        let mut spins = 0;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < YIELDS_BEFORE_SLEEP {
                spins += 1;
                std::thread::yield_now();
            } else {
                std::thread::park();
            }
        }
    }
}

/// What the lanes of one emulated warp share.
struct Exchange {
    slots: Vec<AtomicU64>,
    barrier: LaneBarrier,
}

/// One lane of an emulated warp of `N` lanes.
pub struct EmulatedLane<'a, const N: usize> {
    lane: usize,
    exchange: &'a Exchange,
}

impl<const N: usize> EmulatedLane<'_, N> {
    fn swap<T: Real>(&self, value: T, source: usize) -> T {
        self.exchange.slots[self.lane].store(value.to_bits(), Ordering::Relaxed);
        self.exchange.barrier.wait();
        let bits = self.exchange.slots[source].load(Ordering::Relaxed);
        // Nobody overwrites a slot before every lane has read.
        self.exchange.barrier.wait();
        T::from_bits(bits)
    }
}

impl<const N: usize> Warp for EmulatedLane<'_, N> {
    const LANES: usize = N;

    fn lane(&self) -> usize {
        self.lane
    }

    unsafe fn shuffle_up<T: Real>(&self, value: T) -> T {
        self.swap(value, self.lane.saturating_sub(1))
    }

    unsafe fn shuffle_down<T: Real>(&self, value: T) -> T {
        self.swap(value, (self.lane + 1).min(N - 1))
    }

    unsafe fn broadcast<T: Real>(&self, value: T, source: usize) -> T {
        self.swap(value, source)
    }

    unsafe fn sync(&self) {
        self.exchange.barrier.wait();
    }

    fn spin(&self) {
        // More threads than cores: let the warp being waited for run.
        std::thread::yield_now();
    }

    fn pause(&self) {
        // As `spin`: let the host's writer and the relay run.
        std::thread::yield_now();
    }

    fn clock_ns(&self) -> u64 {
        clock_ns()
    }
}

/// Nanoseconds since the first call in this process: the emulated warps'
/// and grids' clock, which the device's bounded waits read.
pub fn clock_ns() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

/// Plain data that the lanes' threads may share: the drivers take raw
/// pointers (series, borders), which the barriers order.
#[derive(Clone, Copy)]
pub struct Shared<T>(pub T);
// SAFETY: the threads use the pointers only between the emulated barriers,
// which order every write before the reads that follow it.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for Shared<T> {}

impl<T: Copy> Shared<T> {
    /// The value; a closure that calls this captures the whole wrapper
    /// (a field access would capture the non-`Sync` field alone).
    pub fn get(&self) -> T {
        self.0
    }
}

/// `body()`, or, if it panics, the end of the process: the other lanes or
/// threads of its warp or block would wait for it at their next exchange
/// or barrier forever, and the test run would hang instead of failing.
fn or_abort<R>(body: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(_) => {
            // The panic hook has printed the message and location.
            eprintln!(
                "an emulated lane or thread panicked: aborting, as its peers would wait forever"
            );
            std::process::abort()
        }
    }
}

/// Runs `body` on every lane of an emulated `N`-lane warp, each on its own
/// thread, and returns lane 0's result.
pub fn run_warp<const N: usize, R: Send>(body: impl Fn(&EmulatedLane<'_, N>) -> R + Sync) -> R {
    run_warps::<N, R>(1, body).swap_remove(0)
}

/// Runs `body` on `warps` emulated `N`-lane warps at once (a launch of
/// that many warps: they may wait on each other), and returns each warp's
/// lane 0 result.
pub fn run_warps<const N: usize, R: Send>(
    warps: usize,
    body: impl Fn(&EmulatedLane<'_, N>) -> R + Sync,
) -> Vec<R> {
    run_numbered_warps::<N, R>(warps, |lane, _| body(lane))
}

/// As [`run_warps`], `body` given each warp's index in the launch too.
pub fn run_numbered_warps<const N: usize, R: Send>(
    warps: usize,
    body: impl Fn(&EmulatedLane<'_, N>, usize) -> R + Sync,
) -> Vec<R> {
    let exchanges: Vec<Exchange> = (0..warps)
        .map(|_| Exchange {
            slots: (0..N).map(|_| AtomicU64::new(0)).collect(),
            barrier: LaneBarrier::new(N),
        })
        .collect();
    std::thread::scope(|scope| {
        let lanes: Vec<_> = exchanges
            .iter()
            .enumerate()
            .flat_map(|(warp, exchange)| (0..N).map(move |lane| (warp, lane, exchange)))
            .map(|(warp, lane, exchange)| {
                let body = &body;
                scope.spawn(move || or_abort(|| body(&EmulatedLane { lane, exchange }, warp)))
            })
            .collect();
        lanes
            .into_iter()
            .map(|lane| lane.join().expect("an emulated lane panicked"))
            .step_by(N)
            .collect()
    })
}

/// One thread of an emulated thread block: a barrier is a
/// [`LaneBarrier`], shared memory a buffer of the block's.
pub struct BlockThread<'a> {
    thread: usize,
    threads: usize,
    barrier: &'a LaneBarrier,
    shared: *mut u8,
}

impl timewarp_kernels::hw::ThreadBlock for BlockThread<'_> {
    fn thread(&self) -> usize {
        self.thread
    }

    fn threads(&self) -> usize {
        self.threads
    }

    unsafe fn barrier(&self) {
        self.barrier.wait();
    }

    fn shared<T>(&self) -> *mut T {
        self.shared as *mut T
    }
}

/// Runs `body` on every thread of an emulated block of `threads` threads,
/// each on its own thread, with `shared` (the block's shared memory, which
/// the caller fills as it likes and inspects after) and returns every
/// thread's result in thread order.
pub fn run_block<R: Send>(
    threads: usize,
    shared: &mut [u64],
    body: impl Fn(&BlockThread<'_>) -> R + Sync,
) -> Vec<R> {
    let barrier = LaneBarrier::new(threads);
    let memory = Shared(shared.as_mut_ptr() as *mut u8);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    or_abort(|| {
                        body(&BlockThread {
                            thread,
                            threads,
                            barrier,
                            shared: memory.get(),
                        })
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("an emulated thread panicked"))
            .collect()
    })
}
