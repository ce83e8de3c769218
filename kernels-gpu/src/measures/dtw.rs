//! Dynamic Time Warping: squared Euclidean local cost, accumulated sum (no
//! square root), optional Sakoe-Chiba band.

use super::window::SakoeChiba;
use super::{Measure, MeasureParams};
use crate::{Neighbours, Real, Recurrence, Sample, Series};

/// DTW parameters as the kernels receive them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DtwParams {
    pub window: SakoeChiba,
}

impl DtwParams {
    /// DTW with a Sakoe-Chiba band of `radius` samples, or none.
    pub const fn new(radius: Option<usize>) -> Self {
        DtwParams {
            window: SakoeChiba::new(radius),
        }
    }
}

impl MeasureParams for DtwParams {
    const MEASURE: Measure = Measure::Dtw;
}

impl<T: Real> Recurrence<T> for DtwParams {
    type Row = Sample<T>;
    type Column = Sample<T>;
    type Window = SakoeChiba;

    /// A subtraction, a three-way minimum and a fused multiply-add.
    const CHEAP_CELL: bool = true;

    #[inline(always)]
    fn window(&self) -> SakoeChiba {
        self.window
    }

    #[inline(always)]
    unsafe fn row(&self, a: &Series<T>, i: usize) -> Sample<T> {
        a.sample(i - 1)
    }

    #[inline(always)]
    unsafe fn column(&self, b: &Series<T>, j: usize) -> Sample<T> {
        b.sample(j - 1)
    }

    #[inline(always)]
    unsafe fn cell(
        &self,
        row: &Sample<T>,
        column: &Sample<T>,
        a: &Series<T>,
        b: &Series<T>,
        Neighbours { diag, up, left }: Neighbours<T>,
    ) -> T {
        a.squared_distance_plus(row, b, column, diag.min3_nonnegative(up, left))
    }
}
