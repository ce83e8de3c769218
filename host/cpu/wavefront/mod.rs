//! One long pair on every core: the cost matrix cut into tiles, each
//! computed on one of rayon's threads as soon as the tiles above it and to
//! its left are done ([`schedule`]: no barrier between anti-diagonals of
//! tiles), from the borders that those left behind. Memory is one row and
//! one column of the matrix, whatever the tiling.
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
//! worker checks for an interrupt before each tile, so that a long pair
//! stops within a tile's time of [`crate::interrupt`].

mod schedule;
mod strip;

use schedule::Schedule;
use std::ops::Range;
use std::sync::Mutex;
use strip::{strip, STRIP};
use timewarp_kernels::{Real, Recurrence, Series, Window};

/// Rows and columns of a tile: enough cells (tens of microseconds) to
/// amortise a task's scheduling, few enough that a pair of some thousand
/// samples has many tiles on most anti-diagonals.
pub(super) const TILE: usize = 256;

/// How a tile's code is compiled: for the processor the crate targets, or
/// for AVX2 and FMA (the lanes' polynomials need FMA in hardware: see
/// `lanes`; only where [`super::units::lockstep_available`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Build {
    Plain,
    Avx2,
}

/// The measure and the pair, shared by the workers.
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
/// threads in the order their dependencies allow. Zero if interrupted (the
/// caller checks [`crate::interrupt::check`] and discards it).
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
    // No more workers than tiles on an anti-diagonal can keep busy: at
    // most one per row of tiles, and per column of tiles in a row's span.
    let widest = spans
        .iter()
        .map(|&(lo, hi)| (hi + 1).saturating_sub(lo))
        .max();
    let threads = rayon::current_num_threads()
        .min(rows)
        .min(widest.unwrap_or(1))
        .max(1);
    let finished = Schedule::new(&spans).run(threads, |r, c| {
        // The schedule runs a tile once those before it in its row and in
        // its column are done, and those after them wait for it: no lock
        // is ever contended (they order the borders' reads and writes).
        let mut above = above[c].lock().unwrap_or_else(|p| p.into_inner());
        let mut left = left[r].lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the series are valid, and the processor has AVX2 and FMA
        // if asked for (this function's contract); the borders have the
        // tile's sizes.
        unsafe {
            match build {
                #[cfg(target_arch = "x86_64")]
                Build::Avx2 => tile_avx2(&pair, (r, c), &mut above, &mut left),
                _ => pair.tile(r, c, &mut above, &mut left),
            }
        }
    });
    if !finished {
        return T::ZERO;
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

#[cfg(test)]
mod tests;
