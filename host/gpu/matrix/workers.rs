//! A distance matrix's blocks on one worker per GPU ([`Worker`]), each
//! with its own pipeline (streams, pinned buffers, device buffers), handed
//! out from one queue ([`spread`]), results into one matrix. One GPU is the
//! same code with one worker, on the calling thread; a worker whose block
//! fails with a device error stops, and its block is computed again by the
//! others (`runtime::several_gpus`).

use super::tile_pipeline::{Operand, PairKernel, Pipeline};
use crate::gpu::plan::matrix_tiles::{Plan, Sizes, Tile};
use crate::gpu::plan::spread::spread_pipelined;
use crate::gpu::runtime::context::Gpu;
use crate::gpu::runtime::several_gpus::{armed_faults, enter};
use crate::gpu::transfer::matrix_output::Output;
use crate::{Float, Result, SeriesSet};
use std::time::Instant;

/// One GPU's share of a computation: its operand for the plan's other
/// side, and the kernel and pipeline it makes on its first block.
pub(crate) struct Worker<'a, T> {
    pub gpu: &'static Gpu,
    operand: Operand<'a, T>,
    kernel: Option<PairKernel>,
    pipeline: Option<Pipeline<'static, T>>,
    /// Blocks to compute before the injected fault, if one is armed.
    fault_after: Option<usize>,
    done: usize,
}

impl<'a, T: Float> Worker<'a, T> {
    /// A worker per GPU, each reading `operand(k)` for GPU `k` of `gpus`;
    /// takes the fault [`inject_gpu_fault`] armed, if any.
    pub(crate) fn each(
        gpus: &[&'static Gpu],
        operand: impl Fn(usize) -> Operand<'a, T>,
    ) -> Vec<Worker<'a, T>> {
        let faults = armed_faults(gpus);
        gpus.iter()
            .zip(faults)
            .enumerate()
            .map(|(k, (&gpu, fault_after))| Worker {
                gpu,
                operand: operand(k),
                kernel: None,
                pipeline: None,
                fault_after,
                done: 0,
            })
            .collect()
    }

    /// Before each block: the GPU's context on this thread, and the
    /// injected fault when its time has come.
    fn enter(&mut self) -> Result<()> {
        enter(self.gpu, &mut self.fault_after, self.done)
    }
}

/// Runs the uploads of `plan` (its blocks) on `workers`, each through its
/// own pipeline of `sizes` with `kernel` loaded on its GPU, the `fixed`
/// side uploaded a block at a time (once for consecutive blocks of the
/// same upload), results into `out`; counts each GPU's pairs, time and the
/// call's time in [`Gpu::work`]. The blocks are handed out in the plan's
/// order (largest first when it is spread, `plan::blocks`); a GPU starts
/// its next block while its last one's results come back, and a block
/// counts as done once they are in `out`.
pub(crate) fn run_plan<T: Float, P: Copy + Send + Sync>(
    workers: &mut [Worker<'_, T>],
    (plan, sizes): (&Plan, Sizes),
    fixed: &SeriesSet<T>,
    params: P,
    kernel: impl Fn(&Gpu) -> Result<PairKernel> + Sync,
    out: &Output<T>,
) -> Result<()> {
    let start = Instant::now();
    let result = spread_pipelined(
        workers,
        plan.uploads.len(),
        |worker| worker.gpu.name(),
        |worker, block| {
            worker.enter()?;
            let gpu = worker.gpu;
            if worker.kernel.is_none() {
                worker.kernel = Some(kernel(gpu)?);
            }
            if worker.pipeline.is_none() {
                worker.pipeline = Some(Pipeline::new(gpu, sizes)?);
            }
            let (Some(kernel), Some(pipeline)) = (&worker.kernel, &mut worker.pipeline) else {
                unreachable!("both set above")
            };
            let upload = (block, plan.fixed, &plan.uploads[block]);
            let done =
                pipeline.start_block((kernel, params), upload, fixed, &worker.operand, out)?;
            worker.done += 1;
            Ok(done)
        },
        |worker| match &mut worker.pipeline {
            Some(pipeline) => pipeline.finish(out),
            None => Ok(Vec::new()),
        },
    );
    let call = start.elapsed();
    // The pipelines wait for their streams as they go.
    for worker in workers.iter_mut() {
        worker.pipeline = None;
    }
    for (worker, share) in workers.iter().zip(result?) {
        let tiles = share.blocks.iter().flat_map(|&b| &plan.uploads[b].tiles);
        let pairs = tiles.map(Tile::pairs).sum();
        worker.gpu.add_work(pairs, share.time, call);
    }
    Ok(())
}
