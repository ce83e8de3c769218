//! The CPU backend's drivers' host-only pieces: a thread block of one
//! thread ([`SingleThread`], so the stencil driver runs in anti-diagonal
//! order on the CPU), and pairs of one shape in lockstep
//! ([`lockstep_values`]: the stencil driver once over [`Lanes`] of `K`
//! pairs, for measures whose cell update is generic over [`Real`]).

use super::lanes::{LaneReal, Lanes};
use timewarp_kernels::drivers::stencil::{ring_len, stencil_value, VALUE_RINGS};
use timewarp_kernels::hw::ThreadBlock;
use timewarp_kernels::{Neighbours, Real, Recurrence, Series, SoftDtwParams, TwedParams};

/// A thread block of one thread whose "shared memory" is a buffer of the
/// caller's: the stencil driver in anti-diagonal order on the CPU.
#[derive(Clone, Copy, Debug)]
pub struct SingleThread {
    pub memory: *mut u8,
}

impl ThreadBlock for SingleThread {
    #[inline(always)]
    fn thread(&self) -> usize {
        0
    }
    #[inline(always)]
    fn threads(&self) -> usize {
        1
    }
    #[inline(always)]
    unsafe fn barrier(&self) {}
    #[inline(always)]
    fn shared<T>(&self) -> *mut T {
        self.memory as *mut T
    }
}

/// A recurrence that runs `K` pairs in lockstep: its parameters, the same
/// in every lane, as a recurrence over [`Lanes`].
pub trait Lockstep<T: LaneReal, const K: usize>: Recurrence<T> {
    /// The measure over lanes.
    type Lanes: Recurrence<Lanes<T, K>>;
    fn lanes(&self) -> Self::Lanes;
}

/// Soft-DTW's cell update is generic over [`Real`]: over lanes it is the
/// same code with the smoothing in every lane.
impl<T: LaneReal, const K: usize> Lockstep<T, K> for SoftDtwParams<T> {
    type Lanes = SoftDtwParams<Lanes<T, K>>;
    #[inline(always)]
    fn lanes(&self) -> Self::Lanes {
        SoftDtwParams {
            gamma: Lanes::splat(self.gamma),
            window: self.window,
        }
    }
}

/// TWED's cell update and its rows' and columns' deletion costs are generic
/// over [`Real`] too: over lanes, the same code with the parameters in
/// every lane.
impl<T: LaneReal, const K: usize> Lockstep<T, K> for TwedParams<T> {
    type Lanes = TwedParams<Lanes<T, K>>;
    #[inline(always)]
    fn lanes(&self) -> Self::Lanes {
        TwedParams {
            nu: Lanes::splat(self.nu),
            lambda: Lanes::splat(self.lambda),
            degree: Lanes::splat(self.degree),
            before_first: self.before_first,
        }
    }
}

/// Lanes [`lockstep_values`] needs in its buffer for pairs of `n x m`
/// samples of `dims` values.
pub fn lockstep_buffer_len(n: usize, m: usize, dims: usize) -> usize {
    // The two series' samples and timestamps, interleaved, and the three
    // anti-diagonals of the stencil driver.
    (n + m) * (dims + 1) + VALUE_RINGS * ring_len(n, m)
}

