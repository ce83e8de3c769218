//! Paired values of host batches in ordinary memory, computed while the
//! host still writes them ([`streamed_values`]): the kernel
//! (`StreamedLaunch`) is launched first and reads the pairs straight from
//! the pinned staging buffer, each warp as soon as the host says its pair
//! is written, so that the first pairs compute while the staging threads
//! write the last, and no copy to device memory comes between (about 3 us
//! off a 1024 x 128 f32 call on the H200s, more on larger calls).
//!
//! The host writes the pairs in chunks, `x` then `y` of each, and raises a
//! count of the pairs written (in cached pinned memory) after each chunk.
//! If it stops midway (an error, a panic), it writes `ABANDONED` instead,
//! and the kernel's warps stop; if the kernel's warps wait past their
//! patience (a launch that blocks until the kernel ends, a host thread
//! stalled for seconds), they stop and say so, and the call computes the
//! pairs the ordinary way ([`super::values`]). Either way no pair's value
//! comes from series not yet written.
//!
//! A call allocates nothing on the device: the kernel's device words are
//! kept per GPU ([`crate::gpu::runtime::streamed_values_state::StreamedState`]), each launch
//! numbered. Nor does it wait for the kernel's end: the kernel says in
//! host memory when every pair's value is written, and the call reads them
//! then, while the kernel's warps finish (they touch none of the call's
//! memory after).

use super::streamed_chunks::chunk_ranges;
use super::value_launches::{launch_lengths, paired_warp, THREADS_PER_BLOCK};
use crate::error::DriverCall;
use crate::gpu::plan::paired_shapes::Shapes;
use crate::gpu::runtime::context::{Gpu, KernelParams, DEFAULT_SHARED_BYTES};
use crate::gpu::runtime::pinned::{keeps, MappedOutputs, Pinned};
use crate::gpu::runtime::wait::{device_wait_bound, wait_stream};
use crate::gpu::transfer::call_uploads::upload_places;
use crate::gpu::transfer::image_writes::{as_bytes_u64, Image};
use crate::gpu::transfer::staged_copy::{stage_in_order, Staging};
use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::{sys, CudaFunction, CudaStream, DevicePtr, LaunchConfig};
use std::cell::Cell;
use std::mem::size_of;
use std::ops::{Range, RangeInclusive};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use timewarp_kernels::launch::pairs::PairsLaunch;
use timewarp_kernels::launch::streamed::{StreamedLaunch, ABANDONED};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Driver, KernelId, SetRef};

/// The bytes of `x` and `y` a call streams: from 1 MiB, where the copies
/// an ordinary launch waits for take longer than the streamed kernel's
/// own costs (its warps' waits, the loads across the bus), up to 2 MiB,
/// past which its warps crowd the GPU while they wait (measured in f32:
/// 700 x 100 and 1024 x 64, about 0.5 MiB, streamed slower; 1024 x 128
/// and 2048 x 128, 1 and 2 MiB, faster; 4096 x 128, 4 MiB, no faster).
const STREAMED_BYTES: RangeInclusive<usize> = (1 << 20)..=(2 << 20);
/// How long the kernel's warps wait for their pair before they give up.
const PATIENCE: Duration = Duration::from_secs(2);
/// How often the host, waiting for the kernel to say it is finished, asks
/// the driver whether the stream's work has ended or failed instead.
const STREAM_LOOK: Duration = Duration::from_micros(20);
/// How long the host waits for the kernel spinning; then it yields its core
/// between looks.
const SPIN: Duration = Duration::from_micros(200);

thread_local! {
    /// Paired computations called from this thread that streamed.
    static STREAMED_CALLS: Cell<u64> = const { Cell::new(0) };
    /// A fault armed by [`inject_streamed_fault`] for this thread's next
    /// streamed call.
    static FAULT: Cell<Option<StreamedFault>> = const { Cell::new(None) };
}

/// How many paired computations called from the current thread computed
/// their pairs while the host wrote them (the others staged or copied the
/// batches first), so that tests and benchmarks can tell which way ran.
pub fn this_thread_streamed_calls() -> u64 {
    STREAMED_CALLS.with(Cell::get)
}

