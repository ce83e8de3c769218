//! What the paired Soft-DTW computations return, shared by the backends
//! that compute them and the API that assembles them.

use crate::Float;
use ndarray::{Array1, Array2, Array3};

/// Values and gradients of paired batches.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftDtwGradient<T> {
    /// One value per pair.
    pub values: Array1<T>,
    /// The gradient of value `k` with respect to `x_k`, `len(x_k) x dims`.
    pub grad_x: Vec<Array2<T>>,
    /// The gradient of value `k` with respect to `y_k`, if asked for.
    pub grad_y: Option<Vec<Array2<T>>>,
}

impl<T: Float> SoftDtwGradient<T> {
    /// `grad_x` as one `pairs x length x dims` array, if every `x_k` has
    /// the same length.
    pub fn grad_x_array(&self) -> Option<Array3<T>> {
        stack(&self.grad_x)
    }

    /// `grad_y` as one array, if asked for and every `y_k` has the same length.
    pub fn grad_y_array(&self) -> Option<Array3<T>> {
        self.grad_y.as_deref().and_then(stack)
    }
}

fn stack<T: Float>(arrays: &[Array2<T>]) -> Option<Array3<T>> {
    let views: Vec<_> = arrays.iter().map(|a| a.view()).collect();
    ndarray::stack(ndarray::Axis(0), &views).ok()
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
