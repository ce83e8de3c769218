//! The GPU variants `diagonal`, `diagonal-launches`, `local` and `shared`
//! against the oracle (and, for pairs too long for it, against the CPU
//! backend), in f32 and f64: every measure, lengths 1, 2, 3, 31, 32, 33,
//! unequal ones (1 x 50, 50 x 7), 1000 and 4097, dims 1 and 3, non-uniform
//! timestamps, DTW bands, TWED with nu and lambda zero and large; the
//! anti-diagonal variants also on pairs of 100 000 samples and more. GPU
//! tests skip without a GPU and fail without one under `REQUIRE_GPU=1`.
//! Also: every entry point of `gpu::kernel_names()` is in the embedded PTX.

mod common;

use common::*;
use timewarp::gpu::{self, LOCAL_MAX_LEN};
use timewarp::{
    distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SeriesSet, SoftDtw, Twed,
};

fn on_gpu(variant: &'static str) -> ComputeOptions {
    ComputeOptions {
        gpu_variant: Some(variant),
        ..ComputeOptions::on(Device::Gpu)
    }
}

fn every_metric() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(0).into(),
        Dtw::with_band(3).into(),
        SoftDtw::new(0.1).unwrap().into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
        Twed::new(0.0, 0.0, 2.0).unwrap().into(),
        Twed::new(100.0, 50.0, 2.0).unwrap().into(),
        Twed::new(1.0, 1.0, 1.0).unwrap().into(),
        Twed::new(0.1, 0.5, 3.0).unwrap().into(),
    ]
}

/// `a` against `b` (and, with `itself`, `a` against itself, which must be
/// exactly symmetric) in precision `T`, against the oracle.
fn check<T: Float>(
    options: &ComputeOptions,
    a: &SeriesSet<f64>,
    b: &SeriesSet<f64>,
    metrics: &[Metric],
    itself: bool,
    context: &str,
) {
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    for &metric in metrics {
        let got = distance_matrix(&a, Some(&b), metric, options).unwrap();
        assert_matches_oracle(&got, &a, &b, metric, context);
        if itself {
            let got = distance_matrix(&a, None, metric, options).unwrap();
            assert_matches_oracle(&got, &a, &a, metric, &format!("{context} (self)"));
            assert_eq!(got, got.t(), "{context}: self-matrix not symmetric");
        }
    }
}

fn check_both(
    options: &ComputeOptions,
    a: &SeriesSet<f64>,
    b: &SeriesSet<f64>,
    metrics: &[Metric],
    itself: bool,
    context: &str,
) {
    check::<f64>(options, a, b, metrics, itself, context);
    check::<f32>(options, a, b, metrics, itself, context);
}

/// Lengths 1, 2, 3, 31, 32, 33 against each other, 1 x 50 and 50 x 7, with
/// non-uniform timestamps, dims 1 and 3, every measure.
fn short_and_unequal_lengths(options: ComputeOptions) {
    let mut rng = rng(11);
    for dims in [1, 3] {
        let lengths = [1, 2, 3, 31, 32, 33];
        let a = random_set(&mut rng, &lengths, dims, 1.0);
        let a = with_random_timestamps(&mut rng, a);
        let b = random_set(&mut rng, &lengths, dims, 1.0);
        let b = with_random_timestamps(&mut rng, b);
        let context = format!("lengths 1-33, {dims} dims");
        check_both(&options, &a, &b, &every_metric(), true, &context);
        for (n, m) in [(1, 50), (50, 7)] {
            let a = random_set(&mut rng, &[n], dims, 1.0);
            let b = random_set(&mut rng, &[m], dims, 1.0);
            let context = format!("{n} x {m}, {dims} dims");
            check_both(&options, &a, &b, &every_metric(), false, &context);
        }
    }
}

/// Pairs of 1000 and 4097 samples (one each way), univariate, and 1000
/// with 3 dims.
fn lengths_1000_and_4097(options: ComputeOptions) {
    let mut rng = rng(12);
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(50).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
    ];
    let a = random_set(&mut rng, &[1000], 1, 1.0);
    let a = with_random_timestamps(&mut rng, a);
    let b = random_set(&mut rng, &[4097], 1, 1.0);
    let b = with_random_timestamps(&mut rng, b);
    check_both(&options, &a, &b, &metrics, false, "1000 x 4097");
    check_both(&options, &b, &a, &metrics, false, "4097 x 1000");
    check_both(&options, &b, &b, &metrics, false, "4097 x 4097");
    let a = random_set(&mut rng, &[1000], 3, 1.0);
    let b = random_set(&mut rng, &[1000], 3, 1.0);
    check_both(&options, &a, &b, &metrics, false, "1000 x 1000, 3 dims");
}

