//! DTW paths with the GPU's last columns: the columns against the CPU's,
//! Hirschberg over the GPU against the full-matrix traceback, and
//! `dtw_path` on the GPU for a pair past the CPU's threshold. Soft-DTW's
//! expected alignment on the GPU (the alignment kernel) against the oracle
//! and the CPU's, with the invariants of every alignment, its rings in
//! global memory, and the memory budget's refusal.

use super::dtw::{assert_valid_path, path_cost};
use super::soft_dtw::{alignment_tolerance, assert_alignment_invariants, SETTINGS};
use super::{pair_series, rng, SHAPES};
use crate::common::{error_scale, on_gpu, tolerance};
use timewarp::gpu::Gpu;
use timewarp::internals::{hirschberg, CpuLastColumn, DtwPair, GpuLastColumn, LastColumn};
use timewarp::{
    distance, dtw_path, oracle, soft_dtw_alignment, ComputeOptions, Device, Dtw, Error, Float,
    SoftDtw,
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
    let pair = DtwPair::new(x.view(), y.view()).unwrap();
    let on_gpu = GpuLastColumn::new(gpu, &pair).unwrap().with_min_cells(0);
    let on_cpu = CpuLastColumn::new(&pair);
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
        let pair = DtwPair::new(x.view(), y.view()).unwrap();
        let provider = GpuLastColumn::new(gpu, &pair).unwrap().with_min_cells(0);
        for leaf in [1, 64, 4096] {
            let got = hirschberg(&pair, &provider, leaf).unwrap();
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
    let pair = DtwPair::new(x.view(), y.view()).unwrap();
    let cpu = hirschberg(&pair, &CpuLastColumn::new(&pair), 1 << 22);
    assert_eq!(got.path, cpu.unwrap().path);
}

fn soft(gamma: f64, band: Option<usize>) -> SoftDtw {
    let soft = SoftDtw::new(gamma).unwrap();
    band.map_or(soft, |r| soft.with_band(r))
}

/// The GPU's alignment of `x` against `y` (given in `T` and as the same
/// values in f64) against the oracle's within [`alignment_tolerance`] (the
/// GPU's), against the CPU's within both tolerances, with the invariants;
/// the value against the oracle's, the CPU's and `distance`'s on the GPU.
fn check_gpu_alignment<T: Float>(
    (x, xf): (&ndarray::Array2<T>, &ndarray::Array2<f64>),
    (y, yf): (&ndarray::Array2<T>, &ndarray::Array2<f64>),
    (gamma, band): (f64, Option<usize>),
) {
    let (n, m, dims) = (x.nrows(), y.nrows(), x.ncols());
    let soft = soft(gamma, band);
    let gpu = ComputeOptions::on(Device::Gpu);
    let cpu = ComputeOptions::on(Device::Cpu);
    let (e, value) = soft_dtw_alignment(x.view(), y.view(), soft, &gpu).unwrap();
    let (cpu_e, cpu_value) = soft_dtw_alignment(x.view(), y.view(), soft, &cpu).unwrap();
    let (expected_e, expected) = oracle::soft_dtw_alignment(xf.view(), yf.view(), gamma, band);
    let context = format!(
        "{} {n} x {m} x {dims}, gamma {gamma}, band {band:?}",
        T::NAME
    );
    let scale = error_scale(xf.view(), yf.view(), expected, soft.into());
    let on_gpu = alignment_tolerance::<T>(n, m, scale, gamma, true);
    let on_cpu = alignment_tolerance::<T>(n, m, scale, gamma, false);
    assert_eq!(e.dim(), (n, m), "{context}");
    for (((i, j), got), (want, from_cpu)) in e.indexed_iter().zip(expected_e.iter().zip(&cpu_e)) {
        let got = got.to_f64();
        assert!(
            (got - want).abs() <= on_gpu,
            "{context}: E[{i}][{j}] {got} vs oracle {want}, bound {on_gpu:e}"
        );
        assert!(
            (got - from_cpu.to_f64()).abs() <= on_gpu + on_cpu,
            "{context}: E[{i}][{j}] {got} vs CPU {from_cpu}"
        );
    }
    assert_alignment_invariants(e.mapv(|v| v.to_f64()).view(), on_gpu, &context);
    // f32: the GPU's fast soft-min, as tests/suite/paired.rs bounds it.
    let fast = if T::NAME == "f32" {
        (n + m) as f64 * gamma * 2f64.powi(-19)
    } else {
        0.0
    };
    let bound = tolerance::<T>(n, m, dims) * scale + fast;
    let value = value.to_f64();
    assert!(
        (value - expected).abs() <= bound,
        "{context}: value {value} vs oracle {expected}"
    );
    assert!(
        (value - cpu_value.to_f64()).abs() <= 2.0 * bound,
        "{context}: value vs CPU"
    );
    let library = distance(x.view(), y.view(), soft.into()).unwrap().to_f64();
    assert!(
        (value - library).abs() <= 2.0 * bound,
        "{context}: value vs distance"
    );
}

/// Every shape (lengths 1 and 2, unequal both ways, multivariate) with
/// every setting (gamma 0.01 to 10, bands 0 and 2 and none), f64 and f32.
/// In f32 at gamma 0.01 the largest pairs' bound exceeds 0.1 (E is in [0,
/// 1], so it would say little): those are checked in f64 only.
#[test]
fn gpu_soft_dtw_alignments_match_the_oracle() {
    let Some(_timed) = on_gpu("paths::gpu::gpu_soft_dtw_alignments_match_the_oracle") else {
        return;
    };
    let mut rng = rng(24);
    for (n, m, dims) in SHAPES {
        for setting in SETTINGS {
            let (x, xf) = pair_series::<f64>(&mut rng, n, dims);
            let (y, yf) = pair_series::<f64>(&mut rng, m, dims);
            check_gpu_alignment((&x, &xf), (&y, &yf), setting);
            let (x32, x32f) = pair_series::<f32>(&mut rng, n, dims);
            let (y32, y32f) = pair_series::<f32>(&mut rng, m, dims);
            let (gamma, band) = setting;
            let expected = oracle::soft_dtw_banded(x32f.view(), y32f.view(), gamma, band);
            let scale = error_scale(x32f.view(), y32f.view(), expected, soft(gamma, band).into());
            if alignment_tolerance::<f32>(n, m, scale, gamma, true) <= 0.1 {
                check_gpu_alignment((&x32, &x32f), (&y32, &y32f), setting);
            }
        }
    }
}

/// A pair whose six anti-diagonals of f64 (6 x 4901 x 8 bytes) exceed any
/// GPU's shared memory per block (227 KiB on an H100 or H200): the kernel
/// keeps its rings in global memory. Against the oracle, with a band too.
#[test]
fn gpu_soft_dtw_alignment_beyond_shared_memory() {
    let Some(_timed) = on_gpu("paths::gpu::gpu_soft_dtw_alignment_beyond_shared_memory") else {
        return;
    };
    let mut rng = rng(25);
    let (x, xf) = pair_series::<f64>(&mut rng, 5000, 1);
    let (y, yf) = pair_series::<f64>(&mut rng, 4900, 1);
    check_gpu_alignment((&x, &xf), (&y, &yf), (1.0, None));
    check_gpu_alignment((&x, &xf), (&y, &yf), (0.1, Some(300)));
}

/// A pair within `PATH_WORKSPACE_BYTES` but over a small device memory
/// budget: a GPU error naming what it needs, nothing computed.
#[test]
fn gpu_soft_dtw_alignment_over_the_budget_is_refused() {
    let Some(_timed) = on_gpu("paths::gpu::gpu_soft_dtw_alignment_over_the_budget_is_refused")
    else {
        return;
    };
    let x = ndarray::Array2::<f32>::zeros((1000, 1));
    let options = ComputeOptions {
        gpu_memory_budget: Some(4 << 20),
        ..ComputeOptions::on(Device::Gpu)
    };
    // 2 x 1000^2 f32 values: 8 MiB.
    let error = soft_dtw_alignment(x.view(), x.view(), soft(1.0, None), &options).unwrap_err();
    assert!(
        matches!(error, Error::GpuOutOfMemory { source: None, .. })
            && error.to_string().contains("needs 8 MiB"),
        "{error}"
    );
}
