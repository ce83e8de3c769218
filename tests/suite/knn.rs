//! k nearest neighbours with lower bounds (banded DTW on the CPU) against
//! the brute force (every distance: `ComputeOptions::brute_force`, itself
//! checked against a sort of the whole matrix in `api::neighbours`): the
//! same indices and the same distances bit for bit, on every shape the
//! cascade treats apart; its bounds on whole series against the oracle's
//! DTW.

use crate::common::rng;
use ndarray::Array2;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::StandardNormal;
use timewarp::search::{lb_keogh, lb_kim, PruningStats};
use timewarp::{
    nearest_neighbours, oracle, upload, ComputeOptions, Device, Dtw, Error, Float, Metric,
    SeriesSet,
};

fn cpu(brute_force: bool) -> ComputeOptions {
    ComputeOptions {
        brute_force,
        ..ComputeOptions::on(Device::Cpu)
    }
}

/// Cylinder, bell or funnel (Saito 1994), `len` samples: a plateau of
/// height `6 + eta` over `[a, b]` (rising for the bell, falling for the
/// funnel) plus unit noise, `a` in `[len/8, len/4]`, `b - a` in `[len/4,
/// 3 len/4]`.
pub(crate) fn cbf(rng: &mut StdRng, len: usize, shape: usize) -> Vec<f64> {
    let a = rng.random_range(len as f64 / 8.0..=len as f64 / 4.0);
    let b = a + rng.random_range(len as f64 / 4.0..=3.0 * len as f64 / 4.0);
    let height = 6.0 + rng.sample::<f64, _>(StandardNormal);
    (0..len)
        .map(|t| {
            let t = t as f64;
            let inside = if (a..=b).contains(&t) { height } else { 0.0 };
            let ramp = match shape % 3 {
                0 => 1.0,
                1 => (t - a) / (b - a),
                _ => (b - t) / (b - a),
            };
            inside * ramp + rng.sample::<f64, _>(StandardNormal)
        })
        .collect()
}

/// `count` CBF series of `dims` dimensions (each dimension its own), of
/// lengths drawn from `lengths`, times `scale`.
pub(crate) fn cbf_set<T: Float>(
    rng: &mut StdRng,
    count: usize,
    lengths: std::ops::RangeInclusive<usize>,
    dims: usize,
    scale: f64,
) -> SeriesSet<T> {
    let series: Vec<Array2<T>> = (0..count)
        .map(|i| {
            let len = rng.random_range(lengths.clone());
            let columns: Vec<Vec<f64>> = (0..dims).map(|_| cbf(rng, len, i)).collect();
            Array2::from_shape_fn((len, dims), |(t, k)| T::from_f64(columns[k][t] * scale))
        })
        .collect();
    SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap()
}

/// The neighbours with bounds and by brute force: the same indices and the
/// same bits; what the bounds pruned (`None`: they did not run).
fn as_brute_force<T: Float>(
    queries: &SeriesSet<T>,
    database: &SeriesSet<T>,
    k: usize,
    metric: Metric,
) -> Option<PruningStats> {
    let resident = upload(database, &cpu(false)).unwrap();
    let fast = nearest_neighbours(queries, &resident, k, metric, &cpu(false)).unwrap();
    let brute = nearest_neighbours(queries, &resident, k, metric, &cpu(true)).unwrap();
    assert!(brute.pruning.is_none());
    assert_eq!(fast.indices, brute.indices, "k {k} {metric:?}");
    for (a, b) in fast.distances.iter().zip(&brute.distances) {
        assert_eq!(
            a.to_f64().to_bits(),
            b.to_f64().to_bits(),
            "{a} vs {b}, k {k} {metric:?}"
        );
    }
    if let Some(s) = fast.pruning {
        let pairs = (queries.len() * database.len()) as u64;
        assert_eq!(s.candidates, pairs);
        assert_eq!(s.kim + s.keogh_query + s.keogh_data + s.dtw, pairs);
        assert!(s.abandoned <= s.dtw);
    }
    fast.pruning
}

fn banded(radius: usize) -> Metric {
    Metric::Dtw(Dtw::with_band(radius))
}

#[test]
fn equal_lengths_as_brute_force_and_pruned() {
    let mut rng = rng(1);
    let database = cbf_set::<f64>(&mut rng, 400, 64..=64, 1, 1.0);
    let queries = cbf_set::<f64>(&mut rng, 24, 64..=64, 1, 1.0);
    for radius in [0, 1, 6, 20] {
        for k in [1, 4] {
            let s = as_brute_force(&queries, &database, k, banded(radius)).unwrap();
            if radius == 6 && k == 1 {
                // The cascade does skip most pairs, each LB_Keogh some.
                assert!(s.dtw * 2 < s.candidates, "{s:?}");
                assert!(s.keogh_query > 0 && s.keogh_data > 0, "{s:?}");
                assert!(s.abandoned > 0, "{s:?}");
            }
        }
    }
}

