//! Seeded synthetic data for benchmarks and tests: Cylinder-Bell-Funnel and
//! random normal series. The same seed gives the same data on every machine.

use crate::SeriesSet;
use ndarray::{Array2, Array3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// The three CBF classes, in the order [`cbf`] generates them.
pub const CBF_CLASSES: [&str; 3] = ["cylinder", "bell", "funnel"];

/// `count` univariate Cylinder-Bell-Funnel series of `length` samples (Saito
/// 1994) and their classes (0 cylinder, 1 bell, 2 funnel, in turn).
///
/// For length `n`, each series draws its event's start `a ~ U[n/8, n/4]`,
/// its duration `b - a ~ U[n/4, 3n/4]`, the amplitude noise `eta ~ N(0, 1)`
/// and per-sample noise `eps(t) ~ N(0, 1)`, at `t = 0, 1, ..., n - 1`:
///
/// - cylinder: `(6 + eta) * 1[a <= t <= b] + eps(t)`
/// - bell: `(6 + eta) * 1[a <= t <= b] * (t - a) / (b - a) + eps(t)`
/// - funnel: `(6 + eta) * 1[a <= t <= b] * (b - t) / (b - a) + eps(t)`
///
/// # Panics
/// If `count` or `length` is 0 (a batch has at least one non-empty series).
pub fn cbf(count: usize, length: usize, seed: u64) -> (SeriesSet<f64>, Vec<usize>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = length as f64;
    let mut values = Array2::zeros((count, length));
    let classes: Vec<usize> = (0..count).map(|k| k % CBF_CLASSES.len()).collect();
    for (mut series, &class) in values.outer_iter_mut().zip(&classes) {
        let a = rng.random_range(n / 8.0..=n / 4.0);
        let b = a + rng.random_range(n / 4.0..=3.0 * n / 4.0);
        let height = 6.0 + normal(&mut rng);
        for (t, x) in series.iter_mut().enumerate() {
            *x = cbf_shape(class, t as f64, a, b, height) + normal(&mut rng);
        }
    }
    let set = SeriesSet::from_univariate(values.view()).expect("count and length are positive");
    (set, classes)
}

/// `count` series of `length` samples of `dims` dimensions, every value
/// drawn from N(0, 1).
///
/// # Panics
/// If `count`, `length` or `dims` is 0.
pub fn random_normal(count: usize, length: usize, dims: usize, seed: u64) -> SeriesSet<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let values = Array3::from_shape_simple_fn((count, length, dims), || normal(&mut rng));
    SeriesSet::from_multivariate(values.view()).expect("count, length and dims are positive")
}

fn normal(rng: &mut StdRng) -> f64 {
    rng.sample(StandardNormal)
}

/// The noise-free CBF signal of `class` at time `t`, for an event on
/// `[a, b]` of amplitude `height`.
fn cbf_shape(class: usize, t: f64, a: f64, b: f64, height: f64) -> f64 {
    if t < a || t > b {
        return 0.0;
    }
    match class {
        0 => height,
        1 => height * (t - a) / (b - a),
        _ => height * (b - t) / (b - a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_classes() {
        let (set, classes) = cbf(7, 40, 1);
        assert_eq!((set.len(), set.dims()), (7, 1));
        assert!((0..7).all(|k| set.series_len(k) == 40));
        assert_eq!(classes, [0, 1, 2, 0, 1, 2, 0]);

        let set = random_normal(5, 12, 3, 1);
        assert_eq!((set.len(), set.dims()), (5, 3));
        assert!((0..5).all(|k| set.series(k).dim() == (12, 3)));
    }

    #[test]
    fn deterministic_per_seed() {
        assert_eq!(cbf(6, 32, 9), cbf(6, 32, 9));
        assert_ne!(cbf(6, 32, 9).0, cbf(6, 32, 10).0);
        assert_eq!(random_normal(4, 16, 2, 3), random_normal(4, 16, 2, 3));
        assert_ne!(random_normal(4, 16, 2, 3), random_normal(4, 16, 2, 4));
    }

    #[test]
    fn random_normal_moments() {
        let set = random_normal(50, 100, 2, 5);
        let values: Vec<f64> = (0..set.len())
            .flat_map(|k| set.series(k).to_owned())
            .collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert!((variance - 1.0).abs() < 0.05, "variance {variance}");
    }

    #[test]
    fn noise_free_shapes() {
        let (a, b, h) = (10.0, 30.0, 6.0);
        // Nothing outside the event, for every class.
        for class in 0..3 {
            assert_eq!(cbf_shape(class, 9.9, a, b, h), 0.0);
            assert_eq!(cbf_shape(class, 30.1, a, b, h), 0.0);
        }
        // Cylinder: a plateau; bell: rises from 0 to h; funnel: falls.
        assert!([10.0, 20.0, 30.0]
            .iter()
            .all(|&t| cbf_shape(0, t, a, b, h) == h));
        assert_eq!(cbf_shape(1, a, a, b, h), 0.0);
        assert_eq!(cbf_shape(1, 20.0, a, b, h), 3.0);
        assert_eq!(cbf_shape(1, b, a, b, h), h);
        assert_eq!(cbf_shape(2, a, a, b, h), h);
        assert_eq!(cbf_shape(2, b, a, b, h), 0.0);
    }

    /// Averaged over many series, the noise cancels: every event covers
    /// `[n/4, 3n/8]` and none covers `t = 0`.
    #[test]
    fn cbf_plateau_and_slopes() {
        let n = 128;
        let (set, classes) = cbf(600, n, 2);
        let mean_at = |class: usize, t: usize| {
            let members: Vec<usize> = (0..set.len()).filter(|&k| classes[k] == class).collect();
            members.iter().map(|&k| set.series(k)[[t, 0]]).sum::<f64>() / members.len() as f64
        };
        let inside = 5 * n / 16;
        for class in 0..3 {
            assert!(mean_at(class, 0).abs() < 0.3, "class {class} at t = 0");
        }
        assert!((mean_at(0, inside) - 6.0).abs() < 0.3, "cylinder plateau");
        // Bell rises, funnel falls across the part every event covers.
        assert!(mean_at(1, 3 * n / 8) > mean_at(1, n / 4) + 0.3);
        assert!(mean_at(2, 3 * n / 8) < mean_at(2, n / 4) - 0.3);
    }
}
