//! The library's Soft-DTW value and gradient against the oracle's.

mod common;

use common::*;
use timewarp::{oracle, soft_dtw_gradient, Float, Metric, SoftDtw};

fn check<T: Float>(length_x: usize, length_y: usize, dims: usize, gamma: f64, seed: u64) {
    let mut rng = rng(seed);
    let x = random_series(&mut rng, length_x, dims, 1.0).mapv(T::from_f64);
    let y = random_series(&mut rng, length_y, dims, 1.0).mapv(T::from_f64);
    let (value, gradient) =
        soft_dtw_gradient(x.view(), y.view(), SoftDtw::new(gamma).unwrap()).unwrap();
    let (x64, y64) = (x.mapv(|v| v.to_f64()), y.mapv(|v| v.to_f64()));
    let (expected, expected_gradient) =
        oracle::soft_dtw_with_gradient(x64.view(), y64.view(), gamma);
    let metric: Metric = SoftDtw::new(gamma).unwrap().into();
    let scale = error_scale(x64.view(), y64.view(), expected, metric);
    let value_bound = tolerance::<T>(length_x, length_y, dims) * scale;
    assert!(
        (value.to_f64() - expected).abs() <= value_bound,
        "{}: value {value} vs oracle {expected}, bound {value_bound:e}",
        T::NAME
    );
    // The backward pass weighs each step by exp((R' - R - cost) / gamma): a
    // rounding error of u |R| in the cost matrix (|R| <= scale) becomes a
    // relative error of u |R| / gamma in a weight, and E multiplies such
    // weights along paths of n + m steps. So each entry is off by at most
    // about u (scale / gamma + 2 (n + m)) relative to the largest entry; 64
    // covers the constant of the few roundings per step (the same bound as
    // tests/oracle_reference.rs, with T's u).
    let largest = expected_gradient.iter().fold(0.0f64, |m, g| m.max(g.abs()));
    let gradient_bound =
        64.0 * T::UNIT_ROUNDOFF * (scale / gamma + 2.0 * (length_x + length_y) as f64) * largest;
    for (got, want) in gradient.iter().zip(expected_gradient.iter()) {
        assert!(
            (got.to_f64() - want).abs() <= gradient_bound,
            "{} gamma {gamma}: gradient {got} vs oracle {want}, bound {gradient_bound:e}",
            T::NAME
        );
    }
}

#[test]
fn gradient_matches_oracle() {
    for (n, m, dims, gamma) in [
        (1, 1, 1, 1.0),
        (5, 9, 1, 0.1),
        (17, 11, 3, 1.0),
        (40, 40, 2, 0.01),
        (30, 12, 1, 10.0),
    ] {
        check::<f64>(n, m, dims, gamma, 11);
        check::<f32>(n, m, dims, gamma, 12);
    }
}
