//! An open GPU ([`Gpu`]): its context and stream, the kernels loaded so
//! far, the pool of pinned buffers, and the one way every launcher enters a
//! computation ([`Gpu::begin`]), loads a kernel ([`Gpu::function`]) and
//! launches it ([`Gpu::launch`]). Every launcher of `matrix`, `paired`,
//! `paths` and `launch` takes a `&Gpu`.

use super::device::{driver_error, list_gpus, GpuInfo, MemoryPool};
use super::kernel_argument::KernelArgument;
use super::pinned::PinnedPool;
use super::ptx::{embedded_ptx, entry_module, kernels_build_error};
use super::setup::{timed, SetupKind};
use super::streamed_values_state::StreamedState;
use super::wait::wait_stream;
use crate::error::DriverCall;
use crate::{Error, Float, GpuSet, Result};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{
    result as driver, sys, CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use timewarp_kernels::{KernelId, MeasureParams, Recurrence};

/// Kernel parameters the GPU runtime launches with: a measure's
/// recurrence, which names its kernels.
pub(crate) trait KernelParams<T: Float>:
    Recurrence<T> + MeasureParams + Send + Sync + 'static
{
}

impl<T: Float, P: Recurrence<T> + MeasureParams + Send + Sync + 'static> KernelParams<T> for P {}

/// Shared memory a kernel may use without opting in.
pub(crate) const DEFAULT_SHARED_BYTES: usize = 48 * 1024;

/// Device memory up to which a computation's allocations are small enough
/// to skip the query of free memory ([`Gpu::begin_small`]).
pub(crate) const SMALL_CALL_BYTES: usize = 16 << 20;

/// An open GPU: its context, stream and the kernels loaded so far.
pub struct Gpu {
    info: GpuInfo,
    pub(crate) context: Arc<CudaContext>,
    /// The stream of the launchers that run one launch after another.
    pub(crate) stream: Arc<CudaStream>,
    /// Each kernel is its own module, loaded (JIT-compiled) on first use.
    functions: Mutex<HashMap<KernelId, Arc<OnceLock<Loaded>>>>,
    /// One computation at a time: they share the streams and size their
    /// memory use from what is free.
    busy: Mutex<()>,
    /// Nanoseconds computations have held `busy`, in all.
    busy_nanos: AtomicU64,
    /// Pairs the work spread over GPUs has computed here, in all.
    pairs: AtomicU64,
    /// Nanoseconds this GPU's workers spent computing those pairs, and
    /// the computations they were part of took.
    work_nanos: AtomicU64,
    call_nanos: AtomicU64,
    /// The streams and pinned buffers of the pipelined pair kernels.
    pub(crate) pool: PinnedPool,
    /// The device's pool of stream-ordered allocations, which keeps what
    /// computations free ([`MemoryPool::keep_freed`]); none without
    /// stream-ordered allocation.
    memory_pool: Option<MemoryPool>,
    /// What the streamed calls keep from one to the next.
    pub(crate) streamed: StreamedState,
}

/// A computation's hold on the GPU ([`Gpu::begin`]); adds its time to
/// [`Gpu::busy_time`] when dropped.
pub(crate) struct Busy<'a> {
    _guard: MutexGuard<'a, ()>,
    since: Instant,
    total: &'a AtomicU64,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let nanos = self.since.elapsed().as_nanos() as u64;
        self.total.fetch_add(nanos, Ordering::Relaxed);
        THIS_THREAD_BUSY_NANOS.with(|busy| busy.set(busy.get() + nanos));
    }
}

thread_local! {
    /// How long computations called from this thread have held a GPU.
    static THIS_THREAD_BUSY_NANOS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How long the computations called from the current thread have held a
/// GPU, in all: with [`Gpu::busy_time`], what share of a GPU's time one
/// thread's work took while others shared it.
pub fn this_thread_busy_time() -> Duration {
    Duration::from_nanos(THIS_THREAD_BUSY_NANOS.with(|busy| busy.get()))
}

/// The pairs a GPU computed in the work spread over GPUs (the pair
/// kernels' distance matrices; paired Soft-DTW values and gradients on
/// several GPUs, each launch of a divergence's pair counted),
/// and the time its worker spent computing them: with several GPUs, each
/// one's share of a computation and its rate ([`Gpu::work`]). `call` is
/// the time of the computations it took part in, from their first block
/// handed out to their last one done (on any GPU): `call - time` is what
/// it waited, at the end, for the others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuWork {
    pub pairs: u64,
    pub time: Duration,
    pub call: Duration,
}

