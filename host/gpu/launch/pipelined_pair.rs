//! One long pair over the whole GPU with the pipelined tiled kernel
//! (column panels in one launch, each warp right behind the panel to its
//! left), the pair already on the device: its value, or the last row of
//! its matrix. Device memory is linear in the lengths. The tiled matrix
//! variants, the paired values of long pairs and the alignment paths'
//! last columns all launch it.

use crate::error::DriverCall;
use crate::gpu::plan::select::{forced_name, pipelined_workspace, tiled_stripe};
use crate::gpu::runtime::context::{poison, Gpu, KernelParams};
use crate::gpu::runtime::wait::{check_fault_word, wait_stream};
use crate::{Error, Float, Result};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig};
use std::mem::size_of;
use std::ptr::null_mut;
use std::sync::Arc;
use timewarp_kernels::catalogue::drivers;
use timewarp_kernels::drivers::columns::long_pair::{PanelHandoff, NO_STALL};
use timewarp_kernels::hw::{Tagged, LANES};
use timewarp_kernels::launch::long_pair::PanelLaunch;
use timewarp_kernels::{Driver, KernelId, SetRef};

/// [`Gpu::pair_pipelined`] of the single series of each of `pair`,
/// already on the device, of lengths `n` and `m`; `budget` bounds the
/// workspace it allocates. Returns once the value is back (the series
/// may be freed then).
pub(crate) fn pair_pipelined_on<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    pair: (SetRef<T>, SetRef<T>),
    (n, m): (usize, usize),
    budget: usize,
) -> Result<T> {
    check_fits(n, m, pipelined_bytes::<T>(n), budget)?;
    let run = enqueue_pipelined(gpu, &gpu.stream, params, pair, (n, m), null_mut())?;
    run.value(&gpu.stream)
}

/// Device memory the pipelined kernel takes for a pair of `n` rows besides
/// the series.
pub(crate) fn pipelined_bytes<T: Float>(n: usize) -> usize {
    pipelined_workspace(n) + size_of::<T>()
}

/// A pipelined launch queued on a stream, with the workspace it uses until
/// it is done.
pub(crate) struct PipelinedRun<T> {
    _borders: CudaSlice<u64>,
    /// The panel counter, then the fault word of the warps' waits.
    flags: CudaSlice<u32>,
    out: CudaSlice<T>,
    kernel: KernelId,
}

impl<T: Float> PipelinedRun<T> {
    /// The pair's value, once the launch is done on `stream` (its own); an
    /// error if a warp's wait for another gave up.
    pub(crate) fn value(self, stream: &Arc<CudaStream>) -> Result<T> {
        let kernel = self.kernel.to_string();
        wait_stream(stream, &kernel)?;
        check_fault_word(stream, &self.flags.slice(1..2), &kernel)?;
        Ok(stream.clone_dtoh(&self.out).call("copying to the host")?[0])
    }
}

thread_local! {
    /// The panel that the next pipelined launch of this thread leaves
    /// unpublished ([`inject_stalled_panel`]).
    static STALLED_PANEL: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// A test hook: the next pipelined long-pair launch of this thread (the
/// `tiled` variant) has panel `panel` never publish its border, as a
/// broken warp would not, so that the warp after it waits until its bound
/// and the call fails with [`crate::Error::DeviceWait`]. For the tests of
/// that bound; `None` clears it.
#[doc(hidden)]
pub fn inject_stalled_panel(panel: Option<u32>) {
    STALLED_PANEL.with(|stalled| stalled.set(panel));
}

/// The stripe of the tiled kernels of `driver` for `m` columns
/// ([`tiled_stripe`]), the warps an SM holds of each (a warp a block) from
/// the occupancy API.
pub(crate) fn stripe_for<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    m: usize,
    univariate: bool,
    driver: impl Fn(u32) -> Driver,
) -> Result<usize> {
    // A stripe forced by name, where the catalogue has it.
    let forced = forced_name().and_then(|name| {
        drivers(P::MEASURE).find_map(|listed| {
            (1..=LANES as u32)
                .find(|&stripe| listed == driver(stripe) && listed.to_string() == name)
        })
    });
    if let Some(stripe) = forced {
        return Ok(stripe as usize);
    }
    tiled_stripe(P::MEASURE, m, |stripe| {
        let id = KernelId::new(P::MEASURE, driver(stripe as u32), univariate, T::PRECISION);
        let blocks = gpu
            .function_to_query(id)?
            .occupancy_max_active_blocks_per_multiprocessor(LANES as u32, 0, None)
            .call("querying the occupancy of a kernel")?;
        Ok(blocks as usize)
    })
}

