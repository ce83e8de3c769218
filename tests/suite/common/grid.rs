//! Runs the device crate's anti-diagonal driver on the host: each thread of
//! an emulated grid is a thread, and the grid-wide barrier is either a
//! host barrier ([`LaneBarrier`]) or the GPU kernels' own generation barrier
//! (`diagonal::generation_barrier`, atomics and fences, yielding while it
//! spins), so the tests check both the driver's logic and the barrier's.

use super::hardware::LaneBarrier;
use std::sync::atomic::AtomicU32;
use timewarp_kernels::hw::{generation_barrier, Grid, WaitBound};

/// Which barrier an emulated grid synchronises with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierKind {
    Std,
    Generation,
}

/// What the threads of one emulated grid share.
struct GridBarrier {
    kind: BarrierKind,
    std: LaneBarrier,
    /// `[count, generation, fault]` of the generation barrier.
    state: [AtomicU32; 3],
}

/// One thread of an emulated grid.
pub struct GridThread<'a> {
    thread: usize,
    threads: usize,
    barrier: &'a GridBarrier,
}

impl Grid for GridThread<'_> {
    fn thread(&self) -> usize {
        self.thread
    }

    fn threads(&self) -> usize {
        self.threads
    }

    unsafe fn sync(&self) {
        match self.barrier.kind {
            BarrierKind::Std => {
                self.barrier.std.wait();
            }
            BarrierKind::Generation => {
                let state = self.barrier.state.as_ptr() as *mut u32;
                let bound = WaitBound::new(state.add(2));
                generation_barrier(
                    state,
                    self.threads as u32,
                    &bound,
                    super::hardware::clock_ns,
                    std::thread::yield_now,
                );
            }
        }
    }
}

/// Runs `body` on every thread of an emulated grid of `threads` threads,
/// each on its own OS thread, and returns thread 0's result.
pub fn run_grid<R: Send>(
    threads: usize,
    kind: BarrierKind,
    body: impl Fn(&GridThread<'_>) -> R + Sync,
) -> R {
    let barrier = GridBarrier {
        kind,
        std: LaneBarrier::new(threads),
        state: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, body) = (&barrier, &body);
                scope.spawn(move || {
                    body(&GridThread {
                        thread,
                        threads,
                        barrier,
                    })
                })
            })
            .collect();
        let mut results: Vec<R> = handles
            .into_iter()
            .map(|h| h.join().expect("an emulated grid thread panicked"))
            .collect();
        results.swap_remove(0)
    })
}