/// Series that start far from the query's start: LB_Kim skips them, of
/// the query's length or not.
#[test]
fn lb_kim_skips_far_first_samples() {
    let mut rng = rng(12);
    let plain = cbf_set::<f64>(&mut rng, 200, 38..=42, 1, 1.0);
    let series: Vec<Array2<f64>> = (0..200)
        .map(|i| {
            let mut x = plain.series(i).to_owned();
            if i % 2 == 1 {
                x[[0, 0]] += 100.0;
            }
            x
        })
        .collect();
    let database = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
    let queries = cbf_set::<f64>(&mut rng, 4, 40..=40, 1, 1.0);
    let s = as_brute_force(&queries, &database, 1, banded(4)).unwrap();
    assert!(s.kim >= 200, "{s:?}");
}

#[test]
fn single_precision_as_brute_force() {
    let mut rng = rng(2);
    let database = cbf_set::<f32>(&mut rng, 300, 48..=48, 1, 1.0);
    let queries = cbf_set::<f32>(&mut rng, 20, 48..=48, 1, 1.0);
    for (radius, k) in [(0, 1), (4, 1), (4, 5), (30, 3)] {
        assert!(as_brute_force(&queries, &database, k, banded(radius)).is_some());
    }
}

#[test]
fn unequal_lengths_as_brute_force() {
    let mut rng = rng(3);
    let database = cbf_set::<f64>(&mut rng, 200, 30..=40, 1, 1.0);
    let queries = cbf_set::<f64>(&mut rng, 16, 28..=42, 1, 1.0);
    for k in [1, 3] {
        as_brute_force(&queries, &database, k, banded(4)).unwrap();
    }
    let database = cbf_set::<f32>(&mut rng, 150, 30..=34, 1, 1.0);
    let queries = cbf_set::<f32>(&mut rng, 10, 30..=34, 1, 1.0);
    as_brute_force(&queries, &database, 2, banded(3)).unwrap();
}

#[test]
fn multivariate_as_brute_force() {
    let mut rng = rng(4);
    let database = cbf_set::<f64>(&mut rng, 150, 32..=32, 3, 1.0);
    let queries = cbf_set::<f64>(&mut rng, 12, 32..=32, 3, 1.0);
    for (radius, k) in [(0, 1), (3, 1), (3, 4)] {
        as_brute_force(&queries, &database, k, banded(radius)).unwrap();
    }
    let database = cbf_set::<f32>(&mut rng, 120, 20..=26, 2, 1.0);
    let queries = cbf_set::<f32>(&mut rng, 9, 20..=26, 2, 1.0);
    as_brute_force(&queries, &database, 3, banded(2)).unwrap();
}

/// No band, or one that covers every cell: the brute force itself.
#[test]
fn without_a_narrow_band_every_distance_is_computed() {
    let mut rng = rng(5);
    let database = cbf_set::<f64>(&mut rng, 40, 16..=20, 1, 1.0);
    let queries = cbf_set::<f64>(&mut rng, 5, 16..=20, 1, 1.0);
    for metric in [Metric::Dtw(Dtw::new()), banded(19), banded(1000)] {
        assert!(as_brute_force(&queries, &database, 2, metric).is_none());
    }
    assert!(as_brute_force(&queries, &database, 2, banded(18)).is_some());
}

/// Copies of a series at several indices, queries equal to them: equal
/// distances (0, and others) rank by index.
#[test]
fn ties_go_to_the_lower_index() {
    let mut rng = rng(6);
    let base = cbf_set::<f64>(&mut rng, 30, 24..=24, 1, 1.0);
    let order: Vec<usize> = (0..90).map(|i| (i * 7) % 30).collect();
    let database = SeriesSet::from_series(order.iter().map(|&i| base.series(i))).unwrap();
    let queries = SeriesSet::from_series((0..6).map(|i| base.series(i))).unwrap();
    for k in [1, 3, 7] {
        as_brute_force(&queries, &database, k, banded(3)).unwrap();
    }
    let resident = upload(&database, &cpu(false)).unwrap();
    let found = nearest_neighbours(&queries, &resident, 3, banded(3), &cpu(false)).unwrap();
    for q in 0..6 {
        let copies: Vec<usize> = (0..90).filter(|&j| order[j] == q).collect();
        assert_eq!(found.indices.row(q).to_vec(), copies);
        assert!(found.distances.row(q).iter().all(|&d| d == 0.0));
    }
}

