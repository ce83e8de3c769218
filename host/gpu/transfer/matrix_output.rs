//! The matrix the pair kernels' tiles fill: allocated, and each tile's part
//! of it faulted in, while the GPU computes the tile; each tile's results
//! checked and copied in when they arrive.

use super::image_writes::{copy_threads, PARALLEL_COPY_BYTES};
use crate::finite::check_finite_here;
use crate::gpu::plan::matrix_tiles::Tile;
use crate::results::{check_room, out_of_memory, zeros};
use crate::{Error, Float, Result};
use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis, ShapeBuilder};
use rayon::prelude::*;
use std::mem::size_of;
use std::ops::Range;
use std::sync::{Mutex, OnceLock};

/// The matrix the tiles' results go into, shared by the pipelines of
/// several GPUs. No two tiles of a plan write the same values (the plans'
/// coverage tests check it), so each tile is written in place with no lock
/// and the GPUs' pipelines copy their tiles at once. Whether the host has
/// room for the matrix is checked with the output, before any launch; the
/// matrix is allocated by the first [`Output::prepare`], with the first
/// tiles already queued, because reused memory is zeroed by the allocator,
/// at the host's memory speed. A pipeline calls `prepare` for a tile before
/// it waits for the tile's results: the tile's part of the matrix is
/// written once then, so that its pages are faulted in while the GPU works.
/// Each tile's results are checked ([`crate::finite::check_finite`]) as
/// they are copied in, on several threads for large tiles. Faulting in
/// pages and reading the results both run at the host's memory speed:
/// before the first launch or after the last kernel they would leave the
/// GPU idle.
pub(crate) struct Output<T> {
    shape: (usize, usize),
    /// Allocated by the first tile prepared or placed; `None` if the host
    /// could not.
    matrix: OnceLock<Option<SharedMatrix<T>>>,
    /// The first error: the allocation's, or a tile's results that failed
    /// the check.
    failed: Mutex<Option<Error>>,
}

/// A matrix whose disjoint blocks threads write at once, through a pointer
/// taken when it was allocated (the array itself is read again only by
/// [`Output::into_matrix`], which owns the output).
struct SharedMatrix<T> {
    matrix: Array2<T>,
    values: *mut T,
}

// SAFETY: the pointer is the matrix's own storage, which moves with it;
// threads write it only through `SharedMatrix::block`, whose callers
// write disjoint blocks.
unsafe impl<T: Send> Send for SharedMatrix<T> {}
// SAFETY: as for `Send`; no `&` method reads or writes the values except
// through `block`, under its contract.
unsafe impl<T: Send + Sync> Sync for SharedMatrix<T> {}

impl<T> SharedMatrix<T> {
    fn new(mut matrix: Array2<T>) -> Self {
        let values = matrix.as_mut_ptr();
        SharedMatrix { matrix, values }
    }

    /// The block `rows x cols` of the matrix, to write.
    ///
    /// # Safety
    /// The block lies within the matrix, and no other thread reads or
    /// writes any of its cells while the view lives.
    unsafe fn block(&self, rows: Range<usize>, cols: Range<usize>) -> ArrayViewMut2<'_, T> {
        let stride = self.matrix.ncols();
        debug_assert!(rows.end <= self.matrix.nrows() && cols.end <= stride);
        let shape = (rows.len(), cols.len()).strides((stride, 1));
        if rows.is_empty() || cols.is_empty() {
            return ArrayViewMut2::from_shape_ptr(shape, self.values);
        }
        ArrayViewMut2::from_shape_ptr(shape, self.values.add(rows.start * stride + cols.start))
    }
}

impl<T: Float> Output<T> {
    /// An output of `rows x cols` results; an error naming its size if
    /// the host cannot allocate it.
    pub(crate) fn new(shape: (usize, usize)) -> Result<Self> {
        check_room::<T>(shape.0, shape.1)?;
        Ok(Output {
            shape,
            matrix: OnceLock::new(),
            failed: Mutex::new(None),
        })
    }

    /// The matrix, allocated by the first caller; `None` (the allocation's
    /// error recorded) if the host could not.
    fn matrix(&self) -> Option<&SharedMatrix<T>> {
        self.matrix
            .get_or_init(|| match zeros(self.shape.0, self.shape.1) {
                Ok(matrix) => Some(SharedMatrix::new(matrix)),
                Err(error) => {
                    self.fail(error);
                    None
                }
            })
            .as_ref()
    }

    fn fail(&self, error: Error) {
        self.failed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get_or_insert(error);
    }

    /// Writes `tile`'s part of the matrix (and its mirror's), so that the
    /// copy of its results finds the pages in memory: called while the
    /// GPU computes the tile.
    pub(crate) fn prepare(&self, tile: &Tile) -> Result<()> {
        let Some(matrix) = self.matrix() else {
            return Err(out_of_memory::<T>(self.shape.0, self.shape.1));
        };
        // SAFETY: the tile lies within the matrix, and no other tile of the
        // plan has any of its cells (nor those of its mirror); its own
        // pipeline prepares it before it places it.
        unsafe {
            fill_zero(matrix.block(tile.rows.clone(), tile.cols.clone()));
            if tile.mirror {
                fill_zero(matrix.block(tile.cols.clone(), tile.rows.clone()));
            }
        }
        Ok(())
    }

