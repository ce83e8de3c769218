//! Cross-checks `timewarp::oracle` against independent Python implementations.
//!
//! The vectors in `tests/fixtures/reference_vectors.json` were produced by
//! `tests/fixtures/make_reference_vectors.py` (rerun by hand, not in CI) with
//! Python 3.11.7, numpy 2.3.5, aeon 1.6.0, tslearn 0.10.0, seed 12345.
//! The versions recorded in the JSON itself are printed by every test.
//!
//! What each reference is:
//!
//! * `twed`: `aeon.distances.twe_distance(x.T, y.T, nu=nu, lmbda=lambda)`.
//!   aeon only has Euclidean local distances (degree 2) and index
//!   timestamps, so the oracle is called with `degree = 2.0` and timestamps
//!   `0, 1, ..., n-1`.  aeon pads a virtual zero sample in front of each
//!   series and charges `2 * nu * |i - j|` on a match and `nu + lambda` on a
//!   deletion, which is Marteau's recursion with those timestamps (cells that
//!   would read the virtual zero in a deletion read `D[0][j] = D[i][0] = inf`).
//! * `dtw`: accumulated squared Euclidean cost, no square root.
//!   `band: null` -> `aeon.distances.dtw_distance` (aeon has no sqrt);
//!   `band: r` -> `tslearn.metrics.dtw(..., global_constraint="sakoe_chiba",
//!   sakoe_chiba_radius=r) ** 2` (tslearn returns the sqrt).  tslearn's
//!   `sakoe_chiba_mask(n, m, r)`: for `n <= m`, row `i` (0-based) may use
//!   columns `max(0, i-r) ..= min(m-1, i+(m-n)+r)`; for `n > m` the mask is
//!   the transpose of that rule (column `j` may use rows
//!   `max(0, j-r) ..= min(n-1, j+(n-m)+r)`).
//! * `soft_dtw`: `tslearn.metrics.SoftDTW(D, gamma).compute()` with
//!   `D[i][j] = sum_k (x_ik - y_jk)^2`, and the gradient with respect to `x`
//!   `SquaredEuclidean(x, y).jacobian_product(SoftDTW.grad())`.
//!
//! Tolerances: relative `1e-10`.  Both sides are plain f64 dynamic programs
//! over the same recursion, but the summation order differs (the oracle sums
//! channels / terms in its own order; aeon is compiled by numba with
//! `fastmath=True`, which lets LLVM reassociate), so results agree to a few
//! ulps times the accumulated magnitude, far below 1e-10 for these sizes
//! (the generator measured <= 3e-15 between the libraries and a plain-Python
//! re-implementation).  The one exception is the Soft-DTW *gradient*: the
//! backward pass evaluates `exp((R[i'][j'] - C - R[i][j]) / gamma)`, so a
//! rounding error of `eps * |R|` in the forward table becomes a relative error
//! of about `eps * |R| / gamma` in the gradient, an inherent conditioning
//! property, not an implementation difference (e.g. series scaled by 1e3
//! with gamma = 1 give |R| ~ 8e6 and ~3e-10 disagreement between two correct
//! implementations).  The gradient is therefore compared normwise (relative
//! to the largest |entry| of the reference gradient, since single entries
//! may be small by cancellation) with tolerance
//! `1e-10 + 64 * eps * (|value| / gamma + 2 * (n + m))`.

use std::path::PathBuf;

use ndarray::{Array1, Array2};
use serde_json::Value;
use timewarp::oracle;

const REL_TOL: f64 = 1e-10;
const MIN_CASES: usize = 20;

fn load() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join("reference_vectors.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
    let g = &v["generator"];
    let s = |k: &str| match &g[k] {
        Value::String(x) => x.clone(),
        other => other.to_string(),
    };
    eprintln!(
        "reference vectors: python {} numpy {} aeon {} tslearn {} seed {} ({})",
        s("python"),
        s("numpy"),
        s("aeon"),
        s("tslearn"),
        s("seed"),
        s("script")
    );
    v
}