/// Values far from 1 both ways: the bounds allow for rounding (and for
/// squares that underflow); values whose distances could overflow take the
/// brute force, which reports the overflow.
#[test]
fn huge_and_tiny_values() {
    for scale in [1e100, 1e-100, 1e-160, 1e-300] {
        let mut rng = rng(7);
        let database = cbf_set::<f64>(&mut rng, 120, 20..=20, 1, scale);
        let queries = cbf_set::<f64>(&mut rng, 8, 20..=20, 1, scale);
        for k in [1, 3] {
            as_brute_force(&queries, &database, k, banded(2));
        }
    }
    for scale in [1e15, 1e-15, 1e-22, 1e-40] {
        let mut rng = rng(8);
        let database = cbf_set::<f32>(&mut rng, 120, 20..=20, 1, scale);
        let queries = cbf_set::<f32>(&mut rng, 8, 20..=20, 1, scale);
        for k in [1, 3] {
            as_brute_force(&queries, &database, k, banded(2));
        }
    }
    let mut rng = rng(9);
    let database = cbf_set::<f32>(&mut rng, 20, 20..=20, 1, 1e20);
    let queries = cbf_set::<f32>(&mut rng, 3, 20..=20, 1, 1e20);
    let resident = upload(&database, &cpu(false)).unwrap();
    for brute_force in [false, true] {
        let found = nearest_neighbours(&queries, &resident, 1, banded(2), &cpu(brute_force));
        assert!(matches!(found, Err(Error::Overflow { .. })), "{found:?}");
    }
}

/// Series of one sample (LB_Kim is then the whole DTW), among series of
/// three, of small whole values (many ties); and `k` the whole database.
#[test]
fn length_one_and_k_the_whole_database() {
    let mut rng = rng(10);
    let mut ints =
        |len: usize| Array2::from_shape_fn((len, 1), |_| rng.random_range(-3i32..=3) as f64);
    let series: Vec<Array2<f64>> = (0..50)
        .map(|i| ints(if i % 2 == 0 { 1 } else { 3 }))
        .collect();
    let database = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
    let queries = SeriesSet::from_series(series[..7].iter().map(|s| s.view())).unwrap();
    for k in [1, 4, 50] {
        as_brute_force(&queries, &database, k, banded(0)).unwrap();
    }
    // One sample and nothing longer: any band covers every cell.
    let ones = SeriesSet::from_series(series.iter().step_by(2).map(|s| s.view())).unwrap();
    assert!(as_brute_force(&ones, &ones, 3, banded(0)).is_none());
    let mixed = cbf_set::<f64>(&mut rng, 60, 1..=4, 2, 1.0);
    let queries = cbf_set::<f64>(&mut rng, 9, 1..=4, 2, 1.0);
    for k in [1, 5, 60] {
        as_brute_force(&queries, &mixed, k, banded(1)).unwrap();
    }
}

/// Few database series and many queries (tasks over the queries), and the
/// reverse.
#[test]
fn many_queries_or_many_series() {
    let mut rng = rng(11);
    let few = cbf_set::<f64>(&mut rng, 5, 40..=40, 1, 1.0);
    let many = cbf_set::<f64>(&mut rng, 700, 40..=40, 1, 1.0);
    as_brute_force(&many, &few, 2, banded(4)).unwrap();
    let one = cbf_set::<f64>(&mut rng, 1, 40..=40, 1, 1.0);
    as_brute_force(&one, &many, 3, banded(4)).unwrap();
}

/// Random series, not normalised, of random offset and scale.
fn walk(rng: &mut StdRng, len: usize, dims: usize) -> Array2<f64> {
    let scale = 10f64.powf(rng.random_range(-3.0..3.0));
    let mut x = Array2::zeros((len, dims));
    for k in 0..dims {
        let mut v = rng.random_range(-50.0..50.0);
        for i in 0..len {
            v += rng.sample::<f64, _>(StandardNormal);
            x[[i, k]] = v * scale;
        }
    }
    x
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// On whole series as given: LB_Kim and LB_Keogh both ways at most the
    /// banded DTW of equal lengths; LB_Kim (first and last samples) at
    /// most the DTW of unequal lengths, whose band widens.
    #[test]
    fn whole_series_bounds_never_exceed_the_dtw(
        (n, m, dims, seed) in (1usize..30, 1usize..30, 1usize..4, any::<u64>())
    ) {
        let mut rng = rng(seed);
        let (q, c) = (walk(&mut rng, n, dims), walk(&mut rng, m, dims));
        let radius = rng.random_range(0..n.max(m));
        let dtw = oracle::dtw(q.view(), c.view(), Some(radius));
        let slack = 1e-12 * dtw;
        let cost = |i: usize, j: usize| -> f64 {
            (0..dims).map(|k| (q[[i, k]] - c[[j, k]]).powi(2)).sum()
        };
        let kim = if n == 1 && m == 1 { cost(0, 0) } else { cost(0, 0) + cost(n - 1, m - 1) };
        prop_assert!(kim <= dtw + slack, "kim {} dtw {}", kim, dtw);
        let c_same = walk(&mut rng, n, dims);
        let dtw = oracle::dtw(q.view(), c_same.view(), Some(radius));
        let slack = 1e-12 * dtw;
        if n >= 2 {
            prop_assert!(lb_kim(q.view(), c_same.view()) <= dtw + slack);
        }
        prop_assert!(lb_keogh(c_same.view(), q.view(), radius) <= dtw + slack);
        prop_assert!(lb_keogh(q.view(), c_same.view(), radius) <= dtw + slack);
    }
}