/// Queues the pipelined kernel on `stream` for the single series of `a`
/// (`n` samples) against that of `b` (`m`), writing the matrix's last row
/// to `last_row` (device memory of `m + 1` values, index `j` being cell
/// `(n, j)`) unless it is null. The caller checked that the workspace
/// ([`pipelined_bytes`]) fits.
pub(crate) fn enqueue_pipelined<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    params: P,
    (a, b): (SetRef<T>, SetRef<T>),
    (n, m): (usize, usize),
    last_row: *mut T,
) -> Result<PipelinedRun<T>> {
    debug_assert!(a.count == 1 && b.count == 1);
    let tiled = |stripe| Driver::Tiled { stripe };
    let stripe = stripe_for::<T, P>(gpu, m, a.dims == 1, tiled)?;
    let panels = m.div_ceil(LANES * stripe);
    let driver = Driver::Tiled {
        stripe: stripe as u32,
    };
    let id = KernelId::new(P::MEASURE, driver, a.dims == 1, T::PRECISION);
    let function = gpu.function(id)?;
    // Two border columns of n + 1 tagged values, two words each.
    let words = 2 * (n + 1) * size_of::<Tagged>() / size_of::<u64>();
    let borders = stream
        .alloc_zeros::<u64>(words)
        .call("allocating device memory")?;
    let flags = stream
        .alloc_zeros::<u32>(2)
        .call("allocating device memory")?;
    let mut out = stream
        .alloc_zeros::<T>(1)
        .call("allocating device memory")?;
    let out_ptr = poison(stream, &mut out)?;
    let launch = PanelLaunch {
        a,
        b,
        params,
        handoff: PanelHandoff {
            borders: borders.device_ptr(stream).0 as *mut Tagged,
            next_panel: flags.device_ptr(stream).0 as *mut u32,
            last_row,
            fault: (flags.device_ptr(stream).0 + size_of::<u32>() as u64) as *mut u32,
            stall_panel: STALLED_PANEL
                .with(|stalled| stalled.take())
                .unwrap_or(NO_STALL),
        },
        out: out_ptr as *mut T,
    };
    // A warp a panel: the atomic panel counter hands the panels out in
    // the order the warps start, so none waits for a warp not running.
    // One warp a block, so that registers alone bound the warps an SM
    // holds (blocks of several warps round the registers up to whole
    // blocks).
    let config = LaunchConfig {
        grid_dim: (panels as u32, 1, 1),
        block_dim: (LANES as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the borders hold 2 (n + 1) values, the flags the zeroed
    // panel counter and fault word, `out` one value, `last_row` null or
    // m + 1 (the caller's); the caller's series are on the device.
    unsafe { gpu.launch(stream, &function, config, false, launch) }?;
    Ok(PipelinedRun {
        _borders: borders,
        flags,
        out,
        kernel: id,
    })
}

/// A pair that does not fit the budget is an error before anything is
/// allocated.
pub(crate) fn check_fits(n: usize, m: usize, bytes: usize, budget: usize) -> Result<()> {
    if bytes > budget {
        return Err(Error::gpu_memory(format!(
            "a pair of {n} x {m} samples needs {bytes} bytes of device memory, over the {budget} available"
        )));
    }
    Ok(())
}
