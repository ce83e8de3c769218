//! The CPU backend's drivers' host-only pieces: a thread block of one
//! thread ([`SingleThread`], so the stencil driver runs in anti-diagonal
//! order on the CPU), and pairs of one shape in lockstep
//! ([`lockstep_values`]: the stencil driver once over [`Lanes`] of `K`
//! pairs, for measures whose cell update is generic over [`Real`]).

use crate::lanes::{LaneReal, Lanes};
use timewarp_kernels::drivers::stencil::{ring_len, stencil_value, VALUE_RINGS};
use timewarp_kernels::hw::ThreadBlock;
use timewarp_kernels::{Real, Recurrence, Series, SoftDtwParams};

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
/// # Safety
/// `buffer` holds [`lockstep_buffer_len`] lanes, not aliased while this
/// runs; the series are non-empty, valid and of one shape as above.
#[inline(always)]
pub unsafe fn lockstep_values<T: LaneReal, M: Recurrence<Lanes<T, K>>, const K: usize>(
    measure: &M,
    a: &[Series<T>; K],
    b: &[Series<T>; K],
    buffer: *mut Lanes<T, K>,
) -> [T; K] {
    let (n, m, dims) = (a[0].len, b[0].len, a[0].dims);
    let a_lanes = interleave(a, buffer);
    let b_lanes = interleave(b, buffer.add(n * (dims + 1)));
    let ring = buffer.add((n + m) * (dims + 1));
    let block = SingleThread {
        memory: ring as *mut u8,
    };
    stencil_value(
        &block,
        measure,
        &a_lanes,
        &b_lanes,
        ring,
        ring_len(n, m),
        std::ptr::null_mut(),
    )
    .0
}

/// `K` series of one shape as one series of lanes, its samples (then its
/// timestamps, if the series have them) written from `to` on.
#[inline(always)]
unsafe fn interleave<T: Real, const K: usize>(
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
