//! Resident sets ([`timewarp::upload`], [`timewarp::distance_matrix_resident`])
//! and the streamed pipeline behind [`timewarp::distance_matrix`]: resident
//! == streamed exactly (the same kernels on the same pairs, however the work
//! is cut), both == the CPU backend and the oracle within rounding, on
//! random batches with unequal lengths, multivariate, with timestamps, every
//! measure, f32 and f64, with memory budgets small enough to force many
//! blocks, chunks and slots. API errors are checked on the CPU; GPU tests
//! skip without a GPU and fail without one under `REQUIRE_GPU=1`.

use crate::common::*;
use ndarray::Array2;
use timewarp::{
    distance_matrix, distance_matrix_resident, upload, ComputeOptions, Device, Dtw, Error, Float,
    Metric, SeriesSet, SoftDtw, Twed, Variant,
};

fn metrics() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(5).into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::default().into(),
        Twed::new(0.5, 1.0, 1.0).unwrap().into(),
    ]
}

/// Queries and a database of unequal lengths (1 to 260), `dims` dimensions,
/// with random timestamps when `times` (TWED reads them, the others not).
fn batches(seed: u64, dims: usize, times: bool) -> (SeriesSet<f64>, SeriesSet<f64>) {
    let mut rng = rng(seed);
    let query_lengths = [1, 2, 17, 64, 130, 33, 5, 200, 90];
    let database_lengths: Vec<usize> = (0..60).map(|k| 1 + (k * 37) % 260).collect();
    let queries = random_set(&mut rng, &query_lengths, dims, 1.0);
    let database = random_set(&mut rng, &database_lengths, dims, 1.0);
    if times {
        let queries = with_random_timestamps(&mut rng, queries);
        let database = with_random_timestamps(&mut rng, database);
        return (queries, database);
    }
    (queries, database)
}

/// `got` against the CPU backend's matrix of the same inputs, within the
/// rounding bound of [`tolerance`] on each pair's [`error_scale`].
fn assert_close_to_cpu<T: Float>(
    got: &Array2<T>,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    context: &str,
) {
    let cpu = distance_matrix(a, b, metric, &ComputeOptions::on(Device::Cpu)).unwrap();
    let (a64, b64) = (
        a.cast::<f64>().unwrap(),
        b.unwrap_or(a).cast::<f64>().unwrap(),
    );
    assert_eq!(got.dim(), cpu.dim(), "{context}: shape");
    for ((i, j), &value) in got.indexed_iter() {
        let (x, y) = (a64.series(i), b64.series(j));
        let expected = cpu[[i, j]].to_f64();
        let bound = 2.0
            * tolerance::<T>(x.nrows(), y.nrows(), x.ncols())
            * error_scale(x, y, expected, metric);
        assert!(
            (value.to_f64() - expected).abs() <= bound,
            "{context}: {metric:?} {} ({i}, {j}): GPU {value:e}, CPU {expected:e}",
            T::NAME
        );
    }
}

// ---------------------------------------------------------------- CPU

/// On the CPU a resident set is a copy the CPU backend reads: the same
/// matrix as `distance_matrix`, to the bit.
#[test]
fn cpu_resident_set_gives_distance_matrix() {
    let cpu = ComputeOptions::on(Device::Cpu);
    for (dims, times) in [(1, false), (3, true)] {
        let (queries, database) = batches(1, dims, times);
        let (queries, database) = (queries.slice(0..4), database.slice(0..12));
        let resident = upload(&database, &cpu).unwrap();
        assert!(!resident.on_gpu());
        assert_eq!(
            (resident.len(), resident.dims(), resident.max_len()),
            (12, dims, database.max_len())
        );
        assert_eq!(resident.min_len(), database.min_len());
        assert_eq!(resident.total_samples(), database.total_samples());
        assert!(!resident.is_empty());
        for metric in metrics() {
            let expected = distance_matrix(&queries, Some(&database), metric, &cpu).unwrap();
            let got = distance_matrix_resident(&queries, &resident, metric, &cpu).unwrap();
            assert_eq!(got, expected, "{metric:?}, {dims} dims");
        }
        let (queries, database) = (
            queries.cast::<f32>().unwrap(),
            database.cast::<f32>().unwrap(),
        );
        let resident = upload(&database, &cpu).unwrap();
        let metric = Twed::default().into();
        let expected = distance_matrix(&queries, Some(&database), metric, &cpu).unwrap();
        let got = distance_matrix_resident(&queries, &resident, metric, &cpu).unwrap();
        assert_eq!(got, expected, "f32, {dims} dims");
    }
}