impl GpuWork {
    /// The work done since `earlier`, a reading of the same GPU.
    pub fn since(self, earlier: GpuWork) -> GpuWork {
        GpuWork {
            pairs: self.pairs - earlier.pairs,
            time: self.time.saturating_sub(earlier.time),
            call: self.call.saturating_sub(earlier.call),
        }
    }
}

/// "1 GPU", "2 GPUs".
fn counted_gpus(count: usize) -> String {
    format!("{count} GPU{}", if count == 1 { "" } else { "s" })
}

/// A kernel loaded, or why it could not be.
/// The error: what failed, and the driver's error if the driver failed.
type Loaded = std::result::Result<CudaFunction, (String, Option<driver::DriverError>)>;

/// Each device the driver reports, opened on first use (or why there are
/// none to open).
type Devices = std::result::Result<Vec<OnceLock<std::result::Result<Gpu, String>>>, String>;

static DEVICES: OnceLock<Devices> = OnceLock::new();

/// The devices' slots, found once per process.
fn devices() -> Result<&'static [OnceLock<std::result::Result<Gpu, String>>]> {
    DEVICES
        .get_or_init(|| {
            if let Some(reason) = kernels_build_error() {
                return Err(format!("this build has no GPU kernels: {reason}"));
            }
            let count = timed(SetupKind::Driver, None, "", list_gpus)?.len();
            if count == 0 {
                return Err("the driver reports no CUDA device".into());
            }
            Ok((0..count).map(|_| OnceLock::new()).collect())
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|reason| Error::GpuUnavailable(reason.clone()))
}

