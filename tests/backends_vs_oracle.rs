//! Every backend (the CPU backend, and each GPU kernel variant) against the
//! oracle, in f32 and f64, on random batches with mixed and unequal lengths
//! (1, 2, 17, 128, 1000 among them), dims 1 and 3, bands, huge and tiny
//! values, explicit timestamps, and real data (GunPoint). GPU tests skip
//! without a GPU and fail without one under `REQUIRE_GPU=1`.

mod common;

use common::*;
use timewarp::{
    distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SeriesSet, SoftDtw, Twed,
};

fn every_metric() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(0).into(),
        Dtw::with_band(3).into(),
        SoftDtw::new(0.1).unwrap().into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
        Twed::new(0.5, 0.25, 2.0).unwrap().into(),
        Twed::new(1.0, 1.0, 1.0).unwrap().into(),
        Twed::new(0.1, 0.5, 3.0).unwrap().into(),
    ]
}

/// `a` against `b` and `a` against itself, in precision `T`, compared with
/// the oracle; the self-matrix must also be exactly symmetric.
fn check<T: Float>(
    options: &ComputeOptions,
    a: &SeriesSet<f64>,
    b: &SeriesSet<f64>,
    metrics: &[Metric],
    context: &str,
) {
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    for &metric in metrics {
        let got = distance_matrix(&a, Some(&b), metric, options).unwrap();
        assert_matches_oracle(&got, &a, &b, metric, context);
        let itself = distance_matrix(&a, None, metric, options).unwrap();
        assert_matches_oracle(&itself, &a, &a, metric, &format!("{context} (self)"));
        assert_eq!(itself, itself.t(), "{context}: self-matrix not symmetric");
    }
}

fn check_both(
    options: &ComputeOptions,
    a: &SeriesSet<f64>,
    b: &SeriesSet<f64>,
    metrics: &[Metric],
    context: &str,
) {
    check::<f64>(options, a, b, metrics, context);
    check::<f32>(options, a, b, metrics, context);
}

fn mixed_lengths_univariate(options: ComputeOptions) {
    let mut rng = rng(1);
    let a = random_set(&mut rng, &[1, 2, 17, 128, 3, 40], 1, 1.0);
    let b = random_set(&mut rng, &[2, 1, 17, 128, 9], 1, 1.0);
    check_both(&options, &a, &b, &every_metric(), "mixed lengths, 1 dim");
}

fn mixed_lengths_multivariate(options: ComputeOptions) {
    let mut rng = rng(2);
    let a = random_set(&mut rng, &[1, 2, 17, 128, 3, 40], 3, 1.0);
    let b = random_set(&mut rng, &[2, 1, 17, 128, 9], 3, 1.0);
    check_both(&options, &a, &b, &every_metric(), "mixed lengths, 3 dims");
}

fn long_series(options: ComputeOptions) {
    let mut rng = rng(3);
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(50).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
    ];
    for dims in [1, 3] {
        let a = random_set(&mut rng, &[1000, 17], dims, 1.0);
        let b = random_set(&mut rng, &[1000, 128, 1], dims, 1.0);
        check_both(
            &options,
            &a,
            &b,
            &metrics,
            &format!("length 1000, {dims} dims"),
        );
    }
}

fn bands_with_unequal_lengths(options: ComputeOptions) {
    let mut rng = rng(4);
    let metrics: Vec<Metric> = [0, 1, 5, 200].map(|r| Dtw::with_band(r).into()).to_vec();
    let a = random_set(&mut rng, &[5, 17, 30, 1], 2, 1.0);
    let b = random_set(&mut rng, &[9, 17, 1, 60], 2, 1.0);
    check_both(&options, &a, &b, &metrics, "bands, unequal lengths");
}

fn huge_and_tiny_values(options: ComputeOptions) {
    let mut rng = rng(5);
    for (scale, also_f32) in [(1e100, false), (1e-100, false), (1e15, true), (1e-15, true)] {
        let a = random_set(&mut rng, &[7, 20], 2, scale);
        let b = random_set(&mut rng, &[20, 3, 1], 2, scale);
        let context = format!("values scaled by {scale:e}");
        // TWED's nu and lambda would swamp tiny values and vanish next to
        // huge ones; nu = lambda = 0 keeps every term of the scale's size.
        let metrics: Vec<Metric> = vec![
            Dtw::new().into(),
            Dtw::with_band(2).into(),
            SoftDtw::new(scale * scale).unwrap().into(),
            Twed::new(0.0, 0.0, 2.0).unwrap().into(),
        ];
        check::<f64>(&options, &a, &b, &metrics, &context);
        if also_f32 {
            check::<f32>(&options, &a, &b, &metrics, &context);
        }
    }
}

fn twed_with_timestamps(options: ComputeOptions) {
    let mut rng = rng(6);
    for dims in [1, 3] {
        let a = random_set(&mut rng, &[1, 2, 17, 50], dims, 1.0);
        let a = with_random_timestamps(&mut rng, a);
        let b = random_set(&mut rng, &[3, 17, 40], dims, 1.0);
        let b = with_random_timestamps(&mut rng, b);
        let metrics: Vec<Metric> = vec![
            Twed::default().into(),
            Twed::new(0.5, 0.25, 2.0).unwrap().into(),
            Twed::new(1.0, 1.0, 1.0).unwrap().into(),
        ];
        check_both(
            &options,
            &a,
            &b,
            &metrics,
            &format!("TWED with timestamps, {dims} dims"),
        );
    }
}

