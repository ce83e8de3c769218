//! Paths in memory linear in the lengths: Hirschberg's divide and conquer,
//! one recursion for DTW and TWED. A measure's pair ([`PathPair`]: DTW's
//! `DtwPair`, TWED's `TwedPair`) says where a sub-pair splits, which two
//! passes find where the path crosses the split, how the halves meet there
//! and how a leaf is traced; a [`LastColumn`] provider (the CPU's here, the
//! GPU's in `on_gpu`) computes the passes' last columns over the series the
//! pair lays out for them ([`PassSeries`]).

use crate::{Error, Float, Result};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Mutex;
use timewarp_kernels::{Neighbours, Recurrence, Series, Window};

/// Sub-pairs of at most this many cells are solved by a full-matrix
/// traceback: one byte a cell, so a leaf takes 16 MiB, small beside the
/// caches' worth of work a split saves, and a few leaves run at once.
pub const HIRSCHBERG_LEAF_CELLS: usize = 1 << 24;

/// The last columns of passes over one pair's [`PassSeries`]: for the
/// sub-series `x[rows]` and `y[cols]` (of the forward series, or of the
/// reversed ones when `reversed`, each counted from its own first stored
/// sample), the last column `D[i][cols.len()]` for every row `i` of the
/// measure's matrix of the two (1-based, row and column 0 the boundary: 0
/// at the corner, infinite elsewhere). The recursion calls it from several
/// threads at once.
pub trait LastColumn<T: Send>: Sync {
    fn last_column(&self, rows: Range<usize>, cols: Range<usize>, reversed: bool)
        -> Result<Vec<T>>;

    /// The last column of each pass, in order: all the passes of one level
    /// of the recursion, which may run at once (by default on all cores).
    fn last_columns(&self, passes: &[Pass]) -> Result<Vec<Vec<T>>> {
        passes
            .par_iter()
            .map(|pass| self.last_column(pass.rows.clone(), pass.cols.clone(), pass.reversed))
            .collect()
    }
}

/// One pass of the recursion: [`LastColumn::last_column`]'s arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pass {
    pub rows: Range<usize>,
    pub cols: Range<usize>,
    pub reversed: bool,
}

/// A part of the pair the path runs through from its first corner to its
/// last: ranges of DTW's cells, or of TWED's nodes (each pair's
/// documentation says which).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubPair {
    pub rows: Range<usize>,
    pub cols: Range<usize>,
}

/// What the divide and conquer needs of a measure, for one pair.
pub trait PathPair<T: Float>: Sync {
    /// The kernel measure the passes compute.
    type Params: Recurrence<T> + Copy + Send + Sync;
    /// One step of the path, in the pair's indices.
    type Step: Send;
    /// The whole path with its value.
    type Path;

    /// The series the passes run over, with the passes' measure.
    fn pass_series(&self) -> &PassSeries<T, Self::Params>;

    /// The whole pair.
    fn whole(&self) -> SubPair;

    /// Whether `part` is traced whole: at most `leaf_cells` cells, or too
    /// narrow to split.
    fn is_leaf(&self, part: &SubPair, leaf_cells: usize) -> bool;

    /// The forward pass to the split and the backward pass from the end to
    /// the split (a forward pass over the reversed series).
    fn passes(&self, part: &SubPair) -> [Pass; 2];

    /// The two halves the path leaves, where the passes' last columns
    /// (`passes`' order) say it crosses the split; an error if no crossing
    /// is finite (the value overflowed the precision).
    fn halves(&self, part: &SubPair, forward: &[T], backward: &[T]) -> Result<[SubPair; 2]>;

    /// A leaf's path (its steps in the pair's indices) and its cost.
    fn leaf(&self, part: &SubPair) -> Result<(Vec<Self::Step>, T)>;

    /// The path of the leaves' steps, in order, and its value.
    fn path(&self, steps: Vec<Self::Step>, value: T) -> Self::Path;
}

/// The series a provider's passes run over, as a measure lays them out:
/// `x`, `y`, reversed `x` and reversed `y` (values sample-major; TWED's
/// with timestamps and one sample before each pass's first), and the
/// measure the passes compute.
pub struct PassSeries<T, P> {
    values: [Vec<T>; 4],
    times: Option<[Vec<T>; 4]>,
    dims: usize,
    /// Samples before a pass's first that the measure reads.
    reads_before: usize,
    params: P,
}

