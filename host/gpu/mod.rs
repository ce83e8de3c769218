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
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};
use timewarp_kernels::band::band_pays;
use timewarp_kernels::warp::LANES;
use timewarp_kernels::{
    DtwParams, PairsLaunch, PipelineLaunch, SetRef, SoftDtwParams, TileLaunch, TwedParams,
};

mod database;
mod long_pair;
mod ptx_split;

mod diagonal;
mod thread_rows;

pub use thread_rows::{LOCAL_CAPACITIES, LOCAL_MAX_LEN};

mod soft_dtw;

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
/// What the host reads in a kernel's parameters besides passing them on:
/// the Sakoe-Chiba band, which decides the warp kernels' shape.
pub(crate) trait KernelParams: Copy {
    /// The band's radius in samples, if the measure has a band.
    fn radius(&self) -> Option<usize> {
        None
    }

    /// The most diagonals the band takes in any pair of a series of
    /// `a_lens` samples (shortest, longest) and one of `b_lens`, if there
    /// is a band: `2 radius + 1`, widened by the pair's length difference
    /// (`timewarp_kernels::dtw::band_columns`).
    fn band_width(&self, a_lens: (usize, usize), b_lens: (usize, usize)) -> Option<usize> {
        let difference = (a_lens.1.saturating_sub(b_lens.0)).max(b_lens.1.saturating_sub(a_lens.0));
        self.radius().map(|radius| 2 * radius + difference + 1)
    }
}

impl KernelParams for DtwParams {
    fn radius(&self) -> Option<usize> {
        (self.band != DtwParams::NO_BAND).then_some(self.band as usize)
    }
}

impl<T: Copy> KernelParams for SoftDtwParams<T> {
    fn radius(&self) -> Option<usize> {
        (self.band != DtwParams::NO_BAND).then_some(self.band as usize)
    }
}

impl<T: Copy> KernelParams for TwedParams<T> {}

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
    /// One pair at a time, a thread per cell of an anti-diagonal, three
    /// rolling anti-diagonals in global memory (Improved TWED / cuTWED's
    /// algorithm), all anti-diagonals in one persistent kernel with a
    /// grid-wide barrier between two.
    Diagonal,
    /// As [`Variant::Diagonal`], one kernel launch per anti-diagonal (as
    /// cuTWED does).
    DiagonalLaunches,
    /// One thread per pair, two rolling rows in a fixed-size array in the
    /// thread's local memory; series `b` (the columns) of at most
    /// [`LOCAL_MAX_LEN`] samples.
    Local,
    /// One thread per pair, two rolling rows in the block's shared memory.
    Shared,
    /// One block per pair, threads over the cells of an anti-diagonal, the
    /// last three anti-diagonals in shared memory (`gpu::soft_dtw`).
    Stencil,
}

impl Variant {
    pub const ALL: [Variant; 9] = [
        Variant::Naive,
        Variant::Warp,
        Variant::Tiled,
        Variant::TiledLaunches,
        Variant::Diagonal,
        Variant::DiagonalLaunches,
        Variant::Local,
        Variant::Shared,
        Variant::Stencil,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Warp => "warp",
            Variant::Tiled => "tiled",
            Variant::TiledLaunches => "tiled-launches",
            Variant::Diagonal => "diagonal",
            Variant::DiagonalLaunches => "diagonal-launches",
            Variant::Local => "local",
            Variant::Shared => "shared",
            Variant::Stencil => "stencil",
        }
    }

    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The variant for `pairs` pairs whose shorter series has at least
    /// `shortest` samples, with a band of at most `band_width` diagonals if
    /// any: the tiled kernel for a single long pair, which it spreads over
    /// the whole GPU, else the warp kernel; also for a long pair whose band
    /// is narrow enough for one warp, which then computes the band alone.
    pub fn choose(pairs: usize, shortest: usize, band_width: Option<usize>) -> Variant {
        let narrow_band = band_width.is_some_and(|w| w <= LANES * MAX_STRIPE);
        if pairs <= TILED_MAX_PAIRS && shortest >= TILED_MIN_LENGTH && !narrow_band {
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
        ("twed", _) => &[1, 4, 8],
        // Soft-DTW's cells wait on their exp and ln: wider stripes add
        // registers and code, not speed.
        ("soft_dtw", _) => &[1, 4],
        // DTW's series of up to 128 samples take a sub-warp
        // (`sub_warp_shapes`). 32 columns a lane (a pair of 1024 in one band
        // instead of two) measured no faster on an H200.
        _ => &[4, 16],
    }
}

