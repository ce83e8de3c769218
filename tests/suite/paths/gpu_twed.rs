//! TWED paths with the GPU's last columns: every kind of pass against the
//! CPU's, the divide and conquer over the GPU against the oracle's
//! traceback, and `twed_path` on the GPU for a long pair with timestamps.

use super::twed::{assert_valid_edits, edit_matches, library_twed, oracle_matches, random_times};
use super::{pair_series, rng};
use crate::common::{on_gpu, tolerance};
use timewarp::gpu::Gpu;
use timewarp::internals::{
    hirschberg, CpuLastColumn, GpuLastColumn, LastColumn, PathPair, SubPair, TwedPair,
};
use timewarp::{oracle, twed_path, ComputeOptions, Device, Float, Twed};

/// The passes of parts from the origin, from inner nodes, to the last
/// corner, one or two rows or node columns wide, of a pair with irregular
/// timestamps: the GPU (every pass on it) against the CPU. Both run the
/// kernels' own cell update (the GPU on the transposed sub-pair, which
/// swaps the two deletions and the operands of each difference: the same
/// roundings), so univariate columns agree to the last bits; the
/// multivariate norms' powers and square roots are the GPU's and the host's
/// own, within the tolerance of `common::tolerance`.
fn twed_columns_match<T: Float>(dims: usize, degree: f64) {
    let mut rng = rng(31);
    let (n, m) = (900, 700);
    let (x, _) = pair_series::<T>(&mut rng, n, dims);
    let (y, _) = pair_series::<T>(&mut rng, m, dims);
    let (tx, ty) = (
        random_times::<T>(&mut rng, n).0,
        random_times::<T>(&mut rng, m).0,
    );
    let twed = Twed::new(0.05, 0.5, degree).unwrap();
    let pair = TwedPair::new(
        (x.view(), Some(tx.view())),
        (y.view(), Some(ty.view())),
        twed,
    )
    .unwrap();
    let gpu = Gpu::get().unwrap();
    let on_gpu = GpuLastColumn::new(gpu, &pair).unwrap().with_min_cells(0);
    let on_cpu = CpuLastColumn::new(&pair);
    let parts = [
        (0..n + 1, 0..m + 1),
        (0..2, 0..m + 1),
        (0..n + 1, 0..3),
        (7..851, 300..334),
        (1..n + 1, 1..m + 1),
        (499..501, 2..691),
        (n - 1..n + 1, 5..m + 1),
    ];
    let tolerance = tolerance::<T>(n, m, dims);
    for (rows, cols) in parts {
        let part = SubPair { rows, cols };
        for pass in pair.passes(&part) {
            let expected = on_cpu
                .last_column(pass.rows.clone(), pass.cols.clone(), pass.reversed)
                .unwrap();
            let got = on_gpu
                .last_column(pass.rows.clone(), pass.cols.clone(), pass.reversed)
                .unwrap();
            assert_eq!(got.len(), pass.rows.len());
            for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                let (g, e) = (g.to_f64(), e.to_f64());
                assert!(
                    (g - e).abs() <= tolerance * e.abs().max(1.0),
                    "{} dims {dims}: {pass:?}, row {i}: {g} vs {e}",
                    T::NAME
                );
            }
        }
    }
}

#[test]
fn gpu_twed_last_columns_match_the_cpu() {
    let Some(_timed) = on_gpu("paths::gpu_twed::gpu_twed_last_columns_match_the_cpu") else {
        return;
    };
    twed_columns_match::<f64>(1, 2.0);
    twed_columns_match::<f64>(3, 3.0);
    twed_columns_match::<f32>(1, 1.0);
    twed_columns_match::<f32>(2, 2.0);
}

