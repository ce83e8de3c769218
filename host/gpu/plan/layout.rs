//! Where the parts of a range of series lie in its device image, and the
//! bytes the image takes: what the plans size their uploads by, apart from
//! writing the image (`transfer::image_writes`). No CUDA here.

use crate::{Float, SeriesSet};
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::SetRef;

/// Bytes of the device image of series `range` of `set`: what uploading
/// them takes.
pub(crate) fn image_bytes<T: Float>(set: &SeriesSet<T>, range: Range<usize>) -> usize {
    Layout::of(set, &range).bytes()
}

/// Where the parts of a range of series lie in its device image: `count + 1`
/// offsets (u64, rebased to the range's first sample), the values, then the
/// timestamps if the batch has them. Streamed chunks, uploaded blocks and
/// resident sets all take this form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub count: usize,
    pub dims: usize,
    pub samples: usize,
    pub times: bool,
    pub element: usize,
}

impl Layout {
    pub(crate) fn of<T: Float>(set: &SeriesSet<T>, range: &Range<usize>) -> Layout {
        let (_, offsets, times) = set.parts();
        Layout {
            count: range.len(),
            dims: set.dims(),
            samples: (offsets[range.end] - offsets[range.start]) as usize,
            times: times.is_some(),
            element: size_of::<T>(),
        }
    }

    pub(crate) fn values_at(&self) -> usize {
        (self.count + 1) * size_of::<u64>()
    }

    pub(crate) fn times_at(&self) -> usize {
        self.values_at() + self.samples * self.dims * self.element
    }

    pub(crate) fn bytes(&self) -> usize {
        self.times_at()
            + if self.times {
                self.samples * self.element
            } else {
                0
            }
    }

    /// The kernels' view of series `first .. first + count` of the image at
    /// device address `base`. Offsets count from the image's first sample,
    /// so a sub-range needs only its own offsets pointer.
    pub(crate) fn set_ref<T>(&self, base: u64, first: usize, count: usize) -> SetRef<T> {
        debug_assert!(first + count <= self.count);
        SetRef {
            values: (base + self.values_at() as u64) as *const T,
            offsets: (base + (first * size_of::<u64>()) as u64) as *const u64,
            times: if self.times {
                (base + self.times_at() as u64) as *const T
            } else {
                std::ptr::null()
            },
            count: count as u64,
            dims: self.dims as u64,
            uniform_len: 0,
            uniform_first: 0,
        }
    }
}

/// Batches whose values count up from 1, for the layout and plan tests.
#[cfg(test)]
pub(crate) mod test_sets {
    use crate::SeriesSet;
    use ndarray::Array2;

    /// Series of `lengths` samples of `dims` values, optionally with
    /// timestamps `0, 0.5, 1, ...`.
    pub fn set(lengths: &[usize], dims: usize, times: bool) -> SeriesSet<f64> {
        let mut next = 0.0;
        let series: Vec<Array2<f64>> = lengths
            .iter()
            .map(|&n| {
                Array2::from_shape_fn((n, dims), |_| {
                    next += 1.0;
                    next
                })
            })
            .collect();
        let set = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
        if !times {
            return set;
        }
        let stamps: Vec<ndarray::Array1<f64>> = lengths
            .iter()
            .map(|&n| (0..n).map(|t| 0.5 * t as f64).collect())
            .collect();
        set.with_timestamps(stamps.iter().map(|t| t.view()))
            .unwrap()
    }
}
