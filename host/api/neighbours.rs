//! The k nearest neighbours of queries in a resident database: under
//! banded DTW on the CPU with lower bounds (`crate::search::whole`), else
//! with only a block of the distance matrix in memory at a time.

use super::matrix::{distance_matrix_resident, resident_matrix_variant};
use crate::resident::Storage;
use crate::results::zeros;
use crate::search::{gpu_knn, whole, PruningStats};
use crate::{ComputeOptions, Error, Float, Metric, ResidentSet, Result, SeriesSet};
use ndarray::{Array2, ArrayView1};
use rayon::prelude::*;
use std::cmp::Ordering;

/// The distances one block of queries may take in host memory: the matrix
/// of `n` queries against a database of `m` series is computed `max(1,
/// KNN_BLOCK_VALUES / m)` queries at a time and reduced to each query's
/// `k` nearest before the next block.
pub const KNN_BLOCK_VALUES: usize = 1 << 25;

/// Each query's `k` nearest database series, nearest first: `indices[[q,
/// r]]` is the database index of query `q`'s neighbour of rank `r` and
/// `distances[[q, r]]` its distance.
#[derive(Clone, Debug, PartialEq)]
pub struct Neighbours<T> {
    pub indices: Array2<usize>,
    pub distances: Array2<T>,
    /// What the lower bounds pruned, where they ran (banded DTW on the
    /// CPU); `None` where every distance was computed.
    pub pruning: Option<PruningStats>,
}

/// The `k` nearest series of `database` to each series of `queries`, by
/// `metric`, nearest first; among equal distances the lower database
/// index ranks first.
///
/// DTW with a band on the CPU skips pairs by lower bounds (LB_Kim,
/// LB_Keogh both ways, the DTW pruned and abandoned against each query's
/// `k`-th best so far: docs/algorithms.md, "Nearest neighbours"), on
/// every core, with the same neighbours and the same distances bit for
/// bit; `pruning` says what they skipped. `options.brute_force` turns
/// them off.
///
/// Otherwise computed where the database lives, as
/// [`distance_matrix_resident`] computes (every GPU of a replicated set
/// sharing the queries, or every slice of a sharded one: each query meets
/// every slice and the rows are merged), a block of queries at a time
/// ([`KNN_BLOCK_VALUES`]), so the whole matrix never exists: memory beyond
/// the sets is one block and the `n x k` result.
///
/// Errors: `k` of 0 or more than the database holds, and those of
/// [`distance_matrix_resident`].
pub fn nearest_neighbours<T: Float>(
    queries: &SeriesSet<T>,
    database: &ResidentSet<T>,
    k: usize,
    metric: Metric,
    options: &ComputeOptions,
) -> Result<Neighbours<T>> {
    check_k(k, database.len())?;
    if let Some(found) = with_bounds(queries, database, k, metric, options)? {
        return Ok(found);
    }
    in_blocks(queries, database, k, metric, options, KNN_BLOCK_VALUES)
}

fn check_k(k: usize, size: usize) -> Result<()> {
    if k == 0 || k > size {
        return Err(Error::InvalidInput(format!(
            "k = {k}: expected 1 to the {size} series of the database"
        )));
    }
    Ok(())
}

