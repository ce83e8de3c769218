//! Open-ended subsequence alignment: the best DTW match of a whole query
//! anywhere in a long series, starting and ending where it is cheapest
//! (tslearn's `dtw_subsequence_path`, dtaidistance's
//! `subsequence_alignment`).
//!
//! The recurrence over the query's samples `i` (rows) and the series'
//! samples `j` (columns), `d(i, j)` the squared Euclidean distance summed
//! over the dimensions in order:
//!
//! ```text
//! C[0][j] = d(0, j)                                  (a path may start at any column)
//! C[i][j] = d(i, j) + min(C[i-1][j-1], C[i-1][j], C[i][j-1])   (i >= 1; C[i][-1] = inf)
//! ```
//!
//! The match ends at the column `e` of least `C[m-1][e]` (the earliest on a
//! tie) and costs `sqrt(C[m-1][e])`, tslearn's value. The series is read a
//! column at a time, so the pass keeps one column (`m` costs) and, for
//! each of its cells, the column where its best path starts: the start of
//! the predecessor the tie rule picks (the diagonal, then the cell above,
//! then the one to the left, tslearn's traceback order), or its own column
//! in row 0. The start of the best end is the match's start, found in the
//! one pass; the path is then DTW's path of the query against
//! `series[start..=end]`, which follows the same cells ([`crate::dtw_path`];
//! docs/algorithms.md, "Subsequence alignment", says why).
//!
//! On the GPU (`super::subsequence_gpu`, the kernels in
//! `kernels-gpu/src/launch/subsequence.rs`) the same recurrence runs over
//! segments of the series at once, a warp each, with the same cell update
//! ([`preferred`] and the cost summed in the same order): the same end,
//! start and cost, bit for bit; then the same path on the CPU.

use super::dtw::{cost, Dims, Many, One};
use super::forward::{check_finite, BestEnd};
use super::SeriesSource;
use crate::gpu::{alignment_auto_on_gpu, Gpu};
use crate::interrupt::{self, Running};
use crate::{ComputeOptions, Device, Dtw, Error, Result};
use ndarray::{Array2, ArrayView2};
use timewarp_kernels::launch::subsequence::preferred;

/// The best match of a query in a long series, and its path.
#[derive(Clone, Debug, PartialEq)]
pub struct SubsequenceAlignment {
    /// The series' first sample in the match.
    pub start: usize,
    /// The series' last sample in the match (`end >= start`).
    pub end: usize,
    /// The square root of the match's accumulated squared Euclidean cost,
    /// as tslearn's `dtw_subsequence_path` returns it.
    pub cost: f64,
    /// The cells `(i, j)`, query sample `i` meeting series sample `j`, from
    /// `(0, start)` to `(m - 1, end)`; each step adds 1 to `i`, to `j` or to
    /// both.
    pub path: Vec<(usize, usize)>,
}

/// Samples read (and checked) at a time: `BLOCK * m` cells between two
/// looks for an interrupt, a few milliseconds for a query of hundreds.
const BLOCK: usize = 1 << 14;

/// The best match of the whole `query` (`m x dims`, one row a sample)
/// anywhere in `series` (`N` samples of `dims` values: an array, a slice
/// or a [`super::SeriesFile`] read block by block), under DTW with a free
/// start and a free end in the series (the module's recurrence).
///
/// Any lengths: the match may be shorter than the query (several of the
/// query's samples meeting one of the series'). Ties: the earliest end
/// among equal costs; along the path, the diagonal step, then the step
/// from the query's previous sample, then the one from the series'
/// previous sample, which gives tslearn's path.
///
/// Memory: one column of the recurrence (`m` costs and starts) and a block
/// of the series; then the path's, that of [`crate::dtw_path`] for the
/// query against `series[start..=end]` (linear in their lengths where the
/// pair is large). Time: `m * N` cells on one core (`Device::Cpu`), or on
/// the GPU (`Device::Gpu`, the series copied there in chunks as it is
/// read; `Device::Auto` where one is usable and `m >= 8` and `m * N >=
/// 2^24`, else the CPU): the same match and cost, bit for bit, and the
/// same path (computed on the CPU). Interrupted by [`crate::interrupt`]
/// between blocks (on the GPU, between chunks and passes).
///
/// Errors: an empty query or series, samples of 0 or of different
/// dimensions, a NaN or infinity in the query or the series (naming its
/// sample and dimension), a cost beyond `f64` ([`Error::Overflow`]);
/// `Device::Gpu` without a usable GPU, and the GPU's errors.
///
/// ```
/// use ndarray::Array2;
/// use timewarp::search::subsequence_alignment;
/// use timewarp::Device;
///
/// let series = [0.0, 5.0, 1.0, 2.0, 2.0, 3.0, 9.0];
/// let query = Array2::from_shape_vec((3, 1), vec![1.0, 2.0, 3.0]).unwrap();
/// let found = subsequence_alignment(query.view(), &series[..], Device::Cpu)?;
/// assert_eq!((found.start, found.end, found.cost), (2, 5, 0.0));
/// assert_eq!(found.path, [(0, 2), (1, 3), (1, 4), (2, 5)]);
/// # Ok::<(), timewarp::Error>(())
/// ```
pub fn subsequence_alignment<S: SeriesSource + ?Sized>(
    query: ArrayView2<f64>,
    series: &S,
    device: Device,
) -> Result<SubsequenceAlignment> {
    let flat = checked_query(query, series)?;
    let _running = Running::start();
    let on_gpu = match device {
        Device::Cpu => None,
        Device::Gpu => Some(Gpu::get()?),
        Device::Auto => auto_gpu(query.nrows(), series.len()),
    };
    let best = match (on_gpu, series.dims()) {
        (Some(found), _) => super::subsequence_gpu::on_gpu(&flat, series, found)?,
        (None, 1) => best_end(&flat, One, series)?,
        (None, dims) => best_end(&flat, Many(dims), series)?,
    };
    if !best.cost.is_finite() {
        return Err(Error::Overflow {
            precision: "float64",
        });
    }
    let mut window = Vec::new();
    series.read(best.start, best.end - best.start + 1, &mut window)?;
    let window = Array2::from_shape_vec((best.end - best.start + 1, series.dims()), window)
        .expect("whole samples");
    let options = ComputeOptions::on(Device::Cpu);
    let alignment = crate::dtw_path(query, window.view(), Dtw::new(), &options)?;
    let path = alignment.path.iter().map(|&(i, j)| (i, best.start + j));
    Ok(SubsequenceAlignment {
        start: best.start,
        end: best.end,
        cost: best.cost.sqrt(),
        path: path.collect(),
    })
}

