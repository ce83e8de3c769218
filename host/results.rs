//! What the computations return, shared by the backends that compute them
//! and the API that assembles them: result matrices, and the paired
//! Soft-DTW values and gradients.

use crate::{Error, Float, Result};
use cudarc::driver::ValidAsZeroBits;
use ndarray::{Array1, Array2, Array3, ArrayView2, ArrayView3};

/// The error for a `rows x cols` result the host cannot allocate.
pub(crate) fn out_of_memory<T>(rows: usize, cols: usize) -> Error {
    Error::OutOfMemory {
        rows,
        cols,
        bytes: rows as u128 * cols as u128 * std::mem::size_of::<T>() as u128,
    }
}

/// A `rows x cols` result of zeros, or [`Error::OutOfMemory`] where the host
/// cannot allocate it: every result matrix is allocated here, so that a
/// result too large is an error instead of an aborted process. Its pages
/// are zeroed by the OS when first written, as `vec![0.0; n]`'s are (the
/// GPU pipeline writes each tile's part while the GPU computes it).
pub(crate) fn zeros<T: ValidAsZeroBits>(rows: usize, cols: usize) -> Result<Array2<T>> {
    const { assert!(std::mem::size_of::<T>() > 0, "results are numbers") };
    let len = rows
        .checked_mul(cols)
        .ok_or_else(|| out_of_memory::<T>(rows, cols))?;
    if len == 0 {
        return Ok(Array2::from_shape_vec((rows, cols), Vec::new()).expect("no values"));
    }
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| out_of_memory::<T>(rows, cols))?;
    // SAFETY: the layout's size is not 0 (`len` values of a sized type).
    let values = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if values.is_null() {
        return Err(out_of_memory::<T>(rows, cols));
    }
    // SAFETY: allocated by the global allocator with the layout of `len`
    // values of `T`, all zero bits, which are a valid `T`.
    let values = unsafe { Vec::from_raw_parts(values, len, len) };
    Ok(Array2::from_shape_vec((rows, cols), values).expect("rows x cols values"))
}

/// [`Error::OutOfMemory`] where the host cannot allocate a `rows x cols`
/// result, checked before any work by a reservation given back at once,
/// untouched: where the result is allocated later (with the first tiles
/// queued, so that the allocator's zeroing of reused memory overlaps the
/// GPU's work), a size the host can never hold still fails first.
pub(crate) fn check_room<T>(rows: usize, cols: usize) -> Result<()> {
    let len = rows
        .checked_mul(cols)
        .ok_or_else(|| out_of_memory::<T>(rows, cols))?;
    Vec::<T>::new()
        .try_reserve_exact(len)
        .map_err(|_| out_of_memory::<T>(rows, cols))
}

/// Values and gradients of paired batches.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftDtwGradient<T> {
    /// One value per pair.
    pub values: Array1<T>,
    /// The gradient of value `k` with respect to `x_k`, `len(x_k) x dims`.
    pub grad_x: BatchGradient<T>,
    /// The gradient of value `k` with respect to `y_k`, if asked for.
    pub grad_y: Option<BatchGradient<T>>,
}

impl<T: Float> SoftDtwGradient<T> {
    /// `grad_x` as one `pairs x length x dims` array, if every `x_k` has
    /// the same length.
    pub fn grad_x_array(&self) -> Option<ArrayView3<'_, T>> {
        self.grad_x.as_array3()
    }

    /// `grad_y` as one array, if asked for and every `y_k` has the same length.
    pub fn grad_y_array(&self) -> Option<ArrayView3<'_, T>> {
        self.grad_y.as_ref().and_then(BatchGradient::as_array3)
    }
}

/// The gradients of a batch's pairs with respect to its series: series `k`'s
/// is a `len(x_k) x dims` block, laid out like the batch's values, all of
/// them in one buffer (one allocation a batch, not one a series).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchGradient<T> {
    values: Vec<T>,
    /// Sample offsets of the series, from 0.
    offsets: Vec<u64>,
    dims: usize,
}

