//! The skewed column driver, for measures whose cell is a long dependent
//! chain ([`Recurrence::LATENCY_BOUND`]: Soft-DTW's two exponentials and a
//! logarithm). A whole pair per warp, each lane a stripe of `G * C`
//! adjacent columns in registers, as in the column driver; but the stripe
//! is cut into `G` groups of `C` columns, and at step `t` group `g` of lane
//! `l` computes row `t - l G - g + 1`. The groups of a lane are then on `G`
//! different rows, so their cells do not depend on each other and the
//! lane's step is `G` independent chains of `C` cells rather than one chain
//! of `G C` (the column driver, `G = 1`).
//!
//! Group `g` takes its left neighbours from group `g - 1`, which computed
//! the same row one step earlier (a register), and group 0 from the last
//! group of lane `l - 1` (a warp shuffle); the diagonal neighbour is the
//! left one of the step before. Each group's row (the measure's
//! [`Recurrence::Row`]) passes to the next group after the step. The price
//! is the wavefront's fill and drain: a panel of `rows x cols` takes `rows
//! + lanes G - 1` steps, `lanes = ceil(cols / (G C))`.
//!
//! A pair wider than `LANES G C` columns runs in panels, left to right,
//! each passing its right column to the next through a border in memory.
//! The measure's window is applied per cell (cells outside are infinite);
//! every panel computes all rows, so banded pairs belong to the sheared
//! band driver, which the host chooses for them.

use crate::hw::Warp;
use crate::series::specialised;
use crate::{Neighbours, Real, Recurrence, Series, Window};
use core::array::from_fn;
use core::ptr::{null, null_mut};

/// A whole pair in one warp, `G` groups of `C` columns a lane; returns the
/// pair's value on every lane.
///
/// # Safety
/// All lanes call it together with the same arguments; `a.len, b.len >=
/// 1`; `border` holds `a.len + 1` values when `b.len > lanes G C` (unused
/// otherwise, may be null).
#[inline(always)]
pub unsafe fn skewed_pair<T: Real, M: Recurrence<T>, W: Warp, const G: usize, const C: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    border: *mut T,
) -> T {
    specialised(a, b, |a, b| {
        skewed_panels::<T, M, W, G, C>(warp, measure, a, b, border)
    })
}

/// [`skewed_pair`] of series whose dimension is known where it is 1 (a
/// function rather than the closure's body, so that it is inlined).
#[inline(always)]
unsafe fn skewed_panels<T: Real, M: Recurrence<T>, W: Warp, const G: usize, const C: usize>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    border: *mut T,
) -> T {
    let width = W::LANES * G * C;
    let panels = b.len.div_ceil(width);
    let mut value = T::INFINITY;
    for panel in 0..panels {
        let col0 = panel * width;
        let panel = Panel {
            col0,
            cols: width.min(b.len - col0),
            left: if panel == 0 { null() } else { border },
            right: if panel + 1 < panels {
                border
            } else {
                null_mut()
            },
        };
        value = if measure.window().is_banded() {
            skewed_panel::<T, M, W, G, C, true>(warp, measure, a, b, &panel)
        } else {
            skewed_panel::<T, M, W, G, C, false>(warp, measure, a, b, &panel)
        };
    }
    value
}

/// Columns `col0 + 1 ..= col0 + cols` of every row, and where their left
/// border comes from and their right border goes (by matrix row; null:
/// the matrix's column 0, or not written). `left` and `right` may be the
/// same array: a row is read long before it is written.
struct Panel<T> {
    col0: usize,
    cols: usize,
    left: *const T,
    right: *mut T,
}

/// One panel; returns its bottom-right cell on every lane.
#[inline(always)]
unsafe fn skewed_panel<
    T: Real,
    M: Recurrence<T>,
    W: Warp,
    const G: usize,
    const C: usize,
    const BANDED: bool,