fn gunpoint(options: ComputeOptions) {
    let read = |name: &str, count: usize| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        let set = timewarp::formats::read_dataset(&path)
            .unwrap()
            .to_series_set::<f64>()
            .unwrap();
        set.slice(0..count)
    };
    let train = read("GunPoint_TRAIN.ts", 8);
    let test = read("GunPoint_TEST.ts", 10);
    assert_eq!(train.max_len(), 150);
    check_both(&options, &train, &test, &every_metric(), "GunPoint");
}

/// Batches cut into many tiles and launches by a tiny memory budget give
/// exactly what one launch gives.
fn chunked_equals_whole(options: ComputeOptions) {
    let mut rng = rng(7);
    let lengths_a: Vec<usize> = (0..37).map(|k| 1 + (k * 7) % 45).collect();
    let lengths_b: Vec<usize> = (0..23).map(|k| 2 + (k * 5) % 60).collect();
    let a = random_set(&mut rng, &lengths_a, 2, 1.0);
    let b = random_set(&mut rng, &lengths_b, 2, 1.0);
    let tight = ComputeOptions {
        gpu_memory_budget: Some(16 * 1024),
        ..options
    };
    for metric in every_metric() {
        let whole = distance_matrix(&a, Some(&b), metric, &options).unwrap();
        let chunked = distance_matrix(&a, Some(&b), metric, &tight).unwrap();
        assert_eq!(whole, chunked, "{metric:?}: tiled result differs");
        let whole = distance_matrix(&a, None, metric, &options).unwrap();
        let chunked = distance_matrix(&a, None, metric, &tight).unwrap();
        assert_eq!(whole, chunked, "{metric:?}: tiled self-matrix differs");
    }
    let too_small = ComputeOptions {
        gpu_memory_budget: Some(64),
        ..options
    };
    // 64 bytes hold no pair's rows (naive) or borders (tiled); the warp
    // kernel needs no workspace for series this short and runs in tiles of
    // one series.
    match options.gpu_variant {
        _ if options.device != Device::Gpu => {}
        // None: the host picks the warp kernel for these shapes.
        None | Some("warp") => {
            let whole = distance_matrix(&a, Some(&b), Dtw::new().into(), &options).unwrap();
            let tiny = distance_matrix(&a, Some(&b), Dtw::new().into(), &too_small).unwrap();
            assert_eq!(whole, tiny, "warp kernel in single-series tiles");
        }
        _ => {
            let error = distance_matrix(&a, Some(&b), Dtw::new().into(), &too_small).unwrap_err();
            let message = error.to_string();
            assert!(
                message.contains("workspace") || message.contains("device memory"),
                "{message}"
            );
        }
    }
}

/// The CPU backend and the GPU compute the same recurrences, so they agree
/// to rounding on a whole real data set.
fn gpu_agrees_with_cpu_on_gunpoint(options: ComputeOptions) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/GunPoint_TRAIN.ts");
    let set = timewarp::formats::read_dataset(&path)
        .unwrap()
        .to_series_set::<f64>()
        .unwrap();
    for metric in every_metric() {
        let here = distance_matrix(&set, None, metric, &options).unwrap();
        let cpu = distance_matrix(&set, None, metric, &ComputeOptions::on(Device::Cpu)).unwrap();
        for (x, y) in here.iter().zip(cpu.iter()) {
            assert!(
                (x - y).abs() <= 1e-12 * y.abs().max(1e-300),
                "{metric:?}: {x} vs {y}"
            );
        }
    }
}

/// The scenarios on the CPU, and on the GPU with the variant the host
/// picks (`gpu`) and with each variant forced (`gpu_naive`, ...).
macro_rules! on_each_backend {
    ($($scenario:ident),* $(,)?) => {
        mod cpu {
            use timewarp::{ComputeOptions, Device};
            $( #[test] fn $scenario() { super::$scenario(ComputeOptions::on(Device::Cpu)); } )*
        }
        on_gpu!(gpu, None, $($scenario),*);
        on_gpu!(gpu_naive, Some("naive"), $($scenario),*);
        on_gpu!(gpu_warp, Some("warp"), $($scenario),*);
        on_gpu!(gpu_tiled, Some("tiled"), $($scenario),*);
        on_gpu!(gpu_tiled_launches, Some("tiled-launches"), $($scenario),*);
    };
}

macro_rules! on_gpu {
    ($module:ident, $variant:expr, $($scenario:ident),*) => {
        mod $module {
            use timewarp::{ComputeOptions, Device};
            $( #[test] fn $scenario() {
                if super::gpu_available(concat!(stringify!($module), "::", stringify!($scenario))) {
                    super::$scenario(ComputeOptions {
                        gpu_variant: $variant,
                        ..ComputeOptions::on(Device::Gpu)
                    });
                }
            } )*
        }
    };
}

on_each_backend!(
    mixed_lengths_univariate,
    mixed_lengths_multivariate,
    long_series,
    bands_with_unequal_lengths,
    huge_and_tiny_values,
    twed_with_timestamps,
    gunpoint,
    chunked_equals_whole,
    gpu_agrees_with_cpu_on_gunpoint,
);
