//! The warp and tiled kernels where their blocks change shape (lengths just
//! below, at and above a lane stripe, a warp's band and a tile, in both
//! roles), against the oracle; long pairs against the CPU backend; and the
//! entry points the host launches, present in the PTX.

mod common;

use common::*;
use timewarp::gpu::{self, kernel_names};
use timewarp::{distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SoftDtw, Twed};

#[test]
fn every_kernel_the_host_launches_is_in_the_ptx() {
    let Some(ptx) = gpu::ptx() else {
        let reason = gpu::kernels_build_error().unwrap_or("no PTX");
        skip("every_kernel_the_host_launches_is_in_the_ptx", reason);
        return;
    };
    for name in kernel_names() {
        assert!(
            ptx.contains(&format!(".entry {name}(")),
            "the PTX has no entry point {name}"
        );
    }
}

fn on_gpu(variant: &'static str) -> ComputeOptions {
    ComputeOptions {
        gpu_variant: Some(variant),
        ..ComputeOptions::on(Device::Gpu)
    }
}

fn edge_metrics() -> Vec<Metric> {
    vec![
        Dtw::new().into(),
        Dtw::with_band(5).into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::new(0.5, 1.0, 2.0).unwrap().into(),
    ]
}

/// Lengths around 32 x stripe (32, 128, 256, 512 columns) and tile heights
/// (256, 512 rows), as rows and as columns.
fn edge_sizes<T: Float>(variant: &'static str, dims: usize) {
    let mut rng = rng(40 + dims as u64);
    let a = random_set(
        &mut rng,
        &[1, 31, 33, 127, 129, 256, 257, 513, 1000],
        dims,
        1.0,
    );
    let b = random_set(&mut rng, &[2, 32, 128, 255, 511, 512, 1025], dims, 1.0);
    let b = with_random_timestamps(&mut rng, b);
    let a = with_random_timestamps(&mut rng, a);
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    for metric in edge_metrics() {
        let got = distance_matrix(&a, Some(&b), metric, &on_gpu(variant)).unwrap();
        assert_matches_oracle(&got, &a, &b, metric, &format!("{variant}, {dims} dims"));
    }
}

macro_rules! edge_tests {
    ($($name:ident: $variant:literal, $t:ty, $dims:literal;)*) => {
        $( #[test]
        fn $name() {
            if gpu_available(stringify!($name)) {
                edge_sizes::<$t>($variant, $dims);
            }
        } )*
    };
}

edge_tests! {
    warp_edge_sizes_f64: "warp", f64, 1;
    warp_edge_sizes_f32: "warp", f32, 1;
    warp_edge_sizes_multivariate: "warp", f64, 3;
    tiled_edge_sizes_f64: "tiled", f64, 1;
    tiled_edge_sizes_f32: "tiled", f32, 1;
    tiled_edge_sizes_multivariate: "tiled", f64, 3;
}

/// Pairs too long for the oracle's full matrix: the tiled kernel (or the
/// one `variant` names) against the CPU backend's rolling rows. Both
/// evaluate the same cell updates on the same neighbours in the same
/// precision, so TWED agrees exactly; DTW's square and sum are one fused
/// multiply-add on the GPU (one rounding instead of two), and Soft-DTW's
/// exp and ln differ between the GPU's libm and the host's, by an ulp or
/// so a cell.
fn long_pair<T: Float>(n: usize, m: usize, metric: Metric, exact: bool) {
    long_pair_on::<T>("tiled", n, m, metric, exact)
}

fn long_pair_on<T: Float>(variant: &'static str, n: usize, m: usize, metric: Metric, exact: bool) {
    let mut rng = rng(n as u64 + m as u64);
    let a = random_set(&mut rng, &[n], 1, 1.0).cast::<T>().unwrap();
    let b = random_set(&mut rng, &[m], 1, 1.0).cast::<T>().unwrap();
    let gpu = distance_matrix(&a, Some(&b), metric, &on_gpu(variant)).unwrap()[[0, 0]];
    let cpu =
        distance_matrix(&a, Some(&b), metric, &ComputeOptions::on(Device::Cpu)).unwrap()[[0, 0]];
    let context = format!("{metric:?} {} {n} x {m}, {variant}", T::NAME);
    if exact {
        assert_eq!(gpu, cpu, "{context}");
    } else {
        let bound = tolerance::<T>(n, m, 1) * cpu.to_f64().abs();
        assert!(
            (gpu.to_f64() - cpu.to_f64()).abs() <= bound,
            "{context}: GPU {gpu:?}, CPU {cpu:?}"
        );
    }
}

