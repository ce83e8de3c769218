//! A tile's rows, [`STRIP`] at a time, each a column behind the row above.

use timewarp_kernels::{Neighbours, Real, Recurrence, Series, Window};

/// Rows of a tile that advance together (see the module's notes): enough
/// independent cells at each step to hide a cell's latency, for DTW's
/// short chains as for Soft-DTW's exponentials and logarithm (strips of 4
/// rows gave DTW 1.50-1.71x on two threads, 8 up to 1.89x).
pub(super) const STRIP: usize = 8;

/// What a strip reads: the measure, the pair, its first row and column
/// and the tile's columns.
pub(super) type StripArgs<'a, T, M> = (
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
pub(super) unsafe fn strip<T: Real, M: Recurrence<T> + ?Sized, const S: usize>(
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