/// Columns per lane of the tiled kernels, narrowest first.
pub fn tiled_stripes(measure: &str, precision: &str) -> &'static [usize] {
    match (measure, precision) {
        ("twed", _) => &[4, 8],
        ("soft_dtw", _) => &[4],
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

/// The (lanes, columns per lane) of the sub-warp kernels (a warp split
/// into parts of 8 or 16 lanes, each computing its own pair), in the order
/// the host tries them; none for measures that have none.
pub fn sub_warp_shapes(measure: &str, _precision: &str) -> &'static [(usize, usize)] {
    match measure {
        // DTW's cell is a few instructions, so a step's fixed cost (the
        // shuffle, the row's sample, the loop) weighs: short series go four
        // to a warp, with more columns a lane and 7 steps to fill and drain
        // the wavefront instead of 31. On an H200, 1024 x 1024 pairs of 128:
        // 3246 GCUPS with 8 lanes x 16, 2568 with 16 x 8, 955 with 32 x 4.
        // 16 x 16 serves bands of up to 256 diagonals (`band_shape`).
        "dtw" => &[(8, 8), (8, 16), (16, 16)],
        _ => &[],
    }
}

/// The first sub-warp shape whose lanes cover `columns`, if any, among
/// those for series of up to 128 samples (measured; wider series take a
/// full warp).
fn sub_warp_shape(measure: &str, precision: &str, columns: usize) -> Option<(usize, usize)> {
    sub_warp_shapes(measure, precision)
        .iter()
        .copied()
        .find(|&(lanes, stripe)| lanes * stripe <= 128 && lanes * stripe >= columns)
}

/// The widest stripe of any warp kernel: bands of more diagonals than
/// `LANES` times this never take the band driver.
const MAX_STRIPE: usize = 16;

/// The (lanes, columns per lane) of the warp or sub-warp kernel for pairs
/// of up to `rows x columns` cells in a band of up to `width` diagonals,
/// if one takes the band driver (`kernels-gpu/src/band.rs`; the kernel
/// checks each pair with the same `band_pays`): of the shapes for which
/// it pays, the one that spends the fewest lane-steps a pair, `lanes * stripe * (rows +
/// lanes used - 1)` (a step's time grows with the stripe; a sub-warp's
/// unused lanes idle).
fn band_shape(
    measure: &str,
    precision: &str,
    width: usize,
    rows: usize,
    columns: usize,
) -> Option<(usize, usize)> {
    let warps = warp_stripes(measure, precision).iter().map(|&s| (LANES, s));
    sub_warp_shapes(measure, precision)
        .iter()
        .copied()
        .chain(warps)
        .filter(|&(lanes, stripe)| band_pays(width, rows, columns, lanes, stripe))
        .min_by_key(|&(lanes, stripe)| lanes * stripe * (rows + width.div_ceil(stripe) - 1))
}

/// The entry point `{measure}_{kernel}_{precision}`, or its univariate
/// twin `{measure}_{kernel}_1d_{precision}` for series of one dimension
/// (the warp, half-warp and tiled kernels have one: the same driver with
/// its multivariate path folded away, which takes many registers).
fn entry_name(measure: &str, kernel: &str, dims: usize, precision: &str) -> String {
    if dims == 1 {
        format!("{measure}_{kernel}_1d_{precision}")
    } else {
        format!("{measure}_{kernel}_{precision}")
    }
}

/// Every entry point the host may launch, for checking that the embedded
/// PTX has them all.
pub fn kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for measure in ["dtw", "soft_dtw", "twed"] {
        for precision in ["f32", "f64"] {
            names.push(format!("{measure}_naive_{precision}"));
            let twins =
                |kernel: String| [1, 2].map(|dims| entry_name(measure, &kernel, dims, precision));
            for s in warp_stripes(measure, precision) {
                names.extend(twins(format!("warp{s}")));
            }
            for (lanes, s) in sub_warp_shapes(measure, precision) {
                names.extend(twins(format!("warp{lanes}x{s}")));
            }
            for s in tiled_stripes(measure, precision) {
                names.extend(twins(format!("tiled{s}")));
                names.push(format!("{measure}_tiled_launches{s}_{precision}"));
            }
            names.push(format!("{measure}_diagonal_{precision}"));
            names.push(format!("{measure}_diagonal_step_{precision}"));
            for cap in LOCAL_CAPACITIES {
                names.push(format!("{measure}_local{cap}_{precision}"));
            }
            names.push(format!("{measure}_shared_{precision}"));
        }
    }
    names.extend(soft_dtw::kernel_names());
    names
}

