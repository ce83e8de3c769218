//! The anti-diagonal variants (`diagonal`, `diagonal-launches`): one pair
//! at a time, a thread per cell of an anti-diagonal, three rolling
//! anti-diagonals in device memory (linear in the lengths); see
//! `kernels-gpu/src/drivers/antidiagonal.rs` and docs/algorithms.md.
//!
//! - `diagonal`: one persistent kernel per pair that walks every
//!   anti-diagonal, with a grid-wide barrier between two. The grid is no
//!   larger than what is resident at once (occupancy API times SMs) and is
//!   launched cooperatively, which guarantees that (or fails); a block's
//!   threads loop over the cells of an anti-diagonal longer than the grid.
//! - `diagonal-launches`: one launch per anti-diagonal, `n + m + 1` per
//!   pair, each sized to its anti-diagonal (as cuTWED does).
//!
//! A matrix is computed pair after pair: the variants are for long pairs.

use crate::error::DriverCall;
use crate::gpu::runtime::context::{poison, Gpu, KernelParams};
use crate::gpu::runtime::wait::{check_fault_word, wait_stream};
use crate::gpu::transfer::call_uploads::{upload_ranges, AsyncCopies};
use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaFunction, DevicePtr, LaunchConfig};
use ndarray::Array2;
use timewarp_kernels::drivers::antidiagonal::Diagonals;
use timewarp_kernels::drivers::antidiagonal_rows;
use timewarp_kernels::launch::long_pair::DiagonalLaunch;
use timewarp_kernels::{Driver, KernelId};

/// Threads per block of the anti-diagonal kernels.
const DIAGONAL_THREADS_PER_BLOCK: u32 = 256;

/// How the anti-diagonals of one pair are launched.
enum Launches {
    /// One cooperative launch of at most `blocks` blocks.
    Persistent { blocks: usize },
    /// One launch per anti-diagonal.
    PerDiagonal,
}

/// Every pair of `a` and `b` (or the upper triangle of `a`) with the
/// anti-diagonal kernels, persistent or one launch per anti-diagonal,
/// one pair after the other.
pub(crate) fn diagonal_pairs<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    persistent: bool,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    budget: usize,
) -> Result<Array2<T>> {
    let triangle = b.is_none();
    let b = b.unwrap_or(a);
    let bytes = diagonal_bytes(a, b);
    if bytes > budget {
        return Err(Error::gpu_memory(format!(
            "pairs of up to {} x {} samples need {bytes} bytes of device memory, over the {budget} available",
            a.max_len(),
            b.max_len()
        )));
    }
    let driver = if persistent {
        Driver::Diagonal
    } else {
        Driver::DiagonalStep
    };
    let id = KernelId::new(P::MEASURE, driver, false, T::PRECISION);
    let function = gpu.function(id)?;
    let launches = if persistent {
        Launches::Persistent {
            blocks: resident_blocks(gpu, &function)?,
        }
    } else {
        Launches::PerDiagonal
    };
    let stream = &gpu.stream;
    // Rows of the pair's matrix index the anti-diagonals: n + 1 values.
    let len = a.max_len() + 1;
    let diagonal_memory = stream
        .alloc_zeros::<T>(3 * len)
        .call("allocating device memory")?;
    // The barrier's count, generation and fault word.
    let barrier_memory = stream
        .alloc_zeros::<u32>(3)
        .call("allocating device memory")?;
    let mut out = stream
        .alloc_zeros::<T>(a.len() * b.len())
        .call("allocating device memory")?;
    let out_ptr = poison(stream, &mut out)? as *mut T;
    let diagonals = Diagonals {
        base: diagonal_memory.device_ptr(stream).0 as *mut T,
        len: len as u64,
    };
    let barrier = barrier_memory.device_ptr(stream).0 as *mut u32;
    for i in 0..a.len() {
        let a_upload = upload_ranges(gpu, &[a], i..i + 1, AsyncCopies::Waited)?;
        let a_ref = a_upload.batch(0, a).view(0..1);
        for j in if triangle { i } else { 0 }..b.len() {
            let b_upload = upload_ranges(gpu, &[b], j..j + 1, AsyncCopies::Waited)?;
            let launch = DiagonalLaunch {
                a: a_ref,
                b: b_upload.batch(0, b).view(0..1),
                params,
                diagonals,
                barrier,
                // SAFETY (of the kernel's write): within the a x b output.
                out: out_ptr.wrapping_add(i * b.len() + j),
                diagonal: 0,
            };
            let (n, m) = (a.series_len(i), b.series_len(j));
            // SAFETY: the series are uploaded, the anti-diagonals hold
            // 3 x (n + 1) values or more, the barrier's count and fault
            // word are zero before the first launch and after every
            // complete barrier (a fault ends the call); launches on one
            // stream run in order.
            unsafe { diagonal_pair(gpu, &function, &launches, launch, n, m) }?;
        }
    }
    let kernel = id.to_string();
    wait_stream(stream, &kernel)?;
    check_fault_word(stream, &barrier_memory.slice(2..3), &kernel)?;
    let values = stream.clone_dtoh(&out).call("copying to the host")?;
    let mut matrix = Array2::from_shape_vec((a.len(), b.len()), values).expect("output shape");
    if triangle {
        for i in 0..a.len() {
            for j in 0..i {
                matrix[[i, j]] = matrix[[j, i]];
            }
        }
    }
    Ok(matrix)
}

