//! Subsequence search (`timewarp::search`) against a brute force written
//! here from the definition: every start's z-normalised window, the
//! oracle's banded DTW, the greedy choice with the exclusion zone. The
//! bounds against the oracle's DTW; the errors.

use crate::common::rng;
use ndarray::{Array2, ArrayView2};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::StandardNormal;
use timewarp::oracle;
use timewarp::search::{lb_keogh, lb_kim, subsequences, Band, SearchOptions};
use timewarp::{Device, Error};

/// z-normalisation as documented: per dimension, `(x - mean) / std` with
/// the mean and population std summed in order; zeros where every value is
/// equal or the std is 0.
fn znorm(x: ArrayView2<f64>) -> Array2<f64> {
    let (m, dims) = x.dim();
    let mut out = Array2::zeros((m, dims));
    for k in 0..dims {
        let column = x.column(k);
        if column.iter().all(|&v| v == column[0]) {
            continue;
        }
        let mut sum = 0.0;
        for &v in column {
            sum += v;
        }
        let mean = sum / m as f64;
        let mut squares = 0.0;
        for &v in column {
            squares += (v - mean) * (v - mean);
        }
        let std = (squares / m as f64).sqrt();
        if std == 0.0 {
            continue;
        }
        for i in 0..m {
            out[[i, k]] = (column[i] - mean) / std;
        }
    }
    out
}

/// Every start's cost, then the greedy choice: (start, distance).
fn brute_force(
    query: ArrayView2<f64>,
    series: ArrayView2<f64>,
    radius: usize,
    k: usize,
    exclusion: usize,
    normalise: bool,
) -> Vec<(usize, f64)> {
    let m = query.nrows();
    let prepare = |x: ArrayView2<f64>| if normalise { znorm(x) } else { x.to_owned() };
    let q = prepare(query);
    let mut costs: Vec<(f64, usize)> = (0..=series.nrows() - m)
        .map(|s| {
            let window = prepare(series.slice(ndarray::s![s..s + m, ..]));
            (oracle::dtw(q.view(), window.view(), Some(radius)), s)
        })
        .collect();
    costs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut picks: Vec<(usize, f64)> = Vec::new();
    for (cost, s) in costs {
        if picks.len() == k {
            break;
        }
        if picks
            .iter()
            .all(|&(p, _)| p.abs_diff(s) >= exclusion.max(1))
        {
            picks.push((s, cost.sqrt()));
        }
    }
    picks
}

/// A random walk, `n x dims`, with constant stretches and noisy copies of
/// `query` planted in it.
fn walk(rng: &mut StdRng, n: usize, dims: usize) -> Array2<f64> {
    let mut x = Array2::zeros((n, dims));
    for k in 0..dims {
        let mut v = rng.random_range(-5.0..5.0);
        for i in 0..n {
            v += rng.sample::<f64, _>(StandardNormal);
            x[[i, k]] = v;
        }
    }
    // A flat stretch: its windows are constant (std 0).
    if n > 60 {
        let at = rng.random_range(0..n - 40);
        let level = x[[at, 0]];
        x.slice_mut(ndarray::s![at..at + 30, ..]).fill(level);
    }
    x
}

fn plant(rng: &mut StdRng, series: &mut Array2<f64>, query: ArrayView2<f64>, copies: usize) {
    let m = query.nrows();
    for _ in 0..copies {
        let at = rng.random_range(0..=series.nrows() - m);
        let scale = rng.random_range(0.5..3.0);
        let offset = rng.random_range(-10.0..10.0);
        for i in 0..m {
            for k in 0..query.ncols() {
                series[[at + i, k]] =
                    offset + scale * query[[i, k]] + 0.1 * rng.sample::<f64, _>(StandardNormal);
            }
        }
    }
}

fn found(result: &timewarp::search::SearchResult) -> Vec<(usize, f64)> {
    result
        .matches
        .iter()
        .map(|m| (m.start, m.distance))
        .collect()
}