fn cases<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    let cs = v[key]
        .as_array()
        .unwrap_or_else(|| panic!("fixture has no array {key:?}"));
    assert!(
        cs.len() >= MIN_CASES,
        "fixture has only {} {key} cases (expected >= {MIN_CASES})",
        cs.len()
    );
    cs
}

fn f(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

/// A list of samples (rows), each a list of `d` floats -> `n x d` array.
fn matrix(v: &Value, what: &str) -> Array2<f64> {
    let rows = v
        .as_array()
        .unwrap_or_else(|| panic!("{what} is not a list of rows"));
    assert!(!rows.is_empty(), "{what} is empty");
    let d = rows[0].as_array().map_or(0, |r| r.len());
    assert!(d > 0, "{what} has rows of zero width");
    let mut data = Vec::with_capacity(rows.len() * d);
    for (i, r) in rows.iter().enumerate() {
        let r = r
            .as_array()
            .unwrap_or_else(|| panic!("{what}[{i}] is not a list"));
        assert_eq!(
            r.len(),
            d,
            "{what}[{i}] has {} values, expected {d}",
            r.len()
        );
        data.extend(r.iter().map(|x| f(x, what)));
    }
    Array2::from_shape_vec((rows.len(), d), data).unwrap()
}

fn rel_err(expected: f64, actual: f64) -> f64 {
    if expected == actual {
        return 0.0;
    }
    if !actual.is_finite() || !expected.is_finite() {
        return f64::INFINITY;
    }
    (expected - actual).abs() / expected.abs().max(actual.abs())
}

fn describe(a: &Array2<f64>, b: &Array2<f64>) -> String {
    format!("{}x{} vs {}x{}", a.nrows(), a.ncols(), b.nrows(), b.ncols())
}

/// Collects failures so that one run reports every bad case, not just the first.
struct Report {
    measure: &'static str,
    failures: Vec<String>,
    worst: f64,
}

impl Report {
    fn new(measure: &'static str) -> Self {
        Report {
            measure,
            failures: Vec::new(),
            worst: 0.0,
        }
    }

    fn check(&mut self, ok: bool, err: f64, msg: impl FnOnce() -> String) {
        if err.is_finite() {
            self.worst = self.worst.max(err);
        }
        if !ok {
            self.failures.push(msg());
        }
    }

    fn finish(self, n: usize) {
        eprintln!(
            "{}: {n} cases, worst relative error {:.3e}",
            self.measure, self.worst
        );
        assert!(
            self.failures.is_empty(),
            "{} of {n} {} cases disagree with the reference:\n{}",
            self.failures.len(),
            self.measure,
            self.failures.join("\n")
        );
    }
}

#[test]
fn twed_matches_aeon() {
    let v = load();
    let cs = cases(&v, "twed");
    let mut rep = Report::new("twed");
    for (k, c) in cs.iter().enumerate() {
        let a = matrix(&c["x"], "x");
        let b = matrix(&c["y"], "y");
        let ta = Array1::from_iter((0..a.nrows()).map(|i| i as f64));
        let tb = Array1::from_iter((0..b.nrows()).map(|j| j as f64));
        let nu = f(&c["nu"], "nu");
        let lambda = f(&c["lambda"], "lambda");
        let degree = f(&c["degree"], "degree");
        let expected = f(&c["value"], "value");
        let actual = oracle::twed(a.view(), ta.view(), b.view(), tb.view(), nu, lambda, degree);
        let err = rel_err(expected, actual);
        rep.check(err <= REL_TOL, err, || {
            format!(
                "  twed case {k} ({}, {}, nu={nu}, lambda={lambda}, degree={degree}): \
                 expected {expected:e}, actual {actual:e}, rel err {err:.3e}",
                c["source"].as_str().unwrap_or("?"),
                describe(&a, &b)
            )
        });
    }
    rep.finish(cs.len());
}

#[test]
fn dtw_matches_aeon_and_tslearn() {
    let v = load();
    let cs = cases(&v, "dtw");
    let banded = cs.iter().filter(|c| !c["band"].is_null()).count();
    assert!(
        banded > 0 && banded < cs.len(),
        "fixture must have banded and unbanded dtw cases"
    );
    let mut rep = Report::new("dtw");
    for (k, c) in cs.iter().enumerate() {
        let a = matrix(&c["x"], "x");
        let b = matrix(&c["y"], "y");
        let band = match &c["band"] {
            Value::Null => None,
            r => Some(
                r.as_u64()
                    .unwrap_or_else(|| panic!("dtw case {k}: bad band {r}"))
                    as usize,
            ),
        };
        let expected = f(&c["value"], "value");
        let actual = oracle::dtw(a.view(), b.view(), band);
        let err = rel_err(expected, actual);
        rep.check(err <= REL_TOL, err, || {
            format!(
                "  dtw case {k} ({}, {}, band={band:?}): \
                 expected {expected:e}, actual {actual:e}, rel err {err:.3e}",
                c["source"].as_str().unwrap_or("?"),
                describe(&a, &b)
            )
        });
    }
    rep.finish(cs.len());
}

#[test]
fn soft_dtw_matches_tslearn() {
    let v = load();
    let cs = cases(&v, "soft_dtw");
    let mut rep = Report::new("soft_dtw");
    let mut worst_grad = 0.0f64;
    for (k, c) in cs.iter().enumerate() {
        let a = matrix(&c["x"], "x");
        let b = matrix(&c["y"], "y");
        let gamma = f(&c["gamma"], "gamma");
        let expected = f(&c["value"], "value");
        let expected_grad = matrix(&c["grad_x"], "grad_x");
        assert_eq!(
            expected_grad.dim(),
            a.dim(),
            "soft_dtw case {k}: grad_x shape != x shape"
        );
        let source = c["source"].as_str().unwrap_or("?");
        let shape = describe(&a, &b);

        let value = oracle::soft_dtw(a.view(), b.view(), gamma);
        let err = rel_err(expected, value);
        rep.check(err <= REL_TOL, err, || {
            format!(
                "  soft_dtw case {k} ({source}, {shape}, gamma={gamma}) soft_dtw(): \
                 expected {expected:e}, actual {value:e}, rel err {err:.3e}"
            )
        });

        let (value2, grad) = oracle::soft_dtw_with_gradient(a.view(), b.view(), gamma);
        let err = rel_err(expected, value2);
        rep.check(err <= REL_TOL, err, || {
            format!(
                "  soft_dtw case {k} ({source}, {shape}, gamma={gamma}) soft_dtw_with_gradient() value: \
                 expected {expected:e}, actual {value2:e}, rel err {err:.3e}"
            )
        });

        if grad.dim() != expected_grad.dim() {
            rep.check(false, f64::NAN, || {
                format!(
                    "  soft_dtw case {k} ({source}, {shape}, gamma={gamma}): gradient shape {:?}, expected {:?}",
                    grad.dim(),
                    expected_grad.dim()
                )
            });
            continue;
        }
        let scale = expected_grad.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let (n, m) = (a.nrows() as f64, b.nrows() as f64);
        let cond = f64::EPSILON * (expected.abs() / gamma + 2.0 * (n + m));
        let grad_tol = REL_TOL + 64.0 * cond;
        let mut gerr = 0.0f64;
        let mut at = (0, 0);
        for ((idx, e), g) in expected_grad.indexed_iter().zip(grad.iter()) {
            let d = if e == g { 0.0 } else { (e - g).abs() / scale };
            // NaN counts as worst, so a NaN gradient cannot pass.
            if d.is_nan() || d > gerr {
                gerr = d;
                at = idx;
            }
        }
        worst_grad = worst_grad.max(gerr);
        rep.check(gerr <= grad_tol, f64::NAN, || {
            format!(
                "  soft_dtw case {k} ({source}, {shape}, gamma={gamma}) gradient: worst at {at:?}: \
                 expected {:e}, actual {:e}, |diff|/max|expected| {gerr:.3e} > tol {grad_tol:.3e}",
                expected_grad[at], grad[at]
            )
        });
    }
    eprintln!("soft_dtw: worst normwise gradient error {worst_grad:.3e}");
    rep.finish(cs.len());
}