/// Streamed calls of this process whose kernel gave up waiting for the
/// host (a warp waited past its patience) and whose pairs were then
/// computed the ordinary way: the streamed path's documented fallback,
/// counted so that a slow host shows (`timewarp bench` reports it).
static STREAMED_FALLBACKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many streamed calls of this process fell back to computing their
/// pairs the ordinary way because the kernel gave up waiting for the host.
pub fn streamed_fallbacks() -> u64 {
    STREAMED_FALLBACKS.load(Ordering::Relaxed)
}

/// A fault of a streamed call, for tests ([`inject_streamed_fault`]).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamedFault {
    /// The host fails after the first chunk: the kernel must stop, and the
    /// call return the error.
    FailAfterFirstChunk,
    /// The host stalls before the last chunk for longer than the kernel's
    /// patience (shortened for the test): the kernel must give up, and the
    /// call compute the pairs the ordinary way.
    StallBeforeLastChunk,
}

/// Test hook: this thread's next streamed call takes `fault`.
#[doc(hidden)]
pub fn inject_streamed_fault(fault: StreamedFault) {
    FAULT.with(|armed| armed.set(Some(fault)));
}

/// The kernel's patience when [`StreamedFault::StallBeforeLastChunk`] is
/// armed, and how long the host then stalls.
const TEST_PATIENCE: Duration = Duration::from_millis(20);
const TEST_STALL: Duration = Duration::from_millis(200);

/// Whether calls may stream: not where `CUDA_LAUNCH_BLOCKING=1` makes each
/// launch wait for its kernel (which would wait for a host that has not
/// begun to write), nor where `TIMEWARP_STREAMED=0` turns it off (to
/// compare the two ways).
fn streaming_allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let set = |name: &str, value: &str| std::env::var(name).is_ok_and(|v| v.trim() == value);
        !set("CUDA_LAUNCH_BLOCKING", "1") && !set("TIMEWARP_STREAMED", "0")
    })
}

/// The values of the pairs of `x` and `y` (one launch: no divergence) by
/// the streamed warp kernel, or `None` where it does not apply ([`plan`])
/// or where the warps gave up waiting. The caller holds the GPU and
/// computes the pairs the ordinary way on `None`.
pub(crate) fn streamed_values<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    (x, y): (&SeriesSet<T>, &SeriesSet<T>),
    shapes: &Shapes,
    budget: usize,
) -> Result<Option<Vec<T>>> {
    let Some(plan) = plan(gpu, &params, (x, y), shapes, budget)? else {
        return Ok(None);
    };
    let fault = FAULT.with(|armed| armed.take());
    let stream = &gpu.stream;
    let Some(outputs) = MappedOutputs::take::<T>((stream, &gpu.pool), plan.pairs)? else {
        return Ok(None);
    };
    let mut staging = gpu.pool.take(&gpu.context, plan.total, true)?;
    let relay = gpu.streamed.words(stream)?;
    let mut control = gpu.pool.take(&gpu.context, 3 * size_of::<u32>(), false)?;
    // SAFETY: buffers taken from the pool have no copy or kernel in flight.
    let words = unsafe { control.bytes_mut(3 * size_of::<u32>()) };
    words.fill(0);
    let words = words.as_mut_ptr().cast::<u32>();
    // SAFETY: the control buffer holds the three words, 4-byte aligned (a
    // pinned buffer starts on a page), and outlives the kernel's use of
    // them (below).
    let control_words = unsafe {
        Control {
            written: AtomicU32::from_ptr(words),
            gave_up: words.add(1),
            finished: words.add(2),
        }
    };
    // SAFETY: as the control buffer's, no copy or kernel is in flight.
    let at = unsafe { staging.bytes_mut(plan.total) }.as_mut_ptr();
    // SAFETY: `at` addresses the staging buffer, held until the kernel is
    // finished or the stream has ended (below), which only the call writes.
    let computed = unsafe {
        launch_while_staging(
            gpu,
            &plan,
            params,
            (&control_words, relay),
            at,
            outputs,
            fault,
        )
    };
    let finished = computed.is_ok() || wait_stream(stream, "the streamed paired kernel").is_ok();
    give_back(gpu, [staging, control], finished);
    computed
}