#[test]
fn search_equals_brute_force() {
    let mut rng = rng(46);
    let mut cases = 0;
    for case in 0..120 {
        let dims = if case % 4 == 3 { 2 } else { 1 };
        let m = [2, 3, 8, 16, 33][case % 5];
        let n = rng.random_range(m..m + 700);
        let query = walk(&mut rng, m, dims);
        let mut series = walk(&mut rng, n, dims);
        plant(&mut rng, &mut series, query.view(), case % 3);
        let band = [0.0, 0.05, 0.1, 0.5, 1.0][case / 5 % 5];
        let radius = Band::Fraction(band).radius(m).unwrap();
        let k = [1, 3, 5][case % 3];
        let exclusion = [None, Some(0), Some(1), Some(m)][case / 3 % 4];
        let normalise = case % 7 != 6;
        let chunk = [7, 64, 1 << 14][case % 3];
        let mut options = SearchOptions::default()
            .with_band(Band::Fraction(band))
            .with_k(k)
            .with_znorm(normalise)
            .with_chunk(chunk)
            .on(Device::Cpu);
        options.exclusion = exclusion;
        let got = subsequences(query.view(), &series.view(), &options).unwrap();
        let zone = exclusion.unwrap_or(m / 2);
        let expected = brute_force(query.view(), series.view(), radius, k, zone, normalise);
        assert_eq!(
            found(&got),
            expected,
            "case {case}: n {n} m {m} dims {dims} band {band} k {k} exclusion {zone} znorm {normalise} chunk {chunk}"
        );
        let s = got.stats;
        assert_eq!(s.candidates, (n - m + 1) as u64, "case {case}");
        assert!(
            s.kim + s.keogh_query + s.keogh_data + s.dtw == s.candidates,
            "case {case}: {s:?}"
        );
        cases += 1;
    }
    assert_eq!(cases, 120);
}

/// The bounds prune: on a random walk most candidates never reach a DTW.
#[test]
fn the_cascade_prunes_a_random_walk() {
    let mut rng = rng(7);
    let series = walk(&mut rng, 20_000, 1);
    let query = walk(&mut rng, 128, 1);
    let options = SearchOptions::default()
        .with_band(Band::Fraction(0.05))
        .on(Device::Cpu);
    let got = subsequences(query.view(), &series.view(), &options).unwrap();
    let expected = brute_force(query.view(), series.view(), 6, 1, 64, true);
    assert_eq!(found(&got), expected);
    assert!(got.stats.pruned_before_dtw() > 0.5, "{:?}", got.stats);
    assert!(
        got.stats.kim > 0 && got.stats.keogh_query > 0,
        "{:?}",
        got.stats
    );
}

/// Copies of the query across unit boundaries (and at both ends) are found
/// (at distance ~0: a scaled copy normalises back up to rounding), whatever
/// the unit size.
#[test]
fn a_match_straddling_two_units_is_found() {
    let mut rng = rng(3);
    let m = 40;
    let query = walk(&mut rng, m, 1);
    let mut series = walk(&mut rng, 3000, 1);
    series
        .slice_mut(ndarray::s![..80, ..])
        .mapv_inplace(|v| v * 3.0);
    for at in [0, 980, 2960] {
        for i in 0..m {
            series[[at + i, 0]] = 2.0 * query[[i, 0]] + 1.0;
        }
    }
    for chunk in [1000, 990, 37] {
        let options = SearchOptions::default()
            .with_k(3)
            .with_chunk(chunk)
            .on(Device::Cpu);
        let got = subsequences(query.view(), &series.view(), &options).unwrap();
        let mut starts: Vec<usize> = got.matches.iter().map(|m| m.start).collect();
        starts.sort();
        assert_eq!(starts, vec![0, 980, 2960], "chunk {chunk}");
        assert!(
            got.matches.iter().all(|m| m.distance < 1e-12),
            "chunk {chunk}: {got:?}"
        );
        assert_eq!(
            found(&got),
            brute_force(query.view(), series.view(), 2, 3, 20, true)
        );
    }
}

