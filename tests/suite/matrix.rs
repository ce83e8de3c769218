//! Distance matrices on every backend against the oracle: one generator over
//! measure x variant x precision x shape.
//!
//! The shapes ([`cases`]) are chosen so that every boundary of every driver
//! is hit once: lengths 1 and 2; just below, at and above a lane stripe, a
//! warp's columns (32, 128, 256, 512), a panel and a tile (256, 512 rows);
//! unequal lengths both ways; a single sample against thousands; 1000 and
//! 4097; 1, 2, 3 and 28 dimensions; timestamps; Sakoe-Chiba bands from
//! radius 0 to wider than the series, and narrow enough for the sheared
//! band driver; huge and tiny values; real data (GunPoint). Each case runs
//! `a` against `b` and, where marked, `a` against itself (which must be
//! exactly symmetric).
//!
//! [`matrix_tests!`] expands one test per backend (the CPU, the GPU's
//! default choice and each GPU variant) and precision; each runs every case
//! its variant takes. The oracle's matrices are computed once per case and
//! shared by all of them (`crate::common::oracle_matrix`). Tolerances:
//! `crate::common::tolerance` (f64: 1e-12 of the accumulated scale; f32: the
//! first-order worst case `4 (n + m)(d + 2) u`). GPU tests skip without a
//! GPU and fail without one under `REQUIRE_GPU=1`.

use crate::common::*;
use rand::rngs::StdRng;
use std::sync::OnceLock;
use timewarp::{
    distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SeriesSet, SoftDtw, Twed, Variant,
};

/// One shape of batches and the measures it is checked with.
pub struct Case {
    pub name: String,
    pub a: SeriesSet<f64>,
    pub b: SeriesSet<f64>,
    pub metrics: Vec<Metric>,
    /// Also `a` against itself.
    pub itself: bool,
    /// Values beyond f32's range: f64 only.
    pub f64_only: bool,
    /// Long series (thousands of samples): GPU variants made for long
    /// series only (the CPU backend is checked on 1000 here, and on longer
    /// pairs as the reference of `long_pairs`).
    pub long: bool,
}

fn every_metric() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(0).into(),
        Dtw::with_band(3).into(),
        SoftDtw::new(0.1).unwrap().into(),
        SoftDtw::new(1.0).unwrap().with_band(4).into(),
        SoftDtw::new(1.0).unwrap().divergence().into(),
        Twed::default().into(),
        Twed::new(0.0, 0.0, 2.0).unwrap().into(),
        Twed::new(100.0, 50.0, 2.0).unwrap().into(),
        Twed::new(1.0, 1.0, 1.0).unwrap().into(),
        Twed::new(0.1, 0.5, 3.0).unwrap().into(),
    ]
}

fn long_metrics() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(50).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
    ]
}

fn case(
    name: impl Into<String>,
    a: SeriesSet<f64>,
    b: SeriesSet<f64>,
    metrics: Vec<Metric>,
) -> Case {
    Case {
        name: name.into(),
        a,
        b,
        metrics,
        itself: false,
        f64_only: false,
        long: false,
    }
}

fn gunpoint(count: usize, file: &str) -> SeriesSet<f64> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    let set = timewarp::formats::read_dataset(&path)
        .unwrap()
        .to_series_set::<f64>()
        .unwrap();
    set.slice(0..count)
}

/// Every shape, made once.
pub fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let mut rng = rng(1);
        let mut cases = Vec::new();
        length_cases(&mut rng, &mut cases);
        band_cases(&mut rng, &mut cases);
        value_cases(&mut rng, &mut cases);
        twed_dimension_cases(&mut rng, &mut cases);
        // Real data.
        cases.push(Case {
            itself: true,
            ..case(
                "GunPoint",
                gunpoint(8, "GunPoint_TRAIN.ts"),
                gunpoint(10, "GunPoint_TEST.ts"),
                every_metric(),
            )
        });
        long_cases(&mut rng, &mut cases);
        cases
    })
}

