//! k nearest neighbours with lower bounds on the GPU (banded DTW, the
//! database resident on one GPU: `search::gpu_knn`) against the GPU's
//! brute force (`ComputeOptions::brute_force`): the same indices and the
//! same distances bit for bit, on random walks and CBF, `k` 1 and 5, `f32`
//! and `f64`, unequal lengths, several dimensions, band 0, duplicated
//! series (ties), a database larger than one bounds launch's chunk and a
//! query block larger than one distances batch. Without a GPU these skip,
//! unless `REQUIRE_GPU=1`.

use crate::common::{on_gpu, rng};
use crate::knn::cbf_set;
use ndarray::Array2;
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::StandardNormal;
use timewarp::internals::use_gpu_knn_bounds;
use timewarp::search::PruningStats;
use timewarp::{
    nearest_neighbours, upload, ComputeOptions, Device, Dtw, Float, GpuSet, Metric, SeriesSet,
};

/// GPU 0 alone: the bounds' path takes a database on one GPU (on several
/// the brute force spreads it).
fn gpu(brute_force: bool) -> ComputeOptions {
    ComputeOptions {
        brute_force,
        ..ComputeOptions::on(Device::Gpu).with_gpus(GpuSet::one(0).unwrap())
    }
}

/// `count` random walks of lengths from `lengths`, `dims` values a sample,
/// with series `copies.1` equal to series `copies.0` (ties).
fn walks<T: Float>(
    rng: &mut StdRng,
    count: usize,
    lengths: std::ops::RangeInclusive<usize>,
    dims: usize,
    copies: &[(usize, usize)],
) -> SeriesSet<T> {
    let mut series: Vec<Array2<T>> = (0..count)
        .map(|_| {
            let len = rng.random_range(lengths.clone());
            let mut x = Array2::<f64>::zeros((len, dims));
            for k in 0..dims {
                let mut v = rng.random_range(-3.0..3.0);
                for t in 0..len {
                    v += rng.sample::<f64, _>(StandardNormal);
                    x[[t, k]] = v;
                }
            }
            x.mapv(T::from_f64)
        })
        .collect();
    for &(from, to) in copies {
        series[to] = series[from].clone();
    }
    SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap()
}

/// The bounded k-NN and the brute force on the GPU: the same indices and
/// bits; the counts add up. Returns what the bounds pruned.
fn as_brute_force<T: Float>(
    queries: &SeriesSet<T>,
    database: &SeriesSet<T>,
    k: usize,
    radius: usize,
) -> PruningStats {
    let metric = Metric::Dtw(Dtw::with_band(radius));
    let resident = upload(database, &gpu(false)).unwrap();
    // The bounds' path on the GPU is not the default (it is slower today).
    use_gpu_knn_bounds(Some(true));
    let fast = nearest_neighbours(queries, &resident, k, metric, &gpu(false));
    use_gpu_knn_bounds(None);
    let fast = fast.unwrap();
    let brute = nearest_neighbours(queries, &resident, k, metric, &gpu(true)).unwrap();
    assert!(brute.pruning.is_none());
    let context = format!("k {k}, radius {radius}, {}", T::NAME);
    assert_eq!(fast.indices, brute.indices, "{context}");
    for (a, b) in fast.distances.iter().zip(&brute.distances) {
        assert_eq!(
            a.to_f64().to_bits(),
            b.to_f64().to_bits(),
            "{a} vs {b}, {context}"
        );
    }
    let s = fast.pruning.expect("the bounds ran on the GPU");
    let pairs = (queries.len() * database.len()) as u64;
    assert_eq!(s.candidates, pairs, "{context}");
    assert_eq!(
        s.kim + s.keogh_query + s.keogh_data + s.dtw,
        pairs,
        "{context}"
    );
    s
}

/// CBF and random walks, `f64` and `f32`, `k` 1 and 5: also run by
/// `every_kernel` for the kernels of both precisions.
pub fn bounded_equals_brute_force_both_precisions() {
    let mut rng = rng(46);
    for k in [1, 5] {
        let database = cbf_set::<f64>(&mut rng, 3000, 128..=128, 1, 1.0);
        let queries = cbf_set::<f64>(&mut rng, 7, 128..=128, 1, 1.0);
        let s = as_brute_force(&queries, &database, k, 12);
        assert!(s.dtw * 2 < s.candidates, "CBF prunes: {s:?}");
        let database = cbf_set::<f32>(&mut rng, 3000, 128..=128, 1, 1.0);
        let queries = cbf_set::<f32>(&mut rng, 7, 128..=128, 1, 1.0);
        as_brute_force(&queries, &database, k, 12);
        let database = walks::<f64>(&mut rng, 2500, 64..=64, 1, &[(5, 900)]);
        let queries = walks::<f64>(&mut rng, 5, 64..=64, 1, &[]);
        as_brute_force(&queries, &database, k, 6);
        let database = walks::<f32>(&mut rng, 2500, 64..=64, 1, &[(5, 900)]);
        let queries = walks::<f32>(&mut rng, 5, 64..=64, 1, &[]);
        as_brute_force(&queries, &database, k, 6);
    }
}

#[test]
fn gpu_knn_bounds_equal_brute_force() {
    let Some(_timed) = on_gpu("knn_gpu::gpu_knn_bounds_equal_brute_force") else {
        return;
    };
    bounded_equals_brute_force_both_precisions();
}

#[test]
fn gpu_knn_bounds_unequal_lengths_multivariate_band_0() {
    let Some(_timed) = on_gpu("knn_gpu::gpu_knn_bounds_unequal_lengths_multivariate_band_0") else {
        return;
    };
    let mut rng = rng(47);
    for dims in [1, 3] {
        // Unequal lengths: LB_Kim only.
        let database = walks::<f64>(&mut rng, 1500, 40..=60, dims, &[]);
        let queries = walks::<f64>(&mut rng, 6, 40..=60, dims, &[]);
        for (k, radius) in [(1, 0), (5, 4)] {
            as_brute_force(&queries, &database, k, radius);
        }
        // Equal lengths, band 0 and wider.
        let database = cbf_set::<f32>(&mut rng, 1500, 50..=50, dims, 1.0);
        let queries = cbf_set::<f32>(&mut rng, 6, 50..=50, dims, 1.0);
        for (k, radius) in [(1, 0), (5, 5)] {
            as_brute_force(&queries, &database, k, radius);
        }
    }
}

#[test]
fn gpu_knn_bounds_ties_and_many_chunks() {
    let Some(_timed) = on_gpu("knn_gpu::gpu_knn_bounds_ties_and_many_chunks") else {
        return;
    };
    let mut rng = rng(48);
    // Duplicated series, among them copies of a query: ties at 0 and
    // above, the lower index first.
    let copies: Vec<(usize, usize)> = (0..40).map(|i| (i, 20_000 + i * 7)).collect();
    let mut database = walks::<f64>(&mut rng, 40_000, 32..=32, 1, &copies);
    let queries = walks::<f64>(&mut rng, 40, 32..=32, 1, &[]);
    let mut series: Vec<Array2<f64>> = (0..database.len())
        .map(|i| database.series(i).to_owned())
        .collect();
    series[30_000] = queries.series(0).to_owned();
    series[30_001] = queries.series(0).to_owned();
    series[12] = queries.series(0).to_owned();
    database = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
    // 40 queries x 40000 series: chunks of growing size (the first 1024
    // series), many distances batches.
    for k in [1, 5] {
        as_brute_force(&queries, &database, k, 3);
    }
}
