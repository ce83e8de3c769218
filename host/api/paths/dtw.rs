//! DTW's warping path with a matrix of steps: one byte per cell of the
//! pair, or per cell of its Sakoe-Chiba band, and two rows of costs; and
//! its divide and conquer in linear memory ([`DtwPair`]).

use super::check_pair;
use super::hirschberg::{least, Pass, PassSeries, PathPair, SubPair};
use super::types::{Alignment, Samples, Step};
use crate::{Error, Float, Result};
use ndarray::{s, ArrayView2};
use timewarp_kernels::DtwParams;

/// The columns `lo..=hi` of 0-based row `i` that a band of radius `r`
/// allows for lengths `n`, `m` (all of them without a band): the band of
/// `Dtw::with_band`, widened by the length difference.
pub(super) fn band_columns(i: usize, n: usize, m: usize, band: Option<usize>) -> (usize, usize) {
    match band {
        None => (0, m - 1),
        Some(r) => {
            let lo = i.saturating_sub(r.saturating_add(n.saturating_sub(m)));
            let hi = i.saturating_add(r).saturating_add(m.saturating_sub(n));
            (lo, hi.min(m - 1))
        }
    }
}

/// The cells the steps' matrix holds: all `n * m`, or the band's.
pub(super) fn cells(n: usize, m: usize, band: Option<usize>) -> u128 {
    match band {
        None => n as u128 * m as u128,
        Some(_) => (0..n)
            .map(|i| {
                let (lo, hi) = band_columns(i, n, m, band);
                (hi - lo + 1) as u128
            })
            .sum(),
    }
}

/// The optimal path by traceback over the recorded steps, ties by
/// [`Step::preferred`]; the value is the last cell's cost (an error if it
/// overflowed the precision).
pub(super) fn traceback<T: Float>(
    x: &Samples<T>,
    y: &Samples<T>,
    band: Option<usize>,
) -> Result<Alignment<T>> {
    let (n, m) = (x.len(), y.len());
    let mut steps: Vec<Step> = Vec::with_capacity(cells(n, m, band) as usize);
    // Where each row's steps start, and the row's first column.
    let mut row_start = Vec::with_capacity(n);
    let mut previous = vec![T::INFINITY; m];
    let mut current = vec![T::INFINITY; m];
    let mut previous_range = (0, 0);
    for i in 0..n {
        // A row is at most a few milliseconds: stops promptly on Ctrl-C.
        crate::interrupt::check()?;
        let (lo, hi) = band_columns(i, n, m, band);
        row_start.push((steps.len(), lo));
        // This row's buffer held row i - 2: clear what it wrote.
        current[previous_range.0..=previous_range.1].fill(T::INFINITY);
        for j in lo..=hi {
            let diagonal = match (i, j) {
                (0, 0) => T::ZERO,
                (0, _) | (_, 0) => T::INFINITY,
                _ => previous[j - 1],
            };
            let up = if i > 0 { previous[j] } else { T::INFINITY };
            let left = if j > lo { current[j - 1] } else { T::INFINITY };
            let (step, best) = Step::preferred(diagonal, up, left);
            steps.push(step);
            current[j] = x.squared_distance(i, y, j) + best;
        }
        previous_range = if i == 0 {
            (lo, hi)
        } else {
            band_columns(i - 1, n, m, band)
        };
        std::mem::swap(&mut previous, &mut current);
    }
    let value = previous[m - 1];
    if !value.is_finite() {
        return Err(Error::Overflow { precision: T::NAME });
    }
    let mut path = Vec::with_capacity(n + m - 1);
    let (mut i, mut j) = (n - 1, m - 1);
    path.push((i, j));
    while (i, j) != (0, 0) {
        let (start, lo) = row_start[i];
        (i, j) = match steps[start + j - lo] {
            Step::Diagonal => (i - 1, j - 1),
            Step::Up => (i - 1, j),
            Step::Left => (i, j - 1),
        };
        path.push((i, j));
    }
    path.reverse();
    Ok(Alignment {
        path,
        value,
        on_gpu: false,
    })
}