impl<T: Float> BatchGradient<T> {
    /// The gradient `values` of the series that the sample `offsets`
    /// delimit (`len + 1` of them, from any start), samples of `dims` values.
    pub(crate) fn new(values: Vec<T>, offsets: &[u64], dims: usize) -> Self {
        let base = offsets.first().copied().unwrap_or(0);
        let offsets: Vec<u64> = offsets.iter().map(|&o| o - base).collect();
        debug_assert_eq!(
            values.len() as u64,
            offsets.last().copied().unwrap_or(0) * dims as u64
        );
        BatchGradient {
            values,
            offsets,
            dims,
        }
    }

    /// The number of series.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values a sample.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The gradient with respect to series `k`, `len(k) x dims`, or `None`
    /// past the last series.
    pub fn get(&self, k: usize) -> Option<ArrayView2<'_, T>> {
        let (start, end) = (*self.offsets.get(k)?, *self.offsets.get(k + 1)?);
        let (start, end) = (start as usize, end as usize);
        let part = &self.values[start * self.dims..end * self.dims];
        ArrayView2::from_shape((end - start, self.dims), part).ok()
    }

    /// The gradient with respect to series `k`, as [`BatchGradient::get`].
    ///
    /// # Panics
    /// If `k >= self.len()`, as indexing past a slice's end does.
    pub fn series(&self, k: usize) -> ArrayView2<'_, T> {
        let len = self.len();
        self.get(k)
            .unwrap_or_else(|| panic!("series {k} of a batch gradient of {len}"))
    }

    /// Each series' gradient in turn.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = ArrayView2<'_, T>> + '_ {
        (0..self.len()).map(|k| self.series(k))
    }

    /// Every series' gradient, one after the other: laid out like the
    /// batch's values.
    pub fn as_slice(&self) -> &[T] {
        &self.values
    }

    /// The sample offsets of the series (`len + 1`, the first 0).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The series' common length, if they all have one (and there is at
    /// least one series).
    fn common_len(&self) -> Option<usize> {
        let first = self.offsets.get(1).copied()? as usize;
        let equal = self
            .offsets
            .windows(2)
            .all(|w| (w[1] - w[0]) as usize == first);
        equal.then_some(first)
    }

    /// All of it as one `series x length x dims` array, if every series
    /// has the same length: a view, nothing copied.
    pub fn as_array3(&self) -> Option<ArrayView3<'_, T>> {
        let len = self.common_len()?;
        ArrayView3::from_shape((self.len(), len, self.dims), &self.values).ok()
    }

    /// [`BatchGradient::as_array3`], owning the values (nothing copied);
    /// `Err(self)` if the series' lengths differ.
    pub fn into_array3(self) -> Result<Array3<T>, Self> {
        let Some(len) = self.common_len() else {
            return Err(self);
        };
        let shape = (self.len(), len, self.dims);
        Ok(Array3::from_shape_vec(shape, self.values).expect("the values fill the shape"))
    }

    /// One array a series (a copy each).
    pub fn to_arrays(&self) -> Vec<Array2<T>> {
        self.iter().map(|g| g.to_owned()).collect()
    }

    /// Subtracts `other`'s gradients (same series and dims) from these.
    pub(crate) fn subtract(&mut self, other: &BatchGradient<T>) {
        debug_assert_eq!((&self.offsets, self.dims), (&other.offsets, other.dims));
        for (mine, theirs) in self.values.iter_mut().zip(&other.values) {
            *mine = *mine - *theirs;
        }
    }
}

