//! Every kernel of the catalogue, launched on a small case and checked
//! against the oracle. The selection rules reach some kernels only for
//! workloads too large for a test (the wider tiled stripes) or never by
//! default (shapes kept for `timewarp bench`); this module forces each of
//! them by name on its thread (`internals::force_kernel_shape`). After each call
//! it checks that the kernel it aimed at was launched, and at the end that
//! every kernel of the catalogue was: run alone (the sanitizer runs take
//! this module), that says the run checked every kernel.

use crate::common::{assert_matches_oracle, on_gpu, random_set, random_timed_set, rng};
use crate::paired::{batches, check_gradients, check_values, metric};
use rand::rngs::StdRng;
use std::collections::BTreeSet;
use timewarp::{
    distance_matrix, internals, oracle, soft_dtw_alignment, ComputeOptions, Dtw, Metric, SeriesSet,
    SoftDtw, Twed, Variant,
};
use timewarp_kernels::catalogue::drivers;
use timewarp_kernels::{Driver, KernelId, Measure, Precision};

/// GPU 0's options with `variant`: a forced shape is this thread's, and
/// on several GPUs a call's blocks run on other threads, with the shape
/// the rules choose (streaming, too, is one GPU's path).
fn gpu_options(variant: Option<Variant>) -> ComputeOptions {
    crate::common::gpu_options(variant).with_gpus(timewarp::GpuSet::one(0).unwrap())
}

/// Forces a kernel shape on this thread while it lives.
struct Forced;

impl Forced {
    fn shape(driver: Driver) -> Forced {
        // Names outlive the thread's calls: the few a run forces are leaked.
        let name: &'static str = Box::leak(driver.to_string().into_boxed_str());
        internals::force_kernel_shape(Some(name));
        Forced
    }
}

impl Drop for Forced {
    fn drop(&mut self) {
        internals::force_kernel_shape(None);
    }
}

/// Asserts that kernel `id` has been launched.
fn assert_launched(id: KernelId, context: &str) {
    assert!(
        internals::kernels_used().contains(&id),
        "{context}: the call did not launch {id}"
    );
}

/// The measure's metric, banded by 3 where `banded`.
fn metric_of(measure: Measure, banded: bool) -> Metric {
    match (measure, banded) {
        (Measure::Dtw, false) => Dtw::new().into(),
        (Measure::Dtw, true) => Dtw::with_band(3).into(),
        (Measure::SoftDtw, false) => SoftDtw::new(0.5).unwrap().into(),
        (Measure::SoftDtw, true) => SoftDtw::new(0.5).unwrap().with_band(3).into(),
        (Measure::Twed, _) => Twed::new(0.5, 1.0, 2.0).unwrap().into(),
    }
}

/// A matrix of `a` against `b` with `variant` in both precisions, each
/// against the oracle and each launching `driver`'s kernel.
fn matrix_with(
    (a, b): (&SeriesSet<f64>, &SeriesSet<f64>),
    metric: Metric,
    variant: Variant,
    (measure, driver): (Measure, Driver),
) {
    let options = gpu_options(Some(variant));
    let univariate = a.dims() == 1;
    let context = format!("{measure:?} {driver} {variant}, {} dims", a.dims());
    let got = distance_matrix(a, Some(b), metric, &options).unwrap();
    assert_matches_oracle(&got, a, b, metric, &context);
    assert_launched(
        KernelId::new(measure, driver, univariate, Precision::F64),
        &context,
    );
    let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
    let got = distance_matrix(&a32, Some(&b32), metric, &options).unwrap();
    assert_matches_oracle(&got, &a32, &b32, metric, &context);
    assert_launched(
        KernelId::new(measure, driver, univariate, Precision::F32),
        &context,
    );
}

/// A pair of sets as the pair of their references.
fn pair(sets: &(SeriesSet<f64>, SeriesSet<f64>)) -> (&SeriesSet<f64>, &SeriesSet<f64>) {
    (&sets.0, &sets.1)
}

