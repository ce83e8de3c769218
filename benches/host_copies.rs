//! How fast bytes in ordinary (pageable) host memory reach the GPU, by the
//! ways an upload could take: the driver's pageable copy, or written into
//! pinned memory first (plain or non-temporal stores, by 1 to 16 threads,
//! copied whole or in 2 to 8 pieces, each as soon as it is written; the
//! calling thread writing pieces too, or only waiting; the threads kept
//! spinning 200 us after a call, or left to fall asleep), against the copy
//! of bytes already pinned, and the bytes registered with the driver for
//! the call (page-locked where they are), copied and unregistered. Each
//! call waits `--gap-us` first (the kernel a call waits for, during which
//! idle threads fall asleep), so the figures include waking the threads.
//! Prints median and 10th-percentile times in us, the gap subtracted;
//! `docs/benchmarks.md` ("Uploads from ordinary memory") has the
//! figures, docs/gpu-runtime.md the choices of the library's uploads that
//! follow from them.
//!
//! The pinned buffer is write-combined, as the library's staging buffers,
//! or with `--cached` cached (write-back) pinned memory: non-temporal stores
//! into it skip the caches as they do into write-combined memory, but may
//! go at the memory's speed rather than the uncached path's.
//!
//! `cargo bench --bench host_copies -- [BYTES] [--gap-us US] [--cached]`;
//! without a GPU it says so and exits.

use cudarc::driver::{result as driver, sys, CudaContext, DevicePtr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use timewarp::internals::stream_copy;

const REPEATS: usize = 300;
const WORK_BYTES: usize = 64 << 10;

/// Counts the calls, so that threads kept spinning after one stop when
/// the next begins.
static GENERATION: AtomicUsize = AtomicUsize::new(0);

/// The command line: bytes a call copies, the wait before each call, and
/// whether the pinned buffer is cached.
struct Options {
    bytes: usize,
    gap_us: u128,
    cached: bool,
}

impl Options {
    fn parse() -> Options {
        let mut options = Options {
            bytes: 1 << 20,
            gap_us: 60,
            cached: false,
        };
        let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--gap-us" => {
                    options.gap_us = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .expect("--gap-us US")
                }
                "--cached" => options.cached = true,
                other => options.bytes = other.parse().expect("BYTES, --gap-us US or --cached"),
            }
        }
        options
    }
}

/// Copies into the device buffer on the bench's stream, from the pinned
/// buffer of `bytes` bytes at `pinned_at`.
struct Copies {
    to: sys::CUdeviceptr,
    stream: sys::CUstream,
    pinned_at: usize,
    bytes: usize,
}

impl Copies {
    /// Starts the copy of `range` of the pinned buffer to the same bytes of
    /// the device buffer.
    fn copy(&self, range: std::ops::Range<usize>) {
        // SAFETY: `range` is inside both buffers; the caller waits for the
        // stream before the pinned bytes are written again.
        unsafe {
            let from = std::slice::from_raw_parts(
                (self.pinned_at + range.start) as *const u8,
                range.len(),
            );
            driver::memcpy_htod_async(self.to + range.start as u64, from, self.stream)
                .expect("copy");
        }
    }

    /// Waits for the copies started.
    fn wait(&self) {
        // SAFETY: the stream is the context's own, alive for the whole bench.
        unsafe { driver::stream::synchronize(self.stream) }.expect("synchronize");
    }
}

