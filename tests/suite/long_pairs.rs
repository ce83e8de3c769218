//! Pairs too long for the oracle's full matrix (65,536 to 100,003 samples), on
//! the long-pair variants (`tiled`, `tiled-launches`, `diagonal`,
//! `diagonal-launches`) and on the warp kernel with a narrow band, against
//! the CPU backend's rolling rows (linear memory; checked against the
//! oracle in `matrix`). Both evaluate the same cell updates on the same
//! neighbours, so TWED agrees exactly; DTW's square and sum are one fused
//! multiply-add on the GPU (one rounding instead of two), and Soft-DTW's
//! exp and ln differ between the GPU's and the host's, by an ulp or so a
//! cell: those agree within `crate::common::tolerance`'s f32 form (`4 (n + m)(d +
//! 2) u`) of the accumulated scale, in either precision. Both orientations
//! (many short anti-diagonals of a long buffer, and long anti-diagonals).
//! GPU only: skips without a GPU, fails without one under `REQUIRE_GPU=1`.

use crate::common::*;
use timewarp::{
    distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SeriesSet, SoftDtw, Twed, Variant,
};

/// One pair in precision `T` on each of `variants` against the CPU
/// backend on the same (rounded) inputs: equal bits if `exact` (the CPU in
/// `T`), else within the bound above of the CPU's f64 value.
fn against_cpu<T: Float>(
    variants: &[Variant],
    a: &SeriesSet<f64>,
    b: &SeriesSet<f64>,
    metric: Metric,
    exact: bool,
) {
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    let (n, m) = (a.max_len(), b.max_len());
    let cpu = ComputeOptions::on(Device::Cpu);
    let exact_value = exact.then(|| distance_matrix(&a, Some(&b), metric, &cpu).unwrap()[[0, 0]]);
    let (a64, b64) = (a.cast::<f64>().unwrap(), b.cast::<f64>().unwrap());
    let (expected, bound) = if exact {
        (0.0, 0.0)
    } else {
        let expected = cpu_matrix(&a64, &b64, metric)[[0, 0]];
        let scale = match metric {
            Metric::SoftDtw(soft) => {
                // The DTW of the same band bounds the costs on the best path.
                let dtw = soft.band().map_or(Dtw::new(), Dtw::with_band);
                let dtw = cpu_matrix(&a64, &b64, dtw.into())[[0, 0]];
                dtw + soft.gamma() * (n + m) as f64 * 3f64.ln() + expected.abs()
            }
            _ => expected.abs(),
        };
        (
            expected,
            4.0 * (n + m) as f64 * 3.0 * T::UNIT_ROUNDOFF * scale,
        )
    };
    for &variant in variants {
        let options = gpu_options(Some(variant));
        let got = distance_matrix(&a, Some(&b), metric, &options).unwrap()[[0, 0]];
        let context = format!("{metric:?} {} {n} x {m}, {variant}", T::NAME);
        if let Some(value) = exact_value {
            assert_eq!(got, value, "{context}");
            continue;
        }
        let got = got.to_f64();
        assert!(
            (got - expected).abs() <= bound,
            "{context}: got {got:e}, CPU {expected:e}, |diff| {:e} > {bound:e}",
            (got - expected).abs()
        );
    }
}

fn pair(seed: u64, n: usize, m: usize, times: bool) -> (SeriesSet<f64>, SeriesSet<f64>) {
    let mut rng = rng(seed);
    let a = random_set(&mut rng, &[n], 1, 1.0);
    let b = random_set(&mut rng, &[m], 1, 1.0);
    if times {
        (
            with_random_timestamps(&mut rng, a),
            with_random_timestamps(&mut rng, b),
        )
    } else {
        (a, b)
    }
}

/// The tiled kernels (pipelined panels; tiles a launch per anti-diagonal)
/// on pairs of 65,536 x 8,191 samples and the like (hundreds of tiles
/// and panels).
#[test]
fn gpu_tiled() {
    let Some(_timed) = on_gpu("long_pairs::gpu_tiled") else {
        return;
    };
    let twed: Metric = Twed::new(1.0, 1.0, 2.0).unwrap().into();
    let tiled = [Variant::Tiled, Variant::TiledLaunches];
    let (a, b) = pair(1, 65_536, 8_191, false);
    against_cpu::<f32>(&tiled, &a, &b, Dtw::new().into(), false);
    against_cpu::<f64>(&tiled, &a, &b, twed, true);
    let (a, b) = pair(2, 8_191, 65_536, false);
    against_cpu::<f64>(&tiled, &a, &b, Dtw::with_band(300).into(), false);
    let (a, b) = pair(3, 65_536, 3_001, false);
    against_cpu::<f32>(&tiled, &a, &b, Twed::default().into(), true);
    let (a, b) = pair(4, 65_536, 2_001, false);
    against_cpu::<f64>(&tiled, &a, &b, SoftDtw::new(0.1).unwrap().into(), false);
}

