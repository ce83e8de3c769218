//! One call's work on several GPUs: each GPU held for the call (in
//! ordinal order), its memory budget, and the blocks of a computation
//! handed out from one queue ([`spread_blocks`]: the pairs of a paired
//! computation, the stencil kernels' tiles); the pair kernels' workers
//! (`matrix::workers`) enter their blocks the same way.
//! The test hook's fault ([`inject_gpu_fault`]) is armed here.
//!
//! A worker whose block fails with a device error stops; its block is
//! computed again by the others (a whole block, so its results overwrite
//! whatever the failed attempt left), and the call fails, naming every GPU
//! that failed, only when none is left.

use super::context::{Busy, Gpu};
use crate::error::DriverCall;
use crate::gpu::plan::blocks::pair_blocks;
use crate::gpu::plan::spread::{named, spread};
use crate::{Error, Result};
use std::cell::Cell;
use std::ops::Range;
use std::time::Instant;

thread_local! {
    /// A fault armed by [`inject_gpu_fault`] for the next multi-GPU call
    /// of this thread: the GPU's ordinal and the blocks it computes first.
    static FAULT: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// Test hook: the next computation this thread starts that spreads blocks
/// over GPUs (a streamed or resident distance matrix with a pair kernel or
/// the stencil kernel, paired Soft-DTW values or gradients) makes GPU `ordinal` fail with a device error after it has computed
/// `after_blocks` blocks, as a GPU out of memory would. Per thread, so
/// other threads' computations are not affected; one call only.
#[doc(hidden)]
pub fn inject_gpu_fault(ordinal: usize, after_blocks: usize) {
    FAULT.with(|fault| fault.set(Some((ordinal, after_blocks))));
}

/// Every GPU of `gpus` held for one computation (in ordinal order, so two
/// calls never wait for each other crosswise), with its memory budget.
pub(crate) fn hold(
    gpus: &[&'static Gpu],
    memory_budget: Option<usize>,
) -> Result<(Vec<Busy<'static>>, Vec<usize>)> {
    let mut sorted = gpus.to_vec();
    sorted.sort_by_key(|gpu| gpu.info().ordinal);
    let mut held = Vec::with_capacity(gpus.len());
    for gpu in sorted {
        let entry = gpu
            .begin(memory_budget)
            .map_err(|e| named(e, &gpu.name()))?;
        held.push((gpu.info().ordinal, entry));
    }
    let budgets = gpus
        .iter()
        .map(|gpu| {
            let (_, (_, budget)) = held
                .iter()
                .find(|(ordinal, _)| *ordinal == gpu.info().ordinal)
                .expect("every GPU is held");
            *budget
        })
        .collect();
    Ok((
        held.into_iter().map(|(_, (busy, _))| busy).collect(),
        budgets,
    ))
}

/// The memory budget of each of `gpus` now (each held in turn).
pub(crate) fn budgets(gpus: &[&'static Gpu], memory_budget: Option<usize>) -> Result<Vec<usize>> {
    gpus.iter()
        .map(|gpu| {
            let (_one_at_a_time, budget) = gpu
                .begin(memory_budget)
                .map_err(|e| named(e, &gpu.name()))?;
            Ok(budget)
        })
        .collect()
}

/// For each of `gpus`, the blocks it computes before the fault that
/// [`inject_gpu_fault`] armed on this thread, if it is that GPU's; takes
/// the fault.
pub(crate) fn armed_faults(gpus: &[&'static Gpu]) -> Vec<Option<usize>> {
    let fault = FAULT.with(Cell::take);
    gpus.iter()
        .map(|gpu| {
            fault
                .filter(|&(ordinal, _)| ordinal == gpu.info().ordinal)
                .map(|(_, after)| after)
        })
        .collect()
}

/// Before a worker's block: the injected fault when its time has come
/// (after `done` blocks), else `gpu`'s context bound to this thread.
pub(crate) fn enter(gpu: &Gpu, fault_after: &mut Option<usize>, done: usize) -> Result<()> {
    if *fault_after == Some(done) {
        *fault_after = None;
        return Err(Error::GpuFailure("injected fault (test hook)".into()));
    }
    gpu.context
        .bind_to_thread()
        .call("binding the context to the thread")
}

/// A paired computation of `pairs` pairs on one GPU, with the test hook's
/// fault and the GPU named in an error, as [`spread_pair_blocks`] does on
/// several.
pub(crate) fn on_one_gpu<R>(
    gpu: &'static Gpu,
    compute: impl FnOnce(&'static Gpu) -> Result<R>,
) -> Result<R> {
    let mut fault_after = armed_faults(&[gpu])[0];
    enter(gpu, &mut fault_after, 0).map_err(|e| named(e, &gpu.name()))?;
    compute(gpu).map_err(|e| named(e, &gpu.name()))
}

/// Blocks `0..count` of a computation on every GPU of `gpus`, handed out
/// in that order from one queue ([`spread`]), `run(gpu, block)` computing
/// one where it lands (and putting its results where they go), with the
/// test hook's fault; each GPU's work recorded, `pairs(block)` a block.
/// Faults as [`spread`] handles them: a failed block goes to the others.
pub(crate) fn spread_blocks(
    gpus: &[&'static Gpu],
    count: usize,
    pairs: impl Fn(usize) -> u64,
    run: impl Fn(&'static Gpu, usize) -> Result<()> + Sync,
) -> Result<()> {
    let faults = armed_faults(gpus).into_iter();
    let mut workers: Vec<_> = gpus.iter().copied().zip(faults).map(|w| (w, 0)).collect();
    let start = Instant::now();
    let shares = spread(
        &mut workers,
        count,
        |((gpu, _), _)| gpu.name(),
        |((gpu, fault_after), done), block| {
            enter(gpu, fault_after, *done)?;
            run(gpu, block)?;
            *done += 1;
            Ok(())
        },
    )?;
    let call = start.elapsed();
    for (gpu, share) in gpus.iter().zip(shares) {
        let pairs = share.blocks.iter().map(|&b| pairs(b)).sum();
        gpu.add_work(pairs, share.time, call);
    }
    Ok(())
}

/// Warps a scheduler of a GPU holds at once (64 an SM from compute
/// capability 7.0 to 9.0, four schedulers an SM; fewer on some, for which
/// the count below is then high, and blocks larger).
const WARPS_A_SCHEDULER: usize = 16;
/// Waves of warps a block of pairs fills at least.
const FILL_WAVES: usize = 4;

/// Pairs a block of paired values spread over `gpus` holds at least:
/// [`FILL_WAVES`] waves of warps on the smallest of them at one warp a
/// pair (the value kernels take a warp or more a pair). Gradients, whose
/// pairs take far longer, go in the queue's smaller blocks: a GPU copies
/// one block's gradients back while the others compute.
pub(crate) fn least_pairs_a_block(gpus: &[&'static Gpu]) -> Result<usize> {
    let mut least = usize::MAX;
    for gpu in gpus {
        least = least.min(gpu.schedulers()? * WARPS_A_SCHEDULER * FILL_WAVES);
    }
    Ok(least)
}

/// A paired computation of `pairs` pairs on every GPU of `gpus`: the pairs
/// in contiguous blocks (pair `k` costing `cost(k)`, several blocks a GPU,
/// largest first, of at least `least_pairs` pairs: `plan::blocks`) handed
/// out from one queue, `compute` run
/// on each block where it lands and `place` putting its result into the
/// whole (no two blocks overlap, so the whole is the one GPU's); each
/// GPU's work recorded (`launches` launches a pair).
pub(crate) fn spread_pair_blocks<R>(
    gpus: &[&'static Gpu],
    (pairs, cost, least_pairs): (usize, impl Fn(usize) -> u64, usize),
    launches: usize,
    compute: impl Fn(&'static Gpu, Range<usize>) -> Result<R> + Sync,
    place: impl Fn(Range<usize>, R) + Sync,
) -> Result<()> {
    let blocks = pair_blocks(pairs, gpus.len(), cost, least_pairs);
    let pairs_of = |block: usize| (blocks[block].len() * launches) as u64;
    spread_blocks(gpus, blocks.len(), pairs_of, |gpu, block| {
        let range = blocks[block].clone();
        place(range.clone(), compute(gpu, range)?);
        Ok(())
    })
}
