//! Views of series in memory, the same on host and device: a batch is one flat
//! array of samples (`dims` values each, sample-major) with an offsets array,
//! so equal and unequal lengths share one layout.

use crate::Real;

/// A batch of series as the kernels see it. Passed by value inside launch
/// parameters, so it is `#[repr(C)]` and holds plain addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SetRef<T> {
    /// `values[(offsets[k] + t) * dims + d]` is value `d` of sample `t` of series `k`.
    pub values: *const T,
    /// `count + 1` sample offsets; series `k` is samples `offsets[k]..offsets[k + 1]`.
    /// Null when every series has `uniform_len` samples: series `k` is then
    /// samples `(uniform_first + k) * uniform_len ..`, and no offsets need
    /// to be in memory.
    pub offsets: *const u64,
    /// One timestamp per sample (same indexing as samples), or null for `0, 1, 2, ...`.
    pub times: *const T,
    pub count: u64,
    pub dims: u64,
    /// Every series' length when `offsets` is null; unused otherwise.
    pub uniform_len: u64,
    /// With `offsets` null, the series before this view's first in the
    /// memory `values` addresses (a view of part of a batch).
    pub uniform_first: u64,
}

// SAFETY: a read-only view; its builder keeps the memory alive and unchanged
// while it is used (the host's CPU backend shares it between rayon threads).
unsafe impl<T: Sync> Sync for SetRef<T> {}
// SAFETY: as for `Sync`.
unsafe impl<T: Sync> Send for SetRef<T> {}

impl<T: Real> SetRef<T> {
    /// The first sample of series `k`: where series `k - 1` ends.
    ///
    /// # Safety
    /// `k <= count`, and the offsets (if not null) describe valid memory.
    #[inline(always)]
    pub unsafe fn start(&self, k: usize) -> usize {
        if self.offsets.is_null() {
            (self.uniform_first as usize + k) * self.uniform_len as usize
        } else {
            *self.offsets.add(k) as usize
        }
    }

    /// Series `k` of the batch.
    ///
    /// # Safety
    /// `k < count`, and the pointers describe valid memory.
    #[inline(always)]
    pub unsafe fn series(&self, k: usize) -> Series<T> {
        self.series_of::<false>(k)
    }

    /// Series `k` of the batch with `dims` read as the constant 1 when
    /// `UNIVARIATE`: the kernels' univariate twins.
    ///
    /// # Safety
    /// As [`SetRef::series`]; with `UNIVARIATE`, `dims == 1`.
    #[inline(always)]
    pub unsafe fn series_of<const UNIVARIATE: bool>(&self, k: usize) -> Series<T> {
        let (start, end) = (self.start(k), self.start(k + 1));
        let dims = if UNIVARIATE { 1 } else { self.dims as usize };
        Series {
            values: self.values.add(start * dims),
            times: if self.times.is_null() {
                self.times
            } else {
                self.times.add(start)
            },
            len: end - start,
            dims,
        }
    }
}

/// One series: `len` samples of `dims` values, with optional timestamps.
#[derive(Clone, Copy, Debug)]
pub struct Series<T> {
    pub values: *const T,
    pub times: *const T,
    pub len: usize,
    pub dims: usize,
}

/// `run` on `a` and `b`, with their dimension a constant of the code where
/// it is 1: the one place where the drivers specialise for univariate
/// series. Univariate series take a copy of the driver of their own, where
/// the cell updates' multivariate paths (a loop over the dimensions per
/// cell, and the registers it holds) fold away; the multivariate path runs
/// knowing `dims != 1`, so the univariate paths fold away from it. The
/// kernels' univariate twins read their series with `dims` the constant 1
/// ([`SetRef::series_of`]), so only the first copy is compiled there.
#[inline(always)]
pub fn specialised<T: Real, R>(
    a: &Series<T>,
    b: &Series<T>,
    run: impl FnOnce(&Series<T>, &Series<T>) -> R,
) -> R {
    if a.dims == 1 {
        run(&Series { dims: 1, ..*a }, &Series { dims: 1, ..*b })
    } else {
        run(a, b)
    }
}

impl<T: Real> Series<T> {
    /// Value `d` of sample `t` (0-based).
    ///
    /// # Safety
    /// `t < len`, `d < dims`.
    #[inline(always)]
    pub unsafe fn value(&self, t: usize, d: usize) -> T {
        *self.values.add(t * self.dims + d)
    }

    /// Timestamp of sample `t` (0-based): the stored one, or `t` itself.
    ///
    /// # Safety
    /// `t < len`.
    #[inline(always)]
    pub unsafe fn time(&self, t: usize) -> T {
        if self.times.is_null() {
            T::from_index(t)
        } else {
            *self.times.add(t)
        }
    }

    /// Squared Euclidean distance between sample `s` of `self` and sample `t`
    /// of `other` (same `dims`).
    ///
    /// Not inlined: the warp driver unrolls the cell update over a lane's
    /// stripe, and this loop (with the registers it holds) would be copied
    /// into every unrolled cell; univariate series never call it.
    ///
    /// # Safety
    /// Indices in range.
    #[inline(never)]
    pub unsafe fn squared_distance(&self, s: usize, other: &Series<T>, t: usize) -> T {
        let mut sum = T::ZERO;
        for d in 0..self.dims {
            let diff = self.value(s, d) - other.value(t, d);
            sum = sum + diff * diff;
        }
        sum
    }
}

/// A sample as the DTW-family cell updates see it: its 0-based index, and
/// its first value, which is the whole sample of a univariate series and
/// can then live in a register. The index is 32 bits (series are shorter
/// than 2^32 samples, `SeriesSet` checks) to halve its registers.
#[derive(Clone, Copy, Debug)]
pub struct Sample<T> {
    pub index: u32,
    pub first: T,
}

impl<T: Real> Series<T> {
    /// Sample `t` (0-based) as a [`Sample`].
    ///
    /// # Safety
    /// `t < len`.
    #[inline(always)]
    pub unsafe fn sample(&self, t: usize) -> Sample<T> {
        Sample {
            index: t as u32,
            first: self.value(t, 0),
        }
    }

    /// Squared Euclidean distance between sample `s` of `self` and sample
    /// `t` of `other`, from the registers when the series are univariate.
    ///
    /// # Safety
    /// The samples were taken from `self` and `other`.
    #[inline(always)]
    pub unsafe fn squared_distance_of(&self, s: &Sample<T>, other: &Series<T>, t: &Sample<T>) -> T {
        if self.dims == 1 {
            let diff = s.first - t.first;
            diff * diff
        } else {
            self.squared_distance(s.index as usize, other, t.index as usize)
        }
    }

    /// [`Series::squared_distance_of`] plus `addend`, the square and the sum
    /// one fused multiply-add on the GPU when the series are univariate
    /// (DTW's cell: its cost plus the smallest neighbour).
    ///
    /// # Safety
    /// As [`Series::squared_distance_of`].
    #[inline(always)]
    pub unsafe fn squared_distance_plus(
        &self,
        s: &Sample<T>,
        other: &Series<T>,
        t: &Sample<T>,
        addend: T,
    ) -> T {
        if self.dims == 1 {
            let diff = s.first - t.first;
            diff.mul_add_fast(diff, addend)
        } else {
            self.squared_distance(s.index as usize, other, t.index as usize) + addend
        }
    }
}