/// The kernels of the matrix variants, each measure and driver in `dims`
/// dimensions.
fn matrix_kernels(rng: &mut StdRng, dims: usize) {
    let short = (
        random_timed_set(rng, &[1, 40, 7], dims, 1.0),
        random_timed_set(rng, &[50, 2], dims, 1.0),
    );
    // Near-equal lengths: a band of radius 3 stays narrow enough for every
    // sheared shape.
    let near = (
        random_timed_set(rng, &[40, 33], dims, 1.0),
        random_timed_set(rng, &[38, 35], dims, 1.0),
    );
    // Past the smaller local capacity; past one panel of the widest tiled
    // stripe.
    let past_256 = (
        random_timed_set(rng, &[270, 3], dims, 1.0),
        random_timed_set(rng, &[260, 5], dims, 1.0),
    );
    let past_panel = (
        random_timed_set(rng, &[1, 300], dims, 1.0),
        random_timed_set(rng, &[530, 2], dims, 1.0),
    );
    for measure in Measure::ALL {
        for driver in drivers(measure) {
            let plain = metric_of(measure, false);
            let case = (measure, driver);
            match driver {
                Driver::Naive => matrix_with(pair(&short), plain, Variant::Naive, case),
                Driver::Local { capacity } => {
                    let sets = if capacity <= 256 { &short } else { &past_256 };
                    matrix_with(pair(sets), plain, Variant::Local, case);
                }
                Driver::Shared => matrix_with(pair(&short), plain, Variant::Shared, case),
                Driver::Stencil => matrix_with(pair(&short), plain, Variant::Stencil, case),
                Driver::Diagonal => matrix_with(pair(&short), plain, Variant::Diagonal, case),
                Driver::DiagonalStep => {
                    matrix_with(pair(&short), plain, Variant::DiagonalLaunches, case)
                }
                Driver::Warp { .. } | Driver::Skewed { .. } => {
                    let _forced = Forced::shape(driver);
                    matrix_with(pair(&short), plain, Variant::Warp, case);
                }
                Driver::Sheared { .. } => {
                    let _forced = Forced::shape(driver);
                    let banded = metric_of(measure, true);
                    matrix_with(pair(&near), banded, Variant::Warp, case);
                }
                Driver::Tiled { .. } => {
                    let _forced = Forced::shape(driver);
                    matrix_with(pair(&past_panel), plain, Variant::Tiled, case);
                }
                Driver::TiledLaunches { .. } => {
                    let _forced = Forced::shape(driver);
                    matrix_with(pair(&past_panel), plain, Variant::TiledLaunches, case);
                }
                // Paired Soft-DTW's kernels: `paired_kernels`.
                Driver::Panels { .. }
                | Driver::Streamed { .. }
                | Driver::Gradient
                | Driver::WarpGradient { .. }
                | Driver::PanelsGradient { .. }
                | Driver::Alignment => {}
                // Not pair drivers (not listed by `drivers`): `search_kernels`,
                // `subsequence_kernels` and the k-NN's `knn_kernels`.
                Driver::SearchEnvelope
                | Driver::SearchBounds
                | Driver::SearchDtw
                | Driver::Subsequence { .. }
                | Driver::KnnEnvelope
                | Driver::KnnBounds
                | Driver::KnnGather => {}
            }
        }
    }
}

/// Paired Soft-DTW values with `options` in both precisions against the
/// oracle, each launching `driver`'s kernel.
fn paired_with(
    (x, y): (&SeriesSet<f64>, &SeriesSet<f64>),
    options: &ComputeOptions,
    driver: Driver,
    context: &str,
) {
    let soft = metric(0.5, None);
    let univariate = x.dims() == 1;
    check_values::<f64>(options, x, y, soft, context);
    assert_launched(
        KernelId::new(Measure::SoftDtw, driver, univariate, Precision::F64),
        context,
    );
    check_values::<f32>(options, x, y, soft, context);
    assert_launched(
        KernelId::new(Measure::SoftDtw, driver, univariate, Precision::F32),
        context,
    );
}

