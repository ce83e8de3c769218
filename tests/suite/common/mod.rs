//! Helpers shared by the tests: random batches, the oracle's matrices
//! (computed once per batch and measure, shared by every backend and
//! variant that is compared with them), tolerances, and the GPU gate.
#![allow(dead_code)]

pub mod driver;
pub mod grid;
pub mod hardware;

use ndarray::{Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rayon::prelude::*;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;
use timewarp::{gpu, internals, oracle, ComputeOptions, Device, Float, Metric, SeriesSet, Variant};

/// GPU tests that skipped in this run (no usable GPU), for the summary.
static SKIPPED: AtomicUsize = AtomicUsize::new(0);

/// A GPU test's time on the GPU machine, printed when it ends with the
/// GPU's busy time so far, so that a run's log shows where the suite spends
/// its time.
pub struct Timed {
    test: String,
    start: Instant,
    own_busy_at_start: f64,
    /// The test's share of the GPUs ([`on_gpu`]) or all of them
    /// ([`on_gpu_alone`]); none for a test's nested calls.
    _hold: Option<GpuHold>,
}

/// GPU tests run at once, each holding [`GPU_TESTS`] shared, but for those
/// that count the whole process's work on the GPUs ([`on_gpu_alone`]).
static GPU_TESTS: RwLock<()> = RwLock::new(());

thread_local! {
    /// The [`Timed`]s this thread holds: only the first takes the lock.
    static HELD: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

enum GpuHold {
    Shared(#[allow(dead_code)] RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] RwLockWriteGuard<'static, ()>),
}

fn hold(alone: bool) -> Option<GpuHold> {
    let first = HELD.with(|held| {
        held.set(held.get() + 1);
        held.get() == 1
    });
    if !first {
        return None;
    }
    Some(if alone {
        GpuHold::Alone(GPU_TESTS.write().unwrap_or_else(|p| p.into_inner()))
    } else {
        GpuHold::Shared(GPU_TESTS.read().unwrap_or_else(|p| p.into_inner()))
    })
}

impl Drop for Timed {
    fn drop(&mut self) {
        HELD.with(|held| held.set(held.get() - 1));
        if !std::thread::panicking() {
            use std::io::Write;
            let seconds = self.start.elapsed().as_secs_f64();
            // The test's own share of the GPU (its computations run on its
            // thread) and the GPU's busy time so far, all tests together.
            let own =
                timewarp::internals::this_thread_busy_time().as_secs_f64() - self.own_busy_at_start;
            let busy = gpu::Gpu::get().map_or(0.0, |gpu| gpu.busy_time().as_secs_f64());
            let _ = writeln!(
                std::io::stderr(),
                "timing: {} {seconds:.2} s (holding the GPU {own:.2} s; GPU busy so far {busy:.2} s)",
                self.test
            );
            write_kernel_coverage();
        }
    }
}

/// Where `TIMEWARP_KERNEL_COVERAGE` names a file, writes there the
/// catalogue's kernels that this run has launched so far and those it has
/// not (rewritten as each GPU test ends): which kernels a sanitizer run of
/// a subset of the suite checked.
fn write_kernel_coverage() {
    let Some(path) = std::env::var_os("TIMEWARP_KERNEL_COVERAGE") else {
        return;
    };
    static WRITING: Mutex<()> = Mutex::new(());
    let _one_writer = WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let used: Vec<String> = internals::kernels_used()
        .iter()
        .map(|id| id.to_string())
        .collect();
    let unused: Vec<String> = timewarp_kernels::KernelId::all()
        .map(|id| id.to_string())
        .filter(|name| !used.contains(name))
        .collect();
    let report = format!(
        "launched {} of {} kernels\nnot launched: {}\nlaunched: {}\n",
        used.len(),
        used.len() + unused.len(),
        unused.join(" "),
        used.join(" ")
    );
    let _ = std::fs::write(path, report);
}

/// Whether GPU test `test` should run: `Some` (a guard that reports its
/// time) when there is a usable GPU. Without one it prints why and skips,
/// unless `REQUIRE_GPU=1` (set on the GPU machine), where that fails.
pub fn on_gpu(test: &str) -> Option<Timed> {
    on_gpu_with(test, false)
}

/// [`on_gpu`] for a test that counts the whole process's work on the GPUs:
/// it runs alone among the GPU tests (it waits for those running, and
/// those that start wait for it).
pub fn on_gpu_alone(test: &str) -> Option<Timed> {
    on_gpu_with(test, true)
}

fn on_gpu_with(test: &str, alone: bool) -> Option<Timed> {
    match gpu::Gpu::get() {
        Ok(gpu) => {
            load_kernels_once(gpu);
            let hold = hold(alone);
            Some(Timed {
                test: test.to_string(),
                start: Instant::now(),
                own_busy_at_start: timewarp::internals::this_thread_busy_time().as_secs_f64(),
                _hold: hold,
            })
        }
        Err(reason) => {
            if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("{test}: REQUIRE_GPU=1 but {reason}");
            }
            skip(test, &reason.to_string());
            None
        }
    }
}

/// Every kernel JIT-compiled on every GPU before the first GPU test goes on
/// (the others wait; the CPU tests run meanwhile): a kernel compiled on
/// first use is compiled while its test holds the GPU, and computations
/// spread over every GPU (the default) use each kernel on each. The
/// second GPU's compilation is the driver's cache of the first's.
/// `TIMEWARP_LAZY_KERNELS=1` (set by `tools/sanitize_all.sh`) leaves each
/// kernel to its first use: a shard under a sanitizer, which instruments
/// every kernel it loads, then loads only those its tests launch.
fn load_kernels_once(first: &gpu::Gpu) {
    static LOADED: OnceLock<()> = OnceLock::new();
    if std::env::var("TIMEWARP_LAZY_KERNELS").is_ok_and(|v| v == "1") {
        return;
    }
    LOADED.get_or_init(|| {
        use std::io::Write;
        let start = Instant::now();
        first
            .load_kernels()
            .expect("every kernel of the catalogue loads");
        for ordinal in 1..gpu::Gpu::count() {
            if let Ok(other) = gpu::Gpu::ordinal(ordinal) {
                other
                    .load_kernels()
                    .unwrap_or_else(|e| panic!("every kernel loads on GPU {ordinal}: {e}"));
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        let _ = writeln!(
            std::io::stderr(),
            "timing: loading every kernel {seconds:.2} s"
        );
    });
}

/// [`on_gpu`] as a yes or no, for tests that need no timing.
pub fn gpu_available(test: &str) -> bool {
    on_gpu(test).is_some()
}

/// Say once on the terminal that GPU tests skip and why, count them, and
/// say how many when the test binary exits (they pass as far as libtest
/// can tell). libtest captures `eprintln!` of passing tests; the stderr
/// handle itself is not captured, so this shows in a plain `cargo test`.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    SKIPPED.fetch_add(1, Ordering::Relaxed);
    SKIP_REASON.get_or_init(|| {
        let _ = writeln!(
            std::io::stderr(),
            "GPU tests skip in this run ({test} and the others that need a GPU): {reason}"
        );
        // SAFETY: `atexit` is the C library's; the handler only reads
        // statics and writes to stderr.
        unsafe { atexit(report_skipped) };
        reason.to_string()
    });
}

static SKIP_REASON: OnceLock<String> = OnceLock::new();

extern "C" {
    fn atexit(handler: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn report_skipped() {
    use std::io::Write;
    let count = SKIPPED.load(Ordering::Relaxed);
    let reason = SKIP_REASON.get().map_or("", String::as_str);
    let _ = writeln!(
        std::io::stderr(),
        "{count} GPU test{} skipped (reported as passed): {reason}",
        if count == 1 { " was" } else { "s were" }
    );
}

/// GPU options with `variant` (`None`: the default choice).
pub fn gpu_options(variant: Option<Variant>) -> ComputeOptions {
    ComputeOptions {
        gpu_variant: variant,
        ..ComputeOptions::on(Device::Gpu)
    }
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// One random series, `length x dims`, N(0, scale^2).
pub fn random_series(rng: &mut StdRng, length: usize, dims: usize, scale: f64) -> Array2<f64> {
    Array2::from_shape_fn((length, dims), |_| {
        scale * rng.sample::<f64, _>(StandardNormal)
    })
}

/// A batch of random series of the given lengths.
pub fn random_set(rng: &mut StdRng, lengths: &[usize], dims: usize, scale: f64) -> SeriesSet<f64> {
    let series: Vec<_> = lengths
        .iter()
        .map(|&n| random_series(rng, n, dims, scale))
        .collect();
    SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap()
}

/// Random increasing timestamps for every series of `set`.
pub fn with_random_timestamps(rng: &mut StdRng, set: SeriesSet<f64>) -> SeriesSet<f64> {
    let times: Vec<ndarray::Array1<f64>> = (0..set.len())
        .map(|k| {
            let mut t = rng.random_range(0.0..3.0);
            (0..set.series_len(k))
                .map(|_| {
                    t += rng.random_range(0.1..2.0);
                    t
                })
                .collect()
        })
        .collect();
    set.with_timestamps(times.iter().map(|t| t.view())).unwrap()
}

/// [`random_set`] with random increasing timestamps.
pub fn random_timed_set(
    rng: &mut StdRng,
    lengths: &[usize],
    dims: usize,
    scale: f64,
) -> SeriesSet<f64> {
    let set = random_set(rng, lengths, dims, scale);
    with_random_timestamps(rng, set)
}

/// The oracle's value for one pair.
pub fn oracle_pair(
    a: ArrayView2<f64>,
    ta: &ndarray::Array1<f64>,
    b: ArrayView2<f64>,
    tb: &ndarray::Array1<f64>,
    metric: Metric,
) -> f64 {
    match metric {
        Metric::Dtw(m) => oracle::dtw(a, b, m.band()),
        Metric::SoftDtw(m) if m.is_divergence() => {
            oracle::soft_dtw_divergence(a, b, m.gamma(), m.band())
        }
        Metric::SoftDtw(m) => oracle::soft_dtw_banded(a, b, m.gamma(), m.band()),
        Metric::Twed(m) => oracle::twed(a, ta.view(), b, tb.view(), m.nu(), m.lambda(), m.degree()),
    }
}

/// Magnitude of the terms a pair's value accumulates, the scale of its
/// rounding error. DTW and TWED add only non-negative terms, so it is the
/// value itself; Soft-DTW adds costs (bounded by the DTW value on the best
/// path) and soft-min corrections in [-gamma ln 3, 0] per cell of the path.
pub fn error_scale(a: ArrayView2<f64>, b: ArrayView2<f64>, value: f64, metric: Metric) -> f64 {
    match metric {
        Metric::SoftDtw(m) => {
            // The divergence adds the terms of sdtw(a, a) and sdtw(b, b)
            // (whose DTW is 0), on paths of 2 n and 2 m cells.
            let (n, k) = (a.nrows() as f64, b.nrows() as f64);
            let paths = if m.is_divergence() {
                2.0 * (n + k)
            } else {
                n + k
            };
            oracle::dtw(a, b, m.band()) + m.gamma() * paths * 3f64.ln() + value.abs()
        }
        _ => value.abs(),
    }
}

/// Allowed relative error (of [`error_scale`]) for a pair of lengths `n`,
/// `m` with `dims` dimensions, in precision `T`.
///
/// f64: 1e-12. The oracle and the kernels round differently (summation
/// order, libm vs std for exp/ln), but each cell adds O(dims) roundings of
/// relative size u = 1.1e-16 to a sum no larger than the scale, so a path
/// of n + m cells is off by at most about 4 (n + m)(dims + 2) u, which is
/// under 1e-12 for n + m up to 2000 and dims <= 3 in the statistical
/// (square-root) sense that rounding errors actually accumulate in; the
/// worst case is checked for f32 below.
///
/// f32: the same first-order worst-case bound, 4 (n + m)(dims + 2) u with
/// u = 6e-8, since f32 runs show the worst case far more readily. The
/// oracle runs on the f32-rounded inputs, so input rounding is not counted.
pub fn tolerance<T: Float>(n: usize, m: usize, dims: usize) -> f64 {
    if T::NAME == "f64" {
        1e-12
    } else {
        4.0 * (n + m) as f64 * (dims + 2) as f64 * T::UNIT_ROUNDOFF
    }
}

/// Assert that `got` (computed in precision `T` from `a` and `b` rounded to
/// `T`) matches the oracle on the rounded inputs within [`tolerance`].
pub fn assert_matches_oracle<T: Float>(
    got: &Array2<T>,
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    metric: Metric,
    context: &str,
) {
    let (a, b) = (a.cast::<f64>().unwrap(), b.cast::<f64>().unwrap());
    assert_eq!(got.dim(), (a.len(), b.len()), "{context}: shape");
    let reference = oracle_matrix(&a, &b, metric);
    for i in 0..a.len() {
        for j in 0..b.len() {
            let (x, y) = (a.series(i), b.series(j));
            let expected = reference[[i, j]];
            let actual = got[[i, j]].to_f64();
            let scale = error_scale(x, y, expected, metric);
            let bound = tolerance::<T>(x.nrows(), y.nrows(), x.ncols()) * scale;
            assert!(
                (actual - expected).abs() <= bound,
                "{context}: {metric:?} {} pair ({i}, {j}), lengths {} and {}, dims {}: got {actual:e}, oracle {expected:e}, |diff| {:e} > bound {bound:e}",
                T::NAME,
                x.nrows(),
                y.nrows(),
                x.ncols(),
                (actual - expected).abs()
            );
        }
    }
}

/// A key of a batch pair and measure: a hash of the series' values,
/// lengths and timestamps and of the measure's parameters.
fn key(a: &SeriesSet<f64>, b: &SeriesSet<f64>, metric: Metric) -> u64 {
    let mut hasher = DefaultHasher::new();
    for set in [a, b] {
        (set.len(), set.dims()).hash(&mut hasher);
        for k in 0..set.len() {
            set.series_len(k).hash(&mut hasher);
            for value in set.series(k).iter().chain(set.timestamps(k).iter()) {
                value.to_bits().hash(&mut hasher);
            }
        }
    }
    format!("{metric:?}").hash(&mut hasher);
    hasher.finish()
}

/// Matrices by key, each slot filled once.
type Cache = OnceLock<Mutex<HashMap<u64, Arc<OnceLock<Array2<f64>>>>>>;

/// A matrix computed once per batch pair and measure, shared by every test
/// that asks for it (the slot is made under the lock; the matrix outside it).
fn memoized(cache: &'static Cache, key: u64, compute: impl FnOnce() -> Array2<f64>) -> Array2<f64> {
    let slot = cache
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(key)
        .or_default()
        .clone();
    slot.get_or_init(compute).clone()
}

/// The oracle's matrix of `a` against `b`, its pairs on all cores, once per
/// batch pair and measure.
pub fn oracle_matrix(a: &SeriesSet<f64>, b: &SeriesSet<f64>, metric: Metric) -> Array2<f64> {
    static CACHE: Cache = OnceLock::new();
    memoized(&CACHE, key(a, b, metric), || {
        let values: Vec<f64> = (0..a.len() * b.len())
            .into_par_iter()
            .map(|k| {
                let (i, j) = (k / b.len(), k % b.len());
                oracle_pair(
                    a.series(i),
                    &a.timestamps(i),
                    b.series(j),
                    &b.timestamps(j),
                    metric,
                )
            })
            .collect();
        Array2::from_shape_vec((a.len(), b.len()), values).unwrap()
    })
}

/// The CPU backend's matrix in f64, once per batch pair and measure: the
/// reference for pairs too long for the oracle's full matrix.
pub fn cpu_matrix(a: &SeriesSet<f64>, b: &SeriesSet<f64>, metric: Metric) -> Array2<f64> {
    static CACHE: Cache = OnceLock::new();
    memoized(&CACHE, key(a, b, metric), || {
        let cpu = ComputeOptions::on(Device::Cpu);
        timewarp::distance_matrix(a, Some(b), metric, &cpu).unwrap()
    })
}
