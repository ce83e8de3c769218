//! The matrix the pair kernels' tiles fill: allocated when the first
//! results arrive, each tile's results checked and copied in as they do.

use super::layout::{copy_threads, PARALLEL_COPY_BYTES};
use super::plan::matrix::Tile;
use crate::finite::check_finite;
use crate::{Error, Float, Result};
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;
use std::mem::size_of;
use std::sync::Mutex;

/// The matrix the tiles' results go into, shared by the pipelines of
/// several GPUs: no two tiles of a plan write the same values, and the
/// lock makes each copy whole. Each tile's results are checked
/// ([`check_finite`]) as they arrive, while the GPU computes the next
/// tiles, and the matrix is allocated when the first results arrive, with
/// tiles already queued: a large matrix's allocation and its check each
/// read or fault in every page, which before the first launch or after
/// the last one would leave the GPU idle.
pub(crate) struct Output<T> {
    shape: (usize, usize),
    placed: Mutex<Placed<T>>,
}

struct Placed<T> {
    matrix: Option<Array2<T>>,
    /// The first tile's results that failed the check.
    failed: Option<Error>,
}

impl<T: Float> Output<T> {
    /// An output of `rows x cols` results.
    pub(crate) fn new(shape: (usize, usize)) -> Self {
        Output {
            shape,
            placed: Mutex::new(Placed {
                matrix: None,
                failed: None,
            }),
        }
    }

    /// Checks a tile's results and copies them (row-major) into the
    /// matrix, and their transpose too for a mirrored tile.
    pub(crate) fn place(&self, tile: &Tile, values: &[T]) {
        let checked = check_finite(values, true);
        let mut placed = self
            .placed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(error) = checked {
            placed.failed.get_or_insert(error);
        }
        let shape = self.shape;
        let matrix = placed
            .matrix
            .get_or_insert_with(|| Array2::from_elem(shape, T::ZERO));
        place(&mut matrix.view_mut(), tile, values);
    }

    /// The matrix, once every tile of the plan is placed; the check's
    /// error if a tile's results failed it.
    pub(crate) fn into_matrix(self) -> Result<Array2<T>> {
        let placed = self
            .placed
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(error) = placed.failed {
            return Err(error);
        }
        Ok(placed
            .matrix
            .unwrap_or_else(|| Array2::from_elem(self.shape, T::ZERO)))
    }
}

/// Copies a tile's results (row-major) into `out`, and their transpose
/// too for a mirrored tile.
fn place<T: Float>(out: &mut ArrayViewMut2<T>, tile: &Tile, values: &[T]) {
    let view = ArrayView2::from_shape((tile.rows.len(), tile.cols.len()), values)
        .expect("a tile's results");
    copy_into(
        out.slice_mut(s![tile.rows.clone(), tile.cols.clone()]),
        view,
    );
    if tile.mirror {
        copy_into(
            out.slice_mut(s![tile.cols.clone(), tile.rows.clone()]),
            view.t(),
        );
    }
}

/// `target.assign(&source)`, spread over threads when large (the first
/// write to a fresh matrix also takes its page faults).
fn copy_into<T: Float>(mut target: ArrayViewMut2<T>, source: ArrayView2<T>) {
    if source.len() * size_of::<T>() < PARALLEL_COPY_BYTES {
        target.assign(&source);
        return;
    }
    let axis = if target.nrows() >= target.ncols() {
        Axis(0)
    } else {
        Axis(1)
    };
    let threads = copy_threads();
    let piece = target
        .len_of(axis)
        .div_ceil(4 * threads.current_num_threads())
        .max(1);
    let pieces: Vec<_> = target
        .axis_chunks_iter_mut(axis, piece)
        .zip(source.axis_chunks_iter(axis, piece))
        .collect();
    threads.install(|| pieces.into_par_iter().for_each(|(mut t, s)| t.assign(&s)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use std::ops::Range;

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
        let output = Output::<f64>::new((3, 3));
        // Row 0 against columns 1 and 2, mirrored into column 0.
        output.place(&tile(0..1, 1..3, true), &[1.0, 2.0]);
        output.place(&tile(1..3, 1..3, false), &[3.0, 4.0, 5.0, 6.0]);
        output.place(&tile(0..1, 0..1, false), &[7.0]);
        let expected = array![[7.0, 1.0, 2.0], [1.0, 3.0, 4.0], [2.0, 5.0, 6.0]];
        assert_eq!(output.into_matrix().unwrap(), expected);
        // No tiles (no pairs): zeros of the shape.
        assert_eq!(
            Output::<f32>::new((0, 4)).into_matrix().unwrap().shape(),
            &[0, 4]
        );
    }

    #[test]
    fn a_tile_that_fails_the_check_fails_the_matrix() {
        let unwritten = Output::<f32>::new((2, 2));
        unwritten.place(&tile(0..1, 0..2, false), &[1.0, 2.0]);
        unwritten.place(&tile(1..2, 0..2, false), &[f32::NAN, 3.0]);
        let error = unwritten.into_matrix().unwrap_err();
        assert!(
            matches!(&error, Error::Gpu(message) if message.contains("unwritten")),
            "{error}"
        );
        let overflowed = Output::<f64>::new((1, 3));
        overflowed.place(&tile(0..1, 0..3, false), &[1.0, f64::INFINITY, 2.0]);
        let error = overflowed.into_matrix().unwrap_err();
        assert!(matches!(error, Error::Overflow { .. }), "{error}");
    }
}
