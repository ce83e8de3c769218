//! DTW paths with the GPU's last columns: the columns against the CPU's,
//! Hirschberg over the GPU against the full-matrix traceback, and
//! `dtw_path` on the GPU for a pair past the CPU's threshold.

use super::dtw::{assert_valid_path, path_cost};
use super::{pair_series, rng};
use crate::common::{on_gpu, tolerance};
use timewarp::gpu::Gpu;
use timewarp::{
    distance, dtw_path, hirschberg, oracle, ComputeOptions, CpuLastColumn, Device, Dtw, Float,
    GpuLastColumn, LastColumn,
};

/// Every sub-pair's last column, forward and reversed, from the GPU
/// (every sub-pair on it) and the CPU: within the tolerance of two sums of
/// the same non-negative terms (`common::tolerance`; the GPU's univariate
/// cell fuses its multiply and add).
fn columns_match<T: Float>(dims: usize) {
    let mut rng = rng(21);
    let (n, m) = (900, 700);
    let (x, _) = pair_series::<T>(&mut rng, n, dims);
    let (y, _) = pair_series::<T>(&mut rng, m, dims);
    let gpu = Gpu::get().unwrap();
    let on_gpu = GpuLastColumn::new(gpu, x.view(), y.view())
        .unwrap()
        .with_min_cells(0);
    let on_cpu = CpuLastColumn::new(x.view(), y.view());
    // Whole, one row, one column, narrower than a panel, odd offsets.
    let ranges = [
        (0..n, 0..m),
        (0..1, 0..m),
        (0..n, 0..1),
        (7..850, 300..333),
        (1..n, 1..m),
        (499..500, 2..690),
    ];
    let tolerance = tolerance::<T>(n, m, dims);
    for (rows, cols) in ranges {
        for reversed in [false, true] {
            let expected = on_cpu
                .last_column(rows.clone(), cols.clone(), reversed)
                .unwrap();
            let got = on_gpu
                .last_column(rows.clone(), cols.clone(), reversed)
                .unwrap();
            assert_eq!(got.len(), rows.len());
            for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                let (g, e) = (g.to_f64(), e.to_f64());
                assert!(
                    (g - e).abs() <= tolerance * e.abs().max(1.0),
                    "{} rows {rows:?} cols {cols:?} reversed {reversed}, row {i}: {g} vs {e}",
                    T::NAME
                );
            }
        }
    }
}

#[test]
fn gpu_last_columns_match_the_cpu() {
    let Some(_timed) = on_gpu("paths::gpu::gpu_last_columns_match_the_cpu") else {
        return;
    };
    columns_match::<f64>(1);
    columns_match::<f64>(3);
    columns_match::<f32>(1);
    columns_match::<f32>(2);
}

/// f64: Hirschberg over the GPU's columns gives the oracle's path (random
/// samples: no two paths within rounding of each other), down to leaves
/// of one cell.
#[test]
fn gpu_hirschberg_matches_the_full_matrix() {
    let Some(_timed) = on_gpu("paths::gpu::gpu_hirschberg_matches_the_full_matrix") else {
        return;
    };
    let gpu = Gpu::get().unwrap();
    let mut rng = rng(22);
    for (n, m, dims) in [(300, 200, 1), (1, 400, 1), (400, 1, 2), (257, 513, 3)] {
        let (x, _) = pair_series::<f64>(&mut rng, n, dims);
        let (y, _) = pair_series::<f64>(&mut rng, m, dims);
        let (expected_path, expected) = oracle::dtw_path(x.view(), y.view(), None);
        let provider = GpuLastColumn::new(gpu, x.view(), y.view())
            .unwrap()
            .with_min_cells(0);
        for leaf in [1, 64, 4096] {
            let got = hirschberg(x.view(), y.view(), &provider, leaf).unwrap();
            assert_eq!(got.path, expected_path, "{n} x {m} x {dims}, leaf {leaf}");
            assert!((got.value - expected).abs() <= 1e-12 * expected.max(1.0));
        }
    }
}

/// `dtw_path` on the GPU for pairs past the threshold where it divides and
/// conquers there: a valid path whose exact cost is the value, and the
/// value `distance`'s (on the CPU), within the tolerance; f64 gives the same
/// path as the CPU's Hirschberg.
#[test]
fn gpu_dtw_path_of_a_long_pair() {
    let Some(_timed) = on_gpu("paths::gpu::gpu_dtw_path_of_a_long_pair") else {
        return;
    };
    let gpu_options = ComputeOptions::on(Device::Gpu);
    let mut rng = rng(23);
    let (n, m) = (9000, 8000);
    let (x, xf) = pair_series::<f32>(&mut rng, n, 1);
    let (y, yf) = pair_series::<f32>(&mut rng, m, 1);
    let got = dtw_path(x.view(), y.view(), Dtw::new(), &gpu_options).unwrap();
    assert_valid_path(&got.path, n, m, None);
    let cost = path_cost(&got.path, xf.view(), yf.view());
    let expected = distance(x.view(), y.view(), Dtw::new().into()).unwrap();
    let tolerance = tolerance::<f32>(n, m, 1);
    assert!(
        (cost - expected as f64).abs() <= tolerance * cost,
        "{cost} vs {expected}"
    );
    assert!(
        (got.value as f64 - cost).abs() <= tolerance * cost,
        "{} vs {cost}",
        got.value
    );

    let (x, y) = (xf, yf);
    let got = dtw_path(x.view(), y.view(), Dtw::new(), &gpu_options).unwrap();
    let cpu = hirschberg(
        x.view(),
        y.view(),
        &CpuLastColumn::new(x.view(), y.view()),
        1 << 22,
    );
    assert_eq!(got.path, cpu.unwrap().path);
}
