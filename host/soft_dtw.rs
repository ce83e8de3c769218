//! Soft-DTW for training loops: paired batches (series `k` of `x` against
//! series `k` of `y`, the loss workload), values and gradients, optionally
//! as the soft-DTW divergence, on the GPU or the CPU.
//!
//! ```
//! use ndarray::Array3;
//! use timewarp::{soft_dtw_pairs, soft_dtw_pairs_gradient, ComputeOptions, Device, SeriesSet, SoftDtw};
//!
//! // 4 pairs of univariate series of length 16 (batch x length x dims).
//! let x = Array3::from_shape_fn((4, 16, 1), |(k, t, _)| (k as f32 + t as f32 * 0.3).sin());
//! let y = Array3::from_shape_fn((4, 16, 1), |(k, t, _)| (k as f32 + t as f32 * 0.3).cos());
//! let (x, y) = (SeriesSet::from_multivariate(x.view())?, SeriesSet::from_multivariate(y.view())?);
//! let metric = SoftDtw::new(0.1)?;
//! let options = ComputeOptions::on(Device::Auto);
//!
//! let losses = soft_dtw_pairs(&x, &y, metric, &options)?;
//! assert_eq!(losses.len(), 4);
//! let result = soft_dtw_pairs_gradient(&x, &y, metric, &options, false)?;
//! assert_eq!(result.grad_x_array().unwrap().dim(), (4, 16, 1));
//!
//! // The divergence of a series with itself is 0.
//! let itself = soft_dtw_pairs(&x, &x, metric.divergence(), &options)?;
//! assert!(itself.iter().all(|&v| v == 0.0));
//! # Ok::<(), timewarp::Error>(())
//! ```

use crate::compute::{Backend, ComputeOptions};
use crate::gpu::Variant;
use crate::{cpu, Error, Float, Result, SeriesSet, SoftDtw, GPU_VARIANTS};
use ndarray::{Array1, Array2, Array3, ArrayView2};
use timewarp_kernels::SoftDtwParams;

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

/// Device memory one pair of `n x m` samples of `dims` values takes on the
/// GPU for the gradient in precision `T`: its whole cost matrix (`n * m`
/// values) dominates, besides both series and both gradients. Batches are
/// processed in chunks whose pairs fit the memory budget (by default 3/4 of
/// the free device memory); e.g. 1024 pairs of 512 x 512 in f32 take 1 GiB.
pub fn soft_dtw_gradient_bytes_per_pair<T: Float>(n: usize, m: usize, dims: usize) -> usize {
    let value = std::mem::size_of::<T>();
    (n * m + 2 * (n + m) * dims + 1) * value + 4 * std::mem::size_of::<u64>()
}

/// The kernels' parameters in precision `T`; an error if gamma or its
/// reciprocal does not fit `T` (e.g. gamma = 1e-50 in f32).
fn params<T: Float>(metric: &SoftDtw) -> Result<SoftDtwParams<T>> {
    let gamma = T::from_f64(metric.gamma());
    if !(gamma > T::ZERO && (T::ONE / gamma).is_finite()) {
        return Err(Error::InvalidParameter {
            name: "gamma",
            value: metric.gamma(),
            requirement: "must be representable in the chosen precision, with a finite reciprocal",
        });
    }
    Ok(SoftDtwParams::new(gamma).with_band(metric.band()))
}

/// Same number of series and same dimensions.
fn check_paired<T: Float>(x: &SeriesSet<T>, y: &SeriesSet<T>) -> Result<()> {
    if x.len() != y.len() {
        return Err(Error::InvalidInput(format!(
            "paired batches need as many series in x as in y: x has {}, y has {}",
            x.len(),
            y.len()
        )));
    }
    if x.dims() != y.dims() {
        return Err(Error::DimensionMismatch {
            first: x.dims(),
            second: y.dims(),
        });
    }
    Ok(())
}

/// The pairs the divergence needs, as one paired batch: `(x_k, y_k)`, then
/// `(x_k, x_k)`, then `(y_k, y_k)`.
fn divergence_batches<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
) -> Result<(SeriesSet<T>, SeriesSet<T>)> {
    fn views<T: Float>(s: &SeriesSet<T>) -> Vec<ArrayView2<'_, T>> {
        (0..s.len()).map(|k| s.series(k)).collect()
    }
    let (xs, ys) = (views(x), views(y));
    let join = |parts: [&Vec<ArrayView2<T>>; 3]| {
        SeriesSet::from_series(parts.into_iter().flatten().copied())
    };
    Ok((join([&xs, &xs, &ys])?, join([&ys, &xs, &ys])?))
}

fn variant(options: &ComputeOptions) -> Result<Option<Variant>> {
    options
        .gpu_variant
        .map(|name| {
            Variant::from_name(name).ok_or_else(|| {
                Error::InvalidInput(format!(
                    "unknown GPU kernel variant {name:?}; expected one of {GPU_VARIANTS:?}"
                ))
            })
        })
        .transpose()
}

/// Finite inputs give finite values unless the precision overflowed; a NaN
/// from the GPU means a pair was never written (outputs are poisoned).
fn check_finite<'a, T: Float>(values: impl IntoIterator<Item = &'a T>, gpu: bool) -> Result<()> {
    if let Some(bad) = values.into_iter().find(|v| !v.is_finite()) {
        if gpu && bad.to_f64().is_nan() {
            return Err(Error::Gpu("a kernel left a value unwritten".into()));
        }
        return Err(Error::Overflow { precision: T::NAME });
    }
    Ok(())
}

