//! One long pair on every core: the cost matrix cut into tiles, the tiles
//! of one anti-diagonal of tiles computed at once (rayon), each from the
//! borders that the tiles above it and to its left left behind. Memory is
//! one row and one column of the matrix, whatever the tiling.
//!
//! Every cell is the measure's own update of the same three neighbours as
//! in the row driver, so the value is bit for bit the row driver's (and,
//! over lanes, the lockstep driver's): only the order of independent cells
//! changes. Within a tile, [`STRIP`] rows advance together, each one column
//! behind the row above, so that the processor overlaps their cells'
//! dependency chains (a row alone waits on each cell's left neighbour).
//!
//! A Sakoe-Chiba band (any [`Window`]) skips the tiles it leaves out
//! entirely; cells outside it are infinite, as in the row driver. Each
//! tile checks for an interrupt first, so that a long pair stops within a
//! tile's time of [`crate::interrupt`].

use crate::interrupt;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Mutex;
use timewarp_kernels::{Neighbours, Real, Recurrence, Series, Window};

/// Rows and columns of a tile: enough cells (tens of microseconds) to
/// amortise a task's scheduling, few enough that a pair of some thousand
/// samples has many tiles on most anti-diagonals.
pub(super) const TILE: usize = 256;

/// Rows of a tile that advance together (see the module's notes): enough
/// independent cells at each step to hide a cell's latency, for DTW's
/// short chains as for Soft-DTW's exponentials and logarithm (strips of 4
/// rows gave DTW 1.50-1.71x on two threads, 8 up to 1.89x).
const STRIP: usize = 8;

/// How a tile's code is compiled: for the processor the crate targets, or
/// for AVX2 and FMA (the lanes' polynomials need FMA in hardware: see
/// `lanes`; only where [`super::units::lockstep_available`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Build {
    Plain,
    Avx2,
}

/// The measure and the pair, shared by the tasks of the anti-diagonals.
struct Pair<'a, T, M: ?Sized> {
    measure: &'a M,
    a: Series<T>,
    b: Series<T>,
    tile: (usize, usize),
}

// SAFETY: the series are only read, by every task, while the caller of
// `wavefront_value` keeps them alive (its contract).
unsafe impl<T, M: Sync + ?Sized> Sync for Pair<'_, T, M> {}

/// The value of the pair `a`, `b` (cell `(a.len, b.len)` of the measure's
/// matrix), its tiles of `tile.0 x tile.1` cells computed on rayon's
/// threads, an anti-diagonal of tiles at a time. Zero if interrupted (the
/// caller checks [`interrupt::check`] and discards it).
///
/// # Safety
/// The series are non-empty and valid for the measure while this runs;
/// with [`Build::Avx2`], the processor has AVX2 and FMA.
pub(super) unsafe fn wavefront_value<T: Real + Send, M: Recurrence<T> + Sync + ?Sized>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    tile: (usize, usize),
    build: Build,
) -> T {
    let (n, m) = (a.len, b.len);
    let (rows, cols) = (n.div_ceil(tile.0), m.div_ceil(tile.1));
    let pair = Pair {
        measure,
        a: *a,
        b: *b,
        tile,
    };
    // The row above each column of tiles (cells of its columns), and the
    // column left of each row of tiles (its rows and the one above), as the
    // last tile computed there left them: at first the matrix's border.
    let above: Vec<Mutex<Vec<T>>> = (0..cols)
        .map(|c| Mutex::new(vec![T::INFINITY; pair.cols(c).len()]))
        .collect();
    let left: Vec<Mutex<Vec<T>>> = (0..rows)
        .map(|r| {
            let mut column = vec![T::INFINITY; pair.rows(r).len() + 1];
            if r == 0 {
                column[0] = T::ZERO;
            }
            Mutex::new(column)
        })
        .collect();
    // The columns of tiles each row of tiles meets the window in.
    let spans: Vec<(usize, usize)> = (0..rows).map(|r| pair.tile_span(r)).collect();
    for diagonal in 0..rows + cols - 1 {
        if interrupt::requested() {
            return T::ZERO;
        }
        let first = diagonal.saturating_sub(cols - 1);
        let last = diagonal.min(rows - 1);
        let tiles: Vec<(usize, usize)> = (first..=last)
            .map(|r| (r, diagonal - r))
            .filter(|&(r, c)| spans[r].0 <= c && c <= spans[r].1)
            .collect();
        tiles.par_iter().with_max_len(1).for_each(|&(r, c)| {
            if interrupt::requested() {
                return;
            }
            // The tiles of one anti-diagonal are in distinct rows and
            // columns of tiles: no lock is ever contended.
            let mut above = above[c].lock().unwrap_or_else(|p| p.into_inner());
            let mut left = left[r].lock().unwrap_or_else(|p| p.into_inner());
            // SAFETY: the series are valid, and the processor has AVX2
            // and FMA if asked for (this function's contract); the borders
            // have the tile's sizes.
            unsafe {
                match build {
                    #[cfg(target_arch = "x86_64")]
                    Build::Avx2 => tile_avx2(&pair, (r, c), &mut above, &mut left),
                    _ => pair.tile(r, c, &mut above, &mut left),
                }
            }
        });
    }
    let corner = above[cols - 1].lock().unwrap_or_else(|p| p.into_inner());
    corner[corner.len() - 1]
}

