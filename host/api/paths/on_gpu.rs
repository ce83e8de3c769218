//! The GPU's [`LastColumn`]: the pair uploaded once (with its reverses),
//! each sub-pair's last column from the pipelined tiled kernel; sub-pairs
//! too small to fill the GPU stay on the CPU.

use super::hirschberg::{CpuLastColumn, LastColumn, Pass};
use crate::gpu::{DevicePathPair, Gpu};
use crate::{Float, Result};
use ndarray::ArrayView2;
use std::ops::Range;

/// Sub-pairs of fewer cells have their last columns computed on the CPU
/// by default: the tiled kernel runs a warp a panel of columns, so a
/// narrow sub-pair occupies a few warps of the GPU, and its launch and
/// copies cost more than the CPU's rolling row.
pub const GPU_LAST_COLUMN_MIN_CELLS: usize = 1 << 22;

/// The GPU's [`LastColumn`] of the pair `(x, y)`, for [`super::hirschberg`].
pub struct GpuLastColumn<'a, T> {
    gpu: &'static Gpu,
    pair: DevicePathPair<T>,
    cpu: CpuLastColumn<'a, T>,
    min_cells: usize,
}

impl<'a, T: Float> GpuLastColumn<'a, T> {
    /// Uploads the pair (and its reverses) to `gpu`.
    pub fn new(gpu: &'static Gpu, x: ArrayView2<'a, T>, y: ArrayView2<'a, T>) -> Result<Self> {
        Ok(Self {
            gpu,
            pair: DevicePathPair::upload(gpu, x, y)?,
            cpu: CpuLastColumn::new(x, y),
            min_cells: GPU_LAST_COLUMN_MIN_CELLS,
        })
    }

    /// The same with sub-pairs of fewer than `cells` cells on the CPU (0:
    /// every sub-pair on the GPU).
    pub fn with_min_cells(self, cells: usize) -> Self {
        Self {
            min_cells: cells,
            ..self
        }
    }
}

impl<T: Float> LastColumn<T> for GpuLastColumn<'_, T> {
    fn last_column(
        &self,
        rows: Range<usize>,
        cols: Range<usize>,
        reversed: bool,
    ) -> Result<Vec<T>> {
        let pass = Pass {
            rows,
            cols,
            reversed,
        };
        Ok(self.last_columns(&[pass])?.remove(0))
    }

    /// The small passes on the CPU's cores while the GPU runs the others,
    /// all of them at once.
    fn last_columns(&self, passes: &[Pass]) -> Result<Vec<Vec<T>>> {
        let on_gpu =
            |pass: &Pass| pass.rows.len().saturating_mul(pass.cols.len()) >= self.min_cells;
        let (large, small): (Vec<_>, Vec<_>) = passes.iter().cloned().partition(on_gpu);
        let large: Vec<_> = large
            .into_iter()
            .map(|p| (p.rows, p.cols, p.reversed))
            .collect();
        let (large, small) = rayon::join(
            || self.pair.last_columns(self.gpu, &large),
            || self.cpu.last_columns(&small),
        );
        let (mut large, mut small) = (large?.into_iter(), small?.into_iter());
        let in_order = passes.iter().map(|pass| {
            let next = if on_gpu(pass) {
                large.next()
            } else {
                small.next()
            };
            next.expect("a column for every pass")
        });
        Ok(in_order.collect())
    }
}