/// Paired Soft-DTW's kernels (values in panels and streamed, gradients,
/// the expected alignment) in `dims` dimensions.
fn paired_kernels(rng: &mut StdRng, dims: usize) {
    let shapes = [(1, 1), (17, 33), (40, 12), (100, 128), (128, 90)];
    let (x, y) = batches(61 + dims as u64, &shapes, dims, 1.0);
    for driver in drivers(Measure::SoftDtw) {
        let here = format!("paired {driver}, {dims} dims");
        let context = here.as_str();
        match driver {
            Driver::Panels { .. } => {
                let _forced = Forced::shape(driver);
                paired_with((&x, &y), &gpu_options(Some(Variant::Warp)), driver, context);
            }
            Driver::Streamed { .. } => {
                // The host writes the pairs while the kernel reads them for
                // calls of 1 to 2 MiB: 96 samples a series.
                for (precision, bytes) in [(Precision::F32, 4), (Precision::F64, 8)] {
                    let pairs = (3 << 19) / (2 * 96 * dims * bytes);
                    let (x, y) = batches(70 + dims as u64, &vec![(96, 96); pairs], dims, 1.0);
                    let options = gpu_options(None);
                    let before = internals::this_thread_streamed_calls();
                    match precision {
                        Precision::F32 => {
                            check_values::<f32>(&options, &x, &y, metric(0.5, None), context)
                        }
                        Precision::F64 => {
                            check_values::<f64>(&options, &x, &y, metric(0.5, None), context)
                        }
                    }
                    assert_eq!(
                        internals::this_thread_streamed_calls(),
                        before + 1,
                        "{context}, {precision:?}: the call did not stream"
                    );
                    let id = KernelId::new(Measure::SoftDtw, driver, dims == 1, precision);
                    assert_launched(id, context);
                }
            }
            Driver::Gradient => {
                let options = gpu_options(Some(Variant::Stencil));
                check_gradients::<f64>(&options, &x, &y, 0.5, None, context);
                check_gradients::<f32>(&options, &x, &y, 0.5, None, context);
                for precision in Precision::ALL {
                    let id = KernelId::new(Measure::SoftDtw, driver, dims == 1, precision);
                    assert_launched(id, context);
                }
            }
            Driver::WarpGradient { .. } | Driver::PanelsGradient { .. } => {
                let _forced = Forced::shape(driver);
                let options = gpu_options(Some(Variant::Warp));
                check_gradients::<f64>(&options, &x, &y, 0.5, None, context);
                check_gradients::<f32>(&options, &x, &y, 0.5, None, context);
                for precision in Precision::ALL {
                    let id = KernelId::new(Measure::SoftDtw, driver, dims == 1, precision);
                    assert_launched(id, context);
                }
            }
            Driver::Alignment => alignment(rng, dims, context),
            _ => {}
        }
    }
}

/// Soft-DTW's expected alignment of a pair on the GPU against the oracle's.
fn alignment(rng: &mut StdRng, dims: usize, context: &str) {
    let pair = random_set(rng, &[37, 52], dims, 1.0);
    let (a, b) = (pair.series(0), pair.series(1));
    let soft = SoftDtw::new(0.5).unwrap();
    let options = gpu_options(None);
    let (expected, value) = oracle::soft_dtw_alignment(a, b, 0.5, None);
    let (got, got_value) = soft_dtw_alignment(a, b, soft, &options).unwrap();
    assert!(
        (got_value - value).abs() <= 1e-12 * value.abs().max(1.0),
        "{context}: value"
    );
    let largest = (&got - &expected)
        .iter()
        .fold(0.0f64, |m, d| m.max(d.abs()));
    assert!(largest <= 1e-9, "{context}: alignment off by {largest:e}");
    let (a32, b32) = (a.mapv(|v| v as f32), b.mapv(|v| v as f32));
    let (got, _) = soft_dtw_alignment(a32.view(), b32.view(), soft, &options).unwrap();
    let (expected, _) = oracle::soft_dtw_alignment(
        a32.mapv(f64::from).view(),
        b32.mapv(f64::from).view(),
        0.5,
        None,
    );
    let largest = (got.mapv(f64::from) - &expected)
        .iter()
        .fold(0.0f64, |m, d| m.max(d.abs()));
    // Entries are probabilities; f32 cells round at 6e-8 each, over paths
    // of under 100 cells.
    assert!(
        largest <= 1e-4,
        "{context}: f32 alignment off by {largest:e}"
    );
    for precision in Precision::ALL {
        let id = KernelId::new(Measure::SoftDtw, Driver::Alignment, dims == 1, precision);
        assert_launched(id, context);
    }
}