impl<T: Real, M: Recurrence<T> + ?Sized> Pair<'_, T, M> {
    /// The matrix's rows (1-based) of row of tiles `r`.
    fn rows(&self, r: usize) -> Range<usize> {
        r * self.tile.0 + 1..((r + 1) * self.tile.0).min(self.a.len) + 1
    }

    /// The matrix's columns of column of tiles `c`.
    fn cols(&self, c: usize) -> Range<usize> {
        c * self.tile.1 + 1..((c + 1) * self.tile.1).min(self.b.len) + 1
    }

    /// The columns of tiles that row of tiles `r` computes: every one
    /// without a band; with one, those with cells of the window, and the
    /// one before them, which passes the cell above its top-right corner
    /// on to the first (it may be in the window when the tile is not).
    /// The first after the last if none.
    fn tile_span(&self, r: usize) -> (usize, usize) {
        let window = self.measure.window();
        let (n, m) = (self.a.len, self.b.len);
        let (mut lo, mut hi) = (m + 1, 0);
        for i in self.rows(r) {
            let (first, last) = window.columns(i, n, m);
            if first <= last {
                lo = lo.min(first);
                hi = hi.max(last);
            }
        }
        if lo > hi {
            return (1, 0);
        }
        (
            ((lo - 1) / self.tile.1).saturating_sub(1),
            (hi - 1) / self.tile.1,
        )
    }

    /// Whether cell `(i, j)` is within the window; the matrix's border
    /// (row or column 0) is not, but is never read through this.
    fn allowed(&self, i: usize, j: usize) -> bool {
        let (first, last) = self.measure.window().columns(i, self.a.len, self.b.len);
        first <= j && j <= last
    }

    /// Tile `(r, c)`: from `above` (row `r0 - 1`, the tile's columns) and
    /// `left` (column `c0 - 1`, rows `r0 - 1 ..= r1`), leaves its last row
    /// in `above` and its last column, with the cell above it, in `left`.
    ///
    /// # Safety
    /// The series are valid; the borders have the tile's sizes.
    #[inline(always)]
    unsafe fn tile(&self, r: usize, c: usize, above: &mut [T], left: &mut [T]) {
        let (rows, cols) = (self.rows(r), self.cols(c));
        let (r0, c0) = (rows.start, cols.start);
        let (measure, a, b) = (self.measure, &self.a, &self.b);
        let window = measure.window();
        if window.is_banded() {
            // A tile outside the window leaves its borders as they were:
            // the cells there read as infinite, as the row driver's.
            if r0 > 1 {
                for (j, cell) in cols.clone().zip(above.iter_mut()) {
                    if !self.allowed(r0 - 1, j) {
                        *cell = T::INFINITY;
                    }
                }
            }
            if c0 > 1 {
                for (i, cell) in (r0 - 1..rows.end).zip(left.iter_mut()) {
                    if i > 0 && !self.allowed(i, c0 - 1) {
                        *cell = T::INFINITY;
                    }
                }
            }
        }
        // The cell above the tile's top-right corner: the next tile's
        // corner.
        let next_corner = above[above.len() - 1];
        let (corner, column) = left.split_first_mut().expect("a corner and the rows");
        let (n, m) = (a.len, b.len);
        let meets = |i| {
            let (first, last) = window.columns(i, n, m);
            first.max(c0) <= last.min(cols.end - 1)
        };
        if window.is_banded() && !rows.clone().any(meets) {
            // No cell of the window: all infinite.
            above.fill(T::INFINITY);
            column.fill(T::INFINITY);
            *corner = next_corner;
            return;
        }
        let columns: Vec<M::Column> = cols.clone().map(|j| measure.column(b, j)).collect();
        let mut diag = *corner;
        let mut k = 0;
        while k < column.len() {
            let i = r0 + k;
            let rows = if column.len() - k >= STRIP { STRIP } else { 1 };
            // The cell left of the strip's last row: the next strip's
            // diagonal neighbour, before the strip replaces it.
            let next_diag = column[k + rows - 1];
            let strip_left = &mut column[k..k + rows];
            let args = (measure, (a, b), (i, c0), &columns[..]);
            if rows == STRIP {
                strip::<T, M, STRIP>(args, above, diag, strip_left);
            } else {
                strip::<T, M, 1>(args, above, diag, strip_left);
            }
            diag = next_diag;
            k += rows;
        }
        *corner = next_corner;
    }
}