#[test]
fn dimension_mismatch_is_an_error() {
    let mut rng = rng(2);
    let database = random_set(&mut rng, &[5, 7], 2, 1.0);
    let queries = random_set(&mut rng, &[4], 3, 1.0);
    // Auto: on the GPU where there is one, else the CPU; the check comes first.
    let options = ComputeOptions::on(Device::Auto);
    let resident = upload(&database, &options).unwrap();
    match distance_matrix_resident(&queries, &resident, Dtw::new().into(), &options) {
        Err(Error::DimensionMismatch { first, second }) => assert_eq!((first, second), (3, 2)),
        other => panic!("expected a dimension mismatch, got {other:?}"),
    }
}

/// A resident set has at least one series: an empty batch is refused
/// before it could be uploaded.
#[test]
fn an_empty_batch_cannot_be_uploaded() {
    let none: Vec<ndarray::ArrayView2<f64>> = Vec::new();
    match SeriesSet::from_series(none) {
        Err(Error::InvalidInput(message)) => assert!(message.contains("no series"), "{message}"),
        other => panic!("expected an empty batch to be refused, got {other:?}"),
    }
}

#[test]
fn the_device_must_agree_with_the_set() {
    let mut rng = rng(3);
    let database = random_set(&mut rng, &[5, 7], 1, 1.0);
    let queries = random_set(&mut rng, &[4], 1, 1.0);
    let resident = upload(&database, &ComputeOptions::on(Device::Cpu)).unwrap();
    let error = distance_matrix_resident(
        &queries,
        &resident,
        Dtw::new().into(),
        &ComputeOptions::on(Device::Gpu),
    )
    .unwrap_err();
    assert!(matches!(error, Error::InvalidInput(_)), "{error:?}");
    assert!(error.to_string().contains("host memory"), "{error}");
}

#[test]
fn upload_to_a_missing_gpu_is_an_error() {
    if timewarp::gpu::Gpu::get().is_ok() {
        skip("upload_to_a_missing_gpu_is_an_error", "there is a GPU");
        return;
    }
    let set = random_set(&mut rng(4), &[3], 1, 1.0);
    match upload(&set, &ComputeOptions::on(Device::Gpu)) {
        Err(Error::GpuUnavailable(_)) => {}
        other => panic!("expected GpuUnavailable, got {:?}", other.map(|s| s.len())),
    }
}

// ---------------------------------------------------------------- GPU

fn gpu_with(variant: Option<Variant>, budget: Option<usize>) -> ComputeOptions {
    ComputeOptions {
        device: Device::Gpu,
        gpu_memory_budget: budget,
        gpu_variant: variant,
        ..ComputeOptions::default()
    }
}

/// Budgets: the default, and small enough for many blocks, tiles and
/// slots while one pair's rows of series up to 260 samples still fit the
/// naive kernel's workspace (48 KiB: 36 outputs of f64 a tile).
const BUDGETS: [Option<usize>; 3] = [None, Some(256 << 10), Some(48 << 10)];

/// The budgets a case runs under: every one for the warp kernel; for the
/// naive kernel, whose workspace cuts the small budgets into hundreds of
/// tiles (each a copy and a launch: seconds a call in f64), those only
/// with the first metric, as the tiling is the same for every measure.
fn budgets(variant: Option<Variant>, metric_index: usize) -> Vec<Option<usize>> {
    BUDGETS
        .into_iter()
        .filter(|&budget| variant != Some(Variant::Naive) || metric_index == 0 || budget.is_none())
        .collect()
}
/// For series short enough to need no workspace in the warp kernel: a few
/// outputs a tile, thousands of tiles.
const TINY: Option<usize> = Some(4 << 10);

/// Queries against a database, streamed and resident, for every variant
/// and budget: resident == streamed exactly, and both close to the oracle
/// and the CPU backend.
fn resident_equals_streamed<T: Float>(dims: usize, times: bool) {
    let (queries, database) = batches(10 + dims as u64, dims, times);
    let (queries, database) = (queries.cast::<T>().unwrap(), database.cast::<T>().unwrap());
    let context = format!(
        "{} {dims} dims{}",
        T::NAME,
        if times { ", timestamps" } else { "" }
    );
    // The default takes the warp kernel here; the naive one needs a
    // workspace, which the budgets cut into more tiles.
    for variant in [Some(Variant::Naive), Some(Variant::Warp)] {
        let resident = upload(&database, &gpu_with(variant, None)).unwrap();
        assert!(resident.on_gpu());
        for (index, metric) in metrics().into_iter().enumerate() {
            let whole =
                distance_matrix(&queries, Some(&database), metric, &gpu_with(variant, None))
                    .unwrap();
            let context = format!("{context}, {variant:?}");
            assert_matches_oracle(&whole, &queries, &database, metric, &context);
            assert_close_to_cpu(&whole, &queries, Some(&database), metric, &context);
            for budget in budgets(variant, index) {
                let options = gpu_with(variant, budget);
                let streamed =
                    distance_matrix(&queries, Some(&database), metric, &options).unwrap();
                assert_eq!(
                    streamed, whole,
                    "{context}, {metric:?}, streamed, budget {budget:?}"
                );
                let got = distance_matrix_resident(&queries, &resident, metric, &options).unwrap();
                assert_eq!(
                    got, whole,
                    "{context}, {metric:?}, resident, budget {budget:?}"
                );
            }
        }
    }
}