/// Launches one pair of `n x m` samples.
///
/// # Safety
/// `launch` is valid for its pair (see [`DiagonalLaunch`]).
unsafe fn diagonal_pair<T: Float, P: Copy>(
    gpu: &Gpu,
    function: &CudaFunction,
    launches: &Launches,
    launch: DiagonalLaunch<T, P>,
    n: usize,
    m: usize,
) -> Result<()> {
    let threads = DIAGONAL_THREADS_PER_BLOCK as usize;
    let config = |blocks: usize| LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (DIAGONAL_THREADS_PER_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    match *launches {
        Launches::Persistent { blocks } => {
            // The longest anti-diagonal has min(n, m) + 1 cells.
            let needed = (n.min(m) + 1).div_ceil(threads);
            gpu.launch(
                &gpu.stream,
                function,
                config(needed.min(blocks)),
                true,
                launch,
            )
        }
        Launches::PerDiagonal => {
            for k in 0..=n + m {
                let (first, last) = antidiagonal_rows(k, n, m);
                let blocks = (last - first + 1).div_ceil(threads);
                let launch = DiagonalLaunch {
                    diagonal: k as u64,
                    ..launch
                };
                gpu.launch(&gpu.stream, function, config(blocks), false, launch)?;
            }
            Ok(())
        }
    }
}

/// Blocks of `function` that the whole GPU holds at once: the occupancy
/// API's blocks per multiprocessor times the multiprocessors. A grid
/// barrier needs every block resident; the cooperative launch checks it.
fn resident_blocks(gpu: &Gpu, function: &CudaFunction) -> Result<usize> {
    let attribute = |a| gpu.attribute(a);
    if attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? == 0 {
        return Err(Error::GpuFailure(
            "the diagonal variant needs cooperative launches, which this GPU does not \
             support; use diagonal-launches"
                .into(),
        ));
    }
    let processors = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let per_processor = function
        .occupancy_max_active_blocks_per_multiprocessor(DIAGONAL_THREADS_PER_BLOCK, 0, None)
        .call("querying the occupancy of a kernel")?;
    match per_processor as usize * processors {
        0 => Err(Error::GpuFailure(
            "the diagonal kernel fits no block on this GPU".into(),
        )),
        blocks => Ok(blocks),
    }
}

/// Device memory of the anti-diagonal variants for a matrix of `a` against
/// `b`: its longest series of each (values, timestamps, offsets), the three
/// anti-diagonals, the barrier and the output.
fn diagonal_bytes<T: Float>(a: &SeriesSet<T>, b: &SeriesSet<T>) -> usize {
    let element = std::mem::size_of::<T>();
    let series = |s: &SeriesSet<T>| {
        let times = if s.has_timestamps() { 1 } else { 0 };
        s.max_len() * (s.dims() + times) * element + 2 * std::mem::size_of::<u64>()
    };
    let diagonals = 3 * (a.max_len() + 1) * element;
    series(a) + series(b) + diagonals + 2 * 4 + a.len() * b.len() * element
}