/// Lengths short and mixed, with and without timestamps, and around the
/// drivers' stripes, warps and tiles.
fn length_cases(rng: &mut StdRng, cases: &mut Vec<Case>) {
    for dims in [1, 3] {
        let a = random_set(rng, &[1, 2, 3, 17, 31, 32, 33, 128, 40], dims, 1.0);
        let b = random_set(rng, &[2, 1, 17, 32, 128, 9], dims, 1.0);
        cases.push(Case {
            itself: true,
            ..case(
                format!("short mixed lengths, {dims} dims"),
                a,
                b,
                every_metric(),
            )
        });
    }
    // Non-uniform timestamps (TWED reads them), 1 x 50 and 50 x 7.
    for dims in [1, 2] {
        let a = random_timed_set(rng, &[1, 50, 7], dims, 1.0);
        let b = random_timed_set(rng, &[50, 7, 1, 3], dims, 1.0);
        cases.push(Case {
            itself: true,
            ..case(format!("timestamps, {dims} dims"), a, b, every_metric())
        });
    }
    // Around a lane stripe and a warp's columns (32 x 1, 4, 8, 16) and
    // tile heights (256, 512 rows), in both roles; timed (TWED reads
    // the timestamps at the edges too).
    for dims in [1, 3] {
        let a = random_timed_set(rng, &[1, 31, 33, 127, 129, 256, 257, 513, 1000], dims, 1.0);
        let b = random_timed_set(rng, &[2, 32, 128, 255, 511, 512, 1025], dims, 1.0);
        let metrics = vec![
            Dtw::new().into(),
            Dtw::with_band(5).into(),
            SoftDtw::new(0.5).unwrap().into(),
            Twed::new(0.5, 1.0, 2.0).unwrap().into(),
        ];
        cases.push(case(
            format!("stripe and tile edges, {dims} dims"),
            a,
            b,
            metrics,
        ));
    }
}

/// Sakoe-Chiba bands, wide and narrow.
fn band_cases(rng: &mut StdRng, cases: &mut Vec<Case>) {
    // Bands from radius 0 to wider than the series, unequal lengths.
    let a = random_set(rng, &[5, 17, 30, 1], 2, 1.0);
    let b = random_set(rng, &[9, 17, 1, 60], 2, 1.0);
    let bands = [0, 1, 5, 200].map(|r| Dtw::with_band(r).into()).to_vec();
    cases.push(Case {
        itself: true,
        ..case("bands, unequal lengths", a, b, bands)
    });
    // Narrow bands the sheared band driver takes.
    for dims in [1, 3] {
        let a = random_set(rng, &[300, 301, 290], dims, 1.0);
        let b = random_set(rng, &[300, 310, 333], dims, 1.0);
        let metrics = [0, 1, 7, 40]
            .into_iter()
            .flat_map(|r| {
                [
                    Dtw::with_band(r).into(),
                    SoftDtw::new(0.5).unwrap().with_band(r).into(),
                ]
            })
            .collect();
        cases.push(case(format!("narrow bands, {dims} dims"), a, b, metrics));
    }
}

/// Values of extreme scales.
fn value_cases(rng: &mut StdRng, cases: &mut Vec<Case>) {
    // Huge and tiny values. TWED's nu and lambda would swamp tiny values
    // and vanish next to huge ones; nu = lambda = 0 keeps every term of
    // the scale's size.
    for (scale, f64_only) in [(1e100, true), (1e-100, true), (1e15, false), (1e-15, false)] {
        let a = random_set(rng, &[7, 20], 2, scale);
        let b = random_set(rng, &[20, 3, 1], 2, scale);
        let metrics = vec![
            Dtw::new().into(),
            Dtw::with_band(2).into(),
            SoftDtw::new(scale * scale).unwrap().into(),
            Twed::new(0.0, 0.0, 2.0).unwrap().into(),
        ];
        cases.push(Case {
            f64_only,
            itself: true,
            ..case(format!("values scaled by {scale:e}"), a, b, metrics)
        });
    }
}

/// TWED with many dimensions.
fn twed_dimension_cases(rng: &mut StdRng, cases: &mut Vec<Case>) {
    // TWED in 28 dimensions, every kind of degree.
    let a = random_timed_set(rng, &[1, 33, 300], 28, 1.0);
    let b = random_timed_set(rng, &[2, 257], 28, 1.0);
    let twed = [1.0, 2.0, 3.0]
        .map(|degree| Twed::new(0.5, 1.0, degree).unwrap().into())
        .to_vec();
    cases.push(case("TWED in 28 dimensions", a, b, twed.clone()));
    // The same, short enough for the variants of a thread a pair.
    let a = random_timed_set(rng, &[1, 33, 120], 28, 1.0);
    let b = random_timed_set(rng, &[2, 65], 28, 1.0);
    cases.push(case("TWED in 28 dimensions, short", a, b, twed));
}