macro_rules! gpu_tests {
    ($($name:ident => $body:expr;)*) => {
        $( #[test]
        fn $name() {
            if let Some(_timed) = on_gpu(stringify!($name)) {
                $body;
            }
        } )*
    };
}

gpu_tests! {
    gpu_resident_equals_streamed_f64 => resident_equals_streamed::<f64>(1, false);
    gpu_resident_equals_streamed_f32 => resident_equals_streamed::<f32>(1, false);
    gpu_resident_equals_streamed_multivariate_f64 => resident_equals_streamed::<f64>(3, true);
    gpu_resident_equals_streamed_multivariate_f32 => resident_equals_streamed::<f32>(2, true);
    gpu_self_matrix_streams_in_chunks => self_matrix_in_chunks();
    gpu_the_larger_side_streams => larger_side_streams();
    gpu_many_queries_against_a_resident_set => many_queries();
    gpu_large_sets_cross_staging_pieces => large_sets::<f32>();
    gpu_large_sets_cross_staging_pieces_f64 => large_sets::<f64>();
    gpu_resident_errors_and_variants => resident_errors();
}

/// A batch against itself: blocks, their triangles and the mirrored
/// streamed chunks give the one-tile matrix exactly, symmetric.
fn self_matrix_in_chunks() {
    let mut rng = rng(20);
    let lengths: Vec<usize> = (0..70).map(|k| 1 + (k * 29) % 150).collect();
    let set = random_set(&mut rng, &lengths, 2, 1.0);
    let set = with_random_timestamps(&mut rng, set);
    for variant in [Some(Variant::Naive), Some(Variant::Warp)] {
        for (index, metric) in metrics().into_iter().enumerate() {
            let whole = distance_matrix(&set, None, metric, &gpu_with(variant, None)).unwrap();
            assert_close_to_cpu(&whole, &set, None, metric, "self-matrix");
            assert_eq!(whole, whole.t(), "{metric:?}: not symmetric");
            for budget in budgets(variant, index) {
                let got = distance_matrix(&set, None, metric, &gpu_with(variant, budget)).unwrap();
                assert_eq!(got, whole, "{variant:?} {metric:?}, budget {budget:?}");
            }
        }
    }
}

/// Many short queries against few references: the references are uploaded
/// and the queries streamed (rows in chunks).
fn larger_side_streams() {
    let mut rng = rng(21);
    let lengths: Vec<usize> = (0..300).map(|k| 1 + (k * 13) % 50).collect();
    let many = random_set(&mut rng, &lengths, 1, 1.0)
        .cast::<f32>()
        .unwrap();
    let few = random_set(&mut rng, &[40, 3, 77], 1, 1.0)
        .cast::<f32>()
        .unwrap();
    for metric in metrics() {
        for (a, b) in [(&many, &few), (&few, &many)] {
            let whole = distance_matrix(a, Some(b), metric, &gpu_with(None, None)).unwrap();
            assert_close_to_cpu(&whole, a, Some(b), metric, "lopsided");
            for budget in BUDGETS.into_iter().chain([TINY]) {
                let got = distance_matrix(a, Some(b), metric, &gpu_with(None, budget)).unwrap();
                assert_eq!(
                    got,
                    whole,
                    "{metric:?} {} x {}, budget {budget:?}",
                    a.len(),
                    b.len()
                );
            }
        }
    }
}