/// [`Pair::tile`] compiled for AVX2 and FMA.
///
/// # Safety
/// As [`Pair::tile`]; the processor has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<T: Real, M: Recurrence<T> + ?Sized>(
    pair: &Pair<T, M>,
    (r, c): (usize, usize),
    above: &mut [T],
    left: &mut [T],
) {
    pair.tile(r, c, above, left)
}

/// What a strip reads: the measure, the pair, its first row and column
/// and the tile's columns.
type StripArgs<'a, T, M> = (
    &'a M,
    (&'a Series<T>, &'a Series<T>),
    (usize, usize),
    &'a [<M as Recurrence<T>>::Column],
);

/// Rows `i0 .. i0 + S` of a tile whose first column is `c0`: `above` is
/// their row above (left with their last row), `corner` the cell left of
/// that, `left` the cells left of the rows (left with the rows' last
/// cells). Row `q` runs `q` columns behind row 0, so the rows' cells at
/// one step are independent.
///
/// # Safety
/// As [`Recurrence::cell`]; `columns` and `above` have the tile's width,
/// `left` `S` values.
#[inline(always)]
unsafe fn strip<T: Real, M: Recurrence<T> + ?Sized, const S: usize>(
    (measure, (a, b), (i0, c0), columns): StripArgs<T, M>,
    above: &mut [T],
    corner: T,
    left: &mut [T],
) {
    let width = columns.len();
    let window = measure.window();
    let (n, m) = (a.len, b.len);
    let rows: [M::Row; S] = std::array::from_fn(|q| measure.row(a, i0 + q));
    // Each row's allowed columns as indices into the tile (all of them
    // without a band; `lo > hi` where none).
    let spans: [(usize, usize); S] = std::array::from_fn(|q| {
        let (first, last) = window.columns(i0 + q, n, m);
        (first.max(c0) - c0, (last + 1).saturating_sub(c0).min(width))
    });
    let mut state = Strip {
        diag: std::array::from_fn(|q| if q == 0 { corner } else { left[q - 1] }),
        west: std::array::from_fn(|q| left[q]),
        handed: [T::INFINITY; S],
        spans,
        // Whether some cell of the strip is outside the window.
        masked: spans.iter().any(|&(lo, hi)| lo > 0 || hi < width),
    };
    let args = (measure, (a, b), rows, columns);
    // The steps where some rows have not started or have ended, with the
    // bounds' tests, and between them those where every row has a cell,
    // without (and without the window's unless needed).
    let full = (S - 1).min(width)..width;
    for step in 0..full.start {
        state.edge(&args, above, step);
    }
    for step in full.clone() {
        if state.masked {
            for q in (0..S).rev() {
                state.cell::<M, true>(&args, above, q, step - q);
            }
        } else {
            for q in (0..S).rev() {
                state.cell::<M, false>(&args, above, q, step - q);
            }
        }
    }
    for step in full.end..width + S - 1 {
        state.edge(&args, above, step);
    }
    left.copy_from_slice(&state.west);
}

/// A strip's rows' state between steps: each row's diagonal and left
/// neighbours of its next cell, what each row computed last, and each
/// row's allowed columns of the tile.
struct Strip<T, const S: usize> {
    diag: [T; S],
    west: [T; S],
    /// Row q's last cell: row q + 1's cell above, on the next step.
    handed: [T; S],
    spans: [(usize, usize); S],
    masked: bool,
}