fn main() {
    let Options {
        bytes,
        gap_us,
        cached,
    } = Options::parse();
    // The library's probe first: cudarc panics where there is no driver.
    if let Err(error) = timewarp::gpu::Gpu::get() {
        println!("host_copies: {error}; nothing measured");
        return;
    }
    let context = CudaContext::new(0).expect("GPU 0");
    let stream = context.new_stream().expect("a stream");
    // SAFETY: every byte is copied in before it is read (never, here).
    let device = unsafe { stream.alloc::<u8>(bytes) }.expect("device memory");
    let to = device.device_ptr(&stream).0;
    let cu_stream = stream.cu_stream();
    let source: Vec<u8> = (0..bytes).map(|k| (k * 31) as u8).collect();
    // Write-combined, as the library's staging buffers, unless `--cached`.
    let (flags, memory) = if cached {
        (0, "cached")
    } else {
        (sys::CU_MEMHOSTALLOC_WRITECOMBINED, "write-combined")
    };
    // SAFETY: u8 is valid whatever the memory holds.
    let mut pinned =
        unsafe { context.alloc_pinned_with_flags::<u8>(bytes, flags) }.expect("pinned");
    let copies = Copies {
        to,
        stream: cu_stream,
        pinned_at: pinned.as_mut_ptr().expect("host address") as usize,
        bytes,
    };

    println!(
        "{bytes} bytes, {gap_us} us between calls, {memory} pinned memory; \
         median and 10th percentile (us)"
    );
    time("pageable copy (the driver's staging)", gap_us, &mut || {
        // SAFETY: the device buffer holds `bytes`; a pageable copy has
        // read its source when it returns.
        unsafe { driver::memcpy_htod_async(copies.to, &source[..], copies.stream) }.expect("copy");
        copies.wait();
    });
    time("pinned copy (bytes already pinned)", gap_us, &mut || {
        copies.copy(0..bytes);
        copies.wait();
    });
    time_registered(&source, &copies, gap_us);
    for threads in [1, 4, 8, 16] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("threads");
        // (pieces, non-temporal stores, the caller writes too, us spun after)
        for (pieces, streamed, helps, linger_us) in [
            (1, false, false, 0),
            (1, true, false, 0),
            (2, false, false, 0),
            (2, true, false, 0),
            (4, true, false, 0),
            (8, true, false, 0),
            (2, true, true, 0),
            (4, true, true, 0),
            (8, true, true, 0),
            (2, true, false, 200),
            (4, true, false, 200),
            (8, true, false, 200),
            (4, true, true, 200),
            (8, true, true, 200),
        ] {
            if threads == 1 && (pieces > 2 || helps || linger_us > 0) {
                continue;
            }
            let staging = Staging {
                threads,
                pieces,
                streamed,
                helps,
                linger_us,
            };
            time_staged(&pool, staging, &source, &copies, gap_us);
        }
    }
}

