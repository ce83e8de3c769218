//! A pair kernel (naive, warp, local or shared) as the distance matrices
//! choose it from the whole batches' shapes ([`pair_kernel`]), and its
//! launches over pairs already on the device ([`launch_pairs`]): the
//! matrices' tiles and the k-NN's gathered pairs run the same kernel, so
//! a pair's value is the same bits in both.

use crate::gpu::plan::select::{local_kernel, shared_threads, warp_kernel};
use crate::gpu::runtime::context::{Gpu, KernelParams, DEFAULT_SHARED_BYTES};
use crate::{Error, Float, Result, Variant};
use cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig};
use std::mem::size_of;
use timewarp_kernels::launch::pairs::PairsLaunch;
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Driver, KernelId, SetRef};

/// A loaded pair kernel (naive, warp, local or shared) and what its
/// launches need.
pub(crate) struct PairKernel {
    pub function: CudaFunction,
    /// 1 (naive, local, shared) or the lanes of a warp or sub-warp.
    pub threads_per_pair: u32,
    /// `PairsLaunch::row_len`.
    pub row_len: usize,
    /// Workspace values per pair; 0 for none.
    pub workspace_per_pair: usize,
    /// Threads of a block.
    pub threads_per_block: u32,
    /// Dynamic shared memory of a block, in bytes.
    pub shared_bytes: u32,
}

/// Threads per block of the pair kernels but `shared` (4 warps).
const THREADS_PER_BLOCK: u32 = 128;

/// The kernel of `variant` (naive, warp, local or shared) for `pairs`
/// pairs of series up to `a_len` and `b_len` samples of `dims` dimensions,
/// in a band of up to `band_width` diagonals if any, loaded, and how to
/// launch it.
pub(crate) fn pair_kernel<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    (a_len, b_len): (usize, usize),
    dims: usize,
    band_width: Option<usize>,
    pairs: usize,
) -> Result<PairKernel> {
    let (measure, precision) = (P::MEASURE, T::PRECISION);
    let row_len = a_len.max(b_len) + 1;
    let kernel = |id: KernelId, threads_per_pair: usize, workspace_per_pair: usize| {
        Ok(PairKernel {
            function: gpu.function(id)?,
            threads_per_pair: threads_per_pair as u32,
            row_len,
            workspace_per_pair,
            threads_per_block: THREADS_PER_BLOCK,
            shared_bytes: 0,
        })
    };
    match variant {
        Variant::Naive => {
            let id = KernelId::new(measure, Driver::Naive, false, precision);
            kernel(id, 1, 2 * row_len)
        }
        Variant::Local => kernel(local_kernel(measure, precision, b_len)?, 1, 0),
        Variant::Shared => shared_kernel::<T>(
            gpu,
            KernelId::new(measure, Driver::Shared, false, precision),
            row_len,
        ),
        Variant::Warp => {
            let occupancy = (pairs, gpu.schedulers()?);
            let lengths = (a_len, b_len);
            let warp = warp_kernel(measure, precision, lengths, dims, band_width, occupancy);
            kernel(warp.id, warp.lanes, warp.workspace_per_pair)
        }
        other => Err(Error::InvalidInput(format!(
            "GPU variant {other} does not run through the pair pipeline"
        ))),
    }
}

/// The `shared` kernel `id` with rows of `row_len` values: a block of
/// threads whose rows (`threads * 2 * row_len` values) fit its shared
/// memory, opting in to more than the default when even 32 threads' rows
/// need it; an error when one thread's rows exceed what a block may have.
fn shared_kernel<T: Float>(gpu: &Gpu, id: KernelId, row_len: usize) -> Result<PairKernel> {
    let bytes_per_thread = 2 * row_len * size_of::<T>();
    let opt_in = gpu.max_shared_bytes()?;
    let (threads, _) =
        shared_threads(bytes_per_thread, DEFAULT_SHARED_BYTES, opt_in).ok_or_else(|| {
            Error::InvalidInput(format!(
                "the shared GPU variant keeps two rows of {row_len} values per thread in \
                 shared memory, {bytes_per_thread} bytes, over the {opt_in} a block of this \
                 GPU may have; use the warp, naive or tiled variant"
            ))
        })?;
    let shared_bytes = threads as usize * bytes_per_thread;
    let (function, _) = gpu.function_with_shared(id, shared_bytes)?;
    Ok(PairKernel {
        function,
        threads_per_pair: 1,
        row_len,
        workspace_per_pair: 0,
        threads_per_block: threads,
        shared_bytes: shared_bytes as u32,
    })
}

/// Pairs `0 .. pairs` of `a` and `b` as `numbering` numbers them
/// (`Numbering::Paired`: `a_k` against `b_k`, into `out[k]`), with `kernel`
/// on `stream`, in launches of at most the `workspace.1` pairs the
/// workspace at `workspace.0` holds (any number when the kernel needs
/// none).
///
/// # Safety
/// `a` and `b` view live device memory of the shapes `kernel` was chosen
/// for (none longer); `out` holds the launch's values; the workspace holds
/// `workspace.1` pairs of `kernel.workspace_per_pair` values, or the kernel
/// needs none.
pub(crate) unsafe fn launch_pairs<T: Float, P: Copy>(
    gpu: &Gpu,
    stream: &CudaStream,
    kernel: &PairKernel,
    params: P,
    (a, b, numbering, pairs): (SetRef<T>, SetRef<T>, Numbering, u64),
    out: sys::CUdeviceptr,
    workspace: (sys::CUdeviceptr, u64),
) -> Result<()> {
    let chunk = match kernel.workspace_per_pair {
        0 => pairs,
        _ => pairs.min(workspace.1),
    };
    let pairs_per_block = u64::from(kernel.threads_per_block / kernel.threads_per_pair);
    let mut first_pair = 0;
    while first_pair < pairs {
        let pair_count = chunk.min(pairs - first_pair);
        let launch = PairsLaunch {
            a,
            b,
            params,
            out: out as *mut T,
            workspace: workspace.0 as *mut T,
            row_len: kernel.row_len as u64,
            first_pair,
            pair_count,
            numbering,
        };
        let blocks = u32::try_from(pair_count.div_ceil(pairs_per_block))
            .map_err(|_| Error::GpuFailure(format!("a launch of {pair_count} pairs")))?;
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (kernel.threads_per_block, 1, 1),
            shared_mem_bytes: kernel.shared_bytes,
        };
        // SAFETY: the caller's promises: live operands, room for the
        // outputs and the workspace, the shared memory the kernel was
        // sized for.
        unsafe { gpu.launch(stream, &kernel.function, config, false, launch) }?;
        first_pair += pair_count;
    }
    Ok(())
}
