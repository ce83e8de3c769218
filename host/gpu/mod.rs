//! The GPU runtime: finds a usable GPU without panicking, loads the embedded
//! PTX once per process, and runs the pairwise kernels over batches of any
//! size: streamed or resident (`database.rs`) for the naive and warp
//! kernels, one pair at a time for the tiled ones (`long_pair.rs`).

use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::{
    result as driver, sys, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use ndarray::Array2;
use std::sync::{Arc, Mutex, OnceLock};
use timewarp_kernels::warp::LANES;
use timewarp_kernels::{PairsLaunch, PipelineLaunch, SetRef, TileLaunch};

mod database;
mod long_pair;

pub use database::DeviceSeriesSet;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

/// The target the embedded PTX was built for, e.g. `"sm_70"`.
pub fn ptx_target() -> &'static str {
    embedded::PTX_TARGET
}

/// The oldest compute capability the embedded PTX runs on: `(7, 0)` for `sm_70`.
pub fn min_compute_capability() -> (i32, i32) {
    let number: i32 = ptx_target()
        .trim_start_matches("sm_")
        .parse()
        .expect("build.rs checks the sm_NN form");
    (number / 10, number % 10)
}
/// Threads per block of every kernel (4 warps).
const THREADS_PER_BLOCK: u32 = 128;

/// The GPU kernel variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// One thread per pair, two rolling rows in global memory.
    Naive,
    /// One warp per pair, each lane a stripe of columns in registers, rows
    /// passed between lanes by shuffles; series wider than a warp's stripes
    /// in column bands.
    Warp,
    /// One long pair at a time over the whole GPU in one launch: column
    /// bands, each a warp's, every warp running right behind the band to
    /// its left (readiness flags); memory linear in the lengths.
    Tiled,
    /// As `Tiled`, but square tiles, an anti-diagonal of tiles per launch.
    TiledLaunches,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant::Naive,
        Variant::Warp,
        Variant::Tiled,
        Variant::TiledLaunches,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Warp => "warp",
            Variant::Tiled => "tiled",
            Variant::TiledLaunches => "tiled-launches",
        }
    }

    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The variant for `pairs` pairs whose shorter series has at least
    /// `shortest` samples: the tiled kernel for a single long pair, which
    /// it spreads over the whole GPU, else the warp kernel.
    pub fn choose(pairs: usize, shortest: usize) -> Variant {
        if pairs <= TILED_MAX_PAIRS && shortest >= TILED_MIN_LENGTH {
            Variant::Tiled
        } else {
            Variant::Warp
        }
    }
}

/// At most this many pairs go to the tiled kernel by default: it computes
/// pairs one after the other, while the warp kernel runs them side by side.
const TILED_MAX_PAIRS: usize = 2;
/// Pairs shorter than this on one side fill too few tiles to gain from the
/// tiled kernel.
const TILED_MIN_LENGTH: usize = 2048;

/// Columns per lane that the warp kernels are instantiated with, for a
/// measure (kernel prefix) and precision, narrowest first
/// (`kernels-gpu/src/kernels.rs` instantiates exactly these).
pub fn warp_stripes(measure: &str, precision: &str) -> &'static [usize] {
    match (measure, precision) {
        ("dtw", "f32") => &[1, 4, 16, 32],
        ("twed", _) => &[1, 4, 8],
        _ => &[1, 4, 16],
    }
}

/// Columns per lane of the tiled kernels, narrowest first.
pub fn tiled_stripes(measure: &str, precision: &str) -> &'static [usize] {
    match (measure, precision) {
        ("twed", _) => &[4, 8],
        _ => &[4, 16],
    }
}

/// The narrowest warp stripe whose 32 lanes cover `columns` columns, or the
/// widest (the series then runs in column bands).
fn warp_stripe(measure: &str, precision: &str, columns: usize) -> usize {
    let stripes = warp_stripes(measure, precision);
    stripes
        .iter()
        .copied()
        .find(|&s| LANES * s >= columns)
        .unwrap_or(stripes[stripes.len() - 1])
}

/// Every entry point the host may launch, for checking that the embedded
/// PTX has them all.
pub fn kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for measure in ["dtw", "soft_dtw", "twed"] {
        for precision in ["f32", "f64"] {
            names.push(format!("{measure}_naive_{precision}"));
            for s in warp_stripes(measure, precision) {
                names.push(format!("{measure}_warp{s}_{precision}"));
            }
            for s in tiled_stripes(measure, precision) {
                names.push(format!("{measure}_tiled{s}_{precision}"));
                names.push(format!("{measure}_tiled_launches{s}_{precision}"));
            }
        }
    }
    names
}

/// The embedded PTX (empty when the build has no kernels).
pub fn ptx() -> &'static str {
    embedded::PTX
}

/// Why this build has no GPU kernels, if it has none.
pub fn kernels_build_error() -> Option<&'static str> {
    embedded::BUILD_ERROR
}

/// A GPU as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
}