impl Gpu {
    /// GPU 0, opened on first use; an error says why there is none.
    pub fn get() -> Result<&'static Gpu> {
        Gpu::ordinal(0)
    }

    /// GPU `ordinal` (as the driver numbers them, after
    /// `CUDA_VISIBLE_DEVICES`), opened once per process on first use, with
    /// its own context, streams and pinned buffers; an error says why it
    /// cannot be used, or that there is no such GPU.
    pub fn ordinal(ordinal: usize) -> Result<&'static Gpu> {
        let devices = devices()?;
        let slot = devices.get(ordinal).ok_or_else(|| {
            Error::GpuUnavailable(format!(
                "there is no GPU {ordinal}: the driver reports {} (ordinals 0 to {})",
                counted_gpus(devices.len()),
                devices.len() - 1
            ))
        })?;
        slot.get_or_init(|| Gpu::open(ordinal))
            .as_ref()
            .map_err(|reason| Error::GpuUnavailable(format!("GPU {ordinal}: {reason}")))
    }

    /// The first GPU of `set`, opened, and no other: the first usable one
    /// for [`GpuSet::all`], else the first listed; an error as
    /// [`Gpu::select`]'s, also for a GPU listed after the first that does
    /// not exist or whose compute capability the kernels do not run on.
    /// For the computations that run on one GPU: opening a GPU creates its
    /// context, which takes far longer than the call itself.
    pub fn first(set: GpuSet) -> Result<&'static Gpu> {
        let Some(list) = set.ordinals() else {
            let first = Gpu::get();
            return match first {
                Ok(gpu) => Ok(gpu),
                Err(reason) => (1..Gpu::count())
                    .find_map(|k| Gpu::ordinal(k).ok())
                    .ok_or(reason),
            };
        };
        let gpu = Gpu::ordinal(list[0])?;
        let infos = list_gpus().map_err(Error::GpuUnavailable)?;
        for &ordinal in &list[1..] {
            let info = infos.get(ordinal).ok_or_else(|| {
                Error::GpuUnavailable(format!(
                    "there is no GPU {ordinal}: the driver reports {} (ordinals 0 to {})",
                    counted_gpus(infos.len()),
                    infos.len().saturating_sub(1)
                ))
            })?;
            info.usable()
                .map_err(|reason| Error::GpuUnavailable(format!("GPU {ordinal}: {reason}")))?;
        }
        Ok(gpu)
    }

    /// How many GPUs the driver reports (0 when it cannot be asked).
    pub fn count() -> usize {
        devices().map_or(0, <[_]>::len)
    }

    /// The GPUs of `set`, opened, in ordinal order: every usable one for
    /// [`GpuSet::all`] (an error only when none is), or exactly those
    /// listed (an error naming the first that does not exist or cannot be
    /// used).
    pub fn select(set: GpuSet) -> Result<Vec<&'static Gpu>> {
        match set.ordinals() {
            Some(list) => list.into_iter().map(Gpu::ordinal).collect(),
            None => {
                let first = Gpu::get();
                let mut usable: Vec<&'static Gpu> = first.iter().copied().collect();
                usable.extend((1..Gpu::count()).filter_map(|k| Gpu::ordinal(k).ok()));
                match (usable.is_empty(), first) {
                    (true, Err(reason)) => Err(reason),
                    _ => Ok(usable),
                }
            }
        }
    }

    fn open(ordinal: usize) -> std::result::Result<Gpu, String> {
        let gpus = list_gpus()?;
        let info = gpus
            .into_iter()
            .nth(ordinal)
            .ok_or_else(|| "the driver reports no CUDA device".to_string())?;
        info.usable()?;
        let (context, memory_pool) = timed(SetupKind::Context, Some(ordinal), "", || {
            let context = CudaContext::new(ordinal).map_err(driver_error("creating a context"))?;
            let memory_pool = MemoryPool::keep_freed(&context, info.total_memory);
            Ok::<_, String>((context, memory_pool))
        })?;
        let stream = context.default_stream();
        Ok(Gpu {
            info,
            context,
            stream,
            functions: Mutex::new(HashMap::new()),
            busy: Mutex::new(()),
            busy_nanos: AtomicU64::new(0),
            pairs: AtomicU64::new(0),
            work_nanos: AtomicU64::new(0),
            call_nanos: AtomicU64::new(0),
            memory_pool,
            pool: PinnedPool::default(),
            streamed: StreamedState::default(),
        })
    }

    /// `GPU 1 (NVIDIA H200)`, for messages.
    pub fn name(&self) -> String {
        format!("GPU {} ({})", self.info.ordinal, self.info.name)
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Enters a computation: one at a time (the returned guard), the
    /// context bound to this thread, and the device-memory budget resolved
    /// (`memory_budget`, or 3/4 of the memory free now).
    pub(crate) fn begin(&self, memory_budget: Option<usize>) -> Result<(Busy<'_>, usize)> {
        let guard = self
            .busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let busy = Busy {
            _guard: guard,
            since: Instant::now(),
            total: &self.busy_nanos,
        };
        self.context
            .bind_to_thread()
            .call("binding the context to the thread")?;
        let budget = match memory_budget {
            Some(bytes) => bytes,
            None => free_budget()?,
        };
        Ok((busy, budget))
    }

    /// [`Gpu::begin`] for a computation that allocates `needed` bytes in
    /// all: with no `memory_budget`, a small one (up to
    /// [`SMALL_CALL_BYTES`]), or one that the memory the device's pool
    /// keeps from earlier computations holds (a training loop's calls
    /// repeat their sizes), takes what it needs as its budget instead of
    /// asking the driver for the free memory, a query that costs as much
    /// as a small batch's kernel; if even that is not free, its allocation
    /// fails with the driver's error.
    pub(crate) fn begin_small(
        &self,
        memory_budget: Option<usize>,
        needed: usize,
    ) -> Result<(Busy<'_>, usize)> {
        if memory_budget.is_some() {
            return self.begin(memory_budget);
        }
        // Held first, so that no other computation takes the pool's memory
        // between the look and the allocations.
        let (busy, _) = self.begin(Some(needed))?;
        let kept = |pool: MemoryPool| needed <= pool.spare();
        if needed <= SMALL_CALL_BYTES || self.memory_pool.is_some_and(kept) {
            return Ok((busy, needed));
        }
        Ok((busy, free_budget()?))
    }

    /// How long computations have held this GPU since it was opened, in
    /// all (they take it one at a time): with the wall time of a run, how
    /// much of it the GPU was in use or loading kernels for it.
    pub fn busy_time(&self) -> Duration {
        Duration::from_nanos(self.busy_nanos.load(Ordering::Relaxed))
    }

    /// The work spread over GPUs that this GPU has done since it was
    /// opened ([`GpuWork`]); the difference of two readings is what a
    /// computation between them did here.
    pub fn work(&self) -> GpuWork {
        GpuWork {
            pairs: self.pairs.load(Ordering::Relaxed),
            time: Duration::from_nanos(self.work_nanos.load(Ordering::Relaxed)),
            call: Duration::from_nanos(self.call_nanos.load(Ordering::Relaxed)),
        }
    }

    /// Counts `pairs` computed in `time` more in [`Gpu::work`], in a
    /// computation of `call` on all its GPUs.
    pub(crate) fn add_work(&self, pairs: u64, time: Duration, call: Duration) {
        self.pairs.fetch_add(pairs, Ordering::Relaxed);
        let nanos = |d: Duration| d.as_nanos() as u64;
        self.work_nanos.fetch_add(nanos(time), Ordering::Relaxed);
        self.call_nanos.fetch_add(nanos(call), Ordering::Relaxed);
    }

    /// Kernel `id`, its module JIT-compiled from the embedded PTX on first
    /// use. Different kernels compile at once on different threads; a
    /// thread that wants a kernel being compiled waits for it.
    pub(crate) fn function(&self, id: KernelId) -> Result<CudaFunction> {
        KERNELS_USED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(id);
        self.function_to_query(id)
    }

    /// [`Gpu::function`] for a kernel that is asked about (its occupancy),
    /// not launched: not counted in [`kernels_used`].
    pub(crate) fn function_to_query(&self, id: KernelId) -> Result<CudaFunction> {
        let slot = self
            .functions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .entry(id)
            .or_default()
            .clone();
        slot.get_or_init(|| self.load(id))
            .clone()
            .map_err(|(call, source)| match source {
                Some(source) => Error::driver(call, source),
                None => Error::GpuFailure(call),
            })
    }

    /// JIT-compiles every kernel of the catalogue now, as one module (one
    /// compilation of the whole PTX costs less than one per kernel, and
    /// compiling it in 16 parts on 16 threads at once took 47 s against
    /// 34 s), instead of each on its first use, where it holds up the
    /// computation that needs it and those waiting for the GPU behind it.
    /// Call it from a thread of its own to overlap the compilation with
    /// other work; a computation that needs a kernel before then loads it
    /// alone. An error if the PTX does not load or lacks a kernel of the
    /// catalogue.
    pub fn load_kernels(&self) -> Result<()> {
        let ordinal = Some(self.info.ordinal);
        let module = timed(SetupKind::ModuleLoad, ordinal, "every kernel", || {
            self.context.load_module(Ptx::from_src(embedded_ptx()))
        })
        .call("loading the kernels")?;
        for id in KernelId::all() {
            let function = module
                .load_function(&id.to_string())
                .call(&format!("loading kernel {id}"))?;
            let slot = self
                .functions
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .entry(id)
                .or_default()
                .clone();
            // A kernel already loaded alone keeps that module.
            let _ = slot.set(Ok(function));
        }
        Ok(())
    }

    /// Kernel `id` JIT-compiled from its module of the embedded PTX (or
    /// read from the driver's cache of earlier compilations).
    fn load(&self, id: KernelId) -> Loaded {
        let name = id.to_string();
        let failed = |e: driver::DriverError| (format!("loading kernel {name}"), Some(e));
        let ordinal = Some(self.info.ordinal);
        let text = timed(SetupKind::ModuleText, ordinal, &name, || {
            entry_module(&name)
        })
        .ok_or_else(|| (format!("the embedded PTX has no kernel {name}"), None))?;
        let module: Arc<CudaModule> = timed(SetupKind::ModuleLoad, ordinal, &name, || {
            self.context.load_module(Ptx::from_src(text))
        })
        .map_err(failed)?;
        module.load_function(&name).map_err(failed)
    }

    /// A device attribute.
    pub(crate) fn attribute(&self, attribute: CUdevice_attribute) -> Result<usize> {
        Ok(self
            .context
            .attribute(attribute)
            .call("reading a device attribute")? as usize)
    }

    /// Warp schedulers of the device: four an SM (every architecture the
    /// kernels run on, Volta on).
    pub(crate) fn schedulers(&self) -> Result<usize> {
        let sms = self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        Ok(4 * sms)
    }

    /// Shared memory a block may opt into on this device.
    pub fn max_shared_bytes(&self) -> Result<usize> {
        self.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    }

    /// Kernel `id`, allowed `shared` bytes of dynamic shared memory (opting
    /// in past the default), and the most threads a block of it may have;
    /// an error if the device allows no block that much.
    pub(crate) fn function_with_shared(
        &self,
        id: KernelId,
        shared: usize,
    ) -> Result<(CudaFunction, usize)> {
        let function = self.function(id)?;
        let limit = self.max_shared_bytes()?;
        if shared > limit {
            return Err(Error::GpuFailure(format!(
                "kernel {id} needs {shared} bytes of shared memory per block, over the device's {limit}"
            )));
        }
        if shared > DEFAULT_SHARED_BYTES {
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
                .call("allowing a kernel more shared memory")?;
        }
        let threads = function
            .max_threads_per_block()
            .call("reading a kernel attribute")? as usize;
        Ok((function, threads))
    }

    /// Launches `function` on `stream` with `config` and `argument` as its
    /// one parameter; `cooperative` launches guarantee that every block is
    /// resident at once (or fail), as a grid-wide barrier needs.
    ///
    /// # Safety
    /// `argument` is the kernel's parameter type, its pointers are valid
    /// for what the kernel does with them, and the kernel was allowed
    /// `config.shared_mem_bytes`.
    pub(crate) unsafe fn launch<A: Copy>(
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
        launched
            .map(|_| ())
            .map_err(|source| Error::launch("launching a kernel", source))
    }

    /// Launches `function` on the GPU's stream on `blocks` blocks of
    /// `threads` threads with `shared` bytes of dynamic shared memory.
    ///
    /// # Safety
    /// As [`Gpu::launch`].
    pub(crate) unsafe fn launch_blocks<A: Copy>(
        &self,
        function: &CudaFunction,
        (blocks, threads): (u32, u32),
        shared: usize,
        argument: A,
    ) -> Result<()>
    where
        KernelArgument<A>: DeviceRepr,
    {
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: shared as u32,
        };
        self.launch(&self.stream, function, config, false, argument)
    }

    /// After a computation on the GPU's stream: on failure, waits for what
    /// it left running (errors ignored), before the buffers it used are
    /// freed.
    pub(crate) fn settle(&self, failed: bool) {
        if failed {
            let _ = wait_stream(&self.stream, "a failed computation");
        }
    }
}

