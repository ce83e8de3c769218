//! The GPU's [`LastColumn`]: a pair's pass series uploaded once, each
//! pass's last column from the pipelined tiled kernel; passes too small to
//! fill the GPU stay on the CPU.

use super::hirschberg::{CpuLastColumn, LastColumn, Pass, PassSeries, PathPair};
use crate::gpu::{DevicePathPair, Gpu};
use crate::{Float, Result};
use std::ops::Range;
use timewarp_kernels::{MeasureParams, Recurrence};

/// Passes of fewer cells have their last columns computed on the CPU by
/// default: the tiled kernel runs a warp a panel of columns, so a narrow
/// sub-pair occupies a few warps of the GPU, and its launch and copies
/// cost more than the CPU's rolling row.
pub const GPU_LAST_COLUMN_MIN_CELLS: usize = 1 << 22;

/// The GPU's [`LastColumn`] of a pair, for `hirschberg`.
pub struct GpuLastColumn<'a, T, P> {
    gpu: &'static Gpu,
    pair: DevicePathPair<T>,
    series: &'a PassSeries<T, P>,
    cpu: CpuLastColumn<'a, T, P>,
    min_cells: usize,
}

impl<'a, T: Float, P: Copy> GpuLastColumn<'a, T, P> {
    /// Uploads the series of `pair`'s passes to `gpu`.
    pub fn new<Q: PathPair<T, Params = P>>(gpu: &'static Gpu, pair: &'a Q) -> Result<Self> {
        let series = pair.pass_series();
        Ok(Self {
            gpu,
            pair: DevicePathPair::upload(gpu, series.values(), series.times(), series.dims())?,
            series,
            cpu: CpuLastColumn::new(pair),
            min_cells: GPU_LAST_COLUMN_MIN_CELLS,
        })
    }

    /// The same with passes of fewer than `cells` cells on the CPU (0:
    /// every pass on the GPU).
    pub fn with_min_cells(self, cells: usize) -> Self {
        Self {
            min_cells: cells,
            ..self
        }
    }
}

impl<T, P> LastColumn<T> for GpuLastColumn<'_, T, P>
where
    T: Float,
    P: Recurrence<T> + MeasureParams + Copy + Send + Sync + 'static,
{
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
        for pass in passes {
            self.series.check(pass)?;
        }
        let on_gpu =
            |pass: &Pass| pass.rows.len().saturating_mul(pass.cols.len()) >= self.min_cells;
        let (large, small): (Vec<_>, Vec<_>) = passes.iter().cloned().partition(on_gpu);
        let large: Vec<_> = large
            .into_iter()
            .map(|pass| {
                let (x, y) = PassSeries::<T, P>::series_of(&pass);
                ((x, pass.rows), (y, pass.cols))
            })
            .collect();
        let params = self.series.params();
        let (large, small) = rayon::join(
            || self.pair.last_columns(self.gpu, params, &large),
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
