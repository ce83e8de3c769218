//! The GPU's [`LastColumn`]: the pair uploaded once (with its reverses),
//! each sub-pair's last column from the pipelined tiled kernel; sub-pairs
//! too small to fill the GPU stay on the CPU.

use super::hirschberg::{CpuLastColumn, LastColumn};
use crate::gpu::{DevicePathPair, Gpu};
use crate::{Float, Result};
use ndarray::ArrayView2;
use std::ops::Range;

/// Sub-pairs of fewer cells have their last columns computed on the CPU:
/// the tiled kernel runs a warp a panel of columns, so a narrow sub-pair
/// occupies a few warps of the GPU, and its launch and copies cost more
/// than the CPU's rolling row.
const GPU_MIN_CELLS: usize = 1 << 22;

pub(super) struct GpuLastColumn<'a, T> {
    gpu: &'static Gpu,
    pair: DevicePathPair<T>,
    cpu: CpuLastColumn<'a, T>,
}

impl<'a, T: Float> GpuLastColumn<'a, T> {
    pub(super) fn new(
        gpu: &'static Gpu,
        x: ArrayView2<'a, T>,
        y: ArrayView2<'a, T>,
    ) -> Result<Self> {
        Ok(Self {
            gpu,
            pair: DevicePathPair::upload(gpu, x, y)?,
            cpu: CpuLastColumn::new(x, y),
        })
    }
}

impl<T: Float> LastColumn<T> for GpuLastColumn<'_, T> {
    fn last_column(
        &self,
        rows: Range<usize>,
        cols: Range<usize>,
        reversed: bool,
    ) -> Result<Vec<T>> {
        if rows.len().saturating_mul(cols.len()) < self.min_cells {
            return self.cpu.last_column(rows, cols, reversed);
        }
        self.pair.last_column(self.gpu, rows, cols, reversed)
    }
}
