//! Series in device memory: resident sets ([`DeviceSeriesSet`]), the
//! images the streamed pipeline uploads ([`DeviceImage`]), and the view
//! the one-launch-at-a-time launchers read them through ([`DeviceBatch`]),
//! also of a call's uploads (`call_uploads`) and of the caller's own device
//! memory ([`ForeignBatch`]).

use crate::gpu::plan::layout::Layout;
use crate::gpu::plan::paired_shapes::Shapes;
use crate::Float;
use cudarc::driver::CudaSlice;
use std::marker::PhantomData;
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::SetRef;

/// A batch in device memory, uploaded once by [`crate::upload`] and read by
/// every computation against it until it is dropped.
pub struct DeviceSeriesSet<T> {
    pub(crate) image: DeviceImage<T>,
    /// The `len + 1` sample offsets, also on the host: the lengths the
    /// paired computations plan with.
    pub(crate) offsets: Vec<u64>,
    pub(crate) max_len: usize,
    pub(crate) min_len: usize,
}

impl<T: Float> DeviceSeriesSet<T> {
    /// Number of series.
    pub fn len(&self) -> usize {
        self.image.layout.count
    }

    /// Always false: a batch has at least one series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimensions of each sample.
    pub fn dims(&self) -> usize {
        self.image.layout.dims
    }

    /// The longest series' length.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The shortest series' length.
    pub fn min_len(&self) -> usize {
        self.min_len
    }

    /// The shortest and the longest series' lengths.
    pub fn lengths(&self) -> (usize, usize) {
        (self.min_len, self.max_len)
    }

    /// Total number of samples of all series.
    pub fn total_samples(&self) -> usize {
        self.image.layout.samples
    }

    /// Bytes of device memory it holds.
    pub fn device_bytes(&self) -> usize {
        self.image.layout.bytes()
    }

    /// The `len + 1` sample offsets of its series (the first 0).
    pub(crate) fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The set as the paired kernels read it.
    pub(crate) fn batch(&self) -> DeviceBatch<'_, T> {
        DeviceBatch {
            base: self.image.base,
            layout: self.image.layout,
            values_address: self.image.base + self.image.layout.values_at() as u64,
            offsets: &self.offsets,
            lengths: self.lengths(),
            uniform: None,
            memory: PhantomData,
        }
    }
}

/// Series in device memory as the one-launch-at-a-time launchers (stencil,
/// paired, gradient, long pairs, anti-diagonal) read them: a device image (a resident set, or a range of a host batch
/// uploaded for one call) and its offsets on the host, from which the host
/// plans launches and sizes outputs. It borrows what owns the image.
pub(crate) struct DeviceBatch<'a, T> {
    pub(super) base: u64,
    pub(super) layout: Layout,
    /// Where the values are: in the image, or in memory the caller owns
    /// ([`ForeignBatch`]).
    pub(super) values_address: u64,
    /// `len + 1` sample offsets; only their differences count (those of an
    /// uploaded range start where the range starts in its host batch).
    pub(super) offsets: &'a [u64],
    /// The (shortest, longest) of its series, known from what the batch
    /// was made from: planning a small call reads them several times, and
    /// a scan of the offsets would take longer than the rest of the plan.
    pub(super) lengths: (usize, usize),
    /// Every series' length, when they are all equal and the kernels find
    /// them without offsets in device memory ([`SetRef::uniform_len`]).
    pub(super) uniform: Option<u64>,
    pub(super) memory: PhantomData<&'a T>,
}

impl<'a, T> DeviceBatch<'a, T> {
    /// The shapes of the pairs of this batch (`x`) and `y`.
    pub(crate) fn paired_shapes(&self, y: &DeviceBatch<'a, T>, divergence: bool) -> Shapes<'a> {
        Shapes::known(self.offsets, y.offsets, divergence, self.lengths, y.lengths)
    }

    /// Dimensions of each sample.
    pub(crate) fn dims(&self) -> usize {
        self.layout.dims
    }

    /// Its `len + 1` sample offsets (only their differences count).
    pub(crate) fn offsets(&self) -> &'a [u64] {
        self.offsets
    }

    /// Values of all its samples (`samples * dims`): what a gradient with
    /// respect to it holds, laid out like its values, at the positions the
    /// kernels compute from its device offsets.
    pub(crate) fn values(&self) -> usize {
        self.layout.samples * self.layout.dims
    }

    /// The kernels' view of its series `range`.
    pub(crate) fn view(&self, range: Range<usize>) -> SetRef<T> {
        let mut view = self.layout.set_ref(self.base, range.start, range.len());
        view.values = self.values_address as *const T;
        if self.layout.times {
            // The timestamps follow the values, as in an image.
            let after_values = self.layout.times_at() - self.layout.values_at();
            view.times = (self.values_address + after_values as u64) as *const T;
        }
        if let Some(len) = self.uniform {
            view.offsets = std::ptr::null();
            view.uniform_len = len;
            view.uniform_first = range.start as u64;
        }
        view
    }
}

/// `count` series of `len` samples of `dims` values each, C-contiguous in
/// device memory the caller owns and keeps alive (a CUDA tensor's): read in
/// place, never freed. All of one length, the kernels need no offsets of
/// them in device memory.
pub(crate) struct ForeignBatch<T> {
    offsets: Vec<u64>,
    values_address: u64,
    layout: Layout,
    element: PhantomData<T>,
}

impl<T: Float> ForeignBatch<T> {
    /// The batch at device address `values`.
    pub(crate) fn new(values: u64, (count, len, dims): (usize, usize, usize)) -> Self {
        let offsets: Vec<u64> = (0..=count).map(|k| (k * len) as u64).collect();
        ForeignBatch {
            offsets,
            values_address: values,
            layout: Layout {
                count,
                dims,
                samples: count * len,
                times: false,
                element: size_of::<T>(),
            },
            element: PhantomData,
        }
    }

    /// The batch as the paired kernels read it.
    pub(crate) fn batch(&self) -> DeviceBatch<'_, T> {
        let len = self.offsets.get(1).copied().unwrap_or(0);
        DeviceBatch {
            base: 0,
            layout: self.layout,
            values_address: self.values_address,
            offsets: &self.offsets,
            lengths: (len as usize, len as usize),
            uniform: Some(len),
            memory: PhantomData,
        }
    }
}

/// Series `first .. first + layout.count` of a batch, in device memory.
pub(crate) struct DeviceImage<T> {
    /// Owns the memory `base` addresses.
    pub(crate) _allocation: CudaSlice<u8>,
    pub(crate) base: u64,
    pub(crate) layout: Layout,
    /// Index in the whole batch of the image's first series.
    pub(crate) first: usize,
    pub(crate) element: PhantomData<T>,
}

impl<T> DeviceImage<T> {
    /// The kernels' view of series `range` (indices in the whole batch).
    pub(crate) fn view(&self, range: &Range<usize>) -> SetRef<T> {
        self.layout
            .set_ref(self.base, range.start - self.first, range.len())
    }
}