impl<T: Float, P: Copy> PassSeries<T, P> {
    /// `values` (and `times`, one per sample) of `x`, `y`, reversed `x`
    /// and reversed `y`, `dims` values a sample; `params` reads
    /// `reads_before` samples before a pass's first.
    pub(super) fn new(
        params: P,
        dims: usize,
        reads_before: usize,
        values: [Vec<T>; 4],
        times: Option<[Vec<T>; 4]>,
    ) -> Self {
        Self {
            values,
            times,
            dims,
            reads_before,
            params,
        }
    }

    pub fn params(&self) -> P {
        self.params
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The values of `x`, `y`, reversed `x` and reversed `y`.
    pub fn values(&self) -> [&[T]; 4] {
        self.values.each_ref().map(Vec::as_slice)
    }

    /// Their timestamps, if the measure reads any.
    pub fn times(&self) -> Option<[&[T]; 4]> {
        self.times.as_ref().map(|t| t.each_ref().map(Vec::as_slice))
    }

    /// Samples of the series of `x` (`which` 0 or 2) or `y` (1 or 3).
    fn len(&self, which: usize) -> usize {
        self.values[which].len() / self.dims
    }

    /// The series of `x` and of `y` that `pass` reads: 0 and 1, or 2 and 3.
    pub fn series_of(pass: &Pass) -> (usize, usize) {
        if pass.reversed {
            (2, 3)
        } else {
            (0, 1)
        }
    }

    /// An error unless `pass` is non-empty and within the series, with the
    /// samples before it that the measure reads.
    pub fn check(&self, pass: &Pass) -> Result<()> {
        let (x, y) = Self::series_of(pass);
        let fits = |range: &Range<usize>, which| {
            range.start < range.end
                && range.start >= self.reads_before
                && range.end <= self.len(which)
        };
        if fits(&pass.rows, x) && fits(&pass.cols, y) {
            Ok(())
        } else {
            Err(Error::InvalidInput(format!(
                "a pass over rows {:?} and columns {:?} is not within the pair's series \
                 ({} and {} samples, {} before each pass read)",
                pass.rows,
                pass.cols,
                self.len(x),
                self.len(y),
                self.reads_before
            )))
        }
    }

    /// The kernels' view of samples `range` of series `which`.
    ///
    /// # Safety
    /// `range` passed [`PassSeries::check`]; the view is used while `self`
    /// lives.
    unsafe fn view(&self, which: usize, range: Range<usize>) -> Series<T> {
        Series {
            values: self.values[which].as_ptr().add(range.start * self.dims),
            times: self
                .times
                .as_ref()
                .map_or(std::ptr::null(), |t| t[which].as_ptr().add(range.start)),
            len: range.len(),
            dims: self.dims,
        }
    }
}

/// The CPU's [`LastColumn`] of a pair: one rolling row of the measure's
/// own cell update (the kernels' code, as the GPU runs it).
pub struct CpuLastColumn<'a, T, P> {
    series: &'a PassSeries<T, P>,
}

impl<'a, T: Float, P: Copy> CpuLastColumn<'a, T, P> {
    pub fn new<Q: PathPair<T, Params = P>>(pair: &'a Q) -> Self {
        Self {
            series: pair.pass_series(),
        }
    }
}

impl<T: Float, P: Recurrence<T> + Copy + Sync> LastColumn<T> for CpuLastColumn<'_, T, P> {
    fn last_column(
        &self,
        rows: Range<usize>,
        cols: Range<usize>,
        reversed: bool,
    ) -> Result<Vec<T>> {
        let pass = Pass {
            rows,
            cols,
            reversed,
        };
        self.series.check(&pass)?;
        let (x, y) = PassSeries::<T, P>::series_of(&pass);
        // SAFETY: the pass was checked; the views live in this call.
        unsafe {
            let (a, b) = (
                self.series.view(x, pass.rows),
                self.series.view(y, pass.cols),
            );
            last_column(&self.series.params, &a, &b)
        }
    }
}