/// Why this build has no GPU kernels, if it has none.
pub fn kernels_build_error() -> Option<&'static str> {
    embedded::BUILD_ERROR
}

/// The embedded PTX text; `None` in a CPU-only build.
pub fn ptx() -> Option<&'static str> {
    kernels_build_error().is_none().then_some(embedded::PTX)
}

/// The pinned toolchain that compiled the PTX (`kernels-gpu/rust-toolchain.toml`),
/// e.g. `"nightly-2026-05-20"`; `None` in a CPU-only build.
pub fn ptx_toolchain() -> Option<&'static str> {
    embedded::PTX_TOOLCHAIN
}

/// `rustc --version` of that toolchain, e.g.
/// `"rustc 1.97.0-nightly (e50aa6fba 2026-05-19)"`; `None` in a CPU-only build.
pub fn ptx_rustc_version() -> Option<&'static str> {
    embedded::PTX_RUSTC_VERSION
}

/// A short hash of the embedded PTX: FNV-1a 64 of its bytes as 16 lower-case
/// hex digits, of which the first 12; `None` in a CPU-only build.
pub fn ptx_hash() -> Option<&'static str> {
    embedded::PTX_HASH
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

/// An open GPU: its context, stream and the kernels loaded so far.
pub struct Gpu {
    info: GpuInfo,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Each kernel is its own module, loaded (JIT-compiled) on first use.
    functions: Mutex<HashMap<String, CudaFunction>>,
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
        let stream = context.default_stream();
        Ok(Gpu {
            info,
            context,
            stream,
            functions: Mutex::new(HashMap::new()),
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
    pub(crate) fn matrix<T: Float, P: KernelParams>(
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
        if let Variant::Diagonal | Variant::DiagonalLaunches = variant {
            let persistent = variant == Variant::Diagonal;
            return self.diagonal_pairs(measure, persistent, params, a, b, budget);
        }
        if variant == Variant::Stencil {
            return self.stencil_matrix(measure, params, a, b, budget);
        }
        self.streamed(measure, variant, params, a, b, budget)
    }

    /// The naive or warp kernel for pairs of series up to `a_len` and
    /// `b_len` samples of `dims` dimensions, in a band of up to
    /// `band_width` diagonals if any, and how to launch it.
    fn pair_kernel<T: Float>(
        &self,
        measure: &str,
        variant: Variant,
        (a_len, b_len): (usize, usize),
        dims: usize,
        band_width: Option<usize>,
    ) -> Result<PairKernel> {
        let row_len = a_len.max(b_len) + 1;
        match variant {
            Variant::Local => return self.local_kernel::<T>(measure, row_len, b_len),
            Variant::Shared => return self.shared_kernel::<T>(measure, row_len),
            _ => {}
        }
        let (name, threads_per_pair, workspace_per_pair) = match variant {
            Variant::Naive => (format!("{measure}_naive_{}", T::NAME), 1, 2 * row_len),
            _ => {
                let band =
                    band_width.and_then(|width| band_shape(measure, T::NAME, width, a_len, b_len));
                if let Some((lanes, stripe)) = band {
                    let kernel = if lanes == LANES {
                        format!("warp{stripe}")
                    } else {
                        format!("warp{lanes}x{stripe}")
                    };
                    // A pair whose band is wider than estimated takes the
                    // column bands, which then need their border column.
                    let workspace = if lanes * stripe < b_len { row_len } else { 0 };
                    (
                        entry_name(measure, &kernel, dims, T::NAME),
                        lanes,
                        workspace,
                    )
                } else if let Some((lanes, stripe)) = sub_warp_shape(measure, T::NAME, b_len) {
                    (
                        entry_name(measure, &format!("warp{lanes}x{stripe}"), dims, T::NAME),
                        lanes,
                        0,
                    )
                } else {
                    let stripe = warp_stripe(measure, T::NAME, b_len);
                    let bands = b_len.div_ceil(LANES * stripe);
                    let workspace = if bands > 1 { row_len } else { 0 };
                    (
                        entry_name(measure, &format!("warp{stripe}"), dims, T::NAME),
                        LANES,
                        workspace,
                    )
                }
            }
        };
        Ok(PairKernel {
            function: self.function(&name)?,
            threads_per_pair: threads_per_pair as u32,
            row_len,
            workspace_per_pair,
            threads_per_block: THREADS_PER_BLOCK,
            shared_bytes: 0,
        })
    }

    /// Kernel `name`, its module JIT-compiled from the embedded PTX on
    /// first use.
    fn function(&self, name: &str) -> Result<CudaFunction> {
        let mut functions = self
            .functions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(function) = functions.get(name) {
            return Ok(function.clone());
        }
        let failed = |e: driver::DriverError| Error::Gpu(format!("kernel {name}: {e}"));
        let text = ptx_split::entry_module(embedded::PTX, name)
            .ok_or_else(|| Error::Gpu(format!("the embedded PTX has no kernel {name}")))?;
        let module: Arc<CudaModule> = self
            .context
            .load_module(Ptx::from_src(text))
            .map_err(failed)?;
        let function = module.load_function(name).map_err(failed)?;
        functions.insert(name.to_string(), function.clone());
        Ok(function)
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
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        self.launch_with(&self.stream, function, config, false, argument)
    }

    /// Launches `function` on `stream` with `config` and `argument` as its
    /// one parameter; `cooperative` launches guarantee that every block is
    /// resident at once (or fail), as a grid-wide barrier needs.
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    unsafe fn launch_with<A: Copy>(
        &self,
        stream: &CudaStream,
        function: &CudaFunction,
        config: LaunchConfig,
        cooperative: bool,
        argument: A,
    ) -> Result<()>
    where
        KernelArgument<A>: DeviceRepr,
    {
        let argument = KernelArgument(argument);
        let mut builder = stream.launch_builder(function);
        builder.arg(&argument);
        let launched = if cooperative {
            builder.launch_cooperative(config)
        } else {
            builder.launch(config)
        };
        launched.map(|_| ()).map_err(gpu_error)
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
            max_len: set.max_len(),
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

/// A loaded naive, warp, local or shared kernel and what its launches need.
struct PairKernel {
    function: CudaFunction,
    /// 1 (naive, local, shared) or a warp.
    threads_per_pair: u32,
    /// `PairsLaunch::row_len`.
    row_len: usize,
    /// Workspace values per pair; 0 for none.
    workspace_per_pair: usize,
    /// Threads of a block ([`THREADS_PER_BLOCK`] but for the shared kernel).
    threads_per_block: u32,
    /// Dynamic shared memory of a block, in bytes.
    shared_bytes: u32,
}

/// A block of series in device memory.
struct DeviceSet<T> {
    values: CudaSlice<T>,
    offsets: CudaSlice<u64>,
    times: Option<CudaSlice<T>>,
    count: usize,
    dims: usize,
    max_len: usize,
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

/// How the stencil kernels cut a computation to fit a device-memory budget:
/// blocks of `a` and of `b` whose data take at most a quarter of it each,
/// and tiles (block pairs) whose output takes at most a quarter.
struct TilePlan {
    a_blocks: Vec<Range<usize>>,
    b_blocks: Vec<Range<usize>>,
}

impl TilePlan {
    fn new<T: Float>(
        a: &SeriesSet<T>,
        b: Option<&SeriesSet<T>>,
        budget: usize,
        element: usize,
    ) -> Self {
        let quarter = budget / 4;
        // A tile is at most `side x side` outputs.
        let side = ((quarter / element) as f64).sqrt().max(1.0) as usize;
        let a_blocks = blocks(a, quarter, side, element);
        let b_blocks = match b {
            Some(b) => blocks(b, quarter, side, element),
            None => a_blocks.clone(),
        };
        TilePlan { a_blocks, b_blocks }
    }
}

/// Consecutive ranges of series with at most `max_bytes` of data and
/// `max_count` series each (a single larger series gets a block of its own).
fn blocks<T: Float>(
    set: &SeriesSet<T>,
    max_bytes: usize,
    max_count: usize,
    element: usize,
) -> Vec<Range<usize>> {
    let bytes_of = |k: usize| {
        let samples = set.series_len(k);
        let times = if set.has_timestamps() { samples } else { 0 };
        (samples * set.dims() + times) * element + std::mem::size_of::<u64>()
    };
    let mut result = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for k in 0..set.len() {
        let size = bytes_of(k);
        if k > start && (bytes + size > max_bytes || k - start == max_count) {
            result.push(start..k);
            (start, bytes) = (k, 0);
        }
        bytes += size;
    }
    result.push(start..set.len());
    result
}
