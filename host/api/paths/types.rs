//! What the path functions return, and the samples they read.

use crate::Float;
use ndarray::ArrayView2;
use std::borrow::Cow;

/// A DTW warping path and the DTW value along it.
#[derive(Clone, Debug, PartialEq)]
pub struct Alignment<T> {
    /// The cells `(i, j)` of the path, sample `i` of `x` meeting sample `j`
    /// of `y`, from `(0, 0)` to `(n - 1, m - 1)`; each step adds 1 to `i`,
    /// to `j` or to both.
    pub path: Vec<(usize, usize)>,
    /// The sum of the path's squared Euclidean costs: `distance`'s value.
    pub value: T,
    /// Whether the GPU computed it (the long unbanded pairs' passes).
    pub on_gpu: bool,
}

/// How a TWED edit step reaches its cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EditStep {
    /// Samples `x_i` and `y_j` are matched (the diagonal step).
    Match,
    /// Sample `x_i` is deleted (the step from `(i - 1, j)`).
    DeleteX,
    /// Sample `y_j` is deleted (the step from `(i, j - 1)`).
    DeleteY,
}

impl EditStep {
    /// `match`, `delete-x` or `delete-y`, as the CLI writes them.
    pub fn name(self) -> &'static str {
        match self {
            EditStep::Match => "match",
            EditStep::DeleteX => "delete-x",
            EditStep::DeleteY => "delete-y",
        }
    }
}

/// One step of a TWED edit path: the cell `(i, j)` it reaches and its cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edit<T> {
    pub step: EditStep,
    pub i: usize,
    pub j: usize,
    pub cost: T,
}

/// A TWED edit path and the TWED value, the sum of its steps' costs.
#[derive(Clone, Debug, PartialEq)]
pub struct EditPath<T> {
    /// The steps in order: the first is always the match of `x_0` with
    /// `y_0`, the last reaches `(n - 1, m - 1)`.
    pub edits: Vec<Edit<T>>,
    pub value: T,
    /// Whether the GPU computed it (the long pairs' passes).
    pub on_gpu: bool,
}

/// A series as contiguous samples of `dims` values (copied when the view
/// is not contiguous, e.g. reversed).
pub(crate) struct Samples<'a, T: Clone> {
    values: Cow<'a, [T]>,
    dims: usize,
}

impl<'a, T: Float> Samples<'a, T> {
    pub(crate) fn new(view: ArrayView2<'a, T>) -> Self {
        let dims = view.ncols();
        let values = match view.to_slice() {
            Some(slice) => Cow::Borrowed(slice),
            None => Cow::Owned(view.iter().copied().collect()),
        };
        Self { values, dims }
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len() / self.dims
    }

    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    pub(crate) fn sample(&self, i: usize) -> &[T] {
        &self.values[i * self.dims..(i + 1) * self.dims]
    }

    /// DTW's local cost: the squared Euclidean distance of `self_i`, `other_j`.
    #[inline]
    pub(crate) fn squared_distance(&self, i: usize, other: &Samples<T>, j: usize) -> T {
        self.sample(i)
            .iter()
            .zip(other.sample(j))
            .fold(T::ZERO, |sum, (&u, &v)| sum + (u - v) * (u - v))
    }
}

/// The predecessor the tie rule picks among the totals reaching a cell
/// (docs/algorithms.md, "Paths"): the diagonal on a tie with either other,
/// then the one from the row above, then the one from the left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Step {
    Diagonal,
    Up,
    Left,
}

impl Step {
    #[inline]
    pub(crate) fn preferred<T: Float>(diagonal: T, up: T, left: T) -> (Step, T) {
        if diagonal <= up && diagonal <= left {
            (Step::Diagonal, diagonal)
        } else if up <= left {
            (Step::Up, up)
        } else {
            (Step::Left, left)
        }
    }
}