/// What a strip's cells read: the measure, the pair, the strip's rows and
/// the tile's columns.
type CellArgs<'a, T, M, const S: usize> = (
    &'a M,
    (&'a Series<T>, &'a Series<T>),
    [<M as Recurrence<T>>::Row; S],
    &'a [<M as Recurrence<T>>::Column],
);

impl<T: Real, const S: usize> Strip<T, S> {
    /// The cells of step `step` of the rows that have a cell there (the
    /// first and last steps, where some have not started or have ended).
    ///
    /// # Safety
    /// As [`Strip::cell`].
    #[inline(always)]
    unsafe fn edge<M: Recurrence<T> + ?Sized>(
        &mut self,
        args: &CellArgs<T, M, S>,
        above: &mut [T],
        step: usize,
    ) {
        for q in (0..S).rev() {
            if let Some(k) = step.checked_sub(q).filter(|&k| k < args.3.len()) {
                self.cell::<M, true>(args, above, q, k);
            }
        }
    }

    /// Row `q`'s cell in column `k` of the tile (infinite outside the
    /// window if `MASK`), the last row's written to `above`. Called from
    /// the last row up at each step, so that row q reads what row q - 1
    /// computed on the step before, before row q - 1 replaces it.
    ///
    /// # Safety
    /// As [`Recurrence::cell`]; `k` is within the tile.
    #[inline(always)]
    unsafe fn cell<M: Recurrence<T> + ?Sized, const MASK: bool>(
        &mut self,
        (measure, (a, b), rows, columns): &CellArgs<T, M, S>,
        above: &mut [T],
        q: usize,
        k: usize,
    ) {
        let up = if q == 0 { above[k] } else { self.handed[q - 1] };
        let neighbours = Neighbours {
            diag: self.diag[q],
            up,
            left: self.west[q],
        };
        let value = measure.cell(&rows[q], &columns[k], a, b, neighbours);
        let outside = MASK && self.masked && !(self.spans[q].0 <= k && k < self.spans[q].1);
        let value = if outside { T::INFINITY } else { value };
        self.diag[q] = up;
        self.west[q] = value;
        self.handed[q] = value;
        if q == S - 1 {
            above[k] = value;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::lanes::Lanes;
    use crate::cpu::lockstep::Lockstep;
    use crate::oracle;
    use ndarray::Array2;
    use timewarp_kernels::drivers::rows::{pair_value, RowPair};
    use timewarp_kernels::{DtwParams, SoftDtwParams, TwedParams};

    /// Values in `[-scale, scale)`, a linear congruential sequence (the
    /// tests need variety, not statistics).
    fn values(seed: u64, count: usize, scale: f64) -> Vec<f64> {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..count)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                scale * ((state >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
            })
            .collect()
    }

    fn series<T>(values: &[T], dims: usize) -> Series<T> {
        Series {
            values: values.as_ptr(),
            times: std::ptr::null(),
            len: values.len() / dims,
            dims,
        }
    }

    /// The row driver's value of the pair: the reference, cell for cell.
    fn rows<T: Real, M: Recurrence<T>>(measure: &M, a: &Series<T>, b: &Series<T>) -> T {
        let mut buffer = vec![T::ZERO; 2 * (b.len + 1)];
        let rows = RowPair {
            base: buffer.as_mut_ptr(),
            len: b.len + 1,
            stride: 1,
        };
        // SAFETY: the series are valid, the rows fit them.
        unsafe { pair_value(measure, a, b, rows) }
    }

    /// Shapes `(n, m, dims)`: single samples, unequal lengths, several
    /// dimensions, lengths on and beside the tiles' edges.
    const SHAPES: [(usize, usize, usize); 9] = [
        (1, 1, 1),
        (1, 9, 1),
        (9, 1, 2),
        (2, 3, 1),
        (12, 12, 1),
        (13, 11, 3),
        (40, 17, 1),
        (17, 40, 2),
        (64, 65, 1),
    ];

    /// Tile sizes: one cell, thin, square, and larger than some pairs.
    const TILES: [(usize, usize); 6] = [(1, 1), (1, 5), (5, 1), (3, 4), (8, 8), (256, 256)];

    /// Bands: none, 0 (the diagonal only: infinite for unequal lengths
    /// beyond the band's reach), 1 and 5.
    const BANDS: [Option<usize>; 4] = [None, Some(0), Some(1), Some(5)];

    /// The wavefront of every shape, tile size and band against the row
    /// driver (the same bits) and, as a check of both, the oracle.
    fn check<M, F>(make: F, oracle: impl Fn(&Array2<f64>, &Array2<f64>, Option<usize>) -> f64)
    where
        M: Recurrence<f64> + Sync,
        F: Fn(Option<usize>) -> Option<M>,
    {
        for (s, &(n, m, dims)) in SHAPES.iter().enumerate() {
            let x = values(2 * s as u64, n * dims, 3.0);
            let y = values(2 * s as u64 + 1, m * dims, 3.0);
            let (a, b) = (series(&x, dims), series(&y, dims));
            for band in BANDS {
                let Some(measure) = make(band) else { continue };
                let want = rows(&measure, &a, &b);
                let xa = Array2::from_shape_vec((n, dims), x.clone()).unwrap();
                let ya = Array2::from_shape_vec((m, dims), y.clone()).unwrap();
                let exact = oracle(&xa, &ya, band);
                let close = if exact.is_finite() {
                    (want - exact).abs() <= 1e-12 * exact.abs().max(1.0)
                } else {
                    want == exact
                };
                assert!(
                    close,
                    "{n}x{m}x{dims} band {band:?}: rows {want:e}, oracle {exact:e}"
                );
                for tile in TILES {
                    // SAFETY: the series are valid and non-empty.
                    let got = unsafe { wavefront_value(&measure, &a, &b, tile, Build::Plain) };
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{n}x{m}x{dims} band {band:?} tiles {tile:?}: {got:e} vs {want:e}"
                    );
                }
            }
        }
    }