/// A constant window normalises to zeros: at cost `sum(q^2)` from a
/// z-normalised query, and at 0 from a constant query.
#[test]
fn constant_windows_normalise_to_zeros() {
    let mut series = Array2::from_shape_fn((200, 1), |(i, _)| ((i * i) % 17) as f64);
    series.slice_mut(ndarray::s![50..90, ..]).fill(4.5);
    let flat = Array2::from_elem((20, 1), -3.0);
    let options = SearchOptions::default().with_k(2).on(Device::Cpu);
    let got = subsequences(flat.view(), &series.view(), &options).unwrap();
    assert_eq!(found(&got), vec![(50, 0.0), (60, 0.0)]);
    let query = Array2::from_shape_fn((20, 1), |(i, _)| (i as f64).sin());
    let got = subsequences(query.view(), &series.view(), &options.with_k(50)).unwrap();
    let q = znorm(query.view());
    let flat_cost = q.iter().map(|v| v * v).sum::<f64>();
    let flat_matches: Vec<_> = got
        .matches
        .iter()
        .filter(|m| (50..=70).contains(&m.start))
        .collect();
    assert!(!flat_matches.is_empty());
    for m in flat_matches {
        let expected = oracle::dtw(q.view(), Array2::zeros((20, 1)).view(), Some(1));
        assert_eq!(m.distance, expected.sqrt());
        assert!((expected - flat_cost).abs() < 1e-9);
    }
}

#[test]
fn single_precision_series_are_widened() {
    let mut rng = rng(11);
    let series = walk(&mut rng, 500, 1);
    let narrow: Vec<f32> = series.iter().map(|&v| v as f32).collect();
    let wide = Array2::from_shape_fn((500, 1), |(i, _)| f64::from(narrow[i]));
    let query = wide.slice(ndarray::s![100..130, ..]).to_owned();
    let options = SearchOptions::default().with_k(2).on(Device::Cpu);
    let got = subsequences(query.view(), &narrow[..], &options).unwrap();
    assert_eq!(
        found(&got),
        brute_force(query.view(), wide.view(), 1, 2, 15, true)
    );
    assert_eq!(
        got.matches[0],
        timewarp::search::Match {
            start: 100,
            distance: 0.0
        }
    );
}

fn invalid_input(result: Result<impl std::fmt::Debug, Error>, fragment: &str) {
    match result {
        Err(Error::InvalidInput(message)) => {
            assert!(message.contains(fragment), "{message:?} lacks {fragment:?}")
        }
        other => panic!("expected InvalidInput containing {fragment:?}, got {other:?}"),
    }
}

