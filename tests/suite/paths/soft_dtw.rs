//! Soft-DTW's expected alignment against the oracle's and against finite
//! differences of the value with respect to the cost matrix.

use super::{pair_series, rng, SHAPES};
use crate::common::{error_scale, tolerance};
use ndarray::{Array2, ArrayView2};
use timewarp::{distance, oracle, soft_dtw_alignment, ComputeOptions, Device, Float, SoftDtw};

fn cpu() -> ComputeOptions {
    ComputeOptions::on(Device::Cpu)
}

/// Soft-DTW's value from a cost matrix (written here, apart from both the
/// oracle and the library, so that the finite differences check them).
fn value_of_costs(costs: &Array2<f64>, gamma: f64, band: Option<usize>) -> f64 {
    let (n, m) = costs.dim();
    let mut r = Array2::from_elem((n + 1, m + 1), f64::INFINITY);
    r[[0, 0]] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            let inside = band.is_none_or(|w| {
                i - 1 <= j - 1 + w + n.saturating_sub(m) && j - 1 <= i - 1 + w + m.saturating_sub(n)
            });
            if inside {
                let before = [r[[i - 1, j - 1]], r[[i - 1, j]], r[[i, j - 1]]];
                let least = before.iter().cloned().fold(f64::INFINITY, f64::min);
                let sum: f64 = before.iter().map(|v| (-(v - least) / gamma).exp()).sum();
                r[[i, j]] = costs[[i - 1, j - 1]] + least - gamma * sum.ln();
            }
        }
    }
    r[[n, m]]
}

fn costs(x: ArrayView2<f64>, y: ArrayView2<f64>) -> Array2<f64> {
    Array2::from_shape_fn((x.nrows(), y.nrows()), |(i, j)| {
        x.row(i)
            .iter()
            .zip(y.row(j))
            .map(|(u, v)| (u - v) * (u - v))
            .sum()
    })
}

/// E against central differences `(V(C + h e_ij) - V(C - h e_ij)) / 2h`,
/// h = 1e-5: the truncation error is O(h^2) times the third derivative
/// (of order 1 / gamma^2 here, so about 1e-8) and the rounding error about
/// u |V| / h, below 1e-9 for values of at most 100; 1e-6 covers both.
#[test]
fn the_alignment_is_the_gradient_by_finite_differences() {
    let mut rng = rng(21);
    for (n, m, band, gamma) in [(5, 4, None, 1.0), (6, 6, Some(1), 0.5), (1, 3, None, 0.1)] {
        let (x, _) = pair_series::<f64>(&mut rng, n, 2);
        let (y, _) = pair_series::<f64>(&mut rng, m, 2);
        let soft = SoftDtw::new(gamma).unwrap();
        let soft = band.map_or(soft, |r| soft.with_band(r));
        let (e, _) = soft_dtw_alignment(x.view(), y.view(), soft, &cpu()).unwrap();
        let c = costs(x.view(), y.view());
        let h = 1e-5;
        for ((i, j), &got) in e.indexed_iter() {
            let (mut up, mut down) = (c.clone(), c.clone());
            up[[i, j]] += h;
            down[[i, j]] -= h;
            let numeric =
                (value_of_costs(&up, gamma, band) - value_of_costs(&down, gamma, band)) / (2.0 * h);
            assert!(
                (got - numeric).abs() <= 1e-6,
                "{n} x {m} band {band:?}: E[{i}][{j}] = {got}, differences {numeric}"
            );
        }
    }
}

/// The oracle's E within `4 (n + m) u (1 + scale / gamma)`: a weight is
/// `exp((R' - R - cost) / gamma)`, whose exponent carries the rounding of
/// the R values (of the order of u times the value's scale) divided by
/// gamma, and E multiplies about n + m of them. The value is the oracle's
/// and `distance`'s within the tolerance of CPU against oracle.
fn check_alignment<T: Float>(seed: u64) {
    let mut rng = rng(seed);
    for (n, m, dims) in SHAPES {
        for (gamma, band) in [(1.0, None), (0.1, Some(2)), (0.01, Some(0))] {
            let (x, xf) = pair_series::<T>(&mut rng, n, dims);
            let (y, yf) = pair_series::<T>(&mut rng, m, dims);
            let soft = SoftDtw::new(gamma).unwrap();
            let soft = band.map_or(soft, |r| soft.with_band(r));
            let (e, value) = soft_dtw_alignment(x.view(), y.view(), soft, &cpu()).unwrap();
            let (expected_e, expected) =
                oracle::soft_dtw_alignment(xf.view(), yf.view(), gamma, band);
            let context = format!(
                "{} {n} x {m} x {dims}, gamma {gamma}, band {band:?}",
                T::NAME
            );
            let scale = error_scale(xf.view(), yf.view(), expected, soft.into());
            let e_tolerance = 4.0 * (n + m) as f64 * T::UNIT_ROUNDOFF * (1.0 + scale / gamma);
            for (got, want) in e.iter().zip(&expected_e) {
                assert!(
                    (got.to_f64() - want).abs() <= e_tolerance,
                    "{context}: {got} vs {want}"
                );
            }
            let bound = tolerance::<T>(n, m, dims) * scale;
            assert!(
                (value.to_f64() - expected).abs() <= bound,
                "{context}: value"
            );
            let library = distance(x.view(), y.view(), soft.into()).unwrap().to_f64();
            assert!(
                (value.to_f64() - library).abs() <= 2.0 * bound,
                "{context}: distance"
            );
        }
    }
}

#[test]
fn soft_dtw_alignments_match_the_oracle_f64() {
    check_alignment::<f64>(22);
}

#[test]
fn soft_dtw_alignments_match_the_oracle_f32() {
    check_alignment::<f32>(23);
}

#[test]
fn too_large_pairs_and_the_divergence_are_refused() {
    // 2 x 20,002^2 f64 values are 6 GiB: refused before anything is allocated.
    let long = Array2::<f64>::zeros((20_000, 1));
    let soft = SoftDtw::new(1.0).unwrap();
    let error = soft_dtw_alignment(long.view(), long.view(), soft, &cpu()).unwrap_err();
    assert!(error.to_string().contains("MiB"), "{error}");
    let short = Array2::<f64>::zeros((3, 1));
    let error =
        soft_dtw_alignment(short.view(), short.view(), soft.divergence(), &cpu()).unwrap_err();
    assert!(error.to_string().contains("divergence"), "{error}");
}
