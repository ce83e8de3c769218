//! The library's Soft-DTW value and gradient against the oracle's.

mod common;

use common::*;
use timewarp::{oracle, soft_dtw_gradient, Float, SoftDtw};

fn check<T: Float>(length_x: usize, length_y: usize, dims: usize, gamma: f64, seed: u64) {
    let mut rng = rng(seed);
    let x = random_series(&mut rng, length_x, dims, 1.0).mapv(T::from_f64);
    let y = random_series(&mut rng, length_y, dims, 1.0).mapv(T::from_f64);
    let (value, gradient) =
        soft_dtw_gradient(x.view(), y.view(), SoftDtw::new(gamma).unwrap()).unwrap();
    let (x64, y64) = (x.mapv(|v| v.to_f64()), y.mapv(|v| v.to_f64()));
    let (expected, expected_gradient) =
        oracle::soft_dtw_with_gradient(x64.view(), y64.view(), gamma);
    // The gradient's entries are sums of E-weighted differences: bound their
    // error by the largest entry's magnitude, with the value's tolerance.
    let tolerance = tolerance::<T>(length_x, length_y, dims) * 10.0;
    let scale = error_scale(
        x64.view(),
        y64.view(),
        expected,
        SoftDtw::new(gamma).unwrap().into(),
    );
    assert!(
        (value.to_f64() - expected).abs() <= tolerance * scale,
        "{}: value {value} vs oracle {expected}",
        T::NAME
    );
    let gradient_scale = expected_gradient
        .iter()
        .fold(0.0f64, |m, g| m.max(g.abs()))
        .max(1.0);
    for (got, want) in gradient.iter().zip(expected_gradient.iter()) {
        assert!(
            (got.to_f64() - want).abs()
                <= tolerance * gradient_scale * (length_x + length_y) as f64,
            "{} gamma {gamma}: gradient {got} vs oracle {want}",
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