#[test]
fn bad_input_is_refused_clearly() {
    let series: Vec<f64> = (0..100).map(|i| (i as f64).sqrt()).collect();
    let query = Array2::from_shape_fn((10, 1), |(i, _)| i as f64);
    let options = SearchOptions::default().on(Device::Cpu);
    let long = Array2::zeros((101, 1));
    invalid_input(
        subsequences(long.view(), &series[..], &options),
        "longer than the series",
    );
    let short = Array2::zeros((1, 1));
    invalid_input(
        subsequences(short.view(), &series[..], &options),
        "at least 2",
    );
    for chunk in [7, 1000] {
        let mut bad = series.clone();
        bad[63] = f64::NAN;
        bad[80] = f64::INFINITY;
        invalid_input(
            subsequences(query.view(), &bad[..], &options.with_chunk(chunk)),
            "non-finite value (NaN) at sample 63",
        );
    }
    let mut bad_query = query.clone();
    bad_query[[4, 0]] = f64::NAN;
    invalid_input(
        subsequences(bad_query.view(), &series[..], &options),
        "sample 4",
    );
    for band in [-0.1, 1.5, f64::NAN] {
        let result = subsequences(
            query.view(),
            &series[..],
            &options.with_band(Band::Fraction(band)),
        );
        assert!(
            matches!(result, Err(Error::InvalidParameter { name: "band", .. })),
            "{band}: {result:?}"
        );
    }
    let result = subsequences(query.view(), &series[..], &options.with_k(0));
    assert!(matches!(
        result,
        Err(Error::InvalidParameter { name: "k", .. })
    ));
    let two = Array2::zeros((10, 2));
    let result = subsequences(two.view(), &series[..], &options);
    assert!(matches!(
        result,
        Err(Error::DimensionMismatch {
            first: 2,
            second: 1
        })
    ));
    // Device::Gpu: `search_gpu` (the CPU's matches, or `GpuUnavailable`).
    // A multivariate NaN names its dimension.
    let mut multi = Array2::from_shape_fn((50, 2), |(i, k)| (i * (k + 1)) as f64);
    multi[[30, 1]] = f64::NAN;
    let q2 = Array2::from_shape_fn((5, 2), |(i, k)| (i + k) as f64);
    invalid_input(
        subsequences(q2.view(), &multi.view(), &options),
        "sample 30, dimension 1",
    );
}

/// Random z-normalised pairs, some with constant stretches, every band.
fn pair() -> impl Strategy<Value = (Array2<f64>, Array2<f64>, usize, Array2<f64>)> {
    (2usize..40, 1usize..3, any::<u64>(), 0usize..8).prop_map(|(m, dims, seed, flat)| {
        let mut rng = rng(seed);
        let q = znorm(walk(&mut rng, m, dims).view());
        // A longer stretch around the candidate: its envelope is wider.
        let mut around = walk(&mut rng, m + 10, dims);
        if flat < 3 {
            let level = around[[5, 0]];
            around.slice_mut(ndarray::s![5..5 + m, ..]).fill(level);
        }
        let c = znorm(around.slice(ndarray::s![5..5 + m, ..]));
        let radius = rng.random_range(0..m);
        (q, c, radius, around)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Every bound is at most the DTW: LB_Kim, LB_Keogh both ways, and
    /// LB_Keogh on the envelope of a wider stretch (the data's envelope as
    /// the search takes it, over the whole series).
    #[test]
    fn bounds_never_exceed_the_dtw((q, c, radius, around) in pair()) {
        let dtw = oracle::dtw(q.view(), c.view(), Some(radius));
        let slack = 1e-12 * (1.0 + dtw);
        prop_assert!(lb_kim(q.view(), c.view()) <= dtw + slack);
        prop_assert!(lb_keogh(c.view(), q.view(), radius) <= dtw + slack);
        prop_assert!(lb_keogh(q.view(), c.view(), radius) <= dtw + slack);
        // The stretch's envelope, normalised with the candidate's statistics.
        let m = q.nrows();
        let (lower, upper) = timewarp::search::envelope(around.view(), radius);
        let window = around.slice(ndarray::s![5..5 + m, ..]);
        let mut wide = 0.0;
        for k in 0..q.ncols() {
            let column = window.column(k);
            let mean = column.sum() / m as f64;
            let std = (column.mapv(|v| (v - mean) * (v - mean)).sum() / m as f64).sqrt();
            let flat = column.iter().all(|&v| v == column[0]);
            let scale = if flat { 0.0 } else { 1.0 / std };
            for i in 0..m {
                let at = (5 + i) * q.ncols() + k;
                let (lo, up) = ((lower[at] - mean) * scale, (upper[at] - mean) * scale);
                let v = q[[i, k]];
                wide += if v > up { (v - up).powi(2) } else if v < lo { (v - lo).powi(2) } else { 0.0 };
            }
        }
        prop_assert!(wide <= dtw + 1e-9 * (1.0 + dtw), "wide {} dtw {}", wide, dtw);
    }
}