/// The measure's values of `K` pairs `(a[l], b[l])` of one shape (every
/// `a[l]` of `n` samples, every `b[l]` of `m`, all of `dims` values, all
/// with timestamps or none), computed in lockstep: the pairs' samples are
/// interleaved into lanes in `buffer`, and the stencil driver
/// ([`stencil_value`] on one thread) runs once over the lanes. Anti-diagonals
/// rather than rows: the cells of an anti-diagonal are independent, so the
/// processor overlaps one cell's exponentials with the next cell's, which
/// is faster than the row driver with the same lanes (docs/algorithms.md).
///
/// With `precomputed_rows`, the measure's rows and columns are computed
/// once into arrays before the driver runs, which pays where they are
/// costly (TWED) and costs where they are a sample (DTW, Soft-DTW).
///
/// # Safety
/// `buffer` holds [`lockstep_buffer_len`] lanes, not aliased while this
/// runs; the series are non-empty, valid and of one shape as above.
#[inline(always)]
pub unsafe fn lockstep_values<T: LaneReal, M: Recurrence<Lanes<T, K>>, const K: usize>(
    measure: &M,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    buffer: *mut Lanes<T, K>,
    precomputed_rows: bool,
) -> [T; K] {
    let (n, m, dims) = (a[0].len, b[0].len, a[0].dims);
    let a_lanes = interleave(a, buffer);
    let b_lanes = interleave(b, buffer.add(n * (dims + 1)));
    let ring = buffer.add((n + m) * (dims + 1));
    let block = SingleThread {
        memory: ring as *mut u8,
    };
    if !precomputed_rows {
        return stencil_value(
            &block,
            measure,
            &a_lanes,
            &b_lanes,
            ring,
            ring_len(n, m),
            std::ptr::null_mut(),
        )
        .0;
    }
    // Each row's and column's share of the cells computed once, not once
    // per cell (TWED's deletion costs, timestamps and previous samples).
    let rows = precompute(n, |i, previous| match previous {
        Some(previous) => measure.next_row(&a_lanes, previous, i),
        None => measure.row(&a_lanes, i),
    });
    let columns = precompute(m, |j, _| measure.column(&b_lanes, j));
    let precomputed = Precomputed {
        measure,
        rows: rows.as_ptr(),
        columns: columns.as_ptr(),
    };
    stencil_value(
        &block,
        &precomputed,
        &a_lanes,
        &b_lanes,
        ring,
        ring_len(n, m),
        std::ptr::null_mut(),
    )
    .0
}

/// `len + 1` entries, entry 0 a copy of entry 1 (the drivers ask for
/// rows and columns from 1 on), entry `k` from `make(k, entry k - 1)`.
#[inline(always)]
fn precompute<X: Copy>(len: usize, mut make: impl FnMut(usize, Option<&X>) -> X) -> Vec<X> {
    let first = make(1, None);
    let mut entries = Vec::with_capacity(len + 1);
    entries.push(first);
    entries.push(first);
    for k in 2..=len {
        let next = make(k, entries.last());
        entries.push(next);
    }
    entries
}

/// A measure whose rows and columns were computed before the driver runs:
/// the driver reads them instead of computing each once per cell.
struct Precomputed<'a, M: Recurrence<T>, T: Real> {
    measure: &'a M,
    rows: *const M::Row,
    columns: *const M::Column,
}

impl<M: Recurrence<T>, T: Real> Recurrence<T> for Precomputed<'_, M, T> {
    type Row = M::Row;
    type Column = M::Column;
    type Window = M::Window;
    const LATENCY_BOUND: bool = M::LATENCY_BOUND;
    const CHEAP_CELL: bool = M::CHEAP_CELL;

    #[inline(always)]
    fn window(&self) -> M::Window {
        self.measure.window()
    }

    #[inline(always)]
    unsafe fn row(&self, _a: &Series<T>, i: usize) -> M::Row {
        *self.rows.add(i)
    }

    #[inline(always)]
    unsafe fn column(&self, _b: &Series<T>, j: usize) -> M::Column {
        *self.columns.add(j)
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        row: &M::Row,
        column: &M::Column,
        a: &Series<T>,
        b: &Series<T>,
        neighbours: Neighbours<T>,
    ) -> T {
        self.measure.cell(row, column, a, b, neighbours)
    }
}

/// `K` series of one shape as one series of lanes, its samples (then its
/// timestamps, if the series have them) written from `to` on.
///
/// # Safety
/// The series are valid and of one shape; `to` holds `len * (dims + 1)`
/// lanes.
#[inline(always)]
pub unsafe fn interleave<T: Real, const K: usize>(
    series: &[Series<T>; K],
    to: *mut Lanes<T, K>,
) -> Series<Lanes<T, K>> {
    let (len, dims) = (series[0].len, series[0].dims);
    for k in 0..len * dims {
        *to.add(k) = Lanes(std::array::from_fn(|l| *series[l].values.add(k)));
    }
    let times = if series[0].times.is_null() {
        std::ptr::null()
    } else {
        let times = to.add(len * dims);
        for t in 0..len {
            *times.add(t) = Lanes(std::array::from_fn(|l| series[l].time(t)));
        }
        times as *const _
    };
    Series {
        values: to,
        times,
        len,
        dims,
    }
}