/// The anti-diagonal kernels (persistent with a grid barrier; a launch per
/// anti-diagonal) on pairs of over 100 000 samples, both orientations,
/// every measure, with timestamps: f64 on the long, short anti-diagonals,
/// f32 on the few long ones (both precisions of every kernel are checked
/// on shorter pairs in `matrix`).
#[test]
fn gpu_diagonal() {
    let Some(_timed) = on_gpu("long_pairs::gpu_diagonal") else {
        return;
    };
    let metrics: Vec<Metric> = vec![
        Dtw::new().into(),
        Dtw::with_band(500).into(),
        SoftDtw::new(1.0).unwrap().into(),
        Twed::new(0.5, 1.0, 2.0).unwrap().into(),
    ];
    let variants = [Variant::Diagonal, Variant::DiagonalLaunches];
    let (a, b) = pair(10, 100_003, 1_001, true);
    for &metric in &metrics {
        against_cpu::<f64>(&variants, &a, &b, metric, false);
    }
    let (a, b) = pair(11, 999, 100_001, true);
    for &metric in &metrics {
        against_cpu::<f32>(&variants, &a, &b, metric, false);
    }
}

/// A single long pair in a narrow band: the warp kernel computes the
/// band's cells alone (the sheared band driver, one warp), the tiled kernel
/// skips the rows outside it.
#[test]
fn gpu_narrow_bands() {
    let Some(_timed) = on_gpu("long_pairs::gpu_narrow_bands") else {
        return;
    };
    let variants = [Variant::Warp, Variant::Tiled];
    let (a, b) = pair(20, 100_000, 100_000, false);
    against_cpu::<f32>(&variants, &a, &b, Dtw::with_band(100).into(), false);
    let (a, b) = pair(21, 100_000, 100_100, false);
    against_cpu::<f64>(&variants, &a, &b, Dtw::with_band(20).into(), false);
    let soft = SoftDtw::new(0.5).unwrap().with_band(30).into();
    against_cpu::<f64>(&variants, &a, &b, soft, false);
}

/// The bound on the tiled kernel's waits, on the GPU: with one panel that
/// never publishes its border (the test hook), the call fails with
/// `Error::DeviceWait` naming the kernel, within a few bounds rather than
/// never; and the GPU stays usable: the same pair right after is right.
#[test]
fn gpu_a_stalled_panel_is_an_error_and_the_gpu_stays_usable() {
    let Some(_timed) =
        on_gpu("long_pairs::gpu_a_stalled_panel_is_an_error_and_the_gpu_stays_usable")
    else {
        return;
    };
    let (a, b) = pair(30, 20_000, 20_000, false);
    let metric: Metric = Dtw::new().into();
    let options = gpu_options(Some(Variant::Tiled));
    timewarp::internals::inject_stalled_panel(Some(3));
    let started = std::time::Instant::now();
    let error = distance_matrix(&a, Some(&b), metric, &options).unwrap_err();
    let waited = started.elapsed();
    timewarp::internals::inject_stalled_panel(None);
    match &error {
        timewarp::Error::DeviceWait { kernel, .. } => {
            assert!(kernel.starts_with("dtw_tiled"), "names the kernel: {error}")
        }
        other => panic!("expected a device wait error, got {other}"),
    }
    let bound = std::time::Duration::from_nanos(timewarp_kernels::hw::WAIT_BOUND_NS);
    assert!(waited < 4 * bound, "the call took {waited:?}");
    let expected = cpu_matrix(&a, &b, metric)[[0, 0]];
    let got = distance_matrix(&a, Some(&b), metric, &options).unwrap()[[0, 0]];
    assert!(
        (got - expected).abs() <= 1e-9 * expected.abs(),
        "after the fault: {got} against the CPU's {expected}"
    );
}
