//! Distance matrices for the commands: one library call for short runs; long
//! ones, when someone is watching stderr, in row blocks that advance a
//! progress bar.

use super::{options_for, set_fraction_done, work_bar, Target};
use ndarray::{s, Array2};
use std::ops::Range;
use timewarp::{
    distance_matrix, nearest_neighbours, ComputeOptions, Float, Metric, Neighbours, ResidentSet,
    Result, SeriesSet, Variant,
};

/// Cells (sample pairs) worth a progress bar: about a second of work.
const LONG_RUN_CELLS_CPU: f64 = 2e9;
const LONG_RUN_CELLS_GPU: f64 = 1e11;
/// Blocks a long run is cut into: a smooth bar, few calls.
const BLOCKS: usize = 100;

/// The matrix of `a` (rows) against `b`, or against itself when `b` is
/// `None`, on `backend` (with GPU kernel `variant`, or the default one).
pub fn compute<T: Float>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    target: Target,
    variant: Option<Variant>,
) -> Result<Array2<T>> {
    let options = ComputeOptions {
        gpu_variant: variant,
        ..options_for(target)
    };
    // Progress in the estimated cells.
    let bar = work_bar();
    if bar.is_hidden() || cells(a, b) < long_run(target) {
        return distance_matrix(a, b, metric, &options);
    }
    let blocks = row_blocks(a.len(), a.len().div_ceil(BLOCKS));
    let total: f64 = blocks.iter().map(|rows| block_cells(a, b, rows)).sum();
    let mut done = 0.0;
    let matrix = in_blocks(a, b, metric, &options, &blocks, |cells| {
        done += cells;
        set_fraction_done(&bar, done / total);
    });
    bar.finish_and_clear();
    matrix
}

/// The `k` nearest series of the resident `database` to each query, on
/// `target` (where the database lives), without lower bounds when
/// `brute_force`; a long run watched on stderr in row blocks that advance
/// a progress bar.
pub fn compute_neighbours<T: Float>(
    queries: &SeriesSet<T>,
    database: &ResidentSet<T>,
    k: usize,
    metric: Metric,
    target: Target,
    (variant, brute_force): (Option<Variant>, bool),
) -> Result<Neighbours<T>> {
    let options = ComputeOptions {
        gpu_variant: variant,
        brute_force,
        ..options_for(target)
    };
    let bar = work_bar();
    let cells = queries.total_samples() as f64 * database.total_samples() as f64;
    if bar.is_hidden() || cells < long_run(target) {
        return nearest_neighbours(queries, database, k, metric, &options);
    }
    let blocks = row_blocks(queries.len(), queries.len().div_ceil(BLOCKS));
    let mut all = Neighbours {
        indices: Array2::zeros((queries.len(), k)),
        distances: Array2::from_elem((queries.len(), k), T::ZERO),
        pruning: None,
    };
    for (b, rows) in blocks.iter().enumerate() {
        let block = queries.slice(rows.clone());
        let found = nearest_neighbours(&block, database, k, metric, &options)?;
        all.indices
            .slice_mut(s![rows.clone(), ..])
            .assign(&found.indices);
        all.distances
            .slice_mut(s![rows.clone(), ..])
            .assign(&found.distances);
        if let Some(block) = found.pruning {
            all.pruning.get_or_insert_with(Default::default).add(&block);
        }
        set_fraction_done(&bar, (b + 1) as f64 / blocks.len() as f64);
    }
    bar.finish_and_clear();
    Ok(all)
}

/// Cells worth a progress bar on `backend`.
fn long_run(target: Target) -> f64 {
    if target.is_gpu() {
        LONG_RUN_CELLS_GPU
    } else {
        LONG_RUN_CELLS_CPU
    }
}

/// Sample pairs the whole matrix takes (each symmetric pair once).
fn cells<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>) -> f64 {
    let rows = a.total_samples() as f64;
    match b {
        Some(b) => rows * b.total_samples() as f64,
        None => rows * rows / 2.0,
    }
}

/// `0..n` in consecutive ranges of `size` (the last may be shorter).
fn row_blocks(n: usize, size: usize) -> Vec<Range<usize>> {
    (0..n)
        .step_by(size.max(1))
        .map(|start| start..(start + size).min(n))
        .collect()
}

/// Sample pairs of block `rows`: against all of `b`, or against series
/// `rows.start..` of `a` itself.
fn block_cells<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>, rows: &Range<usize>) -> f64 {
    let block = a.slice(rows.clone());
    match b {
        Some(b) => cells(&block, Some(b)),
        None => cells(&block, Some(&a.slice(rows.start..a.len()))),
    }
}

/// The matrix, one library call per block of rows; `done` hears each
/// block's cells. Against itself, rows `r0..r1` meet series `r0..` only and
/// the upper triangle is mirrored, so each symmetric pair is computed about
/// once, and with the same operands as the library's own triangle.
fn in_blocks<T: Float>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    options: &ComputeOptions,
    blocks: &[Range<usize>],
    mut done: impl FnMut(f64),
) -> Result<Array2<T>> {
    let columns = b.map_or(a.len(), SeriesSet::len);
    let mut out = Array2::from_elem((a.len(), columns), T::ZERO);
    for rows in blocks {
        let block = a.slice(rows.clone());
        match b {
            Some(b) => {
                let values = distance_matrix(&block, Some(b), metric, options)?;
                out.slice_mut(s![rows.clone(), ..]).assign(&values);
            }
            None => {
                let rest = a.slice(rows.start..a.len());
                let values = distance_matrix(&block, Some(&rest), metric, options)?;
                for ((i, j), &v) in values.indexed_iter() {
                    let (i, j) = (rows.start + i, rows.start + j);
                    if i <= j {
                        out[[i, j]] = v;
                        out[[j, i]] = v;
                    }
                }
            }
        }
        done(block_cells(a, b, rows));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use timewarp::data::random_normal;
    use timewarp::{Device, SoftDtw, Twed};

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // A list of one block is meant.
    fn blocks_cover_the_rows() {
        assert_eq!(row_blocks(7, 3), [0..3, 3..6, 6..7]);
        assert_eq!(row_blocks(2, 5), [0..2]);
        assert!(row_blocks(0, 4).is_empty());
    }

    /// Blocks give exactly the library's single-call matrix, rectangular
    /// and symmetric, and report every cell once.
    #[test]
    fn blocks_match_one_call() {
        let a = random_normal(11, 9, 2, 1);
        let b = random_normal(5, 7, 2, 2);
        let options = ComputeOptions::on(Device::Cpu);
        let metrics: [Metric; 2] = [SoftDtw::new(0.5).unwrap().into(), Twed::default().into()];
        for metric in metrics {
            for other in [Some(&b), None] {
                let expected = distance_matrix(&a, other, metric, &options).unwrap();
                let blocks = row_blocks(a.len(), 3);
                let mut reported = 0.0;
                let got =
                    in_blocks(&a, other, metric, &options, &blocks, |c| reported += c).unwrap();
                assert_eq!(got, expected);
                let total: f64 = blocks.iter().map(|r| block_cells(&a, other, r)).sum();
                assert_eq!(reported, total);
            }
        }
    }
}