/// A streamed call's kernel and sizes, once it is known to apply.
struct StreamedPlan<'a> {
    function: CudaFunction,
    pairs: usize,
    dims: usize,
    images: [Image<'a>; 2],
    /// Where each image's values start in the staging buffer, and its size.
    values_at: Vec<usize>,
    total: usize,
    /// The warp kernel's workspace a pair, in elements.
    border: usize,
    /// Elements of one warp's pair (values and timestamps) in shared memory.
    warp_values: usize,
    shared: usize,
    blocks: usize,
}

/// The streamed kernel for the pairs of `x` and `y`, or `None` where it
/// does not apply: batches in page-locked memory (their copies need no
/// staging), pairs wider than one panel of a whole warp's kernel, pairs
/// the kernel would not hold in shared memory or whose warps would not all
/// be resident at once, or bytes outside [`STREAMED_BYTES`].
fn plan<'a, T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: &P,
    (x, y): (&'a SeriesSet<T>, &'a SeriesSet<T>),
    shapes: &Shapes,
    budget: usize,
) -> Result<Option<StreamedPlan<'a>>> {
    let pairs = shapes.pairs();
    if !streaming_allowed()
        || shapes.launches() != 1
        || x.is_page_locked()
        || y.is_page_locked()
        || pairs >= ABANDONED as usize
    {
        return Ok(None);
    }
    let lengths = launch_lengths(shapes)[0];
    let dims = x.dims();
    let warp = paired_warp::<T, P>(params, lengths, dims, (pairs, gpu.schedulers()?));
    // One panel a pair: with two or more, streaming measured slower.
    let Driver::Warp { lanes: 32, stripe } = warp.id.driver else {
        return Ok(None);
    };
    if lengths.1 .1 > 32 * stripe as usize {
        return Ok(None);
    }
    let streamed = Driver::Streamed { stripe };
    let id = KernelId::new(P::MEASURE, streamed, warp.id.univariate, T::PRECISION);
    let border = warp.workspace_per_pair;
    let times = x.parts().2.is_some() || y.parts().2.is_some();
    // The largest pair's values (and timestamps) in shared memory.
    let warp_values = (lengths.0 .1 + lengths.1 .1) * (dims + usize::from(times));
    let warps_per_block = THREADS_PER_BLOCK / 32;
    let shared = warps_per_block * warp_values * size_of::<T>();
    let images = [Image::new(x, &(0..pairs)), Image::new(y, &(0..pairs))];
    let (values_at, total) = upload_places(&images);
    let staged_bytes = total - values_at[0];
    if !id.exists()
        || shared > DEFAULT_SHARED_BYTES
        || !STREAMED_BYTES.contains(&staged_bytes)
        || !keeps(total)
        || border * pairs * size_of::<T>() > budget
    {
        return Ok(None);
    }
    let function = gpu.function(id)?;
    // A warp a pair and one more, the relay of the host's count.
    let blocks = (pairs + 1).div_ceil(warps_per_block);
    let per_sm = gpu
        .streamed
        .blocks_per_sm((id, &function), THREADS_PER_BLOCK, shared)?;
    if blocks > per_sm * gpu.schedulers()? / 4 {
        return Ok(None);
    }
    Ok(Some(StreamedPlan {
        function,
        pairs,
        dims,
        images,
        values_at,
        total,
        border,
        warp_values,
        shared,
        blocks,
    }))
}

/// The words the host and the kernel share, in the control buffer: the
/// count of pairs written, and the kernel's "a warp gave up" and "every
/// pair's value is written".
struct Control<'a> {
    written: &'a AtomicU32,
    gave_up: *mut u32,
    finished: *mut u32,
}