/// The GPU `Device::Auto` aligns a query of `m` samples in a series of `n`
/// on: the first, when it is usable, `m >= 8` and `m * n >= 2^24`.
fn auto_gpu(m: usize, n: usize) -> Option<&'static Gpu> {
    if !alignment_auto_on_gpu(m, n) {
        return None;
    }
    Gpu::get().ok()
}

/// The query as flat samples, after the checks the function documents.
fn checked_query<S: SeriesSource + ?Sized>(query: ArrayView2<f64>, series: &S) -> Result<Vec<f64>> {
    let (m, dims) = query.dim();
    if m == 0 {
        return Err(Error::InvalidInput("the query is empty".into()));
    }
    if series.is_empty() {
        return Err(Error::InvalidInput("the series is empty".into()));
    }
    if dims == 0 {
        return Err(Error::InvalidInput(
            "the query has samples of 0 dimensions".into(),
        ));
    }
    if dims != series.dims() {
        return Err(Error::DimensionMismatch {
            first: dims,
            second: series.dims(),
        });
    }
    if let Some(((i, k), v)) = query.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "the query has a non-finite value ({v}) at sample {i}, dimension {k}"
        )));
    }
    Ok(query.iter().copied().collect())
}

/// The forward pass over the whole series, block by block.
fn best_end<D: Dims, S: SeriesSource + ?Sized>(
    query: &[f64],
    dims: D,
    series: &S,
) -> Result<BestEnd> {
    let m = query.len() / dims.get();
    let mut column = Column::new(m);
    let mut best = BestEnd {
        start: 0,
        end: 0,
        cost: f64::INFINITY,
    };
    let mut block = Vec::with_capacity(BLOCK * dims.get());
    for first in (0..series.len()).step_by(BLOCK) {
        interrupt::check()?;
        series.read(first, BLOCK.min(series.len() - first), &mut block)?;
        check_finite(&block, first, dims.get())?;
        for (k, sample) in block.chunks_exact(dims.get()).enumerate() {
            let j = first + k;
            column.advance(query, dims, sample, j);
            // Strictly less: the earliest end on a tie.
            let last = column.costs[m - 1];
            if last < best.cost {
                let start = column.starts[m - 1];
                best = BestEnd {
                    start,
                    end: j,
                    cost: last,
                };
            }
        }
    }
    Ok(best)
}

/// One column of the recurrence: each query sample's accumulated cost and
/// the series column where that cell's best path starts. A column depends
/// only on the one before it and on one series sample; the GPU's kernel
/// runs the same update, its lanes each holding a few rows of the column
/// and passing the last down a warp (`launch::subsequence`).
pub(crate) struct Column {
    pub(crate) costs: Vec<f64>,
    pub(crate) starts: Vec<usize>,
}

impl Column {
    /// The column before the series' first: the infinite boundary.
    pub(crate) fn new(m: usize) -> Self {
        Column {
            costs: vec![f64::INFINITY; m],
            starts: vec![0; m],
        }
    }

    /// Column `j - 1` becomes column `j`, of series sample `sample`.
    #[inline]
    pub(crate) fn advance<D: Dims>(&mut self, query: &[f64], dims: D, sample: &[f64], j: usize) {
        let cells = query
            .chunks_exact(dims.get())
            .zip(self.costs.iter_mut().zip(self.starts.iter_mut()));
        // `up`: the cell just computed; `diagonal`: the previous column's
        // cell above this row. Row 0 starts afresh: its diagonal is the
        // boundary row's 0, at this column.
        let mut up = (f64::INFINITY, 0);
        let mut diagonal = (0.0, j);
        for (row, (cost_here, start_here)) in cells {
            let left = (*cost_here, *start_here);
            let (reached, start) = preferred(diagonal, up, left);
            up = (cost(row, 0, sample, 0, dims) + reached, start);
            (*cost_here, *start_here) = up;
            diagonal = left;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::preferred;

    #[test]
    fn the_two_choices_are_the_three_way_tie_rule() {
        let values = [0.0, 1.0, 2.0, f64::INFINITY];
        for diagonal in values {
            for up in values {
                for left in values {
                    let rule = if diagonal <= up && diagonal <= left {
                        0
                    } else if up <= left {
                        1
                    } else {
                        2
                    };
                    let (value, picked) = preferred((diagonal, 0), (up, 1), (left, 2));
                    assert_eq!((picked, value), (rule, [diagonal, up, left][rule]));
                }
            }
        }
    }
}
