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

use crate::finite::check_finite;
use crate::gpu::{self, Gpu};
use crate::interrupt;
use crate::resident::Stored;
use crate::results::{BatchGradient, PairedGradients};
use crate::{
    cpu, Backend, ComputeOptions, Device, Error, Float, ResidentSet, Result, SeriesSet, SoftDtw,
    SoftDtwGradient, Variant,
};
use ndarray::{Array1, Array2, ArrayView2};
use timewarp_kernels::SoftDtwParams;

/// Device memory one pair of `n x m` samples of `dims` values takes on the
/// GPU for the gradient in precision `T`, at most: its whole cost matrix
/// dominates (`n * m` values, or for `m <= 1024`, where the warp driver
/// stores its wavefront's steps, up to `(n + 31) * (m + 15)`), besides both
/// series, both gradients and the borders between a pair's panels (three,
/// of `n + 1` rows). Batches are processed in chunks whose pairs fit the
/// memory budget (by default 3/4 of the free device memory); e.g. 1024
/// pairs of 512 x 512 in f32 take about 1.2 GiB.
pub fn soft_dtw_gradient_bytes_per_pair<T: Float>(n: usize, m: usize, dims: usize) -> usize {
    let value = std::mem::size_of::<T>();
    let store = (n * m).max((n + 31) * (m + 15));
    // Each row of a border: tagged values of 16 bytes (the forward pass's
    // cell, the backward pass's derivative, key and row gradient) and the
    // row shares.
    let borders = 3 * (n + 1) * ((3 + dims) * 16 + dims * value + 16);
    (store + 2 * (n + m) * dims + 1) * value + 4 * std::mem::size_of::<u64>() + borders
}

