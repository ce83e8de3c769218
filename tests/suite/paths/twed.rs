//! TWED edit paths against the oracle's traceback, with and without
//! timestamps; the divide and conquer against the full matrix, and its
//! passes against the costs of the halves they stand for.

use super::{pair_series, rng, SHAPES};
use crate::common::tolerance;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use rand::rngs::StdRng;
use rand::Rng;
use timewarp::internals::{hirschberg, CpuLastColumn, LastColumn, PathPair, SubPair, TwedPair};
use timewarp::oracle::{self, TwedStep};
use timewarp::{
    distance_matrix, twed_path, ComputeOptions, Device, Edit, EditStep, Float, SeriesSet, Twed,
};

fn cpu() -> ComputeOptions {
    ComputeOptions::on(Device::Cpu)
}

fn oracle_step(step: TwedStep) -> EditStep {
    match step {
        TwedStep::Match => EditStep::Match,
        TwedStep::DeleteA => EditStep::DeleteX,
        TwedStep::DeleteB => EditStep::DeleteY,
    }
}

/// Irregular increasing timestamps from a negative start (the virtual
/// sample is at time 0 all the same), in precision `T`, and in f64.
pub fn random_times<T: Float>(rng: &mut StdRng, len: usize) -> (Array1<T>, Array1<f64>) {
    let mut t = rng.random_range(-3.0..3.0);
    let times = Array1::from_shape_fn(len, |_| {
        t += rng.random_range(0.0..2.0);
        T::from_f64(t)
    });
    let exact = times.mapv(|v| v.to_f64());
    (times, exact)
}

/// The library's default timestamps 0, 1, 2, ...
pub fn default_times(len: usize) -> Array1<f64> {
    Array1::range(0.0, len as f64, 1.0)
}

/// The first step matches `x_0` with `y_0`, each step reaches the cell
/// its kind says from the one before, the last reaches `(n - 1, m - 1)`.
pub fn assert_valid_edits<T: Float>(edits: &[Edit<T>], n: usize, m: usize, context: &str) {
    let first = edits[0];
    assert_eq!(
        (first.step, first.i, first.j),
        (EditStep::Match, 0, 0),
        "{context}"
    );
    let last = edits.last().unwrap();
    assert_eq!((last.i, last.j), (n - 1, m - 1), "{context}");
    for pair in edits.windows(2) {
        let (before, after) = (pair[0], pair[1]);
        let reached = match after.step {
            EditStep::Match => (before.i + 1, before.j + 1),
            EditStep::DeleteX => (before.i + 1, before.j),
            EditStep::DeleteY => (before.i, before.j + 1),
        };
        assert_eq!(reached, (after.i, after.j), "{context}");
    }
}

/// The cells of a path's matches. A run of deletions between two matches
/// costs the same in any order (each deletion's cost reads its own series
/// only), so paths with the same matches are equally optimal, and which
/// order a traceback picks depends on how its sums round: paths are
/// compared by their matches where they come from different recurrences.
pub fn matches(steps: impl IntoIterator<Item = (EditStep, usize, usize)>) -> Vec<(usize, usize)> {
    steps
        .into_iter()
        .filter(|(step, _, _)| *step == EditStep::Match)
        .map(|(_, i, j)| (i, j))
        .collect()
}

/// The library's TWED of the pair at these timestamps, on the CPU.
pub fn library_twed<T: Float>(
    (x, tx): (ArrayView2<T>, ArrayView1<T>),
    (y, ty): (ArrayView2<T>, ArrayView1<T>),
    twed: Twed,
) -> f64 {
    let set = |s, t| {
        SeriesSet::from_series([s])
            .unwrap()
            .with_timestamps([t])
            .unwrap()
    };
    let (a, b) = (set(x, tx), set(y, ty));
    distance_matrix(&a, Some(&b), twed.into(), &cpu()).unwrap()[[0, 0]].to_f64()
}