/// A computation's share of the current context's free device memory: 3/4
/// of it, leaving room for what the driver and other users allocate
/// meanwhile.
fn free_budget() -> Result<usize> {
    Ok(driver::mem_get_info()
        .call("reading the free device memory")?
        .0
        / 4
        * 3)
}

/// Fill a fresh output with NaN (all bits set), so a pair the kernel failed
/// to write cannot pass for a result. Returns its device address.
pub(crate) fn poison<T: Float>(
    stream: &CudaStream,
    out: &mut CudaSlice<T>,
) -> Result<sys::CUdeviceptr> {
    let (pointer, _) = out.device_ptr(stream);
    // SAFETY: `pointer` addresses `out`, whose size in bytes is given.
    unsafe { poison_bytes(stream, pointer, out.num_bytes()) }?;
    Ok(pointer)
}

/// [`poison`] of `bytes` bytes at device address `pointer`.
///
/// # Safety
/// `pointer` addresses at least `bytes` bytes of device memory.
pub(crate) unsafe fn poison_bytes(
    stream: &CudaStream,
    pointer: sys::CUdeviceptr,
    bytes: usize,
) -> Result<()> {
    driver::memset_d8_async(pointer, 0xff, bytes, stream.cu_stream()).call("filling device memory")
}

/// Every kernel a computation of this process has launched, on any GPU:
/// what a run covered (the sanitizer runs' report of what they checked).
static KERNELS_USED: Mutex<BTreeSet<KernelId>> = Mutex::new(BTreeSet::new());

/// The kernels this process's computations have launched, in the
/// catalogue's order.
pub fn kernels_used() -> Vec<KernelId> {
    let used = KERNELS_USED.lock();
    used.unwrap_or_else(|poisoned| poisoned.into_inner())
        .iter()
        .copied()
        .collect()
}
