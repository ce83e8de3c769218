//! TWED edit paths against the oracle's traceback.

use super::{pair_series, rng, SHAPES};
use crate::common::tolerance;
use ndarray::Array1;
use timewarp::oracle::{self, TwedStep};
use timewarp::{distance, twed_path, ComputeOptions, Device, EditStep, Float, Twed};

fn oracle_step(step: TwedStep) -> EditStep {
    match step {
        TwedStep::Match => EditStep::Match,
        TwedStep::DeleteA => EditStep::DeleteX,
        TwedStep::DeleteB => EditStep::DeleteY,
    }
}

/// f64: the oracle's steps exactly, costs within the tolerance; f32: a
/// path whose steps are consistent (each reaches the next cell), whose
/// costs add up to the value, which is the oracle's and `distance`'s
/// within the tolerance (same terms, other roundings).
fn check_twed<T: Float>(seed: u64) {
    let mut rng = rng(seed);
    let cpu = ComputeOptions::on(Device::Cpu);
    for (n, m, dims) in SHAPES {
        for (nu, lambda, degree) in [(0.001, 1.0, 2.0), (0.5, 0.0, 1.0), (0.0, 0.3, 3.0)] {
            let (x, xf) = pair_series::<T>(&mut rng, n, dims);
            let (y, yf) = pair_series::<T>(&mut rng, m, dims);
            let twed = Twed::new(nu, lambda, degree).unwrap();
            let got = twed_path(x.view(), y.view(), twed, &cpu).unwrap();
            // The library's series are at times 0, 1, 2, ...
            let (tx, ty) = (
                Array1::range(0.0, n as f64, 1.0),
                Array1::range(0.0, m as f64, 1.0),
            );
            let (steps, expected) = oracle::twed_path(
                xf.view(),
                tx.view(),
                yf.view(),
                ty.view(),
                nu,
                lambda,
                degree,
            );
            let context = format!(
                "{} {n} x {m} x {dims}, nu {nu} lambda {lambda} p {degree}",
                T::NAME
            );
            let bound = tolerance::<T>(n, m, dims) * expected.max(f64::MIN_POSITIVE);
            assert!((got.value.to_f64() - expected).abs() <= bound, "{context}");
            let total: f64 = got.edits.iter().map(|e| e.cost.to_f64()).sum();
            assert!(
                (total - expected).abs() <= bound,
                "{context}: costs add to {total}"
            );
            let first = got.edits[0];
            assert_eq!(
                (first.step, first.i, first.j),
                (EditStep::Match, 0, 0),
                "{context}"
            );
            let last = got.edits.last().unwrap();
            assert_eq!((last.i, last.j), (n - 1, m - 1), "{context}");
            for pair in got.edits.windows(2) {
                let (before, after) = (pair[0], pair[1]);
                let reached = match after.step {
                    EditStep::Match => (before.i + 1, before.j + 1),
                    EditStep::DeleteX => (before.i + 1, before.j),
                    EditStep::DeleteY => (before.i, before.j + 1),
                };
                assert_eq!(reached, (after.i, after.j), "{context}");
            }
            if T::NAME == "f64" {
                let ours: Vec<_> = got.edits.iter().map(|e| (e.step, e.i, e.j)).collect();
                let theirs: Vec<_> = steps.iter().map(|s| (oracle_step(s.0), s.1, s.2)).collect();
                assert_eq!(ours, theirs, "{context}");
                for (edit, step) in got.edits.iter().zip(&steps) {
                    assert!((edit.cost.to_f64() - step.3).abs() <= 1e-12 * step.3.max(1.0));
                }
            }
            let library = distance(x.view(), y.view(), twed.into()).unwrap().to_f64();
            assert!(
                (got.value.to_f64() - library).abs() <= 2.0 * bound,
                "{context}"
            );
        }
    }
}

#[test]
fn twed_paths_match_the_oracle_f64() {
    check_twed::<f64>(11);
}

#[test]
fn twed_paths_match_the_oracle_f32() {
    check_twed::<f32>(12);
}

#[test]
fn a_twed_pair_too_large_is_refused() {
    let long = ndarray::Array2::<f64>::zeros((40_000, 1));
    let cpu = ComputeOptions::on(Device::Cpu);
    let error = twed_path(long.view(), long.view(), Twed::default(), &cpu).unwrap_err();
    assert!(error.to_string().contains("MiB"), "{error}");
}