/// f64: the oracle's steps exactly, costs within the tolerance; f32: a
/// valid path; both: the costs add up to the value, which is the oracle's
/// and `distance`'s within the tolerance (same terms, other roundings).
/// With the default timestamps (passed or not) and irregular ones.
fn check_twed<T: Float>(seed: u64) {
    let mut rng = rng(seed);
    for (n, m, dims) in SHAPES {
        for (nu, lambda, degree) in [(0.001, 1.0, 2.0), (0.5, 0.0, 1.0), (0.0, 0.3, 3.0)] {
            let (x, xf) = pair_series::<T>(&mut rng, n, dims);
            let (y, yf) = pair_series::<T>(&mut rng, m, dims);
            let twed = Twed::new(nu, lambda, degree).unwrap();
            let timed = (
                random_times::<T>(&mut rng, n),
                random_times::<T>(&mut rng, m),
            );
            for irregular in [false, true] {
                let ((tx, txf), (ty, tyf)) = if irregular {
                    timed.clone()
                } else {
                    let default = |len| (default_times(len).mapv(T::from_f64), default_times(len));
                    (default(n), default(m))
                };
                let (x_times, y_times) = if irregular {
                    (Some(tx.view()), Some(ty.view()))
                } else {
                    (None, None)
                };
                let got = twed_path(x.view(), y.view(), x_times, y_times, twed, &cpu()).unwrap();
                let (steps, expected) = oracle::twed_path(
                    xf.view(),
                    txf.view(),
                    yf.view(),
                    tyf.view(),
                    nu,
                    lambda,
                    degree,
                );
                let context = format!(
                    "{} {n} x {m} x {dims}, nu {nu} lambda {lambda} p {degree}, irregular {irregular}",
                    T::NAME
                );
                assert!(!got.on_gpu, "{context}");
                let bound = tolerance::<T>(n, m, dims) * expected.max(f64::MIN_POSITIVE);
                assert!((got.value.to_f64() - expected).abs() <= bound, "{context}");
                let total: f64 = got.edits.iter().map(|e| e.cost.to_f64()).sum();
                assert!(
                    (total - expected).abs() <= bound,
                    "{context}: costs add to {total}"
                );
                assert_valid_edits(&got.edits, n, m, &context);
                if T::NAME == "f64" {
                    let ours: Vec<_> = got.edits.iter().map(|e| (e.step, e.i, e.j)).collect();
                    let theirs: Vec<_> =
                        steps.iter().map(|s| (oracle_step(s.0), s.1, s.2)).collect();
                    assert_eq!(ours, theirs, "{context}");
                    for (edit, step) in got.edits.iter().zip(&steps) {
                        assert!((edit.cost.to_f64() - step.3).abs() <= 1e-12 * step.3.max(1.0));
                    }
                }
                let library = library_twed((x.view(), tx.view()), (y.view(), ty.view()), twed);
                assert!(
                    (got.value.to_f64() - library).abs() <= 2.0 * bound,
                    "{context}"
                );
            }
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

/// The divide and conquer of `pair` with leaves of `leaf` cells against the
/// oracle's traceback: f64, the value within 1e-12 (the leaves' costs
/// summed, the oracle's matrix in another order) and, with `nu > 0`, the
/// same matches ([`matches`]); f32, a valid path whose costs add to the
/// value, the oracle's within the tolerance.
///
/// With `nu = 0` the optimum is often not unique even on random data:
/// costs are sums of absolute differences, and where `y_{j-1} <= x_{i-1}`
/// and `x_i <= y_j` (say) the match into `(i, j)` costs
/// `|x_i - y_j| + |x_{i-1} - y_{j-1}| = (y_j - y_{j-1}) - (x_i - x_{i-1})`,
/// which the deletion of `y_j` it replaces offsets exactly for every such
/// `j`. The time differences (`nu > 0`, irregular or not) break those ties.
fn check_divide_and_conquer<T: Float>(
    (x, tx): (ArrayView2<T>, ArrayView1<T>),
    (y, ty): (ArrayView2<T>, ArrayView1<T>),
    twed: Twed,
    leaf: usize,
    expected: &(Vec<(TwedStep, usize, usize, f64)>, f64),
    context: &str,
) {
    let (n, m, dims) = (x.nrows(), y.nrows(), x.ncols());
    let pair = TwedPair::new((x, Some(tx)), (y, Some(ty)), twed).unwrap();
    let got = hirschberg(&pair, &CpuLastColumn::new(&pair), leaf).unwrap();
    let context = format!("{context}, leaf {leaf}");
    let (steps, value) = expected;
    assert_valid_edits(&got.edits, n, m, &context);
    let total: f64 = got.edits.iter().map(|e| e.cost.to_f64()).sum();
    if T::NAME == "f64" {
        if twed.nu() > 0.0 {
            assert_eq!(edit_matches(&got.edits), oracle_matches(steps), "{context}");
        }
        assert!(
            (got.value.to_f64() - value).abs() <= 1e-12 * value,
            "{context}: {} vs {value}",
            got.value
        );
    } else {
        let bound = tolerance::<T>(n, m, dims) * value;
        assert!((got.value.to_f64() - value).abs() <= bound, "{context}");
        assert!((total - value).abs() <= bound, "{context}: costs {total}");
    }
    assert!(
        (total - got.value.to_f64()).abs() <= tolerance::<T>(n, m, dims) * value,
        "{context}: costs add to {total}"
    );
}

/// The matches of the library's path.
pub fn edit_matches<T: Float>(edits: &[Edit<T>]) -> Vec<(usize, usize)> {
    matches(edits.iter().map(|e| (e.step, e.i, e.j)))
}

/// The matches of the oracle's path.
pub fn oracle_matches(steps: &[(TwedStep, usize, usize, f64)]) -> Vec<(usize, usize)> {
    matches(steps.iter().map(|s| (oracle_step(s.0), s.1, s.2)))
}

/// The oracle's path of the pair (f64 of the rounded values and times).
fn oracle_path<T: Float>(
    (x, tx): (&Array2<T>, &Array1<T>),
    (y, ty): (&Array2<T>, &Array1<T>),
    twed: Twed,
) -> (Vec<(TwedStep, usize, usize, f64)>, f64) {
    let (xf, yf) = (x.mapv(|v| v.to_f64()), y.mapv(|v| v.to_f64()));
    let (txf, tyf) = (tx.mapv(|v| v.to_f64()), ty.mapv(|v| v.to_f64()));
    let (nu, lambda, degree) = (twed.nu(), twed.lambda(), twed.degree());
    oracle::twed_path(
        xf.view(),
        txf.view(),
        yf.view(),
        tyf.view(),
        nu,
        lambda,
        degree,
    )
}

/// Leaves of 1 cell (every part split down to a row or a column of
/// cells), 16 and 4096, on lengths 1 and 2, unequal lengths both ways, the
/// default and irregular timestamps, nu or lambda 0.
fn divide_and_conquer_univariate<T: Float>(seed: u64) {
    let mut rng = rng(seed);
    let shapes = [
        (1, 300),
        (300, 1),
        (2, 257),
        (257, 2),
        (3, 3),
        (101, 67),
        (250, 300),
    ];
    let params = [(0.001, 1.0), (0.5, 0.0), (0.0, 0.3)];
    for (k, (n, m)) in shapes.into_iter().enumerate() {
        let (nu, lambda) = params[k % params.len()];
        let twed = Twed::new(nu, lambda, 2.0).unwrap();
        let (x, _) = pair_series::<T>(&mut rng, n, 1);
        let (y, _) = pair_series::<T>(&mut rng, m, 1);
        for irregular in [false, true] {
            let (tx, ty) = if irregular {
                (
                    random_times::<T>(&mut rng, n).0,
                    random_times::<T>(&mut rng, m).0,
                )
            } else {
                (
                    default_times(n).mapv(T::from_f64),
                    default_times(m).mapv(T::from_f64),
                )
            };
            let expected = oracle_path((&x, &tx), (&y, &ty), twed);
            let context = format!(
                "{} {n} x {m}, nu {nu} lambda {lambda}, irregular {irregular}",
                T::NAME
            );
            for leaf in [1, 16, 4096] {
                check_divide_and_conquer(
                    (x.view(), tx.view()),
                    (y.view(), ty.view()),
                    twed,
                    leaf,
                    &expected,
                    &context,
                );
            }
        }
    }
}

#[test]
fn twed_divide_and_conquer_matches_the_full_matrix_f64() {
    divide_and_conquer_univariate::<f64>(13);
}

#[test]
fn twed_divide_and_conquer_matches_the_full_matrix_f32() {
    divide_and_conquer_univariate::<f32>(14);
}

/// Multivariate samples with each norm's degree (1, 2, 3: the powers'
/// path), irregular timestamps.
#[test]
fn twed_divide_and_conquer_multivariate() {
    let mut rng = rng(15);
    for (n, m, dims, degree) in [(60, 45, 2, 1.0), (45, 70, 2, 2.0), (50, 50, 3, 3.0)] {
        let twed = Twed::new(0.1, 0.5, degree).unwrap();
        let (x, _) = pair_series::<f64>(&mut rng, n, dims);
        let (y, _) = pair_series::<f64>(&mut rng, m, dims);
        let (tx, ty) = (random_times(&mut rng, n).0, random_times(&mut rng, m).0);
        let expected = oracle_path((&x, &tx), (&y, &ty), twed);
        for leaf in [1, 40] {
            check_divide_and_conquer(
                (x.view(), tx.view()),
                (y.view(), ty.view()),
                twed,
                leaf,
                &expected,
                &format!("{n} x {m} x {dims}, degree {degree}"),
            );
        }
    }
}

/// Values of 1e150 and 1e-150 in f64, 1e30 and 1e-30 in f32: the path is
/// valid and its costs add to the value, the oracle's within the
/// tolerance. Both leave many optimal paths (huge values make the time
/// differences vanish, as `nu = 0` does, see [`check_divide_and_conquer`];
/// tiny ones leave lambda and the times to decide), so paths are not
/// compared.
fn extreme_values<T: Float>(seed: u64, scales: [f64; 2]) {
    let mut rng = rng(seed);
    for scale in scales {
        for (n, m) in [(40, 40), (37, 52)] {
            let twed = Twed::default();
            let scaled = |len, rng: &mut StdRng| {
                let (values, _) = pair_series::<f64>(rng, len, 1);
                values.mapv(|v| T::from_f64(v * scale))
            };
            let (x, y) = (scaled(n, &mut rng), scaled(m, &mut rng));
            let (tx, ty) = (
                random_times::<T>(&mut rng, n).0,
                random_times::<T>(&mut rng, m).0,
            );
            let (_, value) = oracle_path((&x, &tx), (&y, &ty), twed);
            let pair = TwedPair::new(
                (x.view(), Some(tx.view())),
                (y.view(), Some(ty.view())),
                twed,
            )
            .unwrap();
            let got = hirschberg(&pair, &CpuLastColumn::new(&pair), 16).unwrap();
            let context = format!("{} scale {scale:e}, {n} x {m}", T::NAME);
            assert_valid_edits(&got.edits, n, m, &context);
            let bound = tolerance::<T>(n, m, 1) * value;
            assert!(
                (got.value.to_f64() - value).abs() <= bound,
                "{context}: {} vs {value}",
                got.value
            );
            let total: f64 = got.edits.iter().map(|e| e.cost.to_f64()).sum();
            assert!((total - value).abs() <= bound, "{context}: costs {total}");
        }
    }
}

#[test]
fn twed_divide_and_conquer_of_huge_and_tiny_values() {
    extreme_values::<f64>(16, [1e150, 1e-150]);
    extreme_values::<f32>(17, [1e30, 1e-30]);
}

/// The passes stand for the costs of the halves: the forward column's
/// entry for node `(i, k)` is the cost of the best path from the part's
/// first corner to it plus the same constant for every `i` (the match
/// into the first corner), and the backward column's the cost from
/// `(i, k)` to the last corner plus a constant; the halves' costs come from
/// the leaves' full-matrix traceback (other code than the passes'), and,
/// from the origin, from the oracle.
#[test]
fn twed_passes_give_the_costs_of_the_halves() {
    let mut rng = rng(18);
    let (n, m) = (30, 26);
    let twed = Twed::new(0.2, 0.7, 2.0).unwrap();
    let (x, xf) = pair_series::<f64>(&mut rng, n, 2);
    let (y, yf) = pair_series::<f64>(&mut rng, m, 2);
    let ((tx, txf), (ty, tyf)) = (random_times(&mut rng, n), random_times(&mut rng, m));
    let pair = TwedPair::new(
        (x.view(), Some(tx.view())),
        (y.view(), Some(ty.view())),
        twed,
    )
    .unwrap();
    let provider = CpuLastColumn::new(&pair);
    let cost = |rows: std::ops::RangeInclusive<usize>, cols: std::ops::RangeInclusive<usize>| {
        let part = SubPair {
            rows: *rows.start()..rows.end() + 1,
            cols: *cols.start()..cols.end() + 1,
        };
        pair.leaf(&part).unwrap().1
    };
    // The whole pair, an inner part, parts along the last row and column.
    for (rows, cols) in [
        (0..=n, 0..=m),
        (4..=21, 3..=17),
        (9..=n, 12..=m),
        (1..=7, 2..=m),
    ] {
        let part = SubPair {
            rows: *rows.start()..rows.end() + 1,
            cols: *cols.start()..cols.end() + 1,
        };
        let [forward_pass, backward_pass] = pair.passes(&part);
        let columns = provider
            .last_columns(&[forward_pass.clone(), backward_pass])
            .unwrap();
        let (forward, backward) = (&columns[0], &columns[1]);
        let (a, last_row) = (*rows.start(), *rows.end());
        let k = cols.start() + (cols.end() - cols.start()) / 2;
        let first = forward_pass.rows.start;
        let close = |got: f64, expected: f64, what: &str| {
            assert!(
                (got - expected).abs() <= 1e-12 * expected.abs().max(1.0),
                "part {rows:?} x {cols:?}, {what}: {got} vs {expected}"
            );
        };
        for i in first..=last_row {
            close(
                forward[i - first] - forward[0],
                cost(a..=i, *cols.start()..=k) - cost(a..=first, *cols.start()..=k),
                &format!("forward, node ({i}, {k})"),
            );
        }
        for i in a..=last_row {
            close(
                backward[last_row - i] - backward[0],
                cost(i..=last_row, k..=*cols.end()) - cost(last_row..=last_row, k..=*cols.end()),
                &format!("backward, node ({i}, {k})"),
            );
        }
        if a == 0 {
            // From the origin no constant: the oracle's TWED of the prefixes.
            for i in 1..=last_row {
                let (_, expected) = oracle::twed_path(
                    xf.slice(ndarray::s![..i, ..]),
                    txf.slice(ndarray::s![..i]),
                    yf.slice(ndarray::s![..k, ..]),
                    tyf.slice(ndarray::s![..k]),
                    twed.nu(),
                    twed.lambda(),
                    twed.degree(),
                );
                close(
                    forward[i - 1],
                    expected,
                    &format!("from the origin to ({i}, {k})"),
                );
            }
        }
    }
}

#[test]
fn bad_timestamps_are_errors() {
    let x = Array2::<f64>::zeros((4, 1));
    let run = |tx: Array1<f64>| {
        twed_path(
            x.view(),
            x.view(),
            Some(tx.view()),
            None,
            Twed::default(),
            &cpu(),
        )
        .unwrap_err()
        .to_string()
    };
    let message = run(Array1::from(vec![0.0, 1.0, 2.0]));
    assert!(message.contains("3 values for a series of 4"), "{message}");
    let message = run(Array1::from(vec![0.0, 1.0, f64::NAN, 3.0]));
    assert!(message.contains("timestamp 2 of x is NaN"), "{message}");
    let message = run(Array1::from(vec![0.0, 2.0, 1.0, 3.0]));
    assert!(message.contains("non-decreasing"), "{message}");
    let y_times = Array1::from(vec![0.0, 1.0, 1.0, f64::INFINITY]);
    let message = twed_path(
        x.view(),
        x.view(),
        None,
        Some(y_times.view()),
        Twed::default(),
        &cpu(),
    )
    .unwrap_err()
    .to_string();
    assert!(message.contains("timestamp 3 of y is inf"), "{message}");
    // The divide and conquer's pair checks them the same way.
    let short = Array1::from(vec![0.0]);
    assert!(TwedPair::new(
        (x.view(), Some(short.view())),
        (x.view(), None),
        Twed::default()
    )
    .is_err());
    // Equal timestamps are allowed (non-decreasing).
    let equal = Array1::from(vec![1.0, 1.0, 1.0, 1.0]);
    assert!(twed_path(
        x.view(),
        x.view(),
        Some(equal.view()),
        None,
        Twed::default(),
        &cpu()
    )
    .is_ok());
}