    #[test]
    fn dtw_wavefront_equals_the_rows() {
        check(
            |band| Some(DtwParams::new(band)),
            |a, b, band| oracle::dtw(a.view(), b.view(), band),
        );
    }

    #[test]
    fn twed_wavefront_equals_the_rows() {
        let params = TwedParams::new(0.01, 0.5, 2.0);
        check(
            |band| band.is_none().then_some(params),
            |a, b, _| {
                let times = |k: usize| ndarray::Array1::from_iter((1..=k).map(|t| t as f64));
                let (ta, tb) = (times(a.nrows()), times(b.nrows()));
                oracle::twed(a.view(), ta.view(), b.view(), tb.view(), 0.01, 0.5, 2.0)
            },
        );
    }

    #[test]
    fn soft_dtw_wavefront_equals_the_rows() {
        for gamma in [1.0, 0.01] {
            check(
                |band| Some(SoftDtwParams::new(gamma).with_band(band)),
                |a, b, band| oracle::soft_dtw_banded(a.view(), b.view(), gamma, band),
            );
        }
    }

    /// Soft-DTW over one lane (the lanes' own exp and ln), as the backend
    /// runs a long pair: the same bits as the row driver over the lane,
    /// compiled for AVX2 and FMA where the processor has them.
    #[test]
    fn soft_dtw_lane_wavefront_equals_the_rows() {
        let build = if super::super::units::lockstep_available() && cfg!(target_arch = "x86_64") {
            Build::Avx2
        } else {
            Build::Plain
        };
        let (n, m, dims) = (70, 45, 2);
        let x: Vec<Lanes<f64, 1>> = values(7, n * dims, 2.0)
            .into_iter()
            .map(|v| Lanes([v]))
            .collect();
        let y: Vec<Lanes<f64, 1>> = values(8, m * dims, 2.0)
            .into_iter()
            .map(|v| Lanes([v]))
            .collect();
        let (a, b) = (series(&x, dims), series(&y, dims));
        for band in BANDS {
            let params = SoftDtwParams::new(0.1).with_band(band);
            let lanes = Lockstep::<f64, 1>::lanes(&params);
            let want = rows(&lanes, &a, &b).0[0];
            for tile in TILES {
                // SAFETY: the series are valid and non-empty; Avx2 only
                // where the processor has it.
                let got = unsafe { wavefront_value(&lanes, &a, &b, tile, build) }.0[0];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "band {band:?} tiles {tile:?}"
                );
            }
        }
    }
}
