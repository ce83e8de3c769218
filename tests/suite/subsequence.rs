//! Open-ended subsequence alignment (`timewarp::search::
//! subsequence_alignment`) against two references written here: the
//! brute force of its definition (the least of the oracle's DTW of the
//! query against every `series[start..=end]`, with the oracle's path), and
//! tslearn's algorithm transcribed (`subsequence_cost_matrix`, the earliest
//! least end, `subsequence_path`'s traceback), whose path it must equal on
//! data full of ties. Series in files and across blocks; the errors.

use crate::common::{random_series, rng};
use ndarray::{s, Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::Rng;
use timewarp::oracle;
use timewarp::search::{subsequence_alignment, SeriesFile, SubsequenceAlignment};
use timewarp::{Device, Error};

/// The least DTW of `query` against any `series[start..=end]` (the
/// earliest end, then the earliest start, on a tie), with its path.
fn brute_force(query: ArrayView2<f64>, series: ArrayView2<f64>) -> (usize, usize, f64) {
    let mut best = (0, 0, f64::INFINITY);
    for end in 0..series.nrows() {
        for start in 0..=end {
            let cost = oracle::dtw(query, series.slice(s![start..=end, ..]), None);
            if cost < best.2 {
                best = (start, end, cost);
            }
        }
    }
    best
}

/// tslearn's `dtw_subsequence_path`, written out: the full accumulated
/// matrix with a free row 0, `argmin` of the last row, and the traceback
/// that takes numpy's `argmin` of `[diagonal, up, left]` until row 0.
fn tslearn(query: ArrayView2<f64>, series: ArrayView2<f64>) -> (Vec<(usize, usize)>, f64) {
    let (m, n) = (query.nrows(), series.nrows());
    let mut c = Array2::from_elem((m + 1, n + 1), f64::INFINITY);
    c.row_mut(0).fill(0.0);
    for i in 0..m {
        for j in 0..n {
            let mut d = 0.0;
            for (a, b) in query.row(i).iter().zip(series.row(j)) {
                d += (a - b) * (a - b);
            }
            c[[i + 1, j + 1]] = d + c[[i, j + 1]].min(c[[i + 1, j]]).min(c[[i, j]]);
        }
    }
    let acc = c.slice(s![1.., 1..]);
    let argmin = |values: &[f64]| {
        let least = values.iter().copied().fold(f64::INFINITY, f64::min);
        values.iter().position(|&v| v == least).unwrap()
    };
    let last: Vec<f64> = acc.row(m - 1).to_vec();
    let end = argmin(&last);
    let mut path = vec![(m - 1, end)];
    let (mut i, mut j) = (m - 1, end);
    while i != 0 {
        (i, j) = if j == 0 {
            (i - 1, 0)
        } else {
            let steps = [acc[[i - 1, j - 1]], acc[[i - 1, j]], acc[[i, j - 1]]];
            [(i - 1, j - 1), (i - 1, j), (i, j - 1)][argmin(&steps)]
        };
        path.push((i, j));
    }
    path.reverse();
    (path, last[end].sqrt())
}

fn align(query: &Array2<f64>, series: &Array2<f64>) -> SubsequenceAlignment {
    subsequence_alignment(query.view(), &series.view(), Device::Cpu).unwrap()
}

/// The squared costs along `path`, summed from its start.
fn path_cost(query: &Array2<f64>, series: &Array2<f64>, path: &[(usize, usize)]) -> f64 {
    let mut total = 0.0;
    for &(i, j) in path {
        let mut d = 0.0;
        for (a, b) in query.row(i).iter().zip(series.row(j)) {
            d += (a - b) * (a - b);
        }
        total += d;
    }
    total
}

#[test]
fn the_best_match_is_the_least_dtw_of_every_start_and_end() {
    let mut rng = rng(71);
    for case in 0..50 {
        let dims = [1, 1, 2, 3][case % 4];
        let m = rng.random_range(1..=6);
        let n = rng.random_range(1..=18);
        let query = random_series(&mut rng, m, dims, 1.0);
        let series = random_series(&mut rng, n, dims, 1.0);
        let found = align(&query, &series);
        let (start, end, cost) = brute_force(query.view(), series.view());
        let context = format!("case {case}: m {m}, n {n}, dims {dims}");
        assert_eq!((found.start, found.end), (start, end), "{context}");
        approx::assert_relative_eq!(found.cost, cost.sqrt(), max_relative = 1e-12);
        let window = series.slice(s![start..=end, ..]);
        let (path, _) = oracle::dtw_path(query.view(), window, None);
        let shifted: Vec<_> = path.iter().map(|&(i, j)| (i, j + start)).collect();
        assert_eq!(found.path, shifted, "{context}");
        let along = path_cost(&query, &series, &found.path);
        approx::assert_relative_eq!(along.sqrt(), found.cost, max_relative = 1e-12);
    }
}

/// Small integers: equal costs everywhere, so the tie rules decide.
fn integers(rng: &mut StdRng, n: usize, dims: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, dims), |_| f64::from(rng.random_range(0..3_i32)))
}

