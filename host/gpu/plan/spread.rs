//! Work spread over several workers (one per GPU), with no CUDA here so
//! that the scheduling is unit-tested on the CPU with fake workers.
//!
//! [`spread`]: blocks `0..count` handed out in that order from one shared
//! queue (a plan lists its blocks largest first: `blocks`), each worker on
//! a thread of its own taking the next block when it is done with the
//! last, so a slower or busier worker takes fewer. A worker whose block
//! fails with a device error ([`Error::is_gpu_failure`]) stops, and its block goes back
//! to the queue for the others; the call fails only when every worker has
//! failed, or at once on any other error (bad input, an overflow, an
//! interruption: the same on every worker). Errors name the worker.
//! [`each`]: one job per worker, all at once (shards, which only the worker
//! that holds them can compute).

use crate::{Error, Result};
use std::ops::Range;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What one worker computed in a [`spread`]: its blocks, and the time it
/// spent computing them (from taking each to its results in place), so
/// its throughput is its blocks' work over that time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Share {
    pub blocks: Vec<usize>,
    pub time: Duration,
}

/// `error` with the worker's `name` in front, if it is a device error (and
/// does not name it already).
pub(crate) fn named(mut error: Error, name: &str) -> Error {
    if let Some(text) = error.gpu_failure_text() {
        if !text.starts_with(name) {
            *text = format!("{name}: {text}");
        }
    }
    error
}

/// The queue's state, under one lock.
struct Queue {
    /// The next block never handed out.
    next: usize,
    /// Blocks handed back by failed workers.
    retry: Vec<usize>,
    /// Blocks being computed.
    in_flight: usize,
    /// Workers that have not failed.
    alive: usize,
    /// Device errors of workers that stopped, named.
    failures: Vec<String>,
    /// The error that ends the call.
    fatal: Option<Error>,
}

/// Runs blocks `0..count` on `workers`, `run(worker, block)` computing one
/// block (and putting its results where they go), and returns each
/// worker's [`Share`]. One worker runs them all on the calling thread.
/// Every block is computed exactly once by a worker that succeeded with
/// it, and counted in that worker's share alone (a block a failed worker
/// handed back counts for the one that computed it); when a call fails no
/// block is left half-done without the error.
pub(crate) fn spread<W, F>(
    workers: &mut [W],
    count: usize,
    name: impl Fn(&W) -> String + Sync,
    run: F,
) -> Result<Vec<Share>>
where
    W: Send,
    F: Fn(&mut W, usize) -> Result<()> + Sync,
{
    spread_pipelined(
        workers,
        count,
        name,
        |worker, block| run(worker, block).map(|()| vec![block]),
        |_| Ok(Vec::new()),
    )
}