/// The kernels' parameters in precision `T`; an error if gamma or its
/// reciprocal does not fit `T` (e.g. gamma = 1e-50 in f32).
pub(super) fn params<T: Float>(metric: &SoftDtw) -> Result<SoftDtwParams<T>> {
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
fn check_paired(x: (usize, usize), y: (usize, usize)) -> Result<()> {
    let ((x_len, x_dims), (y_len, y_dims)) = (x, y);
    if x_len != y_len {
        return Err(Error::InvalidInput(format!(
            "paired batches need as many series in x as in y: x has {x_len}, y has {y_len}"
        )));
    }
    if x_dims != y_dims {
        return Err(Error::DimensionMismatch {
            first: x_dims,
            second: y_dims,
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

/// The batches of a paired computation, where it runs (counts and dims
/// checked).
enum Paired<'a, T> {
    Cpu(&'a SeriesSet<T>, &'a SeriesSet<T>),
    /// Host batches, uploaded for the call to the GPUs of the options.
    Gpu(&'a SeriesSet<T>, &'a SeriesSet<T>),
    /// Resident sets, read where they are: each GPU that holds both whole,
    /// with its copies (the first GPU of `x`'s first).
    Resident(Vec<gpu::ResidentCopies<'a, T>>),
}

impl<'a, T: Float> Paired<'a, T> {
    /// Host batches on the backend `options.device` resolves to.
    fn host(x: &'a SeriesSet<T>, y: &'a SeriesSet<T>, options: &ComputeOptions) -> Result<Self> {
        Ok(match Backend::resolve_on(options.device, options.gpus)? {
            Backend::Cpu => Paired::Cpu(x, y),
            Backend::Gpu(_) => Paired::Gpu(x, y),
        })
    }

    /// Resident sets, computed where they live; both must live in the
    /// same place, and `options.device` must agree (`Auto` always does).
    fn resident(
        x: &'a ResidentSet<T>,
        y: &'a ResidentSet<T>,
        options: &ComputeOptions,
    ) -> Result<Self> {
        if x.on_gpu() != y.on_gpu() {
            return Err(Error::InvalidInput(format!(
                "paired resident sets must live in the same place, but x lives in {} and y in {}; \
                 upload both with the same device",
                x.lives(),
                y.lives()
            )));
        }
        x.backend(options.device)?;
        match (x.stored()?, y.stored()?) {
            (Stored::Host(x), Stored::Host(y)) => Ok(Paired::Cpu(x, y)),
            (Stored::Gpu(gpu), Stored::Gpu(on)) if std::ptr::eq(gpu, on) => {
                let (xs, ys) = (x.gpu_copies()?, y.gpu_copies()?);
                let both = xs
                    .into_iter()
                    .filter_map(|(gpu, x)| {
                        let (_, y) = ys.iter().find(|(on, _)| std::ptr::eq(gpu, *on))?;
                        Some((gpu, x, *y))
                    })
                    .collect();
                Ok(Paired::Resident(both))
            }
            (Stored::Gpu(gpu), Stored::Gpu(on)) => Err(Error::InvalidInput(format!(
                "paired resident sets must live on the same GPU, but x lives on {} and y on {}; \
                 upload both with the same GPUs",
                gpu.name(),
                on.name()
            ))),
            _ => unreachable!("both sets live where the backend computes"),
        }
    }

    fn on_gpu(&self) -> bool {
        !matches!(self, Paired::Cpu(..))
    }

    /// The sample offsets of `x` and `y`, and the dims.
    fn layout(&self) -> (&'a [u64], &'a [u64], usize) {
        match self {
            Paired::Cpu(x, y) | Paired::Gpu(x, y) => (x.parts().1, y.parts().1, x.dims()),
            Paired::Resident(copies) => {
                let (_, x, y) = copies[0];
                (x.offsets(), y.offsets(), x.dims())
            }
        }
    }

    /// The values, laid out as [`PairedGradients::values`].
    fn values(
        &self,
        params: SoftDtwParams<T>,
        divergence: bool,
        options: &ComputeOptions,
    ) -> Result<Vec<T>> {
        let budget = options.gpu_memory_budget;
        let variant = options.gpu_variant;
        let running = interrupt::Running::start();
        let values = match *self {
            Paired::Cpu(x, y) if divergence => {
                let (a, b) = divergence_batches(x, y)?;
                cpu::paired(&a, &b, &params)
            }
            Paired::Cpu(x, y) => cpu::paired(x, y, &params),
            Paired::Gpu(x, y) => {
                let gpus = Gpu::select(options.gpus)?;
                gpu::paired_values_spread(&gpus, variant, params, (x, y), divergence, budget)?
            }
            Paired::Resident(ref copies) => {
                gpu::paired_values_resident_spread(copies, variant, params, divergence, budget)?
            }
        };
        interrupt::check()?;
        drop(running);
        check_finite(&values, self.on_gpu())?;
        Ok(values)
    }

    /// The values and gradients (with respect to `y` if `with_y`).
    fn gradients(
        &self,
        params: SoftDtwParams<T>,
        divergence: bool,
        with_y: bool,
        options: &ComputeOptions,
    ) -> Result<PairedGradients<T>> {
        let (budget, variant) = (options.gpu_memory_budget, options.gpu_variant);
        let running = interrupt::Running::start();
        let result = match *self {
            Paired::Cpu(x, y) => cpu_gradients(x, y, params, divergence, with_y)?,
            Paired::Gpu(x, y) => {
                let gpus = Gpu::select(options.gpus)?;
                gpu::paired_gradient_spread(
                    &gpus,
                    variant,
                    params,
                    (x, y),
                    divergence,
                    with_y,
                    budget,
                )?
            }
            Paired::Resident(ref copies) => gpu::paired_gradient_resident_spread(
                copies,
                variant,
                params,
                (divergence, with_y),
                budget,
            )?,
        };
        interrupt::check()?;
        drop(running);
        check_finite(&result.values, self.on_gpu())?;
        let gradients = [&result.grad_y, &result.grad_xx, &result.grad_yy];
        let others = gradients.into_iter().filter_map(Option::as_ref);
        for gradient in std::iter::once(&result.grad_x).chain(others) {
            check_finite(gradient, false)?;
        }
        Ok(result)
    }
}

/// [`Paired::gradients`] on the CPU: the divergence's pairs as one batch.
fn cpu_gradients<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    params: SoftDtwParams<T>,
    divergence: bool,
    with_y: bool,
) -> Result<PairedGradients<T>> {
    if !divergence {
        let (values, grad_x, grad_y) = cpu::paired_gradient(x, y, &params, with_y);
        return Ok(PairedGradients {
            values,
            grad_x,
            grad_y,
            grad_xx: None,
            grad_yy: None,
        });
    }
    let (a, b) = divergence_batches(x, y)?;
    let (values, mut grad_a, grad_b) = cpu::paired_gradient(&a, &b, &params, with_y);
    let (x_values, y_values) = (x.total_samples() * x.dims(), y.total_samples() * y.dims());
    // `a` is x, x, y; `b` is y, x, y.
    let grad_yy = grad_a.split_off(2 * x_values);
    let grad_xx = grad_a.split_off(x_values);
    Ok(PairedGradients {
        values,
        grad_x: grad_a,
        grad_y: grad_b.map(|mut g| {
            g.truncate(y_values);
            g
        }),
        grad_xx: Some(grad_xx),
        grad_yy: with_y.then_some(grad_yy),
    })
}

/// The values of `pairs` pairs: Soft-DTW, or the divergence from the three
/// values of each pair.
fn combine_values<T: Float>(v: Vec<T>, pairs: usize, divergence: bool) -> Array1<T> {
    if !divergence {
        return Array1::from(v);
    }
    let n = pairs;
    let two = T::ONE + T::ONE;
    (0..n)
        .map(|k| v[k] - (v[n + k] + v[2 * n + k]) / two)
        .collect()
}

fn values<T: Float>(
    inputs: Paired<T>,
    metric: SoftDtw,
    params: SoftDtwParams<T>,
    options: &ComputeOptions,
) -> Result<Array1<T>> {
    let pairs = inputs.layout().0.len() - 1;
    let v = inputs.values(params, metric.is_divergence(), options)?;
    Ok(combine_values(v, pairs, metric.is_divergence()))
}

fn gradients<T: Float>(
    inputs: Paired<T>,
    metric: SoftDtw,
    params: SoftDtwParams<T>,
    options: &ComputeOptions,
    with_y: bool,
) -> Result<SoftDtwGradient<T>> {
    let divergence = metric.is_divergence();
    let result = inputs.gradients(params, divergence, with_y, options)?;
    let (x, y, dims) = inputs.layout();
    let mut grad_x = BatchGradient::new(result.grad_x, x, dims);
    let mut grad_y = result.grad_y.map(|g| BatchGradient::new(g, y, dims));
    if !divergence {
        return Ok(SoftDtwGradient {
            values: Array1::from(result.values),
            grad_x,
            grad_y,
        });
    }
    // The gradient of sdtw(x, y) minus that of sdtw(x, x) with respect to
    // its first argument, and likewise for y.
    let own_x = result.grad_xx.expect("the divergence's");
    grad_x.subtract(&BatchGradient::new(own_x, x, dims));
    if let (Some(g), Some(own)) = (grad_y.as_mut(), result.grad_yy) {
        g.subtract(&BatchGradient::new(own, y, dims));
    }
    Ok(SoftDtwGradient {
        values: combine_values(result.values, x.len() - 1, true),
        grad_x,
        grad_y,
    })
}

/// Soft-DTW of series `k` of `x` against series `k` of `y`, for every `k`:
/// the loss of a batch. With [`SoftDtw::divergence`], the soft-DTW
/// divergence. `x` and `y` need the same number of series and the same
/// dimensions; lengths may differ, within and between them.
///
/// On the GPU ([`crate::Device::Gpu`], or [`crate::Device::Auto`] when there is one) the
/// kernel variant is [`ComputeOptions::gpu_variant`]'s (`stencil`, `warp`
/// or `tiled`), else chosen from the lengths: the tiled kernel for one or
/// two long pairs, else the warp kernel.
/// Both batches are uploaded for the call; for batches already on the
/// device see [`soft_dtw_pairs_resident`].
pub fn soft_dtw_pairs<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
) -> Result<Array1<T>> {
    check_paired((x.len(), x.dims()), (y.len(), y.dims()))?;
    let params = params::<T>(&metric)?;
    values(Paired::host(x, y, options)?, metric, params, options)
}

/// The GPU kernel variant [`soft_dtw_pairs`] computes `x` against `y`
/// with on the GPU: `options.gpu_variant` if set, else the default for
/// their shapes: the tiled kernel for one or two long pairs, else the warp
/// kernel. What `timewarp bench --paired` times by default.
///
/// Errors: no usable GPU, batches that do not pair up, a variant that
/// computes distance matrices only.
pub fn soft_dtw_pairs_variant<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
) -> Result<Variant> {
    check_paired((x.len(), x.dims()), (y.len(), y.dims()))?;
    Gpu::first(options.gpus)?;
    gpu::paired_value_variant(options.gpu_variant, (x, y), metric.is_divergence())
}

/// The GPU kernel variant [`soft_dtw_pairs_gradient`] computes `x`
/// against `y` with on the GPU: `options.gpu_variant` if set (`warp`, for
/// series `y` of up to 1024 samples, or `stencil`), else `warp` where every
/// series `y` (and for the divergence `x`) fits it, else `stencil`. What
/// `timewarp bench --paired --gradient` times by default.
///
/// Errors: no usable GPU, batches that do not pair up, a variant that
/// computes no gradient or does not fit the series.
pub fn soft_dtw_pairs_gradient_variant<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
) -> Result<Variant> {
    check_paired((x.len(), x.dims()), (y.len(), y.dims()))?;
    Gpu::first(options.gpus)?;
    gpu::paired_gradient_variant(options.gpu_variant, (x, y), metric.is_divergence())
}

/// [`soft_dtw_pairs`] of two resident sets ([`crate::upload`]), computed
/// where they live, without moving them: on the GPU the kernels read the
/// device sets and only the outputs (and the warp kernel's borders) are
/// allocated, in chunks that fit `options.gpu_memory_budget`; the
/// divergence's `sdtw(x_k, x_k)` and `sdtw(y_k, y_k)` are pairs of a set
/// with itself. The results are those of [`soft_dtw_pairs`] on the same
/// batches, bit for bit. On the CPU (sets uploaded for it) this is
/// [`soft_dtw_pairs`] of the host copies.
///
/// Errors: as [`soft_dtw_pairs`]; sets that live in different places (one
/// on the GPU, one on the CPU), or an `options.device` that disagrees with
/// where they live (`Auto` always agrees).
pub fn soft_dtw_pairs_resident<T: Float>(
    x: &ResidentSet<T>,
    y: &ResidentSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
) -> Result<Array1<T>> {
    check_paired((x.len(), x.dims()), (y.len(), y.dims()))?;
    let params = params::<T>(&metric)?;
    values(Paired::resident(x, y, options)?, metric, params, options)
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
/// ([`soft_dtw_gradient_bytes_per_pair`]), by a warp a pair, or 4 warps a
/// pair (a panel of columns each), where every series `y` has at most
/// 1,024 samples, else by a block a pair
/// (`options.gpu_variant`: `warp` or `stencil` to choose, see
/// [`soft_dtw_pairs_gradient_variant`]); batches run in chunks that fit,
/// and a pair that alone does not fit the memory budget is an error. For
/// batches already on the device see [`soft_dtw_pairs_gradient_resident`].
pub fn soft_dtw_pairs_gradient<T: Float>(
    x: &SeriesSet<T>,
    y: &SeriesSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
    with_respect_to_y: bool,
) -> Result<SoftDtwGradient<T>> {
    check_paired((x.len(), x.dims()), (y.len(), y.dims()))?;
    let params = params::<T>(&metric)?;
    gradients(
        Paired::host(x, y, options)?,
        metric,
        params,
        options,
        with_respect_to_y,
    )
}

/// [`soft_dtw_pairs_gradient`] of two resident sets, computed where they
/// live (see [`soft_dtw_pairs_resident`]): on the GPU only the outputs
/// (values and gradients, for the whole batch) and the stored cost matrices
/// (in chunks that fit `options.gpu_memory_budget` besides the outputs)
/// are allocated. The results are those of [`soft_dtw_pairs_gradient`] on
/// the same batches, bit for bit.
///
/// Errors: as [`soft_dtw_pairs_gradient`] and [`soft_dtw_pairs_resident`].
pub fn soft_dtw_pairs_gradient_resident<T: Float>(
    x: &ResidentSet<T>,
    y: &ResidentSet<T>,
    metric: SoftDtw,
    options: &ComputeOptions,
    with_respect_to_y: bool,
) -> Result<SoftDtwGradient<T>> {
    check_paired((x.len(), x.dims()), (y.len(), y.dims()))?;
    let params = params::<T>(&metric)?;
    gradients(
        Paired::resident(x, y, options)?,
        metric,
        params,
        options,
        with_respect_to_y,
    )
}

/// Soft-DTW between `x` and `y` (`length x dims` each) and its gradient with
/// respect to `x`, on the CPU (with the metric's band; the divergence's
/// gradient if the metric is the divergence). For batches and the GPU see
/// [`crate::soft_dtw_pairs_gradient`].
pub fn soft_dtw_gradient<T: Float>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    metric: SoftDtw,
) -> Result<(T, Array2<T>)> {
    let xs = SeriesSet::from_series([x])?;
    let ys = SeriesSet::from_series([y])?;
    let result =
        soft_dtw_pairs_gradient(&xs, &ys, metric, &ComputeOptions::on(Device::Cpu), false)?;
    Ok((result.values[0], result.grad_x.series(0).to_owned()))
}