#[test]
fn the_path_and_the_cost_are_tslearns_on_ties_and_random_data() {
    let mut rng = rng(72);
    for case in 0..100 {
        let dims = [1, 2][case % 2];
        let m = rng.random_range(1..=8);
        let n = rng.random_range(1..=30);
        let (query, series) = if case < 50 {
            (integers(&mut rng, m, dims), integers(&mut rng, n, dims))
        } else {
            let q = random_series(&mut rng, m, dims, 1.0);
            (q, random_series(&mut rng, n, dims, 1.0))
        };
        let found = align(&query, &series);
        let (path, cost) = tslearn(query.view(), series.view());
        let context = format!("case {case}: query {query:?}, series {series:?}");
        assert_eq!(found.path, path, "{context}");
        assert_eq!(found.cost, cost, "{context}");
        assert_eq!(
            (found.start, found.end),
            (path[0].1, path[path.len() - 1].1)
        );
    }
}

#[test]
fn a_query_longer_than_the_series_and_a_series_of_one_sample() {
    let query = Array2::from_shape_vec((4, 1), vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let one = Array2::from_shape_vec((1, 1), vec![2.0]).unwrap();
    let found = align(&query, &one);
    assert_eq!((found.start, found.end), (0, 0));
    assert_eq!(found.path, vec![(0, 0), (1, 0), (2, 0), (3, 0)]);
    assert_eq!(found.cost, (1.0_f64 + 0.0 + 1.0 + 4.0).sqrt());
    let short = Array2::from_shape_vec((2, 1), vec![9.0, 3.5]).unwrap();
    let found = align(&query, &short);
    assert_eq!(found.path, tslearn(query.view(), short.view()).0);
}

#[test]
fn a_planted_copy_is_found_across_blocks_and_in_a_file() {
    let mut rng = rng(73);
    let n = 40_000; // beyond one block of 16384 samples
    let mut series = random_series(&mut rng, n, 1, 1.0);
    let query = random_series(&mut rng, 24, 1, 3.0);
    // The query stretched: each sample twice, from sample 33,000.
    for i in 0..48 {
        series[[33_000 + i, 0]] = query[[i / 2, 0]];
    }
    let found = align(&query, &series);
    // The earliest end of cost 0 leaves the last repeat out; the start
    // skips the first (tie: the diagonal from row 0).
    assert_eq!((found.start, found.end, found.cost), (33_001, 33_046, 0.0));
    let (path, cost) = tslearn(query.view(), series.view());
    assert_eq!((found.path.clone(), found.cost), (path, cost));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("series.npy");
    ndarray_npy::write_npy(&file, &series).unwrap();
    let from_file = subsequence_alignment(
        query.view(),
        &SeriesFile::open(&file).unwrap(),
        Device::Auto,
    )
    .unwrap();
    assert_eq!(from_file, found);
}

fn error(query: &Array2<f64>, series: &Array2<f64>, device: Device) -> Error {
    subsequence_alignment(query.view(), &series.view(), device).unwrap_err()
}

#[test]
fn bad_input_is_a_clear_error() {
    let query = Array2::from_shape_vec((3, 1), vec![0.0, 1.0, 2.0]).unwrap();
    let series = Array2::from_shape_vec((5, 1), vec![0.0; 5]).unwrap();
    let empty = Array2::<f64>::zeros((0, 1));
    let message = |e: Error| e.to_string();
    assert!(message(error(&empty, &series, Device::Cpu)).contains("query is empty"));
    assert!(message(error(&query, &empty, Device::Cpu)).contains("series is empty"));
    let wide = Array2::<f64>::zeros((5, 2));
    assert!(matches!(
        error(&query, &wide, Device::Cpu),
        Error::DimensionMismatch {
            first: 1,
            second: 2
        }
    ));

    let mut bad_query = query.clone();
    bad_query[[2, 0]] = f64::NAN;
    let text = message(error(&bad_query, &series, Device::Cpu));
    assert!(
        text.contains("query") && text.contains("sample 2"),
        "{text}"
    );

    // In the second block, so the position counts the blocks before it.
    let mut long = Array2::<f64>::zeros((20_000, 2));
    long[[17_000, 1]] = f64::INFINITY;
    let pair = Array2::<f64>::zeros((3, 2));
    let text = message(error(&pair, &long, Device::Cpu));
    assert!(
        text.contains("series") && text.contains("sample 17000, dimension 1"),
        "{text}"
    );

    let huge = Array2::from_elem((3, 1), 1e200);
    let text = error(&huge, &(-&huge), Device::Cpu);
    assert!(matches!(text, Error::Overflow { .. }), "{text}");
}