impl<'a, T: Float> IntoIterator for &'a BatchGradient<T> {
    type Item = ArrayView2<'a, T>;
    type IntoIter = Box<dyn ExactSizeIterator<Item = ArrayView2<'a, T>> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

/// What the CPU backend's paired gradient returns: the values, the
/// gradient with respect to the first batch and, if asked for, to the
/// second, each laid out like its batch's values.
pub(crate) type Gradients<T> = (Vec<T>, Vec<T>, Option<Vec<T>>);

/// Values and gradients of a paired computation, each gradient laid out
/// like its batch's values.
#[derive(Debug)]
pub(crate) struct PairedGradients<T> {
    /// `sdtw(x_k, y_k)` for every `k`; for the divergence then
    /// `sdtw(x_k, x_k)`, then `sdtw(y_k, y_k)`.
    pub values: Vec<T>,
    /// Of `sdtw(x_k, y_k)` with respect to `x_k`.
    pub grad_x: Vec<T>,
    /// Of `sdtw(x_k, y_k)` with respect to `y_k`, if asked for.
    pub grad_y: Option<Vec<T>>,
    /// For the divergence: of `sdtw(x_k, x_k)` with respect to its first
    /// argument.
    pub grad_xx: Option<Vec<T>>,
    /// For the divergence, if asked for `y`: of `sdtw(y_k, y_k)` with
    /// respect to its first argument.
    pub grad_yy: Option<Vec<T>>,
}

#[cfg(test)]
mod tests {
    use super::{zeros, BatchGradient};
    use crate::Error;
    use ndarray::array;

    #[test]
    fn results_are_zeros_or_an_error_naming_their_size() {
        assert_eq!(
            zeros::<f64>(2, 3).unwrap(),
            ndarray::Array2::<f64>::zeros((2, 3))
        );
        assert_eq!(zeros::<f32>(0, 4).unwrap().shape(), &[0, 4]);
        assert_eq!(zeros::<usize>(3, 1).unwrap().sum(), 0);
        // More elements than a usize counts, and more bytes than an
        // allocation may have: errors, not aborts.
        for (rows, cols, bytes) in [(1 << 40, 1 << 40, 1u128 << 83), (1 << 31, 1 << 30, 1 << 64)] {
            let error = zeros::<f64>(rows, cols).unwrap_err();
            assert!(
                matches!(error, Error::OutOfMemory { rows: r, cols: c, bytes: b }
                    if (r, c, b) == (rows, cols, bytes)),
                "{error:?}"
            );
            assert!(error.to_string().contains(&bytes.to_string()), "{error}");
        }
    }

    /// Series of 2, 0 and 3 samples of 2 values, offsets from 5 (a slice
    /// of a larger batch): each series' block, the flat values, no
    /// common length.
    #[test]
    fn series_are_their_blocks_of_the_values() {
        let values: Vec<f64> = (0..10).map(f64::from).collect();
        let g = BatchGradient::new(values.clone(), &[5, 7, 7, 10], 2);
        assert_eq!((g.len(), g.dims(), g.offsets()), (3, 2, &[0, 2, 2, 5][..]));
        assert_eq!(g.series(0), array![[0.0, 1.0], [2.0, 3.0]]);
        assert_eq!(g.series(1).dim(), (0, 2));
        assert_eq!(g.series(2), array![[4.0, 5.0], [6.0, 7.0], [8.0, 9.0]]);
        assert!(g.get(3).is_none());
        let blocks: Vec<usize> = g.iter().map(|s| s.nrows()).collect();
        assert_eq!(blocks, [2, 0, 3]);
        assert_eq!(g.as_slice(), &values[..]);
        assert!(g.as_array3().is_none());
        let arrays = g.to_arrays();
        assert_eq!(arrays[2], g.series(2));
        assert_eq!(g.clone().into_array3(), Err(g));
    }

    /// Equal lengths: one array, the same in a view and owned.
    #[test]
    fn equal_lengths_make_one_array() {
        let values: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let g = BatchGradient::new(values, &[0, 2, 4, 6], 2);
        let view = g.as_array3().expect("equal lengths");
        assert_eq!(view.dim(), (3, 2, 2));
        assert_eq!(view[[2, 1, 0]], 10.0);
        assert_eq!(view.index_axis(ndarray::Axis(0), 1), g.series(1));
        let owned = g.clone().into_array3().expect("equal lengths");
        assert_eq!(owned, view);
        let mut minus = g.clone();
        minus.subtract(&g);
        assert!(minus.as_slice().iter().all(|&v| v == 0.0));
    }

    /// No series: empty, nothing to index, no array.
    #[test]
    fn no_series() {
        let g = BatchGradient::<f64>::new(Vec::new(), &[0], 1);
        assert!(g.is_empty());
        assert!(g.get(0).is_none());
        assert!(g.as_array3().is_none());
    }
}