/// Times `call`, each run `gap_us` after the last, and prints the median
/// and 10th percentile of the runs after 20 left untimed.
fn time(name: &str, gap_us: u128, call: &mut dyn FnMut()) {
    let mut times = Vec::with_capacity(REPEATS);
    for repeat in 0..REPEATS + 20 {
        let start = Instant::now();
        while start.elapsed().as_micros() < gap_us {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        call();
        if repeat >= 20 {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    print_times(name, times);
}

/// One line: the median and 10th percentile of `times` (us).
fn print_times(name: &str, mut times: Vec<f64>) {
    times.sort_by(f64::total_cmp);
    println!(
        "{name:<44} {:8.1} {:8.1}",
        times[REPEATS / 2],
        times[REPEATS / 10]
    );
}

/// The source registered with the driver for the call (page-locked in
/// place), copied, and unregistered: the registration and the copy are a
/// call's path; the unregistration could overlap its kernel. Each phase
/// timed on its own.
fn time_registered(source: &[u8], copies: &Copies, gap_us: u128) {
    let bytes = source.len();
    let mut phases = [Vec::new(), Vec::new(), Vec::new()];
    let source_at = source.as_ptr() as *mut std::ffi::c_void;
    for repeat in 0..REPEATS + 20 {
        let start = Instant::now();
        while start.elapsed().as_micros() < gap_us {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        // SAFETY: `source` lives to the end and is unregistered below.
        let registered = unsafe { sys::cuMemHostRegister_v2(source_at, bytes, 0) };
        assert_eq!(registered, sys::CUresult::CUDA_SUCCESS, "register");
        let registered_at = Instant::now();
        // SAFETY: the device buffer holds `bytes`; waited for below.
        unsafe { driver::memcpy_htod_async(copies.to, source, copies.stream) }.expect("copy");
        copies.wait();
        let copied_at = Instant::now();
        // SAFETY: registered above, no copy in flight.
        let unregistered = unsafe { sys::cuMemHostUnregister(source_at) };
        assert_eq!(unregistered, sys::CUresult::CUDA_SUCCESS, "unregister");
        if repeat >= 20 {
            phases[0].push((registered_at - start).as_secs_f64() * 1e6);
            phases[1].push((copied_at - registered_at).as_secs_f64() * 1e6);
            phases[2].push(copied_at.elapsed().as_secs_f64() * 1e6);
        }
    }
    for (name, times) in [
        "registered: register",
        "registered: copy",
        "registered: unregister",
    ]
    .into_iter()
    .zip(phases)
    {
        print_times(name, times);
    }
}

/// One way to stage an upload through the pinned buffer.
#[derive(Clone, Copy)]
struct Staging {
    /// Threads of the pool writing the pinned buffer.
    threads: usize,
    /// Copies started, each as soon as its bytes are written.
    pieces: usize,
    /// Non-temporal stores rather than plain ones.
    streamed: bool,
    /// The calling thread writes too, rather than only waiting.
    helps: bool,
    /// The threads spin this long after a call, awake for the next.
    linger_us: u128,
}

/// Times uploads of `source` staged as `staging` says, on `pool`.
fn time_staged(
    pool: &rayon::ThreadPool,
    staging: Staging,
    source: &[u8],
    copies: &Copies,
    gap_us: u128,
) {
    let Staging {
        threads,
        pieces,
        streamed,
        helps,
        linger_us,
    } = staging;
    let bytes = copies.bytes;
    let pinned_at = copies.pinned_at;
    // SAFETY: the allocation holds `bytes` bytes and lives to the end.
    let staging = || unsafe { std::slice::from_raw_parts_mut(pinned_at as *mut u8, bytes) };
    let piece = bytes.div_ceil(pieces);
    let pending: Vec<AtomicUsize> = (0..pieces).map(|_| AtomicUsize::new(0)).collect();
    let next = AtomicUsize::new(0);
    let works = bytes.div_ceil(WORK_BYTES);
    let name = format!(
        "{threads:>2} threads, {pieces} piece(s), {}{}{}",
        if streamed { "non-temporal" } else { "plain" },
        if helps { ", caller helps" } else { "" },
        if linger_us > 0 { ", lingering" } else { "" },
    );
    let (pending, next) = (&pending, &next);
    // Work `k`: bytes `k * WORK_BYTES..` of the source, staged.
    let work = move |k: usize| {
        let part = &mut staging()[k * WORK_BYTES..((k + 1) * WORK_BYTES).min(bytes)];
        let from = &source[k * WORK_BYTES..][..part.len()];
        if streamed {
            stream_copy(part, from);
        } else {
            part.copy_from_slice(from);
        }
        pending[k * WORK_BYTES / piece].fetch_sub(1, Ordering::Release);
    };
    // The next work no thread has taken, if any.
    let claim = move || {
        let k = next.fetch_add(1, Ordering::Relaxed);
        (k < works).then_some(k)
    };
    time(&name, gap_us, &mut || {
        GENERATION.fetch_add(1, Ordering::Relaxed);
        next.store(0, Ordering::Relaxed);
        for (k, count) in pending.iter().enumerate() {
            let len = piece.min(bytes - k * piece);
            count.store(len.div_ceil(WORK_BYTES), Ordering::Relaxed);
        }
        pool.in_place_scope_fifo(|scope| {
            for _ in 0..threads {
                scope.spawn_fifo(move |_| {
                    while let Some(k) = claim() {
                        work(k);
                    }
                });
            }
            let mut copied = 0;
            while copied < pieces {
                if pending[copied].load(Ordering::Acquire) == 0 {
                    copies.copy(copied * piece..((copied + 1) * piece).min(bytes));
                    copied += 1;
                } else if let Some(k) = helps.then(claim).flatten() {
                    work(k);
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        if linger_us > 0 {
            keep_awake(pool, threads, linger_us);
        }
        copies.wait();
    });
}

/// Keeps the pool's threads spinning up to `linger_us` after a call, so
/// that they are awake for the next (which stops them).
fn keep_awake(pool: &rayon::ThreadPool, threads: usize, linger_us: u128) {
    let call = GENERATION.load(Ordering::Relaxed);
    for _ in 0..threads {
        pool.spawn(move || {
            let start = Instant::now();
            while GENERATION.load(Ordering::Relaxed) == call
                && start.elapsed().as_micros() < linger_us
            {
                std::hint::spin_loop();
            }
        });
    }
}