/// Launches the streamed kernel, then stages the pairs into the buffer at
/// `at` chunk by chunk, raising the count of pairs written after each, and
/// reads the values once the kernel says they are all written: `None`
/// where a warp gave up (after the kernel has ended).
///
/// # Safety
///
/// `at` addresses a pinned buffer of `plan.total` bytes that nothing else
/// writes, and it and the control words stay alive until this returns
/// `Ok`, or until the stream has ended when it returns an error.
unsafe fn launch_while_staging<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    plan: &StreamedPlan,
    params: P,
    (control, (relayed, through)): (&Control, (u64, u64)),
    at: *mut u8,
    outputs: MappedOutputs,
    fault: Option<StreamedFault>,
) -> Result<Option<Vec<T>>> {
    let stream = &gpu.stream;
    let pairs = plan.pairs;
    // SAFETY: the caller's: the buffer is ours to write.
    let refs = unsafe { staged_set_refs::<T>(plan, at) };
    // The offsets leave the write-combining buffers before the launch.
    std::sync::atomic::fence(Ordering::SeqCst);
    let workspace = match plan.border {
        0 => None,
        _ => Some(
            stream
                .alloc_zeros::<T>(plan.border * pairs)
                .call("allocating device memory")?,
        ),
    };
    let patience = match fault {
        Some(StreamedFault::StallBeforeLastChunk) => TEST_PATIENCE,
        _ => PATIENCE,
    };
    let argument = StreamedLaunch {
        pairs: PairsLaunch {
            a: refs[0],
            b: refs[1],
            params,
            out: outputs.address::<T>(0) as *mut T,
            workspace: workspace.as_ref().map_or(0, |w| w.device_ptr(stream).0) as *mut T,
            row_len: plan.border.max(1) as u64,
            first_pair: 0,
            pair_count: pairs as u64,
            numbering: Numbering::Paired,
        },
        written: control.written.as_ptr(),
        relayed: relayed as *mut u64,
        through: through as *mut u64,
        launch_number: gpu.streamed.next_launch(),
        gave_up: control.gave_up,
        finished: control.finished,
        warp_values: plan.warp_values as u64,
        patience_ns: patience.as_nanos() as u64,
    };
    let config = LaunchConfig {
        grid_dim: (plan.blocks as u32, 1, 1),
        block_dim: (THREADS_PER_BLOCK as u32, 1, 1),
        shared_mem_bytes: plan.shared as u32,
    };
    // The launch goes while the staging threads write the first chunk.
    // SAFETY: the argument's pointers address the staging and control
    // buffers and the outputs, held until the kernel has said it is
    // finished (it touches none of them after) or the stream is
    // synchronized (the caller's, when it has not), the GPU's kept words,
    // and device memory dropped after the launch (freed in the stream's
    // order); the kernel was given `shared` bytes, every warp's room; a
    // cooperative launch puts every block on the GPU at once, or fails.
    let launch = || unsafe { gpu.launch(stream, &plan.function, config, true, argument) };
    let images = &plan.images;
    let (ranges, counts) = chunk_ranges(images, &plan.values_at, plan.dims, pairs);
    let staged = [
        (plan.values_at[0], &images[0]),
        (plan.values_at[1], &images[1]),
    ];
    let mut next = 0;
    let last = counts.len() - 1;
    let publish = |_range: Range<usize>| -> Result<()> {
        if let Some(count) = counts[next] {
            match fault {
                Some(StreamedFault::FailAfterFirstChunk) if count < pairs => {
                    return Err(Error::GpuFailure("injected fault: the host stopped".into()));
                }
                Some(StreamedFault::StallBeforeLastChunk) if next == last => {
                    std::thread::sleep(TEST_STALL);
                }
                _ => {}
            }
            control.written.store(count as u32, Ordering::Release);
        }
        next += 1;
        Ok(())
    };
    let abandon = Abandon(control.written);
    // SAFETY: the staging buffer holds every range and image; only the
    // staging writes it while the kernel reads what it has published.
    unsafe { stage_in_order(Staging(at), &staged, &ranges, launch, || Ok(()), publish) }?;
    std::mem::forget(abandon);
    // SAFETY: the control buffer holds the words (the caller's).
    let (finished, gave_up) = unsafe {
        (
            AtomicU32::from_ptr(control.finished),
            AtomicU32::from_ptr(control.gave_up),
        )
    };
    // A warp that gave up said so before it was through: visible once
    // `finished` is.
    let gave_up = || gave_up.load(Ordering::Acquire) != 0;
    if !wait_until_finished(stream, finished)? || gave_up() {
        // Some pairs have no value: the ordinary way, once the kernel has
        // ended.
        wait_stream(stream, "the streamed paired kernel")?;
        STREAMED_FALLBACKS.fetch_add(1, Ordering::Relaxed);
        return Ok(None);
    }
    // SAFETY: every pair's warp wrote its value before the last of them
    // raised `finished` (read with acquire above); none writes to the
    // outputs after.
    let values = unsafe { outputs.read_finished::<T>() };
    STREAMED_CALLS.with(|calls| calls.set(calls.get() + 1));
    Ok(Some(values))
}

