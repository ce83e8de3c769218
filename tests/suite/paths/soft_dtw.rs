//! Soft-DTW's expected alignment against the oracle's and against finite
//! differences of the value with respect to the cost matrix, and the
//! invariants every alignment satisfies (`assert_alignment_invariants`,
//! which the GPU's are held to as well).

use super::{pair_series, rng, SHAPES};
use crate::common::{error_scale, tolerance};
use ndarray::{Array2, ArrayView2};
use timewarp::{
    distance, oracle, soft_dtw_alignment, ComputeOptions, Device, Error, Float, SoftDtw,
};

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

/// How far a computed E may be from the exact one, absolutely (E is in
/// [0, 1]) and relative to each entry. E is a sum, over the monotone paths
/// from the cell to the end, of products of at most `n + m` weights
/// `exp((key - R) / gamma)`, all positive, so its relative error is at
/// most the sum of the weights' relative errors along one path. A weight's
/// exponent carries a few roundings of R values, each within u of the
/// value's scale, divided by gamma; its exponential and the product and
/// sum that use it add a few u: `4 u (1 + scale / gamma)` a weight. On the
/// GPU in f32, the fast soft-min puts each key within `gamma 2^-19` of the
/// exact soft-min of its neighbours (docs/algorithms.md) and `ex2.approx`
/// adds `2^-22` to each weight.
pub fn alignment_tolerance<T: Float>(n: usize, m: usize, scale: f64, gamma: f64, gpu: bool) -> f64 {
    let fast = if gpu && T::NAME == "f32" {
        2f64.powi(-19) + 2f64.powi(-22)
    } else {
        0.0
    };
    (n + m) as f64 * (4.0 * T::UNIT_ROUNDOFF * (1.0 + scale / gamma) + fast)
}

/// What every expected alignment satisfies, whatever the pair: E is the
/// probability that a random alignment (a monotone path from `(0, 0)` to
/// `(n - 1, m - 1)`, inside the band) passes through each cell. Every path
/// starts and ends in the corners (E = 1 there); it meets every row and
/// every column at least once (rows and columns grow by at most 1 a step),
/// so their sums are at least 1; its cells' `i + j` grow by 1 or 2 a step,
/// so it meets each anti-diagonal at most once and one of any two
/// consecutive ones at least once: the sums of anti-diagonals are at most
/// 1, those of two consecutive ones at least 1. `tolerance`: the relative
/// error of each entry (`alignment_tolerance`), so of each sum.
pub fn assert_alignment_invariants(e: ArrayView2<f64>, tolerance: f64, context: &str) {
    let (n, m) = e.dim();
    for corner in [e[[0, 0]], e[[n - 1, m - 1]]] {
        assert!(
            (corner - 1.0).abs() <= tolerance,
            "{context}: corner {corner}"
        );
    }
    for ((i, j), &v) in e.indexed_iter() {
        assert!(
            (-tolerance..=1.0 + tolerance).contains(&v),
            "{context}: E[{i}][{j}] = {v}"
        );
    }
    for (i, row) in e.rows().into_iter().enumerate() {
        assert!(
            row.sum() >= 1.0 - tolerance,
            "{context}: row {i} sums to {}",
            row.sum()
        );
    }
    for (j, column) in e.columns().into_iter().enumerate() {
        let sum = column.sum();
        assert!(
            sum >= 1.0 - tolerance,
            "{context}: column {j} sums to {sum}"
        );
    }
    let mut diagonals = vec![0.0; n + m - 1];
    for ((i, j), &v) in e.indexed_iter() {
        diagonals[i + j] += v;
    }
    for (d, &sum) in diagonals.iter().enumerate() {
        assert!(
            sum <= 1.0 + tolerance,
            "{context}: anti-diagonal {d} sums to {sum}"
        );
    }
    for (d, pair) in diagonals.windows(2).enumerate() {
        let sum = pair[0] + pair[1];
        assert!(
            sum >= 1.0 - 2.0 * tolerance,
            "{context}: anti-diagonals {d} and {} sum to {sum}",
            d + 1
        );
    }
}

/// The (gamma, band) pairs the alignments are checked with: small and
/// large gamma, bands of 0 and 2 and none.
pub const SETTINGS: [(f64, Option<usize>); 4] =
    [(1.0, None), (0.1, Some(2)), (0.01, Some(0)), (10.0, None)];

/// The oracle's E within [`alignment_tolerance`], and the invariants; the
/// value is the oracle's and `distance`'s within the tolerance of CPU
/// against oracle.
fn check_alignment<T: Float>(seed: u64) {
    let mut rng = rng(seed);
    for (n, m, dims) in SHAPES {
        for (gamma, band) in SETTINGS {
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
            let e_tolerance = alignment_tolerance::<T>(n, m, scale, gamma, false);
            for (got, want) in e.iter().zip(&expected_e) {
                assert!(
                    (got.to_f64() - want).abs() <= e_tolerance,
                    "{context}: {got} vs {want}"
                );
            }
            assert_alignment_invariants(e.mapv(|v| v.to_f64()).view(), e_tolerance, &context);
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

/// Refused on every device before anything is allocated or a GPU is
/// looked for, so this runs without one.
#[test]
fn too_large_pairs_the_divergence_and_bad_gamma_are_refused() {
    // 2 x 20,002^2 f64 values are 6 GiB.
    let long = Array2::<f64>::zeros((20_000, 1));
    let soft = SoftDtw::new(1.0).unwrap();
    for device in [Device::Cpu, Device::Gpu, Device::Auto] {
        let options = ComputeOptions::on(device);
        let error = soft_dtw_alignment(long.view(), long.view(), soft, &options).unwrap_err();
        assert!(
            matches!(error, Error::InvalidInput(_)) && error.to_string().contains("6105 MiB"),
            "{device:?}: {error}"
        );
        let short = Array2::<f64>::zeros((3, 1));
        let error = soft_dtw_alignment(short.view(), short.view(), soft.divergence(), &options)
            .unwrap_err();
        assert!(error.to_string().contains("divergence"), "{error}");
        // Representable in f64, 0 in f32.
        let tiny = SoftDtw::new(1e-50).unwrap();
        let short = Array2::<f32>::zeros((3, 1));
        let error = soft_dtw_alignment(short.view(), short.view(), tiny, &options).unwrap_err();
        assert!(
            matches!(error, Error::InvalidParameter { name: "gamma", .. }),
            "{error}"
        );
    }
}