thread_local! {
    /// This thread's choice of the GPU's bounds ([`use_gpu_knn_bounds`]).
    static GPU_BOUNDS: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Test and bench hook: this thread's k-NN over a database on one GPU
/// takes the lower bounds (`Some(true)`), the brute force (`Some(false)`),
/// or the default (`None`): the brute force, unless
/// `TIMEWARP_GPU_KNN_BOUNDS=1`. On the GPU the bounds' path is slower than
/// the brute force today (docs/benchmarks.md, "k-NN with lower bounds"),
/// so it is not the default.
pub fn use_gpu_knn_bounds(choice: Option<bool>) {
    GPU_BOUNDS.with(|c| c.set(choice));
}

fn gpu_bounds_chosen() -> bool {
    static FROM_ENV: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    GPU_BOUNDS.with(std::cell::Cell::get).unwrap_or_else(|| {
        *FROM_ENV.get_or_init(|| std::env::var("TIMEWARP_GPU_KNN_BOUNDS").is_ok_and(|v| v == "1"))
    })
}

/// The neighbours by the lower bounds, where they apply: DTW with a band
/// narrower than the series, bounds not turned off, distances that cannot
/// overflow ([`whole::slack`]); a database on the host (the CPU's cascade)
/// or, when chosen ([`use_gpu_knn_bounds`]), on one GPU
/// (`search::gpu_knn`: the bounds on the GPU, the survivors' distances by
/// the brute force's pair kernel).
fn with_bounds<T: Float>(
    queries: &SeriesSet<T>,
    database: &ResidentSet<T>,
    k: usize,
    metric: Metric,
    options: &ComputeOptions,
) -> Result<Option<Neighbours<T>>> {
    let Metric::Dtw(dtw) = metric else {
        return Ok(None);
    };
    let Some(radius) = dtw.band() else {
        return Ok(None);
    };
    // The brute force's errors first: dimensions, a device that disagrees.
    if queries.dims() != database.dims() {
        return Err(Error::DimensionMismatch {
            first: queries.dims(),
            second: database.dims(),
        });
    }
    database.backend(options.device)?;
    if options.brute_force {
        return Ok(None);
    }
    let found = match &database.storage {
        Storage::Host(set) => {
            let Some(slack) = whole::slack(queries, set, radius) else {
                return Ok(None);
            };
            whole::nearest(queries, set, k, radius, slack)?
        }
        Storage::Gpu(_) if !gpu_bounds_chosen() => return Ok(None),
        Storage::Gpu(set) => {
            let variant = resident_matrix_variant(options)?;
            let how = (variant, options.gpu_memory_budget);
            match gpu_knn::nearest(queries, set, (k, radius), how, KNN_BLOCK_VALUES)? {
                Some(found) => found,
                None => return Ok(None),
            }
        }
    };
    Ok(Some(Neighbours {
        indices: found.indices,
        distances: found.distances,
        pruning: Some(found.stats),
    }))
}

/// [`nearest_neighbours`] with blocks of `block_values` distances.
fn in_blocks<T: Float>(
    queries: &SeriesSet<T>,
    database: &ResidentSet<T>,
    k: usize,
    metric: Metric,
    options: &ComputeOptions,
    block_values: usize,
) -> Result<Neighbours<T>> {
    check_k(k, database.len())?;
    let n = queries.len();
    let mut indices = zeros(n, k)?;
    let mut distances = zeros(n, k)?;
    let block = (block_values / database.len()).max(1);
    for start in (0..n).step_by(block) {
        let end = (start + block).min(n);
        let matrix =
            distance_matrix_resident(&queries.slice(start..end), database, metric, options)?;
        let nearest: Vec<Vec<usize>> = (0..matrix.nrows())
            .into_par_iter()
            .map(|q| k_smallest(matrix.row(q), k))
            .collect();
        for (offset, (row, nearest)) in matrix.outer_iter().zip(nearest).enumerate() {
            let q = start + offset;
            for (rank, j) in nearest.into_iter().enumerate() {
                indices[[q, rank]] = j;
                distances[[q, rank]] = row[j];
            }
        }
    }
    Ok(Neighbours {
        indices,
        distances,
        pruning: None,
    })
}

/// The positions of the `k` smallest values of `row`, smallest first, ties
/// by position.
fn k_smallest<T: Float>(row: ArrayView1<T>, k: usize) -> Vec<usize> {
    let by_rank = |&i: &usize, &j: &usize| -> Ordering {
        row[i].to_f64().total_cmp(&row[j].to_f64()).then(i.cmp(&j))
    };
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.select_nth_unstable_by(k - 1, by_rank);
    order.truncate(k);
    order.sort_unstable_by(by_rank);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{upload, Device, Dtw};
    use ndarray::{array, Array2};

    #[test]
    fn smallest_first_ties_by_position() {
        let row = array![3.0, 1.0, 2.0, 1.0, 0.5];
        assert_eq!(k_smallest(row.view(), 3), vec![4, 1, 3]);
        assert_eq!(k_smallest(row.view(), 5), vec![4, 1, 3, 2, 0]);
    }

    #[test]
    fn equals_a_sort_of_the_whole_matrix_across_blocks() {
        let queries = Array2::from_shape_fn((7, 12), |(i, t)| ((i * 7 + t * 3) % 11) as f64 - 5.0);
        let base = Array2::from_shape_fn((9, 10), |(i, t)| ((i * 5 + t * 2) % 13) as f64 - 6.0);
        let (queries, base) = (
            SeriesSet::from_univariate(queries.view()).unwrap(),
            SeriesSet::from_univariate(base.view()).unwrap(),
        );
        let options = ComputeOptions::on(Device::Cpu);
        let metric = Metric::Dtw(Dtw::new());
        let database = upload(&base, &options).unwrap();
        let found = nearest_neighbours(&queries, &database, 4, metric, &options).unwrap();
        let matrix = crate::distance_matrix(&queries, Some(&base), metric, &options).unwrap();
        for (q, row) in matrix.outer_iter().enumerate() {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&i, &j| row[i].total_cmp(&row[j]).then(i.cmp(&j)));
            assert_eq!(found.indices.row(q).to_vec(), order[..4].to_vec());
            for r in 0..4 {
                assert_eq!(found.distances[[q, r]], row[order[r]]);
            }
        }
        // Blocks of 2 queries (and of 1, the smallest) give the same.
        for block_values in [18, 1] {
            let blocked = in_blocks(&queries, &database, 4, metric, &options, block_values);
            assert_eq!(blocked.unwrap(), found);
        }
        let too_many = nearest_neighbours(&queries, &database, 10, metric, &options);
        assert!(too_many.unwrap_err().to_string().contains("k = 10"));
        assert!(nearest_neighbours(&queries, &database, 0, metric, &options).is_err());
    }
}