/// Hundreds of queries against a resident set, in query blocks and column
/// ranges; the set reused across measures, calls and a second set.
fn many_queries() {
    let mut rng = rng(22);
    let query_lengths: Vec<usize> = (0..400).map(|k| 1 + (k * 7) % 40).collect();
    let database_lengths: Vec<usize> = (0..500).map(|k| 2 + (k * 11) % 45).collect();
    let queries = random_set(&mut rng, &query_lengths, 2, 1.0);
    let database = random_set(&mut rng, &database_lengths, 2, 1.0);
    let resident = upload(&database, &gpu_with(None, None)).unwrap();
    let other = upload(&queries, &gpu_with(None, None)).unwrap();
    for metric in metrics() {
        let whole =
            distance_matrix(&queries, Some(&database), metric, &gpu_with(None, None)).unwrap();
        assert_close_to_cpu(&whole, &queries, Some(&database), metric, "many queries");
        for budget in BUDGETS.into_iter().chain([TINY]) {
            let got =
                distance_matrix_resident(&queries, &resident, metric, &gpu_with(None, budget))
                    .unwrap();
            assert_eq!(got, whole, "{metric:?}, budget {budget:?}");
        }
        // The other way round, against the second resident set.
        let back =
            distance_matrix_resident(&database, &other, metric, &gpu_with(None, None)).unwrap();
        let expected =
            distance_matrix(&database, Some(&queries), metric, &gpu_with(None, None)).unwrap();
        assert_eq!(back, expected, "{metric:?}, second set");
    }
}

/// Sets larger than one staging buffer (16 MiB): uploads in several
/// pieces over several streams, streamed chunks copied on all cores.
fn large_sets<T: Float>() {
    let database = timewarp::data::random_normal(50_000, 100, 1, 23)
        .cast::<T>()
        .unwrap();
    let queries = timewarp::data::random_normal(3, 100, 1, 24)
        .cast::<T>()
        .unwrap();
    let resident = upload(&database, &gpu_with(None, None)).unwrap();
    for metric in [Dtw::new().into(), Twed::default().into()] {
        let streamed =
            distance_matrix(&queries, Some(&database), metric, &gpu_with(None, None)).unwrap();
        let got =
            distance_matrix_resident(&queries, &resident, metric, &gpu_with(None, None)).unwrap();
        assert_eq!(got, streamed, "{metric:?} {}", T::NAME);
        assert_close_to_cpu(&streamed, &queries, Some(&database), metric, "large");
        // The database as rows: the uploaded and streamed sides swap.
        let swapped =
            distance_matrix(&database, Some(&queries), metric, &gpu_with(None, None)).unwrap();
        assert_close_to_cpu(
            &swapped,
            &database,
            Some(&queries),
            metric,
            "large, swapped",
        );
    }
}

fn resident_errors() {
    let mut rng = rng(25);
    let database = random_set(&mut rng, &[300, 20], 1, 1.0);
    let queries = random_set(&mut rng, &[9], 1, 1.0);
    // Larger than the budget: a clear error, and streaming still works.
    // On GPU 0 alone: several GPUs' budgets add up (the message says so).
    let one = gpu_with(None, Some(64)).with_gpus(timewarp::GpuSet::one(0).unwrap());
    let error = upload(&database, &one).err().unwrap();
    assert!(
        matches!(error, Error::GpuOutOfMemory { source: None, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("over the 64 available"),
        "{error}"
    );
    let resident = upload(&database, &gpu_with(None, None)).unwrap();
    // The variants that read host series pair by pair or block by block.
    for variant in [
        Variant::Tiled,
        Variant::TiledLaunches,
        Variant::Diagonal,
        Variant::DiagonalLaunches,
        Variant::Stencil,
    ] {
        let error = distance_matrix_resident(
            &queries,
            &resident,
            Dtw::new().into(),
            &gpu_with(Some(variant), None),
        )
        .unwrap_err();
        assert!(
            matches!(&error, Error::InvalidInput(m) if m.contains(variant.name()) && m.contains("resident")),
            "{error:?}"
        );
    }
    let error = distance_matrix_resident(
        &queries,
        &resident,
        Dtw::new().into(),
        &ComputeOptions::on(Device::Cpu),
    )
    .unwrap_err();
    assert!(error.to_string().contains("GPU memory"), "{error}");
    // One long pair, where the default would pick the tiled kernel: the
    // warp kernel runs it.
    let long_a = random_set(&mut rng, &[3000], 1, 1.0);
    let long_b = random_set(&mut rng, &[2500], 1, 1.0);
    let resident = upload(&long_b, &gpu_with(None, None)).unwrap();
    for metric in metrics() {
        let got =
            distance_matrix_resident(&long_a, &resident, metric, &gpu_with(None, None)).unwrap();
        assert_close_to_cpu(&got, &long_a, Some(&long_b), metric, "long pair");
    }
    // A series whose naive rows do not fit the workspace.
    let error = distance_matrix_resident(
        &long_a,
        &resident,
        Dtw::new().into(),
        &gpu_with(Some(Variant::Naive), Some(16 << 10)),
    )
    .unwrap_err();
    assert!(error.to_string().contains("workspace"), "{error}");
}