/// Long series, and a single sample against thousands.
fn long_cases(rng: &mut StdRng, cases: &mut Vec<Case>) {
    // Long series, one pair of each orientation.
    for dims in [1, 3] {
        let a = random_set(rng, &[1000, 17], dims, 1.0);
        let b = random_set(rng, &[1000, 128, 1], dims, 1.0);
        cases.push(Case {
            itself: true,
            ..case(format!("length 1000, {dims} dims"), a, b, long_metrics())
        });
    }
    let a = random_timed_set(rng, &[4097, 1000], 1, 1.0);
    let b = random_timed_set(rng, &[4097, 1], 1, 1.0);
    cases.push(Case {
        long: true,
        ..case("4097 and 1000", a, b, long_metrics())
    });
    for (n, m) in [(1, 5000), (5000, 7)] {
        let a = random_set(rng, &[n], 1, 1.0);
        let b = random_set(rng, &[m], 1, 1.0);
        cases.push(Case {
            long: true,
            ..case(format!("{n} x {m}"), a, b, long_metrics())
        });
    }
}

/// Series a variant of a thread a pair takes in these tests: it computes a
/// pair's cells one after the other, from memory (a pair of 300 takes tens
/// of milliseconds), and its capacities (`local`'s 256 and 1024, `shared`'s
/// opt-in) are checked in `gpu_local_and_shared_capacities`.
const THREAD_A_PAIR_MAX_LEN: usize = 160;

/// Whether `variant` takes every series of `case`: the long cases go to
/// the variants made for long series (not those of a thread a pair), and
/// `local` holds the columns' series in a fixed array.
fn takes(variant: Option<Variant>, case: &Case) -> bool {
    let thread_a_pair = matches!(
        variant,
        Some(Variant::Naive | Variant::Local | Variant::Shared)
    );
    let longest = case.a.max_len().max(case.b.max_len());
    if (case.long || longest > THREAD_A_PAIR_MAX_LEN) && thread_a_pair {
        return false;
    }
    match variant {
        Some(Variant::Local) => {
            let columns = if case.itself {
                case.a.max_len().max(case.b.max_len())
            } else {
                case.b.max_len()
            };
            columns <= timewarp::internals::local_max_len()
        }
        _ => true,
    }
}

/// Every case `options` takes, in precision `T`, against the oracle.
fn check_cases<T: Float>(options: &ComputeOptions) {
    let on_gpu = options.device == Device::Gpu;
    for case in cases() {
        if (case.long && !on_gpu) || (case.f64_only && T::NAME == "f32") {
            continue;
        }
        if !takes(options.gpu_variant, case) {
            continue;
        }
        let (a, b) = (case.a.cast::<T>().unwrap(), case.b.cast::<T>().unwrap());
        let context = format!("{}, {:?}", case.name, options.gpu_variant);
        for &metric in &case.metrics {
            let got = distance_matrix(&a, Some(&b), metric, options).unwrap();
            assert_matches_oracle(&got, &a, &b, metric, &context);
            if case.itself {
                let itself = distance_matrix(&a, None, metric, options).unwrap();
                assert_matches_oracle(&itself, &a, &a, metric, &format!("{context} (self)"));
                assert_eq!(itself, itself.t(), "{context}: self-matrix not symmetric");
            }
        }
    }
}

/// One test per backend and precision: `cpu`, `gpu_default` and
/// `gpu_<variant>`, each `_f32` and `_f64`.
macro_rules! matrix_tests {
    ($($name:ident: $variant:expr;)*) => {
        #[test]
        fn cpu_f64() {
            check_cases::<f64>(&ComputeOptions::on(Device::Cpu));
        }
        #[test]
        fn cpu_f32() {
            check_cases::<f32>(&ComputeOptions::on(Device::Cpu));
        }
        $(
            mod $name {
                use super::*;
                #[test]
                fn f64() {
                    if let Some(_timed) = on_gpu(concat!("matrix::", stringify!($name), "::f64")) {
                        check_cases::<f64>(&gpu_options($variant));
                    }
                }
                #[test]
                fn f32() {
                    if let Some(_timed) = on_gpu(concat!("matrix::", stringify!($name), "::f32")) {
                        check_cases::<f32>(&gpu_options($variant));
                    }
                }
            }
        )*
    };
}