>(
    warp: &W,
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    panel: &Panel<T>,
) -> T {
    let (n, m) = (a.len, b.len);
    let lane = warp.lane();
    let lanes_used = panel.cols.div_ceil(G * C);
    let last_column = panel.col0 + panel.cols;
    // The matrix column of the lane's first cell. Lanes past the panel's
    // last column compute copies of it, which nobody reads.
    let first = panel.col0 + lane * G * C + 1;
    let columns: [[M::Column; C]; G] =
        from_fn(|g| from_fn(|c| measure.column(b, (first + g * C + c).min(last_column))));
    // Cell (i, col0), lane 0's left neighbour on row i (0 on the corner of
    // the first panel).
    let corner = if panel.col0 == 0 {
        T::ZERO
    } else {
        T::INFINITY
    };
    // Rows in 32 bits (a pair has fewer than 2^31 rows): `i32` so that
    // rows before the first are negative.
    let rows_i32 = n as i32;
    let border = |i: i32| -> T {
        if i == 0 {
            corner
        } else if i < 0 || i > rows_i32 || panel.left.is_null() {
            T::INFINITY
        } else {
            *panel.left.add(i as usize)
        }
    };
    let clamp_row = |i: i32| i.clamp(1, rows_i32) as usize;
    // Group g's row at step t is t - start - g + 1.
    let start = (lane * G) as i32;
    let window = measure.window();

    // Row 0 (the matrix's top: infinite) until a group starts.
    let mut cells = [[T::INFINITY; C]; G];
    // The left neighbour each group took at the step before: its diagonal.
    let mut edge = [T::INFINITY; G];
    edge[0] = if lane == 0 { border(0) } else { T::INFINITY };
    let mut rows: [M::Row; G] = from_fn(|_| measure.row(a, 1));
    // Fetched a step ahead: group 0's row and lane 0's left border.
    let mut next_row = measure.row(a, clamp_row(1 - start));
    let mut next_border = if lane == 0 { border(1) } else { T::INFINITY };

    let steps = (n + lanes_used * G - 1) as i32;
    for t in 0..steps {
        let row0 = t - start + 1;
        for g in (1..G).rev() {
            rows[g] = rows[g - 1];
        }
        rows[0] = next_row;
        next_row = measure.row(a, clamp_row(row0 + 1));
        let from_lane_before = warp.shuffle_up(cells[G - 1][C - 1]);
        let left0 = if lane == 0 {
            let left = next_border;
            next_border = border(row0 + 1);
            left
        } else {
            from_lane_before
        };
        // Last group first: each group reads the previous one's cells of
        // the step before.
        for g in (0..G).rev() {
            let i = row0 - g as i32;
            let left = if g == 0 { left0 } else { cells[g - 1][C - 1] };
            let diag = edge[g];
            edge[g] = left;
            let live = i >= 1 && i <= rows_i32;
            let (lo, hi) = if BANDED {
                window.columns(clamp_row(i), n, m)
            } else {
                (1, m)
            };
            group_row(
                measure,
                a,
                b,
                &rows[g],
                &columns[g],
                &mut cells[g],
                Neighbours {
                    diag,
                    up: T::INFINITY,
                    left,
                },
                live,
                |c| !BANDED || (lo..=hi).contains(&(first + g * C + c)),
            );
            if g == G - 1 && live && !panel.right.is_null() && lane == W::LANES - 1 {
                *panel.right.add(i as usize) = cells[G - 1][C - 1];
            }
        }
    }

    // Every group ends on row n.
    let k = panel.cols - 1;
    let (owner, index) = (k / (G * C), k % (G * C));
    // A select per cell rather than an index: the cells stay in registers.
    let mut mine = cells[0][0];
    for (g, group) in cells.iter().enumerate() {
        for (c, &cell) in group.iter().enumerate() {
            if g * C + c == index {
                mine = cell;
            }
        }
    }
    warp.broadcast(mine, owner)
}

/// One row of a group's `C` cells, left to right, kept only if `live` (the
/// group is on a row of the matrix); `allowed(c)` says whether cell `c` is
/// inside the measure's window (infinite if not).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn group_row<T: Real, M: Recurrence<T>, const C: usize>(
    measure: &M,
    a: &Series<T>,
    b: &Series<T>,
    row: &M::Row,
    columns: &[M::Column; C],
    cells: &mut [T; C],
    start: Neighbours<T>,
    live: bool,
    allowed: impl Fn(usize) -> bool,
) {
    let Neighbours {
        mut diag, mut left, ..
    } = start;
    for c in 0..C {
        let up = cells[c];
        let value = measure.cell(row, &columns[c], a, b, Neighbours { diag, up, left });
        let value = if allowed(c) { value } else { T::INFINITY };
        diag = up;
        left = value;
        if live {
            cells[c] = value;
        }
    }
}
