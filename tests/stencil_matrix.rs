//! GPU only: the stencil variant (a block per pair, `*_stencil_*` kernels)
//! of every measure through `distance_matrix`, against the oracle, in f32
//! and f64: mixed and unequal lengths (1 to 1000, and 4096), dims 1 and 3,
//! DTW bands, Soft-DTW with and without a band, TWED with timestamps; tiny
//! memory budgets give the same results as one piece. (The driver's logic
//! is checked on the CPU in tests/block_driver.rs.) Skips without a GPU,
//! fails without one under `REQUIRE_GPU=1`.

mod common;

use common::*;
use timewarp::{
    distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SeriesSet, SoftDtw, Twed,
};

fn stencil() -> ComputeOptions {
    ComputeOptions {
        gpu_variant: Some("stencil"),
        ..ComputeOptions::on(Device::Gpu)
    }
}

fn metrics() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(0).into(),
        Dtw::with_band(3).into(),
        SoftDtw::new(0.1).unwrap().into(),
        SoftDtw::new(1.0).unwrap().with_band(4).into(),
        Twed::default().into(),
        Twed::new(0.5, 0.25, 3.0).unwrap().into(),
    ]
}

fn check<T: Float>(a: &SeriesSet<f64>, b: &SeriesSet<f64>, metrics: &[Metric], context: &str) {
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    for &metric in metrics {
        let got = distance_matrix(&a, Some(&b), metric, &stencil()).unwrap();
        assert_matches_oracle(&got, &a, &b, metric, context);
        let itself = distance_matrix(&a, None, metric, &stencil()).unwrap();
        assert_matches_oracle(&itself, &a, &a, metric, &format!("{context} (self)"));
        assert_eq!(itself, itself.t(), "{context}: self-matrix not symmetric");
    }
}

#[test]
fn stencil_matches_the_oracle() {
    if !gpu_available("stencil_matches_the_oracle") {
        return;
    }
    let mut rng = rng(11);
    for dims in [1, 3] {
        let a = random_set(&mut rng, &[1, 2, 17, 128, 33, 1000], dims, 1.0);
        let a = with_random_timestamps(&mut rng, a);
        let b = random_set(&mut rng, &[2, 1, 40, 128, 1000], dims, 1.0);
        let b = with_random_timestamps(&mut rng, b);
        let context = format!("stencil, dims {dims}");
        check::<f64>(&a, &b, &metrics(), &context);
        check::<f32>(&a, &b, &metrics(), &context);
    }
}

#[test]
fn stencil_long_pairs() {
    if !gpu_available("stencil_long_pairs") {
        return;
    }
    let mut rng = rng(12);
    let a = random_set(&mut rng, &[4096, 100], 1, 1.0);
    let b = random_set(&mut rng, &[4096, 3000], 1, 1.0);
    let metrics: Vec<Metric> = vec![
        Dtw::with_band(64).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::default().into(),
    ];
    for &metric in &metrics {
        let got = distance_matrix(&a, Some(&b), metric, &stencil()).unwrap();
        assert_matches_oracle(&got, &a, &b, metric, "stencil, 4096");
        let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
        let got = distance_matrix(&a32, Some(&b32), metric, &stencil()).unwrap();
        assert_matches_oracle(&got, &a32, &b32, metric, "stencil, 4096, f32");
    }
}

#[test]
fn stencil_chunked_equals_whole_and_other_variants() {
    if !gpu_available("stencil_chunked_equals_whole_and_other_variants") {
        return;
    }
    let mut rng = rng(13);
    let lengths_a: Vec<usize> = (0..37).map(|k| 1 + (k * 7) % 45).collect();
    let lengths_b: Vec<usize> = (0..23).map(|k| 2 + (k * 5) % 60).collect();
    let a = random_set(&mut rng, &lengths_a, 2, 1.0);
    let b = random_set(&mut rng, &lengths_b, 2, 1.0);
    let tight = ComputeOptions {
        gpu_memory_budget: Some(16 * 1024),
        ..stencil()
    };
    let warp = ComputeOptions {
        gpu_variant: Some("warp"),
        ..stencil()
    };
    for metric in metrics() {
        let whole = distance_matrix(&a, Some(&b), metric, &stencil()).unwrap();
        assert_eq!(
            whole,
            distance_matrix(&a, Some(&b), metric, &tight).unwrap(),
            "{metric:?}"
        );
        // Every driver computes each cell with the same arithmetic.
        assert_eq!(
            whole,
            distance_matrix(&a, Some(&b), metric, &warp).unwrap(),
            "{metric:?}: stencil vs warp"
        );
        let whole = distance_matrix(&a, None, metric, &stencil()).unwrap();
        assert_eq!(
            whole,
            distance_matrix(&a, None, metric, &tight).unwrap(),
            "{metric:?} (self)"
        );
    }
}