/// Pairs of over 100 000 samples (both orientations: many short
/// anti-diagonals of a long buffer, and long anti-diagonals), against the
/// CPU backend (both linear in memory; the oracle's full matrix would not
/// fit). The bound is `common::tolerance`'s f32 form (4 (n + m)(d + 2) u)
/// in either precision, of the scale of the accumulated terms.
fn pairs_over_100000_samples(options: ComputeOptions) {
    let mut rng = rng(13);
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(500).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::new(0.5, 1.0, 2.0).unwrap().into(),
    ];
    for (n, m) in [(100_003, 3_001), (2_999, 100_001)] {
        let a = random_set(&mut rng, &[n], 1, 1.0);
        let a = with_random_timestamps(&mut rng, a);
        let b = random_set(&mut rng, &[m], 1, 1.0);
        let b = with_random_timestamps(&mut rng, b);
        for &metric in &metrics {
            against_cpu::<f64>(&options, &a, &b, metric);
            against_cpu::<f32>(&options, &a, &b, metric);
        }
    }
}

/// One pair in precision `T` on `options` against the CPU backend in f64
/// on the same (rounded) inputs.
fn against_cpu<T: Float>(
    options: &ComputeOptions,
    a: &SeriesSet<f64>,
    b: &SeriesSet<f64>,
    metric: Metric,
) {
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    let got = distance_matrix(&a, Some(&b), metric, options).unwrap()[[0, 0]].to_f64();
    let (a, b) = (a.cast::<f64>().unwrap(), b.cast::<f64>().unwrap());
    let cpu = ComputeOptions::on(Device::Cpu);
    let expected = distance_matrix(&a, Some(&b), metric, &cpu).unwrap()[[0, 0]];
    let scale = match metric {
        Metric::SoftDtw(soft) => {
            let dtw = distance_matrix(&a, Some(&b), Dtw::new().into(), &cpu).unwrap()[[0, 0]];
            let (n, m) = (a.max_len(), b.max_len());
            dtw + soft.gamma() * (n + m) as f64 * 3f64.ln() + expected.abs()
        }
        _ => expected.abs(),
    };
    let (n, m) = (a.max_len(), b.max_len());
    let bound = 4.0 * (n + m) as f64 * 3.0 * T::UNIT_ROUNDOFF * scale;
    assert!(
        (got - expected).abs() <= bound,
        "{metric:?} {} {n} x {m}: got {got:e}, CPU {expected:e}, |diff| {:e} > {bound:e}",
        T::NAME,
        (got - expected).abs()
    );
}

/// `local` holds series `b` of up to `LOCAL_MAX_LEN` samples and says so
/// past it; series `a` may be longer.
fn local_capacity(options: ComputeOptions) {
    let mut rng = rng(14);
    let short = random_set(&mut rng, &[LOCAL_MAX_LEN, 5], 1, 1.0);
    let long = random_set(&mut rng, &[LOCAL_MAX_LEN + 1], 1, 1.0);
    let metric: Metric = Dtw::new().into();
    check_both(
        &options,
        &long,
        &short,
        &[metric],
        false,
        "a longer than local rows",
    );
    let error = distance_matrix(&short, Some(&long), metric, &options).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("local") && message.contains(&LOCAL_MAX_LEN.to_string()),
        "{message}"
    );
    assert!(distance_matrix(&long, None, metric, &options).is_err());
}

/// `shared` opts in to more than 48 KiB of shared memory per block for
/// long rows, down to one thread per block; past what a block may have it
/// says so.
fn shared_capacity(options: ComputeOptions) {
    let mut rng = rng(15);
    // f64 rows of 6001 values: 96 KiB a thread, two threads a block
    // (227 KiB opt-in on H100/H200).
    let a = random_set(&mut rng, &[300], 1, 1.0);
    let b = random_set(&mut rng, &[6000], 1, 1.0);
    check::<f64>(
        &options,
        &a,
        &b,
        &[Dtw::new().into()],
        false,
        "rows of 96 KiB",
    );
    let huge = random_set(&mut rng, &[40_000], 1, 1.0);
    let error = distance_matrix(&a, Some(&huge), Dtw::new().into(), &options).unwrap_err();
    assert!(error.to_string().contains("shared"), "{error}");
}