/// [`spread`] for workers that keep blocks in flight, so that one block's
/// last results come back while the next one computes:
/// `start(worker, block)` starts a block and returns the blocks whose
/// results are now all in place (none, that one, or earlier ones);
/// `finish(worker)` waits for the rest of its blocks and returns them. A
/// block counts as done only once it is returned: a worker that fails
/// hands every block it started and did not return back to the queue.
pub(crate) fn spread_pipelined<W, F, G>(
    workers: &mut [W],
    count: usize,
    name: impl Fn(&W) -> String + Sync,
    start: F,
    finish: G,
) -> Result<Vec<Share>>
where
    W: Send,
    F: Fn(&mut W, usize) -> Result<Vec<usize>> + Sync,
    G: Fn(&mut W) -> Result<Vec<usize>> + Sync,
{
    if let [worker] = workers {
        return alone(worker, count, start, finish)
            .map(|share| vec![share])
            .map_err(|e| named(e, &name(worker)));
    }
    if workers.is_empty() {
        return Err(Error::InvalidInput("no worker to compute on".into()));
    }
    let queue = Mutex::new(Queue {
        next: 0,
        retry: Vec::new(),
        in_flight: 0,
        alive: workers.len(),
        failures: Vec::new(),
        fatal: None,
    });
    let changed = Condvar::new();
    let lock = || {
        queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    // The next block; `None` when there is none to take now. A worker
    // with blocks open (`!wait`) takes one only while more are left than
    // there are workers: each of the last goes to a worker that has
    // finished, so none waits at the end while another still has two
    // blocks to go. A worker without (`wait`) waits for a block that
    // another may still hand back.
    let take = |wait: bool| -> Option<usize> {
        let mut state = lock();
        loop {
            if state.fatal.is_some() {
                return None;
            }
            if !wait && count - state.next + state.retry.len() <= state.alive {
                return None;
            }
            let block = state.retry.pop().or_else(|| {
                (state.next < count).then(|| {
                    state.next += 1;
                    state.next - 1
                })
            });
            if let Some(block) = block {
                state.in_flight += 1;
                return Some(block);
            }
            if !wait || state.in_flight == 0 {
                return None;
            }
            // A block in flight may still come back from a failing worker.
            state = changed
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    };
    let work = |worker: &mut W| -> Share {
        let mut share = Share::default();
        // Blocks started and not yet returned.
        let mut open: Vec<usize> = Vec::new();
        loop {
            // With blocks open, finish them before waiting on the others'.
            let next = take(open.is_empty());
            let began = Instant::now();
            let result = match next {
                Some(block) => {
                    open.push(block);
                    start(worker, block)
                }
                None if open.is_empty() => return share,
                None => finish(worker),
            };
            share.time += began.elapsed();
            let goes_on = lock().settle(result, next.is_none(), &mut open, &mut share, || {
                name(worker)
            });
            changed.notify_all();
            if !goes_on {
                return share;
            }
        }
    };
    let shares: Vec<Share> = on_threads(workers, work);
    let state = queue.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(error) = state.fatal {
        return Err(error);
    }
    debug_assert_eq!(shares.iter().map(|s| s.blocks.len()).sum::<usize>(), count);
    Ok(shares)
}

/// [`spread_pipelined`] on one worker, on the calling thread: every block
/// in order.
fn alone<W, F, G>(worker: &mut W, count: usize, start: F, finish: G) -> Result<Share>
where
    F: Fn(&mut W, usize) -> Result<Vec<usize>>,
    G: Fn(&mut W) -> Result<Vec<usize>>,
{
    let began = Instant::now();
    let mut share = Share::default();
    for block in 0..count {
        share.blocks.extend(start(worker, block)?);
    }
    share.blocks.extend(finish(worker)?);
    share.time = began.elapsed();
    debug_assert_eq!(share.blocks.len(), count);
    Ok(share)
}

impl Queue {
    /// Records what a worker's start (or, `finished`, its finish) gave:
    /// the blocks it completed into its `share`, out of its `open` ones;
    /// or its error, its open blocks back to the queue (a device error
    /// while others are alive) or the call's end. Returns whether the
    /// worker goes on.
    fn settle(
        &mut self,
        result: Result<Vec<usize>>,
        finished: bool,
        open: &mut Vec<usize>,
        share: &mut Share,
        name: impl FnOnce() -> String,
    ) -> bool {
        match result {
            Ok(done) => {
                for block in done {
                    let at = open.iter().position(|&b| b == block);
                    open.swap_remove(at.expect("a worker returns only blocks it started"));
                    self.in_flight -= 1;
                    share.blocks.push(block);
                }
                if finished {
                    debug_assert!(open.is_empty(), "finish returns every open block");
                    self.in_flight -= open.len();
                    self.retry.append(open);
                }
                true
            }
            Err(error) => {
                self.in_flight -= open.len();
                if error.is_gpu_failure() && self.alive > 1 {
                    self.alive -= 1;
                    self.retry.append(open);
                    self.failures.push(named(error, &name()).to_string());
                } else {
                    let mut error = named(error, &name());
                    if let Some(last) = error.gpu_failure_text() {
                        if !self.failures.is_empty() {
                            *last = format!(
                                "{last}; the other GPUs failed before: {}",
                                self.failures.join("; ")
                            );
                        }
                    }
                    self.fatal.get_or_insert(error);
                }
                false
            }
        }
    }
}

/// Runs `run(worker)` on every worker at once, a thread each (one on the
/// calling thread); the first error in the workers' order, named, if any.
pub(crate) fn each<W, R, F>(
    workers: &mut [W],
    name: impl Fn(&W) -> String + Sync,
    run: F,
) -> Result<Vec<R>>
where
    W: Send,
    R: Send,
    F: Fn(&mut W) -> Result<R> + Sync,
{
    let named_run = |worker: &mut W| run(worker).map_err(|e| named(e, &name(worker)));
    if let [worker] = workers {
        return Ok(vec![named_run(worker)?]);
    }
    on_threads(workers, named_run).into_iter().collect()
}

/// `run(worker)` for every worker at once, a scoped thread each, the
/// results in the workers' order; a worker's panic is the caller's.
fn on_threads<W: Send, R: Send>(workers: &mut [W], run: impl Fn(&mut W) -> R + Sync) -> Vec<R> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = workers
            .iter_mut()
            .map(|worker| scope.spawn(|| run(worker)))
            .collect();
        threads
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
            .collect()
    })
}

/// Contiguous slices of `count` series, one per budget in turn, in
/// proportion to the budgets, each within its budget (`bytes(range)`: what
/// a slice takes); a budget may get an empty slice. `None` if the set does
/// not fit them all.
pub(crate) fn shards(
    count: usize,
    budgets: &[usize],
    bytes: impl Fn(Range<usize>) -> usize,
) -> Option<Vec<Range<usize>>> {
    // Proportions of the series' bytes, without what any slice takes.
    let empty = bytes(0..0);
    let total = (bytes(0..count) - empty) as f64;
    let sum: f64 = budgets.iter().map(|&b| b as f64).sum();
    let mut result = Vec::with_capacity(budgets.len());
    let (mut start, mut share) = (0, 0.0);
    for (k, &budget) in budgets.iter().enumerate() {
        share += budget as f64;
        let last = k + 1 == budgets.len();
        let mut end = start;
        while end < count {
            let fits = bytes(start..end + 1) <= budget;
            let due = last || ((bytes(0..end + 1) - empty) as f64) <= total * share / sum;
            if !fits || !due {
                break;
            }
            end += 1;
        }
        result.push(start..end);
        start = end;
    }
    (start == count).then_some(result)
}

#[cfg(test)]
mod tests;