matrix_tests! {
    gpu_default: None;
    gpu_naive: Some(Variant::Naive);
    gpu_warp: Some(Variant::Warp);
    gpu_tiled: Some(Variant::Tiled);
    gpu_tiled_launches: Some(Variant::TiledLaunches);
    gpu_diagonal: Some(Variant::Diagonal);
    gpu_diagonal_launches: Some(Variant::DiagonalLaunches);
    gpu_local: Some(Variant::Local);
    gpu_shared: Some(Variant::Shared);
    gpu_stencil: Some(Variant::Stencil);
}

/// Batches cut into many tiles and launches by a tiny memory budget give
/// exactly what one launch gives, for every variant that tiles; and every
/// variant gives the default's bits (each driver computes each cell with
/// the same arithmetic), except the anti-diagonal and stencil drivers,
/// whose Soft-DTW and TWED cells round the same but whose f32 min order may
/// differ, checked against the oracle above.
#[test]
fn gpu_chunked_equals_whole() {
    let Some(_timed) = on_gpu("matrix::gpu_chunked_equals_whole") else {
        return;
    };
    let mut rng = rng(7);
    let lengths_a: Vec<usize> = (0..37).map(|k| 1 + (k * 7) % 45).collect();
    let lengths_b: Vec<usize> = (0..23).map(|k| 2 + (k * 5) % 60).collect();
    let a = random_set(&mut rng, &lengths_a, 2, 1.0);
    let b = random_set(&mut rng, &lengths_b, 2, 1.0);
    // One measure of each kind: every cell update and band test.
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(3).into(),
        SoftDtw::new(1.0).unwrap().with_band(4).into(),
        Twed::default().into(),
    ];
    for variant in [
        Variant::Naive,
        Variant::Warp,
        Variant::Local,
        Variant::Shared,
        Variant::Stencil,
    ] {
        let options = gpu_options(Some(variant));
        let tight = ComputeOptions {
            gpu_memory_budget: Some(16 * 1024),
            ..options
        };
        for &metric in &metrics {
            let whole = distance_matrix(&a, Some(&b), metric, &options).unwrap();
            let chunked = distance_matrix(&a, Some(&b), metric, &tight).unwrap();
            assert_eq!(whole, chunked, "{variant} {metric:?}: tiled result differs");
            let whole = distance_matrix(&a, None, metric, &options).unwrap();
            let chunked = distance_matrix(&a, None, metric, &tight).unwrap();
            assert_eq!(
                whole, chunked,
                "{variant} {metric:?}: tiled self-matrix differs"
            );
        }
    }
    // 64 bytes hold no pair's rows (naive); the warp kernel needs no
    // workspace for series this short and runs in tiles of one series.
    let too_small = |variant| ComputeOptions {
        gpu_memory_budget: Some(64),
        ..gpu_options(Some(variant))
    };
    let dtw: Metric = Dtw::new().into();
    let whole = distance_matrix(&a, Some(&b), dtw, &gpu_options(None)).unwrap();
    let tiny = distance_matrix(&a, Some(&b), dtw, &too_small(Variant::Warp)).unwrap();
    assert_eq!(whole, tiny, "warp kernel in single-series tiles");
    let error = distance_matrix(&a, Some(&b), dtw, &too_small(Variant::Naive)).unwrap_err();
    assert!(error.to_string().contains("workspace"), "{error}");
}

/// The CPU backend and the GPU compute the same recurrences, so they agree
/// to rounding on a whole real data set.
#[test]
fn gpu_agrees_with_cpu_on_gunpoint() {
    let Some(_timed) = on_gpu("matrix::gpu_agrees_with_cpu_on_gunpoint") else {
        return;
    };
    let set = gunpoint(50, "GunPoint_TRAIN.ts");
    let variants = [
        None,
        Some(Variant::Naive),
        Some(Variant::Warp),
        Some(Variant::Tiled),
        Some(Variant::TiledLaunches),
    ];
    // The tiled variants compute pair after pair, a launch each: a part
    // of the set is enough for them (the whole set would hold the GPU for
    // seconds).
    let part = set.slice(0..12);
    for metric in every_metric() {
        for (set, variants) in [(&set, &variants[..3]), (&part, &variants[3..])] {
            let cpu = ComputeOptions::on(Device::Cpu);
            let cpu = distance_matrix(set, None, metric, &cpu).unwrap();
            for &variant in variants {
                let here = distance_matrix(set, None, metric, &gpu_options(variant)).unwrap();
                for (x, y) in here.iter().zip(cpu.iter()) {
                    assert!(
                        (x - y).abs() <= 1e-12 * y.abs().max(1e-300),
                        "{variant:?} {metric:?}: {x} vs {y}"
                    );
                }
            }
        }
    }
}