impl GpuInfo {
    /// Whether timewarp's kernels can run on it, and if not, why.
    pub fn usable(&self) -> std::result::Result<(), String> {
        let needed = min_compute_capability();
        if self.compute_capability < needed {
            Err(format!(
                "compute capability {}.{} is below the {}.{} the kernels (PTX {}) need",
                self.compute_capability.0,
                self.compute_capability.1,
                needed.0,
                needed.1,
                ptx_target()
            ))
        } else {
            Ok(())
        }
    }
}

fn driver_error(what: &str) -> impl Fn(driver::DriverError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Every GPU the driver reports, or why none can be listed (no driver, a
/// driver that fails to initialise).
pub fn list_gpus() -> std::result::Result<Vec<GpuInfo>, String> {
    // SAFETY: only probes whether the driver library can be loaded; cudarc
    // panics on its first call without it, so nothing else runs before this.
    if !unsafe { sys::is_culib_present() } {
        return Err("no NVIDIA driver found (libcuda could not be loaded)".into());
    }
    driver::init().map_err(driver_error("the CUDA driver failed to initialise"))?;
    let count = driver::device::get_count().map_err(driver_error("counting devices"))?;
    (0..count)
        .map(|ordinal| {
            let device = driver::device::get(ordinal).map_err(driver_error("opening a device"))?;
            let attribute = |a| {
                // SAFETY: `device` is a valid handle from the driver.
                unsafe { driver::device::get_attribute(device, a) }
                    .map_err(driver_error("reading a device attribute"))
            };
            use sys::CUdevice_attribute::*;
            Ok(GpuInfo {
                ordinal: ordinal as usize,
                name: driver::device::get_name(device).map_err(driver_error("device name"))?,
                compute_capability: (
                    attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                    attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                ),
                // SAFETY: as above.
                total_memory: unsafe { driver::device::total_mem(device) }
                    .map_err(driver_error("device memory"))?,
            })
        })
        .collect()
}

/// An open GPU: its context, stream and loaded kernels.
pub struct Gpu {
    info: GpuInfo,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    /// One computation at a time: they share the streams and size their
    /// memory use from what is free.
    busy: Mutex<()>,
    /// The streams and pinned buffers of the naive and warp kernels' runs.
    pipelines: database::Pipelines,
}

static GPU: OnceLock<std::result::Result<Gpu, String>> = OnceLock::new();

impl Gpu {
    /// The process's GPU (device 0), opened on first use; an error says why
    /// there is none.
    pub fn get() -> Result<&'static Gpu> {
        GPU.get_or_init(|| Gpu::open(0))
            .as_ref()
            .map_err(|reason| Error::GpuUnavailable(reason.clone()))
    }

    fn open(ordinal: usize) -> std::result::Result<Gpu, String> {
        if let Some(reason) = kernels_build_error() {
            return Err(format!("this build has no GPU kernels: {reason}"));
        }
        let gpus = list_gpus()?;
        let info = gpus
            .into_iter()
            .nth(ordinal)
            .ok_or_else(|| "the driver reports no CUDA device".to_string())?;
        info.usable()?;
        let context = CudaContext::new(ordinal).map_err(driver_error("creating a context"))?;
        let module = context
            .load_module(Ptx::from_src(embedded::PTX))
            .map_err(driver_error("loading the PTX"))?;
        let stream = context.default_stream();
        Ok(Gpu {
            info,
            context,
            stream,
            module,
            busy: Mutex::new(()),
            pipelines: database::Pipelines::default(),
        })
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Every series of `a` against every series of `b` (or the upper
    /// triangle of `a` against itself) with the kernels of `measure` (the
    /// kernel prefix, e.g. `dtw`), variant `variant`, using at most
    /// `memory_budget` bytes of device memory (default: 3/4 of what is
    /// free), in as many tiles and launches as that takes.
    pub(crate) fn matrix<T: Float, P: Copy>(
        &self,
        measure: &str,
        variant: Variant,
        params: P,
        a: &SeriesSet<T>,
        b: Option<&SeriesSet<T>>,
        memory_budget: Option<usize>,
    ) -> Result<Array2<T>> {
        let _one_at_a_time = self
            .busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.context.bind_to_thread().map_err(gpu_error)?;
        let budget = database::memory_budget_or_free(memory_budget)?;
        if matches!(variant, Variant::Tiled | Variant::TiledLaunches) {
            return self.pairs_one_by_one(measure, variant, params, a, b, budget);
        }
        self.streamed(measure, variant, params, a, b, budget)
    }

    /// The naive or warp kernel for pairs of series up to `a_len` and
    /// `b_len` samples, and how to launch it.
    fn pair_kernel<T: Float>(
        &self,
        measure: &str,
        variant: Variant,
        a_len: usize,
        b_len: usize,
    ) -> Result<PairKernel> {
        let row_len = a_len.max(b_len) + 1;
        let (name, threads_per_pair, workspace_per_pair) = match variant {
            Variant::Naive => (format!("{measure}_naive_{}", T::NAME), 1, 2 * row_len),
            _ => {
                let stripe = warp_stripe(measure, T::NAME, b_len);
                let bands = b_len.div_ceil(LANES * stripe);
                let workspace = if bands > 1 { row_len } else { 0 };
                (
                    format!("{measure}_warp{stripe}_{}", T::NAME),
                    LANES,
                    workspace,
                )
            }
        };
        Ok(PairKernel {
            function: self.function(&name)?,
            threads_per_pair: threads_per_pair as u32,
            row_len,
            workspace_per_pair,
        })
    }

    fn function(&self, name: &str) -> Result<CudaFunction> {
        self.module
            .load_function(name)
            .map_err(|e| Error::Gpu(format!("kernel {name}: {e}")))
    }

    /// Launches `function` on `blocks` blocks of `threads` threads with
    /// `argument` as its one parameter.
    ///
    /// # Safety
    /// `argument` is the kernel's parameter type and its pointers are valid.
    unsafe fn launch<A: Copy>(
        &self,
        function: &CudaFunction,
        blocks: u32,
        threads: u32,
        argument: A,
    ) -> Result<()>
    where
        KernelArgument<A>: DeviceRepr,
    {
        self.launch_on(&self.stream, function, blocks, threads, argument)
    }

    /// [`Gpu::launch`] on `stream`.
    ///
    /// # Safety
    /// As for [`Gpu::launch`].
    unsafe fn launch_on<A: Copy>(
        &self,
        stream: &CudaStream,
        function: &CudaFunction,
        blocks: u32,
        threads: u32,
        argument: A,
    ) -> Result<()>
    where
        KernelArgument<A>: DeviceRepr,
    {
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let argument = KernelArgument(argument);
        stream
            .launch_builder(function)
            .arg(&argument)
            .launch(config)
            .map(|_| ())
            .map_err(gpu_error)
    }

    fn upload<T: Float>(&self, set: &SeriesSet<T>) -> Result<DeviceSet<T>> {
        let (values, offsets, times) = set.parts();
        let stream = &self.stream;
        Ok(DeviceSet {
            values: stream.clone_htod(values).map_err(gpu_error)?,
            offsets: stream.clone_htod(offsets).map_err(gpu_error)?,
            times: times
                .map(|t| stream.clone_htod(t))
                .transpose()
                .map_err(gpu_error)?,
            count: set.len(),
            dims: set.dims(),
        })
    }
}

/// Fill a fresh output with NaN (all bits set), so a pair the kernel failed
/// to write cannot pass for a result. Returns its device address.
fn poison<T: Float>(stream: &CudaStream, out: &mut CudaSlice<T>) -> Result<sys::CUdeviceptr> {
    let (pointer, _) = out.device_ptr(stream);
    // SAFETY: `pointer` addresses `out`, whose size in bytes is given.
    unsafe {
        driver::memset_d8_async(pointer, 0xff, out.num_bytes(), stream.cu_stream())
            .map_err(gpu_error)?
    };
    Ok(pointer)
}

fn gpu_error(error: driver::DriverError) -> Error {
    Error::Gpu(error.to_string())
}

/// The one kernel parameter, a `#[repr(C)]` struct shared with the device
/// crate, passed by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct KernelArgument<A>(A);

// SAFETY: `PairsLaunch` and `TileLaunch` are `#[repr(C)]`, `Copy`, and laid
// out identically by the host and the nvptx64 compiler (same definition,
// same field types, 64-bit pointers on both).
unsafe impl<T: Copy, P: Copy> DeviceRepr for KernelArgument<PairsLaunch<T, P>> {}
unsafe impl<T: Copy, P: Copy> DeviceRepr for KernelArgument<TileLaunch<T, P>> {}
unsafe impl<T: Copy, P: Copy> DeviceRepr for KernelArgument<PipelineLaunch<T, P>> {}

/// A loaded naive or warp kernel and what its launches need.
struct PairKernel {
    function: CudaFunction,
    /// 1 (naive) or a warp.
    threads_per_pair: u32,
    /// `PairsLaunch::row_len`.
    row_len: usize,
    /// Workspace values per pair; 0 for none.
    workspace_per_pair: usize,
}

/// A block of series in device memory.
struct DeviceSet<T> {
    values: CudaSlice<T>,
    offsets: CudaSlice<u64>,
    times: Option<CudaSlice<T>>,
    count: usize,
    dims: usize,
}

impl<T: Float> DeviceSet<T> {
    fn set_ref(&self, stream: &CudaStream) -> SetRef<T> {
        SetRef {
            values: self.values.device_ptr(stream).0 as *const T,
            offsets: self.offsets.device_ptr(stream).0 as *const u64,
            times: self
                .times
                .as_ref()
                .map_or(std::ptr::null(), |t| t.device_ptr(stream).0 as *const T),
            count: self.count as u64,
            dims: self.dims as u64,
        }
    }
}