#[test]
fn long_pairs_match_the_cpu_backend() {
    if !gpu_available("long_pairs_match_the_cpu_backend") {
        return;
    }
    long_pair::<f32>(100_000, 10_000, Dtw::new().into(), false);
    long_pair::<f64>(10_000, 100_000, Dtw::with_band(300).into(), false);
    long_pair::<f64>(
        100_000,
        10_000,
        Twed::new(1.0, 1.0, 2.0).unwrap().into(),
        true,
    );
    long_pair::<f32>(100_000, 3_000, Twed::default().into(), true);
    long_pair::<f64>(100_000, 2_000, SoftDtw::new(0.1).unwrap().into(), false);
}

/// The shapes the issue names: one sample against thousands, and 4097.
#[test]
fn lopsided_and_odd_pairs_match_the_oracle() {
    if !gpu_available("lopsided_and_odd_pairs_match_the_oracle") {
        return;
    }
    let mut rng = rng(77);
    for (n, m) in [(1, 5000), (5000, 7), (4097, 4097)] {
        let a = random_set(&mut rng, &[n], 1, 1.0);
        let b = random_set(&mut rng, &[m], 1, 1.0);
        for variant in ["naive", "warp", "tiled"] {
            for metric in edge_metrics() {
                let got = distance_matrix(&a, Some(&b), metric, &on_gpu(variant)).unwrap();
                assert_matches_oracle(&got, &a, &b, metric, &format!("{variant} {n} x {m}"));
                let got32 = distance_matrix(
                    &a.cast::<f32>().unwrap(),
                    Some(&b.cast::<f32>().unwrap()),
                    metric,
                    &on_gpu(variant),
                )
                .unwrap();
                assert_matches_oracle(
                    &got32,
                    &a.cast::<f32>().unwrap(),
                    &b.cast::<f32>().unwrap(),
                    metric,
                    &format!("{variant} {n} x {m}"),
                );
            }
        }
    }
}

/// TWED with samples in R^28 and arbitrary timestamps, for every degree
/// kind (1, 2, other), on the batch and long-pair variants.
#[test]
fn twed_in_28_dimensions_matches_the_oracle() {
    if !gpu_available("twed_in_28_dimensions_matches_the_oracle") {
        return;
    }
    let mut rng = rng(28);
    let a = random_set(&mut rng, &[1, 33, 300], 28, 1.0);
    let a = with_random_timestamps(&mut rng, a);
    let b = random_set(&mut rng, &[2, 257], 28, 1.0);
    let b = with_random_timestamps(&mut rng, b);
    for variant in ["naive", "warp", "tiled", "stencil"] {
        for degree in [1.0, 2.0, 3.0] {
            let metric: Metric = Twed::new(0.5, 1.0, degree).unwrap().into();
            let got = distance_matrix(&a, Some(&b), metric, &on_gpu(variant)).unwrap();
            assert_matches_oracle(&got, &a, &b, metric, &format!("{variant}, 28 dims"));
            let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
            let got = distance_matrix(&a32, Some(&b32), metric, &on_gpu(variant)).unwrap();
            assert_matches_oracle(&got, &a32, &b32, metric, &format!("{variant}, 28 dims"));
        }
    }
}

/// Bands narrow enough for the band driver (the host then picks a warp or
/// sub-warp shape by the band's width, not the series' length, and a
/// single long pair takes the warp kernel): radii 0, 1, 7 and 40 on
/// equal and unequal lengths (the band widens by the difference), one and
/// three dimensions, DTW and Soft-DTW, both precisions, against the oracle;
/// and long pairs in a narrow band against the CPU backend.
#[test]
fn narrow_bands_match_the_oracle() {
    if !gpu_available("narrow_bands_match_the_oracle") {
        return;
    }
    let mut rng = rng(91);
    for dims in [1, 3] {
        let a = random_set(&mut rng, &[300, 301, 290], dims, 1.0);
        let b = random_set(&mut rng, &[300, 310, 333], dims, 1.0);
        for radius in [0, 1, 7, 40] {
            let metrics: [Metric; 2] = [
                Dtw::with_band(radius).into(),
                SoftDtw::new(0.5).unwrap().with_band(radius).into(),
            ];
            for metric in metrics {
                let context = format!("radius {radius}, {dims} dims");
                let got = distance_matrix(&a, Some(&b), metric, &on_gpu("warp")).unwrap();
                assert_matches_oracle(&got, &a, &b, metric, &context);
                let (a32, b32) = (a.cast::<f32>().unwrap(), b.cast::<f32>().unwrap());
                let got = distance_matrix(&a32, Some(&b32), metric, &on_gpu("warp")).unwrap();
                assert_matches_oracle(&got, &a32, &b32, metric, &context);
            }
        }
    }
    for variant in ["warp", "tiled"] {
        long_pair_on::<f32>(variant, 200_000, 200_000, Dtw::with_band(100).into(), false);
        long_pair_on::<f64>(variant, 150_000, 150_100, Dtw::with_band(20).into(), false);
    }
}