/// The variants of a thread a pair on series longer than the shapes of
/// `check_cases` give them (`THREAD_A_PAIR_MAX_LEN`): one pair of each
/// measure, both precisions, and TWED in 28 dimensions on `naive`.
#[test]
fn gpu_thread_a_pair_variants_on_longer_series() {
    let Some(_timed) = on_gpu("matrix::gpu_thread_a_pair_variants_on_longer_series") else {
        return;
    };
    let mut rng = rng(19);
    let a = random_timed_set(&mut rng, &[300], 2, 1.0);
    let b = random_timed_set(&mut rng, &[290], 2, 1.0);
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(20).into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::new(0.5, 1.0, 2.0).unwrap().into(),
    ];
    let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
    for variant in [Variant::Naive, Variant::Local, Variant::Shared] {
        let options = gpu_options(Some(variant));
        for &metric in &metrics {
            let context = format!("300 x 290, {variant}");
            let got = distance_matrix(&a, Some(&b), metric, &options).unwrap();
            assert_matches_oracle(&got, &a, &b, metric, &context);
            let got = distance_matrix(&a32, Some(&b32), metric, &options).unwrap();
            assert_matches_oracle(&got, &a32, &b32, metric, &context);
        }
    }
    let a = random_timed_set(&mut rng, &[200], 28, 1.0);
    let b = random_timed_set(&mut rng, &[257], 28, 1.0);
    let twed: Metric = Twed::new(0.5, 1.0, 3.0).unwrap().into();
    let got = distance_matrix(&a, Some(&b), twed, &gpu_options(Some(Variant::Naive))).unwrap();
    assert_matches_oracle(&got, &a, &b, twed, "TWED in 28 dimensions, naive");
}

/// The long-pair variants, pair after pair, under a budget that cuts their
/// workspaces into pieces give what they give whole; a budget that holds
/// no pair's workspace is an error naming the pair's size.
#[test]
fn gpu_long_pair_variants_in_pieces() {
    let Some(_timed) = on_gpu("matrix::gpu_long_pair_variants_in_pieces") else {
        return;
    };
    let mut rng = rng(20);
    let a = random_set(&mut rng, &[1, 45, 300, 17], 2, 1.0);
    let b = random_set(&mut rng, &[60, 2, 257], 2, 1.0);
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        SoftDtw::new(1.0).unwrap().with_band(4).into(),
        Twed::default().into(),
    ];
    for variant in [Variant::Tiled, Variant::TiledLaunches] {
        let options = gpu_options(Some(variant));
        let tight = ComputeOptions {
            gpu_memory_budget: Some(24 * 1024),
            ..options
        };
        for &metric in &metrics {
            let whole = distance_matrix(&a, Some(&b), metric, &options).unwrap();
            let pieces = distance_matrix(&a, Some(&b), metric, &tight).unwrap();
            assert_eq!(whole, pieces, "{variant} {metric:?}: pieces differ");
        }
        let too_small = ComputeOptions {
            gpu_memory_budget: Some(64),
            ..options
        };
        let dtw: Metric = Dtw::new().into();
        let error = distance_matrix(&a, Some(&b), dtw, &too_small).unwrap_err();
        assert!(error.to_string().contains("bytes"), "{variant}: {error}");
    }
}