fn paired_values<T: Float>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    params: SoftDtwParams<T>,
    options: &ComputeOptions,
) -> Result<Vec<T>> {
    let backend = Backend::resolve(options.device)?;
    let values = match backend {
        Backend::Cpu => cpu::paired(a, b, &params),
        Backend::Gpu(gpu) => gpu.paired_values(
            "soft_dtw",
            variant(options)?,
            params,
            a,
            b,
            options.gpu_memory_budget,
        )?,
    };
    check_finite(&values, backend.is_gpu())?;
    Ok(values)
}

/// Values, the gradient with respect to the first batch and, if asked for,
/// to the second, each laid out like its batch's values.
pub(crate) type Gradients<T> = (Vec<T>, Vec<T>, Option<Vec<T>>);

fn paired_gradient<T: Float>(
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    params: SoftDtwParams<T>,
    with_b: bool,
    options: &ComputeOptions,
) -> Result<Gradients<T>> {
    let backend = Backend::resolve(options.device)?;
    let result = match backend {
        Backend::Cpu => cpu::paired_gradient(a, b, &params, with_b),
        Backend::Gpu(gpu) => {
            gpu.soft_dtw_paired_gradient(params, a, b, with_b, options.gpu_memory_budget)?
        }
    };
    let (values, grad_a, grad_b) = &result;
    check_finite(values, backend.is_gpu())?;
    check_finite(grad_a.iter().chain(grad_b.iter().flatten()), false)?;
    Ok(result)
}

/// The flat gradient of a batch (laid out like its values) cut into one
/// `len x dims` array per series.
fn split<T: Float>(flat: &[T], set: &SeriesSet<T>) -> Vec<Array2<T>> {
    let dims = set.dims();
    let mut start = 0;
    (0..set.len())
        .map(|k| {
            let len = set.series_len(k);
            let part = &flat[start * dims..(start + len) * dims];
            start += len;
            Array2::from_shape_vec((len, dims), part.to_vec()).expect("gradient shape")
        })
        .collect()
}

/// Soft-DTW of series `k` of `x` against series `k` of `y`, for every `k`:
/// the loss of a batch. With [`SoftDtw::divergence`], the soft-DTW
/// divergence. `x` and `y` need the same number of series and the same
/// dimensions; lengths may differ, within and between them.
///
/// On the GPU ([`crate::Device::Gpu`], or [`crate::Device::Auto`] when there is one) the
/// kernel variant is [`ComputeOptions::gpu_variant`]'s (`stencil`, `warp`
/// or `tiled`), else chosen from the lengths ([`crate::gpu::Gpu::choose_paired`]).
pub fn soft_dtw_pairs<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
) -> Result<Array1<T>> {
    check_paired(x, y)?;
    let params = params::<T>(&metric)?;
    if !metric.is_divergence() {
        return Ok(Array1::from(paired_values(x, y, params, options)?));
    }
    let (a, b) = divergence_batches(x, y)?;
    let v = paired_values(&a, &b, params, options)?;
    let n = x.len();
    let two = T::ONE + T::ONE;
    Ok((0..n)
        .map(|k| v[k] - (v[n + k] + v[2 * n + k]) / two)
        .collect())
}

/// [`soft_dtw_pairs`] and its gradients: with respect to each `x_k`, and to
/// each `y_k` if `with_respect_to_y`. The backward pass of Cuturi & Blondel
/// (2017, Algorithm 2) over the stored cost matrix of each pair; with a
/// band, only alignments inside it count. For the divergence the gradient
/// with respect to `x` is that of `sdtw(x, y)` minus that of `sdtw(x, x)`
/// with respect to its first argument (Soft-DTW is symmetric, so both
/// arguments of `sdtw(x, x)` contribute equally), and likewise for `y`.
///
/// On the GPU each pair's cost matrix is kept in device memory
/// ([`soft_dtw_gradient_bytes_per_pair`]); batches run in chunks that fit,
/// and a pair that alone does not fit the memory budget is an error.
pub fn soft_dtw_pairs_gradient<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
    with_respect_to_y: bool,
) -> Result<SoftDtwGradient<T>> {
    check_paired(x, y)?;
    let params = params::<T>(&metric)?;
    if !metric.is_divergence() {
        let (values, grad_a, grad_b) = paired_gradient(x, y, params, with_respect_to_y, options)?;
        return Ok(SoftDtwGradient {
            values: Array1::from(values),
            grad_x: split(&grad_a, x),
            grad_y: grad_b.map(|g| split(&g, y)),
        });
    }
    let (a, b) = divergence_batches(x, y)?;
    let (v, grad_a, grad_b) = paired_gradient(&a, &b, params, with_respect_to_y, options)?;
    let n = x.len();
    let two = T::ONE + T::ONE;
    let ga = split(&grad_a, &a);
    let values = (0..n)
        .map(|k| v[k] - (v[n + k] + v[2 * n + k]) / two)
        .collect();
    let grad_x = (0..n).map(|k| &ga[k] - &ga[n + k]).collect();
    let grad_y = grad_b.map(|g| {
        let gb = split(&g, &b);
        (0..n).map(|k| &gb[k] - &ga[2 * n + k]).collect()
    });
    Ok(SoftDtwGradient {
        values,
        grad_x,
        grad_y,
    })
}