/// f64: the divide and conquer over the GPU's columns gives the oracle's
/// matches (`nu > 0`, irregular timestamps: one optimal path but for the
/// order of deletions between two matches, see `twed::matches`) and value,
/// down to leaves of one cell.
#[test]
fn gpu_twed_hirschberg_matches_the_full_matrix() {
    let Some(_timed) = on_gpu("paths::gpu_twed::gpu_twed_hirschberg_matches_the_full_matrix")
    else {
        return;
    };
    let gpu = Gpu::get().unwrap();
    let mut rng = rng(32);
    for (n, m, dims, degree) in [
        (300, 200, 1, 2.0),
        (1, 400, 1, 2.0),
        (400, 1, 2, 1.0),
        (257, 513, 3, 3.0),
    ] {
        let (x, _) = pair_series::<f64>(&mut rng, n, dims);
        let (y, _) = pair_series::<f64>(&mut rng, m, dims);
        let (tx, ty) = (random_times(&mut rng, n).0, random_times(&mut rng, m).0);
        let twed = Twed::new(0.1, 0.5, degree).unwrap();
        let (steps, expected) = oracle::twed_path(
            x.view(),
            tx.view(),
            y.view(),
            ty.view(),
            twed.nu(),
            twed.lambda(),
            twed.degree(),
        );
        let pair = TwedPair::new(
            (x.view(), Some(tx.view())),
            (y.view(), Some(ty.view())),
            twed,
        )
        .unwrap();
        let provider = GpuLastColumn::new(gpu, &pair).unwrap().with_min_cells(0);
        for leaf in [1, 64, 4096] {
            let got = hirschberg(&pair, &provider, leaf).unwrap();
            let context = format!("{n} x {m} x {dims}, leaf {leaf}");
            assert_valid_edits(&got.edits, n, m, &context);
            assert_eq!(
                edit_matches(&got.edits),
                oracle_matches(&steps),
                "{context}"
            );
            assert!(
                (got.value - expected).abs() <= 1e-12 * expected,
                "{context}: {} vs {expected}",
                got.value
            );
        }
    }
}

/// `twed_path` on the GPU for a pair past the threshold where it divides
/// and conquers there, with irregular timestamps: f32, a valid path whose
/// costs add to the value, which is the CPU's `distance` (of the same
/// timestamps) within the tolerance; f64, the same matches as the CPU's
/// divide and conquer (the same columns, see
/// `gpu_twed_last_columns_match_the_cpu`) and the same value.
#[test]
fn gpu_twed_path_of_a_long_pair() {
    let Some(_timed) = on_gpu("paths::gpu_twed::gpu_twed_path_of_a_long_pair") else {
        return;
    };
    let gpu_options = ComputeOptions::on(Device::Gpu);
    let mut rng = rng(33);
    let (n, m) = (9000, 8000);
    let twed = Twed::default();
    let (x, xf) = pair_series::<f32>(&mut rng, n, 1);
    let (y, yf) = pair_series::<f32>(&mut rng, m, 1);
    let ((tx, txf), (ty, tyf)) = (
        random_times::<f32>(&mut rng, n),
        random_times::<f32>(&mut rng, m),
    );
    let got = twed_path(
        x.view(),
        y.view(),
        Some(tx.view()),
        Some(ty.view()),
        twed,
        &gpu_options,
    )
    .unwrap();
    assert!(got.on_gpu);
    assert_valid_edits(&got.edits, n, m, "f32");
    let tolerance = tolerance::<f32>(n, m, 1);
    let expected = library_twed((x.view(), tx.view()), (y.view(), ty.view()), twed);
    let total: f64 = got.edits.iter().map(|e| e.cost as f64).sum();
    assert!(
        (got.value as f64 - expected).abs() <= tolerance * expected,
        "{} vs {expected}",
        got.value
    );
    assert!(
        (total - expected).abs() <= tolerance * expected,
        "{total} vs {expected}"
    );

    let got = twed_path(
        xf.view(),
        yf.view(),
        Some(txf.view()),
        Some(tyf.view()),
        twed,
        &gpu_options,
    )
    .unwrap();
    let pair = TwedPair::new(
        (xf.view(), Some(txf.view())),
        (yf.view(), Some(tyf.view())),
        twed,
    )
    .unwrap();
    let cpu = hirschberg(&pair, &CpuLastColumn::new(&pair), 1 << 22).unwrap();
    assert_eq!(edit_matches(&got.edits), edit_matches(&cpu.edits));
    assert!((got.value - cpu.value).abs() <= 1e-12 * cpu.value);
}
