//! The GPU's part of the alignment paths' divide and conquer: one long
//! pair kept on the device with both series reversed too, and the last
//! column of the DTW matrix of any of its sub-pairs. The pipelined tiled
//! kernel computes the transposed sub-pair (the columns' series as rows)
//! and writes that matrix's last row, which is the sub-pair's last column.

use super::context::Gpu;
use super::device::gpu_error;
use super::long_pair::pipelined_launch;
use crate::{Float, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use ndarray::{s, ArrayView2};
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::{DtwParams, SetRef};

/// A pair on the device: `x`, `y`, reversed `x` and reversed `y`, one
/// after the other, `dims` values a sample.
pub struct DevicePathPair<T> {
    samples: CudaSlice<T>,
    lengths: (usize, usize),
    dims: usize,
}

impl<T: Float> DevicePathPair<T> {
    /// Uploads `x` and `y` (`length x dims` each, equal dims) and their
    /// reverses.
    pub fn upload(gpu: &Gpu, x: ArrayView2<T>, y: ArrayView2<T>) -> Result<Self> {
        let (_one_at_a_time, _budget) = gpu.begin(None)?;
        let samples: Vec<T> = [x, y, x.slice(s![..;-1, ..]), y.slice(s![..;-1, ..])]
            .iter()
            .flat_map(|series| series.iter().copied())
            .collect();
        let samples = gpu.stream.clone_htod(&samples).map_err(gpu_error)?;
        Ok(Self {
            samples,
            lengths: (x.nrows(), y.nrows()),
            dims: x.ncols(),
        })
    }

    /// The lengths of `x` and `y`.
    pub fn lengths(&self) -> (usize, usize) {
        self.lengths
    }

    /// `D(i, last)` for every row `i` of the (unbanded) DTW matrix of
    /// `x[rows]` against `y[cols]`, or, when `reversed`, of the reversed
    /// series' `rows` and `cols` (counted from their own first samples).
    pub fn last_column(
        &self,
        gpu: &Gpu,
        rows: Range<usize>,
        cols: Range<usize>,
        reversed: bool,
    ) -> Result<Vec<T>> {
        let (n, m) = self.lengths;
        assert!(
            rows.start < rows.end && rows.end <= n && cols.start < cols.end && cols.end <= m,
            "a sub-pair of the pair"
        );
        let (_one_at_a_time, budget) = gpu.begin(None)?;
        let stream = &gpu.stream;
        let base = self.samples.device_ptr(stream).0;
        // The first sample of x, y, reversed x, reversed y.
        let (x_at, y_at) = if reversed { (n + m, 2 * n + m) } else { (0, n) };
        let address = |sample: usize| base + (sample * self.dims * size_of::<T>()) as u64;
        let offsets = [0, cols.len() as u64, 0, rows.len() as u64];
        let offsets = stream.clone_htod(&offsets).map_err(gpu_error)?;
        let offsets_at = offsets.device_ptr(stream).0 as *const u64;
        let set = |sample: usize, which: usize| SetRef {
            values: address(sample) as *const T,
            // SAFETY (of the add): `offsets` holds two pairs.
            offsets: unsafe { offsets_at.add(2 * which) },
            times: std::ptr::null(),
            count: 1,
            dims: self.dims as u64,
        };
        // The launched matrix has y's samples as rows, x's as columns.
        let pair = (set(y_at + cols.start, 0), set(x_at + rows.start, 1));
        let last_row = stream.alloc_zeros::<T>(rows.len() + 1).map_err(gpu_error)?;
        let last_row_at = last_row.device_ptr(stream).0 as *mut T;
        let lengths = (cols.len(), rows.len());
        pipelined_launch(
            gpu,
            DtwParams::new(None),
            pair,
            lengths,
            budget,
            last_row_at,
        )?;
        let mut column = stream.clone_dtoh(&last_row).map_err(gpu_error)?;
        column.remove(0);
        Ok(column)
    }
}