/// The two batches as the kernel reads them from the staging buffer at
/// `at`; the offsets of a batch whose series differ in length are written
/// there first, rebased, in the room the layout keeps for them.
///
/// # Safety
///
/// `at` addresses a buffer of `plan.total` bytes that nothing else touches.
unsafe fn staged_set_refs<T: Float>(plan: &StreamedPlan, at: *mut u8) -> Vec<SetRef<T>> {
    let mut offsets_at = 0;
    let mut refs = Vec::with_capacity(2);
    for (image, &values) in plan.images.iter().zip(&plan.values_at) {
        let layout = image.layout;
        let uniform = image.lengths.0 == image.lengths.1;
        if !uniform {
            let rebased: Vec<u64> = image
                .offsets
                .iter()
                .map(|&o| o - image.offsets[0])
                .collect();
            let bytes = as_bytes_u64(&rebased);
            // SAFETY: the layout keeps room for them at `offsets_at`.
            unsafe { std::slice::from_raw_parts_mut(at.add(offsets_at), bytes.len()) }
                .copy_from_slice(bytes);
        }
        let values = at as u64 + values as u64;
        refs.push(SetRef::<T> {
            values: values as *const T,
            offsets: if uniform {
                std::ptr::null()
            } else {
                (at as u64 + offsets_at as u64) as *const u64
            },
            times: if layout.times {
                (values + (layout.times_at() - layout.values_at()) as u64) as *const T
            } else {
                std::ptr::null()
            },
            count: plan.pairs as u64,
            dims: plan.dims as u64,
            uniform_len: if uniform { image.lengths.0 as u64 } else { 0 },
            uniform_first: 0,
        });
        offsets_at += layout.values_at();
    }
    refs
}

/// Waits until the kernel on `stream` raises `finished`: true then; false
/// if the stream's work ended without it (a warp that gave up counted
/// itself through before the relay began counting, a case the host then
/// treats as giving up); an error if the stream failed.
fn wait_until_finished(stream: &CudaStream, finished: &AtomicU32) -> Result<bool> {
    let started = Instant::now();
    let mut looked = started;
    loop {
        if finished.load(Ordering::Acquire) != 0 {
            return Ok(true);
        }
        let now = Instant::now();
        if now - looked >= STREAM_LOOK {
            // SAFETY: the stream is alive (the GPU holds it).
            match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                status => {
                    status.result().call("querying a stream")?;
                    return Ok(finished.load(Ordering::Acquire) != 0);
                }
            }
            looked = now;
            if now - started > device_wait_bound() {
                return Err(Error::DeviceWait {
                    kernel: "the streamed paired kernel".into(),
                    what: "it neither finished nor ended within TIMEWARP_DEVICE_WAIT_SECONDS"
                        .into(),
                });
            }
        }
        if now - started < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Gives the buffers back to the pool once nothing reads them, or leaks
/// them where the stream failed and a kernel might still.
fn give_back(gpu: &Gpu, buffers: [Pinned; 2], finished: bool) {
    for buffer in buffers {
        if finished {
            gpu.pool.give_back(buffer);
        } else {
            std::mem::forget(buffer);
        }
    }
}

/// Tells the kernel that the host stopped writing, unless forgotten once
/// every pair is written.
struct Abandon<'a>(&'a AtomicU32);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        self.0.store(ABANDONED, Ordering::Release);
    }
}
