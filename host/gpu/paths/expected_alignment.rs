//! Soft-DTW's expected alignment of one pair on the GPU ([`pair_alignment`]):
//! the stencil driver's passes writing the derivative of the pair's value
//! with respect to every cell (`alignment` kernels).

use crate::error::DriverCall;
use crate::gpu::launch::stencil::{shared_bytes, stencil_launch};
use crate::gpu::plan::layout::image_bytes;
use crate::gpu::plan::select::block_threads;
use crate::gpu::runtime::context::{poison, Gpu, KernelParams};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::call_uploads::{upload_ranges, AsyncCopies, UPLOAD_SLACK};
use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::DevicePtr;
use ndarray::Array2;
use std::mem::size_of;
use timewarp_kernels::drivers::stencil::{ring_len, GRADIENT_RINGS};
use timewarp_kernels::launch::pairs::GradientBuffers;
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Differentiable, Driver, KernelId};

/// The derivative of the value of the pair `x` against `y` (one series
/// each, equal dims, checked by the caller) with respect to every cell,
/// `n x m`, 0 outside the window (Soft-DTW's expected alignment), and the
/// value: the `alignment` kernel, one block, the gradient's passes writing
/// each cell's derivative instead of the samples' gradient.
///
/// Device memory: both series, the stored cost matrix and the alignment
/// (`n * m` values each), and the rings when they do not fit shared
/// memory; an error, before anything is allocated, if that exceeds the
/// budget (`memory_budget`, or 3/4 of the free memory).
pub(crate) fn pair_alignment<T: Float, P: KernelParams<T> + Differentiable<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    memory_budget: Option<usize>,
) -> Result<(Array2<T>, T)> {
    let (_one_at_a_time, budget) = gpu.begin(memory_budget)?;
    let (n, m) = (x.series_len(0), y.series_len(0));
    let cells = n * m;
    let ring = ring_len(n, m);
    let ring_bytes = shared_bytes::<T>(GRADIENT_RINGS, ring);
    let global_rings = ring_bytes > gpu.max_shared_bytes()?;
    let needed = image_bytes(x, 0..1)
        + image_bytes(y, 0..1)
        + UPLOAD_SLACK
        + (2 * cells + 1) * size_of::<T>()
        + size_of::<u64>()
        + if global_rings { ring_bytes } else { 0 };
    if needed > budget {
        return Err(Error::gpu_memory(format!(
            "the expected alignment of a {n} x {m} pair needs {} MiB of device memory, over \
             the {} MiB available",
            needed.div_ceil(1 << 20),
            budget >> 20
        )));
    }
    let uploaded = upload_ranges(gpu, &[x, y], 0..1, AsyncCopies::Waited)?;
    let (a, b) = (uploaded.batch(0, x), uploaded.batch(1, y));
    let stream = &gpu.stream;
    let result = (|| {
        // Zeroed: the kernel writes the cells of the window only.
        let alignment = stream
            .alloc_zeros::<T>(cells)
            .call("allocating device memory")?;
        let ring_values = if global_rings {
            GRADIENT_RINGS * ring
        } else {
            0
        };
        // SAFETY: uninitialised, as in `gradient_into`: the forward pass
        // writes every cell of the store before the backward pass reads
        // it, and each anti-diagonal of the rings before the next reads it.
        let workspace =
            unsafe { stream.alloc::<T>(cells + ring_values) }.call("allocating device memory")?;
        let mut value = stream
            .alloc_zeros::<T>(1)
            .call("allocating device memory")?;
        let value_at = poison(stream, &mut value)?;
        let store_offsets = stream.clone_htod(&[0u64]).call("copying to the device")?;
        let store = workspace.device_ptr(stream).0;
        let id = KernelId::new(P::MEASURE, Driver::Alignment, false, T::PRECISION);
        let shared = if global_rings { 0 } else { ring_bytes };
        let (function, limit) = gpu.function_with_shared(id, shared)?;
        let threads = block_threads(ring, limit);
        let pair = (a.view(0..1), b.view(0..1));
        let mut launch = stencil_launch(pair, params, Numbering::Paired, 1, ring);
        launch.pairs.out = value_at as *mut T;
        launch.gradient = GradientBuffers {
            store: store as *mut T,
            store_offsets: store_offsets.device_ptr(stream).0 as *const u64,
            grad_a: std::ptr::null_mut(),
            grad_b: std::ptr::null_mut(),
            rings: if global_rings {
                (store + (cells * size_of::<T>()) as u64) as *mut T
            } else {
                std::ptr::null_mut()
            },
            alignment: alignment.device_ptr(stream).0 as *mut T,
            fault: std::ptr::null_mut(),
        };
        // SAFETY: the pair is on the device and outlives the launch (the
        // copies below wait for it); the store and the alignment hold its
        // n x m cells at offset 0, the alignment zeroed; `out` one value;
        // the six rings of `ring` values are after the store or in the
        // `shared` bytes the kernel was allowed.
        unsafe { gpu.launch_blocks(&function, (1, threads), shared, launch) }?;
        wait_stream(stream, "the Soft-DTW alignment kernel")?;
        let alignment = stream.clone_dtoh(&alignment).call("copying to the host")?;
        let value = stream.clone_dtoh(&value).call("copying to the host")?[0];
        let alignment = Array2::from_shape_vec((n, m), alignment).expect("n x m cells");
        Ok((alignment, value))
    })();
    // The pair's image is freed next: no kernel may still read it.
    gpu.settle(result.is_err());
    result
}