    /// Checks a tile's results and copies them (row-major) into the
    /// matrix, and their transpose too for a mirrored tile. The matrix is
    /// allocated here if no [`Output::prepare`] has (a caller that computes
    /// each tile before placing it has nothing to overlap); where the host
    /// cannot, the output fails with that error.
    pub(crate) fn place(&self, tile: &Tile, values: &[T]) {
        let Some(matrix) = self.matrix() else {
            return;
        };
        // SAFETY: as in `prepare`: the tile's cells and its mirror's are
        // its own.
        let placed = unsafe { place(matrix, tile, values) };
        if let Err(error) = placed {
            self.fail(error);
        }
    }

    /// The matrix, once every tile of the plan is placed; the first error
    /// if the matrix could not be allocated or a tile's results failed the
    /// check.
    pub(crate) fn into_matrix(self) -> Result<Array2<T>> {
        let failed = self
            .failed
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(error) = failed {
            return Err(error);
        }
        match self.matrix.into_inner().flatten() {
            Some(shared) => Ok(shared.matrix),
            // No tiles: no pairs.
            None => zeros(self.shape.0, self.shape.1),
        }
    }
}

/// Copies a tile's results (row-major) into its block of `matrix`, and
/// their transpose too for a mirrored tile, checking them
/// ([`crate::finite::check_finite`]) as they are copied.
///
/// # Safety
/// The tile lies within the matrix, and no other thread reads or writes
/// its cells or its mirror's meanwhile.
unsafe fn place<T: Float>(matrix: &SharedMatrix<T>, tile: &Tile, values: &[T]) -> Result<()> {
    let view = ArrayView2::from_shape((tile.rows.len(), tile.cols.len()), values)
        .expect("a tile's results");
    let checked = copy_into(
        matrix.block(tile.rows.clone(), tile.cols.clone()),
        view,
        true,
    );
    if tile.mirror {
        copy_into(
            matrix.block(tile.cols.clone(), tile.rows.clone()),
            view.t(),
            false,
        )?;
    }
    checked
}

/// `target.assign(&source)`, checking `source` too if `check`, spread over
/// the copy threads when large; the first piece's error, in order.
fn copy_into<T: Float>(
    mut target: ArrayViewMut2<T>,
    source: ArrayView2<T>,
    check: bool,
) -> Result<()> {
    let copy = |mut target: ArrayViewMut2<T>, source: ArrayView2<T>| {
        target.assign(&source);
        if !check {
            return Ok(());
        }
        // Row-major results: each row of a piece is contiguous.
        source.rows().into_iter().try_for_each(|row| {
            check_finite_here(row.as_slice().expect("a row of the results"), true)
        })
    };
    let Some((axis, piece)) = pieces(&target.view()) else {
        return copy(target, source);
    };
    let pieces: Vec<_> = target
        .axis_chunks_iter_mut(axis, piece)
        .zip(source.axis_chunks_iter(axis, piece))
        .collect();
    let results: Vec<Result<()>> =
        copy_threads().install(|| pieces.into_par_iter().map(|(t, s)| copy(t, s)).collect());
    results.into_iter().collect()
}

/// Writes zeros over `target`, spread over the copy threads when large.
fn fill_zero<T: Float>(mut target: ArrayViewMut2<T>) {
    let Some((axis, piece)) = pieces(&target.view()) else {
        target.fill(T::ZERO);
        return;
    };
    let pieces: Vec<_> = target.axis_chunks_iter_mut(axis, piece).collect();
    copy_threads().install(|| pieces.into_par_iter().for_each(|mut t| t.fill(T::ZERO)));
}