/// `D[i][b.len]` for every row `i` of the unbanded matrix of `a` against
/// `b`, row by row; [`Error::Interrupted`] if interrupted (checked every
/// row: a pass may take seconds).
///
/// # Safety
/// The series are valid for the measure.
unsafe fn last_column<T: Float, P: Recurrence<T>>(
    measure: &P,
    a: &Series<T>,
    b: &Series<T>,
) -> Result<Vec<T>> {
    debug_assert!(!measure.window().is_banded(), "passes are unbanded");
    let columns: Vec<P::Column> = (1..=b.len).map(|j| measure.column(b, j)).collect();
    // Row i - 1, then row i, of D[i][0..=b.len].
    let mut cells = vec![T::INFINITY; b.len + 1];
    cells[0] = T::ZERO;
    let mut column = Vec::with_capacity(a.len);
    let mut row = measure.row(a, 1);
    for i in 1..=a.len {
        crate::interrupt::check()?;
        if i > 1 {
            row = measure.next_row(a, &row, i);
        }
        let mut diag = cells[0];
        cells[0] = T::INFINITY;
        let mut left = T::INFINITY;
        for (cell, column) in cells[1..].iter_mut().zip(&columns) {
            let up = *cell;
            *cell = measure.cell(&row, column, a, b, Neighbours { diag, up, left });
            diag = up;
            left = *cell;
        }
        column.push(cells[b.len]);
    }
    Ok(column)
}

/// The optimal path of `pair` in memory linear in its lengths, and its
/// value: each part is split in two where the path crosses its split
/// ([`PathPair::passes`], [`PathPair::halves`]), down to leaves of at most
/// `leaf_cells` cells (or too narrow to split), which a full-matrix
/// traceback solves. The value is the sum of the leaves' (in f64).
///
/// The parts are split a level at a time: the provider gets all passes of
/// a level in one call ([`LastColumn::last_columns`]), so a GPU can run
/// them together, while the leaves found so far are traced on the other
/// CPU cores. Where several paths are optimal it may pick another than the
/// full-matrix traceback; the value is the same.
pub fn hirschberg<T: Float, Q: PathPair<T>, P: LastColumn<T>>(
    pair: &Q,
    provider: &P,
    leaf_cells: usize,
) -> Result<Q::Path> {
    // Each leaf's steps keyed by its first corner (the leaves' order along
    // the path), and its cost.
    let leaves = Mutex::new(Vec::new());
    let trace = |part: SubPair| -> Result<()> {
        let (steps, value) = pair.leaf(&part)?;
        let mut leaves = leaves
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        leaves.push(((part.rows.start, part.cols.start), steps, value));
        Ok(())
    };
    let failure = Mutex::new(None);
    rayon::scope(|scope| -> Result<()> {
        let mut level = vec![pair.whole()];
        while !level.is_empty() {
            crate::interrupt::check()?;
            let (done, split): (Vec<_>, Vec<_>) = level
                .into_iter()
                .partition(|part| pair.is_leaf(part, leaf_cells));
            for part in done {
                let (trace, failure) = (&trace, &failure);
                scope.spawn(move |_| {
                    if let Err(error) = trace(part) {
                        *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(error);
                    }
                });
            }
            let passes: Vec<_> = split.iter().flat_map(|part| pair.passes(part)).collect();
            let columns = provider.last_columns(&passes)?;
            level = Vec::with_capacity(2 * split.len());
            for (part, columns) in split.iter().zip(columns.chunks_exact(2)) {
                level.extend(pair.halves(part, &columns[0], &columns[1])?);
            }
        }
        Ok(())
    })?;
    if let Some(error) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(error);
    }
    let mut leaves = leaves.into_inner().unwrap_or_else(|p| p.into_inner());
    leaves.sort_unstable_by_key(|(start, _, _)| *start);
    let value = leaves.iter().map(|(_, _, value)| value.to_f64()).sum();
    let steps = leaves.into_iter().flat_map(|(_, steps, _)| steps).collect();
    Ok(pair.path(steps, T::from_f64(value)))
}

/// The least of `totals` (the first on ties) and where it is, or the
/// overflow error if none is finite.
pub(super) fn least<T: Float>(totals: impl Iterator<Item = T>) -> Result<(T, usize)> {
    let mut best: Option<(T, usize)> = None;
    for (k, total) in totals.enumerate() {
        if best.is_none_or(|(least, _)| total < least) {
            best = Some((total, k));
        }
    }
    match best {
        Some((total, k)) if total.is_finite() => Ok((total, k)),
        _ => Err(Error::Overflow { precision: T::NAME }),
    }
}