/// The stencil driver computes each cell with the warp driver's
/// arithmetic: in f64 the same bits for every measure, in f32 for Soft-DTW
/// and TWED (DTW's f32 cells may take their minimum in another order).
#[test]
fn gpu_stencil_equals_warp() {
    let Some(_timed) = on_gpu("matrix::gpu_stencil_equals_warp") else {
        return;
    };
    let mut rng = rng(21);
    let a = random_set(&mut rng, &[1, 33, 100, 7], 2, 1.0);
    let b = random_set(&mut rng, &[64, 2, 129], 2, 1.0);
    let (stencil, warp) = (
        gpu_options(Some(Variant::Stencil)),
        gpu_options(Some(Variant::Warp)),
    );
    let soft_and_twed: Vec<Metric> = vec![
        SoftDtw::new(0.5).unwrap().into(),
        SoftDtw::new(0.5).unwrap().with_band(3).into(),
        Twed::default().into(),
    ];
    let every: Vec<Metric> = every_metric();
    let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
    for &metric in &every {
        let one = distance_matrix(&a, Some(&b), metric, &stencil).unwrap();
        let other = distance_matrix(&a, Some(&b), metric, &warp).unwrap();
        assert_eq!(one, other, "f64 {metric:?}");
    }
    for &metric in &soft_and_twed {
        let one = distance_matrix(&a32, Some(&b32), metric, &stencil).unwrap();
        let other = distance_matrix(&a32, Some(&b32), metric, &warp).unwrap();
        assert_eq!(one, other, "f32 {metric:?}");
    }
}

/// `local` holds series `b` of up to its largest capacity and says so past
/// it; series `a` may be longer. `shared` opts in to more than 48 KiB of
/// shared memory per block for long rows, down to one thread per block;
/// past what a block may have it says so.
#[test]
fn gpu_local_and_shared_capacities() {
    let Some(_timed) = on_gpu("matrix::gpu_local_and_shared_capacities") else {
        return;
    };
    let mut rng = rng(14);
    let max = timewarp::internals::local_max_len();
    let short = random_set(&mut rng, &[max, 5], 1, 1.0);
    let long = random_set(&mut rng, &[max + 1], 1, 1.0);
    let dtw: Metric = Dtw::new().into();
    let local = gpu_options(Some(Variant::Local));
    let got = distance_matrix(&long, Some(&short), dtw, &local).unwrap();
    assert_matches_oracle(&got, &long, &short, dtw, "a longer than local rows");
    let error = distance_matrix(&short, Some(&long), dtw, &local).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("local") && message.contains(&max.to_string()),
        "{message}"
    );
    assert!(distance_matrix(&long, None, dtw, &local).is_err());
    let (long32, short32) = (long.cast::<f32>().unwrap(), short.cast::<f32>().unwrap());
    let got = distance_matrix(&long32, Some(&short32), dtw, &local).unwrap();
    assert_matches_oracle(
        &got,
        &long32,
        &short32,
        dtw,
        "a longer than local rows, f32",
    );
    assert!(distance_matrix(&short32, Some(&long32), dtw, &local).is_err());
    // f64 rows of 6001 values: 96 KiB a thread, two threads a block (227
    // KiB opt-in on H100/H200).
    let shared = gpu_options(Some(Variant::Shared));
    let a = random_set(&mut rng, &[300], 1, 1.0);
    let b = random_set(&mut rng, &[6000], 1, 1.0);
    let got = distance_matrix(&a, Some(&b), dtw, &shared).unwrap();
    assert_matches_oracle(&got, &a, &b, dtw, "rows of 96 KiB");
    let huge = random_set(&mut rng, &[40_000], 1, 1.0);
    let error = distance_matrix(&a, Some(&huge), dtw, &shared).unwrap_err();
    assert!(error.to_string().contains("shared"), "{error}");
}

/// A few small pairs of every measure in both precisions on every variant:
/// quick enough to run under compute-sanitizer (memcheck, racecheck,
/// synccheck): `bash .gpu/run.sh sanitize memcheck sanitizer_smoke`.
#[test]
fn gpu_sanitizer_smoke() {
    let Some(_timed) = on_gpu("matrix::gpu_sanitizer_smoke") else {
        return;
    };
    let mut rng = rng(18);
    let metrics: Vec<Metric> = vec![
        Dtw::with_band(3).into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::default().into(),
    ];
    // Two dimensions, and one (the univariate twins).
    for dims in [2, 1] {
        let a = random_timed_set(&mut rng, &[1, 33, 7], dims, 1.0);
        let b = random_timed_set(&mut rng, &[50, 2], dims, 1.0);
        let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
        for variant in Variant::ALL {
            let options = gpu_options(Some(variant));
            let context = format!("sanitizer smoke, {variant}, {dims} dims");
            for &metric in &metrics {
                let got = distance_matrix(&a, Some(&b), metric, &options).unwrap();
                assert_matches_oracle(&got, &a, &b, metric, &context);
                let got = distance_matrix(&a32, Some(&b32), metric, &options).unwrap();
                assert_matches_oracle(&got, &a32, &b32, metric, &context);
            }
        }
    }
}