/// How to cut `view` for the copy threads, along its longer axis, about
/// four pieces a thread; none when it is too small to gain from them.
fn pieces<T>(view: &ArrayView2<T>) -> Option<(Axis, usize)> {
    if view.len() * size_of::<T>() < PARALLEL_COPY_BYTES {
        return None;
    }
    let axis = if view.nrows() >= view.ncols() {
        Axis(0)
    } else {
        Axis(1)
    };
    let threads = copy_threads().current_num_threads();
    Some((axis, view.len_of(axis).div_ceil(4 * threads).max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, s};

    fn tile(rows: Range<usize>, cols: Range<usize>, mirror: bool) -> Tile {
        Tile {
            rows,
            cols,
            triangle: false,
            mirror,
        }
    }

    #[test]
    fn tiles_fill_the_matrix_and_mirrors_their_transpose() {
        let output = Output::<f64>::new((3, 3)).unwrap();
        let prepared_and_placed = |tile: Tile, values: &[f64]| {
            output.prepare(&tile).unwrap();
            output.place(&tile, values);
        };
        // Row 0 against columns 1 and 2, mirrored into column 0.
        prepared_and_placed(tile(0..1, 1..3, true), &[1.0, 2.0]);
        prepared_and_placed(tile(1..3, 1..3, false), &[3.0, 4.0, 5.0, 6.0]);
        prepared_and_placed(tile(0..1, 0..1, false), &[7.0]);
        let expected = array![[7.0, 1.0, 2.0], [1.0, 3.0, 4.0], [2.0, 5.0, 6.0]];
        assert_eq!(output.into_matrix().unwrap(), expected);
        // No tiles (no pairs): zeros of the shape.
        assert_eq!(
            Output::<f32>::new((0, 4))
                .unwrap()
                .into_matrix()
                .unwrap()
                .shape(),
            &[0, 4]
        );
    }

    #[test]
    fn tiles_placed_without_prepare_allocate_the_matrix() {
        // As the stencil kernel's tiles on several GPUs are placed.
        let output = Output::<f32>::new((2, 3)).unwrap();
        output.place(&tile(1..2, 0..3, false), &[4.0, 5.0, 6.0]);
        output.place(&tile(0..1, 0..3, false), &[1.0, 2.0, 3.0]);
        let expected = array![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]];
        assert_eq!(output.into_matrix().unwrap(), expected);
    }

    #[test]
    fn a_matrix_the_host_cannot_hold_fails_before_any_tile() {
        // 2^62 bytes: no host has them; a product past usize overflows.
        for shape in [(1 << 30, 1 << 30), (usize::MAX, 2)] {
            let error = Output::<f32>::new(shape).err().expect("no room");
            assert!(
                matches!(error, Error::OutOfMemory { rows, cols, .. } if (rows, cols) == shape),
                "{error}"
            );
        }
    }

    #[test]
    fn large_tiles_are_copied_and_checked_in_pieces() {
        // Tiles of more than PARALLEL_COPY_BYTES, along either axis, each
        // prepared first as the pipeline does.
        let (rows, cols) = (3, PARALLEL_COPY_BYTES / 4 + 5);
        let values: Vec<f32> = (0..rows * cols).map(|k| k as f32).collect();
        let wide = tile(0..rows, 0..cols, false);
        let output = Output::<f32>::new((rows, cols)).unwrap();
        output.prepare(&wide).unwrap();
        output.place(&wide, &values);
        let matrix = output.into_matrix().unwrap();
        let expected = Array2::from_shape_vec((rows, cols), values.clone()).unwrap();
        assert_eq!(matrix, expected);

        // A mirrored tile: its transpose too.
        let m = 513;
        let square: Vec<f32> = (0..m * m).map(|k| k as f32).collect();
        let mirrored = tile(0..m, m..2 * m, true);
        let output = Output::<f32>::new((2 * m, 2 * m)).unwrap();
        output.prepare(&mirrored).unwrap();
        output.place(&mirrored, &square);
        let matrix = output.into_matrix().unwrap();
        let block = Array2::from_shape_vec((m, m), square).unwrap();
        assert_eq!(matrix.slice(s![0..m, m..2 * m]), block);
        assert_eq!(matrix.slice(s![m..2 * m, 0..m]), block.t());
        assert!(matrix.slice(s![0..m, 0..m]).iter().all(|&v| v == 0.0));

        // A bad value in any piece fails the matrix; with several, the
        // first piece's decides (a NaN: a result left unwritten).
        let last = rows * cols - 1;
        for (nan, infinity) in [
            (Some(last), None),
            (None, Some(cols + 7)),
            (Some(1), Some(last)),
        ] {
            let mut bad = values.clone();
            if let Some(k) = nan {
                bad[k] = f32::NAN;
            }
            if let Some(k) = infinity {
                bad[k] = f32::INFINITY;
            }
            let output = Output::<f32>::new((rows, cols)).unwrap();
            output.prepare(&wide).unwrap();
            output.place(&wide, &bad);
            let error = output.into_matrix().unwrap_err();
            if nan.is_some() {
                assert!(
                    matches!(&error, Error::GpuFailure(m) if m.contains("unwritten")),
                    "{error}"
                );
            } else {
                assert!(matches!(error, Error::Overflow { .. }), "{error}");
            }
        }
    }

    #[test]
    fn a_tile_that_fails_the_check_fails_the_matrix() {
        let unwritten = Output::<f32>::new((2, 2)).unwrap();
        for (tile, values) in [
            (tile(0..1, 0..2, false), [1.0, 2.0]),
            (tile(1..2, 0..2, false), [f32::NAN, 3.0]),
        ] {
            unwritten.prepare(&tile).unwrap();
            unwritten.place(&tile, &values);
        }
        let error = unwritten.into_matrix().unwrap_err();
        assert!(
            matches!(&error, Error::GpuFailure(message) if message.contains("unwritten")),
            "{error}"
        );
        let overflowed = Output::<f64>::new((1, 3)).unwrap();
        overflowed.prepare(&tile(0..1, 0..3, false)).unwrap();
        overflowed.place(&tile(0..1, 0..3, false), &[1.0, f64::INFINITY, 2.0]);
        let error = overflowed.into_matrix().unwrap_err();
        assert!(matches!(error, Error::Overflow { .. }), "{error}");
    }
}