/// The subsequence search's kernels: a search on the GPU finds the CPU's
/// matches, bit for bit (more in `search_gpu`).
fn search_kernels() {
    use timewarp::search::{subsequences, SearchOptions};
    let series: Vec<f64> = (0..5000)
        .map(|i| (i as f64 * 0.05).sin() + 0.1 * ((i * 7919) % 13) as f64)
        .collect();
    let query = ndarray::Array2::from_shape_fn((50, 1), |(i, _)| series[1200 + i]);
    let options = SearchOptions::default().with_k(3);
    let on = |device| subsequences(query.view(), &series[..], &options.on(device)).unwrap();
    assert_eq!(
        on(timewarp::Device::Gpu).matches,
        on(timewarp::Device::Cpu).matches
    );
    for driver in [
        Driver::SearchEnvelope,
        Driver::SearchBounds,
        Driver::SearchDtw,
    ] {
        assert_launched(KernelId::search(driver), "search");
    }
}

/// The k-NN's bounds kernels, both precisions: the bounded k-NN on the
/// GPU gives the brute force's neighbours, bit for bit (more in
/// `knn_gpu`).
fn knn_kernels() {
    crate::knn_gpu::bounded_equals_brute_force_both_precisions();
    for precision in Precision::ALL {
        for driver in [Driver::KnnEnvelope, Driver::KnnBounds, Driver::KnnGather] {
            assert_launched(KernelId::knn(driver, precision), "k-NN");
        }
    }
}

/// The open-ended subsequence alignment's kernels, a query row a lane and
/// four, each with its univariate twin: the CPU's match, bit for bit
/// (more in `subsequence_gpu`).
fn subsequence_kernels(rng: &mut StdRng) {
    use timewarp::search::subsequence_alignment;
    use timewarp::Device;
    for (m, dims) in [(20, 1), (20, 2), (100, 1), (100, 2)] {
        let series = crate::common::random_series(rng, 3000, dims, 1.0);
        let query = crate::common::random_series(rng, m, dims, 1.0);
        let on = |device| subsequence_alignment(query.view(), &series.view(), device).unwrap();
        assert_eq!(on(Device::Gpu), on(Device::Cpu), "m {m}, dims {dims}");
        let rows = if m <= 32 { 1 } else { 4 };
        let context = format!("subsequence alignment, m {m}, dims {dims}");
        assert_launched(KernelId::subsequence(rows, dims == 1), &context);
    }
}

#[test]
fn gpu_every_kernel_matches_the_oracle() {
    let Some(_timed) = on_gpu("every_kernel::gpu_every_kernel_matches_the_oracle") else {
        return;
    };
    let mut rng = rng(60);
    for dims in [2, 1] {
        matrix_kernels(&mut rng, dims);
        paired_kernels(&mut rng, dims);
    }
    search_kernels();
    knn_kernels();
    subsequence_kernels(&mut rng);
    let used: BTreeSet<KernelId> = internals::kernels_used().into_iter().collect();
    let missing: Vec<String> = KernelId::all()
        .filter(|id| !used.contains(id))
        .map(|id| id.to_string())
        .collect();
    assert!(missing.is_empty(), "kernels never launched: {missing:?}");
}