/// DTW's divide and conquer of one unbanded pair (`hirschberg`):
/// a [`SubPair`] is a rectangle of cells, from its first cell to its last.
/// It splits after its middle column `c`: the forward pass gives the cost
/// of reaching each cell of column `c`, the backward pass (the forward
/// pass over the reversed series, exact for DTW since its costs belong to
/// cells) the cost from each cell of column `c + 1` to the end, and the
/// path crosses from `(i, c)` to `(i, c + 1)` or `(i + 1, c + 1)` where
/// their sum is least (the lowest such row, the diagonal step first).
pub struct DtwPair<'a, T: Float> {
    x: ArrayView2<'a, T>,
    y: ArrayView2<'a, T>,
    series: PassSeries<T, DtwParams>,
}

impl<'a, T: Float> DtwPair<'a, T> {
    /// The pair `x`, `y` (`length x dims` each), checked as `distance`
    /// checks it.
    pub fn new(x: ArrayView2<'a, T>, y: ArrayView2<'a, T>) -> Result<Self> {
        check_pair(x, y)?;
        let flat = |series: ArrayView2<T>| series.iter().copied().collect::<Vec<_>>();
        let values = [
            flat(x),
            flat(y),
            flat(x.slice(s![..;-1, ..])),
            flat(y.slice(s![..;-1, ..])),
        ];
        let series = PassSeries::new(DtwParams::new(None), x.ncols(), 0, values, None);
        Ok(Self { x, y, series })
    }
}

impl<T: Float> PathPair<T> for DtwPair<'_, T> {
    type Params = DtwParams;
    type Step = (usize, usize);
    type Path = Alignment<T>;

    fn pass_series(&self) -> &PassSeries<T, DtwParams> {
        &self.series
    }

    fn whole(&self) -> SubPair {
        SubPair {
            rows: 0..self.x.nrows(),
            cols: 0..self.y.nrows(),
        }
    }

    fn is_leaf(&self, part: &SubPair, leaf_cells: usize) -> bool {
        let (rows, cols) = (part.rows.len(), part.cols.len());
        rows == 1 || cols == 1 || (rows as u128 * cols as u128) <= leaf_cells as u128
    }

    /// The forward pass to the middle column, and the backward pass (over
    /// the reversed series) to the column after it.
    fn passes(&self, part: &SubPair) -> [Pass; 2] {
        let (n, m) = (self.x.nrows(), self.y.nrows());
        let c = middle(part);
        [
            Pass {
                rows: part.rows.clone(),
                cols: part.cols.start..c + 1,
                reversed: false,
            },
            Pass {
                rows: n - part.rows.end..n - part.rows.start,
                cols: m - part.cols.end..m - (c + 1),
                reversed: true,
            },
        ]
    }

    fn halves(&self, part: &SubPair, forward: &[T], backward: &[T]) -> Result<[SubPair; 2]> {
        let n = part.rows.len();
        // The cost from (i, c + 1) to the end, the cell's own cost included.
        let to_end = |i: usize| backward[n - 1 - i];
        // Each row's crossings: the diagonal step (but from the last row),
        // then the step to the right.
        let crossings = (0..n).flat_map(|i| {
            let diagonal = (i + 1 < n).then(|| (i, true, forward[i] + to_end(i + 1)));
            diagonal
                .into_iter()
                .chain([(i, false, forward[i] + to_end(i))])
        });
        let crossings: Vec<_> = crossings.collect();
        let (_, k) = least(crossings.iter().map(|&(_, _, total)| total))?;
        let (row, is_diagonal, _) = crossings[k];
        let (row, c) = (part.rows.start + row, middle(part));
        Ok([
            SubPair {
                rows: part.rows.start..row + 1,
                cols: part.cols.start..c + 1,
            },
            SubPair {
                rows: row + usize::from(is_diagonal)..part.rows.end,
                cols: c + 1..part.cols.end,
            },
        ])
    }

    fn leaf(&self, part: &SubPair) -> Result<(Vec<(usize, usize)>, T)> {
        let leaf = traceback(
            &Samples::new(self.x.slice(s![part.rows.clone(), ..])),
            &Samples::new(self.y.slice(s![part.cols.clone(), ..])),
            None,
        )?;
        let (row0, col0) = (part.rows.start, part.cols.start);
        let path = leaf.path.iter().map(|&(i, j)| (i + row0, j + col0));
        Ok((path.collect(), leaf.value))
    }

    fn path(&self, path: Vec<(usize, usize)>, value: T) -> Alignment<T> {
        Alignment {
            path,
            value,
            on_gpu: false,
        }
    }
}

/// The column a sub-pair is split after.
fn middle(part: &SubPair) -> usize {
    part.cols.start + (part.cols.len() - 1) / 2
}
