//! Where the searched series comes from: anything that can copy a range of
//! its samples out as `f64`, so that a search holds only its units of work
//! (their starts and `m - 1` samples more) and never the whole series:
//! arrays in memory, and files read as they are searched
//! ([`super::SeriesFile`]).

use crate::Result;
use ndarray::ArrayView2;

/// A long series of `len()` samples of `dims()` values each.
pub trait SeriesSource: Sync {
    /// Samples in the series.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values per sample.
    fn dims(&self) -> usize;

    /// Replaces `out` with samples `start..start + count`, row-major
    /// (`count * dims()` values). The search checks that they are finite.
    fn read(&self, start: usize, count: usize, out: &mut Vec<f64>) -> Result<()>;

    /// Writes samples `start..start + count` into `out` (`count * dims()`
    /// values, row-major): by default [`SeriesSource::read`] and a copy.
    fn read_into(&self, start: usize, count: usize, out: &mut [f64]) -> Result<()> {
        let mut values = Vec::with_capacity(out.len());
        self.read(start, count, &mut values)?;
        out.copy_from_slice(&values);
        Ok(())
    }
}

/// A univariate series.
impl SeriesSource for [f64] {
    fn len(&self) -> usize {
        <[f64]>::len(self)
    }
    fn dims(&self) -> usize {
        1
    }
    fn read(&self, start: usize, count: usize, out: &mut Vec<f64>) -> Result<()> {
        out.clear();
        out.extend_from_slice(&self[start..start + count]);
        Ok(())
    }
    fn read_into(&self, start: usize, count: usize, out: &mut [f64]) -> Result<()> {
        out.copy_from_slice(&self[start..start + count]);
        Ok(())
    }
}

/// A univariate series in single precision (widened as it is read).
impl SeriesSource for [f32] {
    fn len(&self) -> usize {
        <[f32]>::len(self)
    }
    fn dims(&self) -> usize {
        1
    }
    fn read(&self, start: usize, count: usize, out: &mut Vec<f64>) -> Result<()> {
        out.clear();
        out.extend(self[start..start + count].iter().map(|&v| f64::from(v)));
        Ok(())
    }
    fn read_into(&self, start: usize, count: usize, out: &mut [f64]) -> Result<()> {
        for (o, &v) in out.iter_mut().zip(&self[start..start + count]) {
            *o = f64::from(v);
        }
        Ok(())
    }
}

/// `len x dims`, one row a sample.
impl SeriesSource for ArrayView2<'_, f64> {
    fn len(&self) -> usize {
        self.nrows()
    }
    fn dims(&self) -> usize {
        self.ncols()
    }
    fn read(&self, start: usize, count: usize, out: &mut Vec<f64>) -> Result<()> {
        out.clear();
        out.extend(self.slice(ndarray::s![start..start + count, ..]).iter());
        Ok(())
    }
    fn read_into(&self, start: usize, count: usize, out: &mut [f64]) -> Result<()> {
        let rows = self.slice(ndarray::s![start..start + count, ..]);
        for (o, &v) in out.iter_mut().zip(rows.iter()) {
            *o = v;
        }
        Ok(())
    }
}

/// `len x dims` in single precision.
impl SeriesSource for ArrayView2<'_, f32> {
    fn len(&self) -> usize {
        self.nrows()
    }
    fn dims(&self) -> usize {
        self.ncols()
    }
    fn read(&self, start: usize, count: usize, out: &mut Vec<f64>) -> Result<()> {
        out.clear();
        out.extend(
            self.slice(ndarray::s![start..start + count, ..])
                .iter()
                .map(|&v| f64::from(v)),
        );
        Ok(())
    }
    fn read_into(&self, start: usize, count: usize, out: &mut [f64]) -> Result<()> {
        let rows = self.slice(ndarray::s![start..start + count, ..]);
        for (o, &v) in out.iter_mut().zip(rows.iter()) {
            *o = f64::from(v);
        }
        Ok(())
    }
}