/// A batch of 9 x 6 series of mixed lengths (2 dims) and the batch
/// against itself, every measure (the anti-diagonal variants compute it
/// pair by pair, the mirror of the triangle on the host).
fn batch_pair_by_pair(options: ComputeOptions) {
    let mut rng = rng(16);
    let lengths_a: Vec<usize> = (0..9).map(|k| 1 + (k * 7) % 45).collect();
    let lengths_b: Vec<usize> = (0..6).map(|k| 2 + (k * 5) % 60).collect();
    let a = random_set(&mut rng, &lengths_a, 2, 1.0);
    let b = random_set(&mut rng, &lengths_b, 2, 1.0);
    check_both(&options, &a, &b, &every_metric(), true, "batch");
}

/// A few small pairs of every measure in both precisions: quick enough to
/// run under compute-sanitizer (memcheck, racecheck, synccheck).
fn sanitizer_smoke(options: ComputeOptions) {
    let mut rng = rng(18);
    let a = random_set(&mut rng, &[1, 33, 7], 2, 1.0);
    let a = with_random_timestamps(&mut rng, a);
    let b = random_set(&mut rng, &[50, 2], 2, 1.0);
    let b = with_random_timestamps(&mut rng, b);
    let metrics: Vec<Metric> = vec![
        Dtw::with_band(3).into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::default().into(),
    ];
    check_both(&options, &a, &b, &metrics, false, "sanitizer smoke");
}

macro_rules! on_variants {
    ($($variant:ident: $name:literal => [$($scenario:ident),* $(,)?]),* $(,)?) => {
        $(
            mod $variant {
                $( #[test] fn $scenario() {
                    let test = concat!(stringify!($variant), "::", stringify!($scenario));
                    if super::gpu_available(test) {
                        super::$scenario(super::on_gpu($name));
                    }
                } )*
            }
        )*
    };
}

on_variants!(
    diagonal: "diagonal" => [
        sanitizer_smoke,
        short_and_unequal_lengths,
        lengths_1000_and_4097,
        pairs_over_100000_samples,
        batch_pair_by_pair,
    ],
    diagonal_launches: "diagonal-launches" => [
        sanitizer_smoke,
        short_and_unequal_lengths,
        lengths_1000_and_4097,
        pairs_over_100000_samples,
        batch_pair_by_pair,
    ],
    local: "local" => [
        sanitizer_smoke,
        short_and_unequal_lengths,
        lengths_1000_and_4097_local,
        local_capacity,
        batch_pair_by_pair,
    ],
    shared: "shared" => [
        sanitizer_smoke,
        short_and_unequal_lengths,
        lengths_1000_and_4097,
        shared_capacity,
        batch_pair_by_pair,
    ],
);

/// `local` takes series `b` of up to 1024 samples: 1000 each way, 4097 as
/// `a` only.
fn lengths_1000_and_4097_local(options: ComputeOptions) {
    let mut rng = rng(17);
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(50).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
    ];
    let a = random_set(&mut rng, &[1000, 4097], 1, 1.0);
    let a = with_random_timestamps(&mut rng, a);
    let b = random_set(&mut rng, &[1000], 1, 1.0);
    let b = with_random_timestamps(&mut rng, b);
    check_both(&options, &a, &b, &metrics, false, "1000 and 4097 x 1000");
    let a = random_set(&mut rng, &[1000], 3, 1.0);
    let b = random_set(&mut rng, &[1000], 3, 1.0);
    check_both(&options, &a, &b, &metrics, false, "1000 x 1000, 3 dims");
}

/// The host lists the entry points of these variants (no GPU needed).
#[test]
fn every_kernel_name_is_listed() {
    let names = gpu::kernel_names();
    for variant in [
        "diagonal",
        "diagonal_step",
        "local256",
        "local1024",
        "shared",
    ] {
        assert!(
            names.iter().any(|n| n.contains(&format!("_{variant}_"))),
            "no {variant} kernel listed"
        );
    }
    // That each listed name is in the PTX: gpu_variants.rs.
}
