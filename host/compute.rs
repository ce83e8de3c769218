//! The public entry points: distance matrices on the chosen device, single
//! distances, and the Soft-DTW gradient.

use crate::gpu::{Gpu, Variant};
use crate::{cpu, Error, Float, Metric, Result, SeriesSet};
use ndarray::{Array2, ArrayView2};
use timewarp_kernels::{DtwParams, Recurrence, SoftDtwParams, TwedParams};

/// Where to compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The GPU if one is usable, else the CPU.
    #[default]
    Auto,
    /// The CPU backend (all cores).
    Cpu,
    /// The GPU; an error if there is none.
    Gpu,
}

/// How to compute a distance matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ComputeOptions {
    pub device: Device,
    /// At most this many bytes of device memory (default: 3/4 of what is
    /// free). Larger problems are processed in tiles and chunks.
    pub gpu_memory_budget: Option<usize>,
    /// The GPU kernel variant, one of [`GPU_VARIANTS`] (default: chosen
    /// from the shapes, see [`Variant::choose`]).
    pub gpu_variant: Option<&'static str>,
}

/// The GPU kernel variants of every measure (see [`Variant`]): `naive`, one
/// thread per pair; `warp`, one warp per pair; `tiled`, one long pair at a
/// time over the whole GPU in one launch; `tiled-launches`, the same in
/// square tiles, a launch per anti-diagonal of tiles; `diagonal` and
/// `diagonal-launches`, one pair at a time, a thread per cell of an
/// anti-diagonal (one persistent kernel, or one launch per anti-diagonal);
/// `local` and `shared`, one thread per pair with its rows in local or
/// shared memory; `stencil`, one block per pair over the anti-diagonals in
/// shared memory.
pub const GPU_VARIANTS: &[&str] = &[
    "naive",
    "warp",
    "tiled",
    "tiled-launches",
    "diagonal",
    "diagonal-launches",
    "local",
    "shared",
    "stencil",
];

impl ComputeOptions {
    pub fn on(device: Device) -> Self {
        Self {
            device,
            ..Self::default()
        }
    }
}

/// The backend a [`Device`] choice resolves to here and now.
#[derive(Clone, Copy)]
pub enum Backend {
    Cpu,
    Gpu(&'static Gpu),
}

impl Backend {
    /// `Auto` gives the GPU if usable, else the CPU; `Gpu` gives the GPU or
    /// the reason there is none.
    pub fn resolve(device: Device) -> Result<Backend> {
        match device {
            Device::Cpu => Ok(Backend::Cpu),
            Device::Gpu => Gpu::get().map(Backend::Gpu),
            Device::Auto => Ok(Gpu::get().map_or(Backend::Cpu, Backend::Gpu)),
        }
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self, Backend::Gpu(_))
    }
}

/// The distance of every series of `a` (rows) to every series of `b`
/// (columns); with `b = None`, of `a` to itself, each symmetric pair computed
/// once.
///
/// Errors: samples of different dimensions, no usable GPU when
/// [`Device::Gpu`] was asked for, a failing device, a result that overflowed
/// the precision.
pub fn distance_matrix<T: Float>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    options: &ComputeOptions,
) -> Result<Array2<T>> {
    if let Some(b) = b {
        if a.dims() != b.dims() {
            return Err(Error::DimensionMismatch {
                first: a.dims(),
                second: b.dims(),
            });
        }
    }
    let backend = Backend::resolve(options.device)?;
    let matrix = match metric {
        Metric::Dtw(dtw) => {
            let params = DtwParams {
                band: dtw.band().map_or(DtwParams::NO_BAND, |r| r as u64),
            };
            run(backend, options, params, metric, a, b)
        }
        Metric::SoftDtw(soft) => {
            let params = SoftDtwParams::new(T::from_f64(soft.gamma())).with_band(soft.band());
            let matrix = run(backend, options, params, metric, a, b)?;
            if soft.is_divergence() {
                divergence_matrix(matrix, a, b, soft, options)
            } else {
                Ok(matrix)
            }
        }
        Metric::Twed(twed) => {
            let params = TwedParams {
                nu: T::from_f64(twed.nu()),
                lambda: T::from_f64(twed.lambda()),
                degree: T::from_f64(twed.degree()),
            };
            run(backend, options, params, metric, a, b)
        }
    }?;
    check_finite(&matrix, backend)?;
    Ok(matrix)
}

fn run<T: Float, P: Recurrence<T> + Copy + Sync>(
    backend: Backend,
    options: &ComputeOptions,
    params: P,
    metric: Metric,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
) -> Result<Array2<T>> {
    match backend {
        Backend::Cpu => Ok(cpu::matrix(a, b, &params)),
        Backend::Gpu(gpu) => gpu.matrix(
            metric.name(),
            gpu_variant(options, a, b)?,
            params,
            a,
            b,
            options.gpu_memory_budget,
        ),
    }
}

/// The variant asked for, or the one [`Variant::choose`] picks for the shapes.
fn gpu_variant<T: Float>(
    options: &ComputeOptions,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
) -> Result<Variant> {
    match options.gpu_variant {
        None => {
            let pairs = match b {
                Some(b) => a.len() * b.len(),
                None => a.len() * (a.len() + 1) / 2,
            };
            let shortest = a.min_len().min(b.map_or(usize::MAX, |b| b.min_len()));
            Ok(Variant::choose(pairs, shortest))
        }
        Some(name) => Variant::from_name(name).ok_or_else(|| {
            Error::InvalidInput(format!(
                "unknown GPU kernel variant {name:?}; expected one of {GPU_VARIANTS:?}"
            ))
        }),
    }
}

/// Finite inputs give finite distances unless the precision overflowed; a
/// NaN from the GPU means a pair was never written (its output is poisoned
/// with NaN before the launch).
fn check_finite<T: Float>(matrix: &Array2<T>, backend: Backend) -> Result<()> {
    if let Some(bad) = matrix.iter().find(|v| !v.is_finite()) {
        if backend.is_gpu() && bad.to_f64().is_nan() {
            return Err(Error::Gpu("a kernel left a distance unwritten".into()));
        }
        return Err(Error::Overflow { precision: T::NAME });
    }
    Ok(())
}

/// The distance between two series (`length x dims` each), on the CPU.
pub fn distance<T: Float>(a: ArrayView2<T>, b: ArrayView2<T>, metric: Metric) -> Result<T> {
    let a = SeriesSet::from_series([a])?;
    let b = SeriesSet::from_series([b])?;
    let matrix = distance_matrix(&a, Some(&b), metric, &ComputeOptions::on(Device::Cpu))?;
    Ok(matrix[[0, 0]])
}

/// The soft-DTW divergence matrix from the Soft-DTW matrix `sdtw(a_i, b_j)`:
/// minus half of `sdtw(a_i, a_i) + sdtw(b_j, b_j)`, computed as paired
/// batches on the same device.
fn divergence_matrix<T: Float>(
    mut matrix: Array2<T>,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    soft: crate::SoftDtw,
    options: &ComputeOptions,
) -> Result<Array2<T>> {
    let plain = crate::SoftDtw::new(soft.gamma())?;
    let plain = match soft.band() {
        Some(r) => plain.with_band(r),
        None => plain,
    };
    let own_a = crate::soft_dtw_pairs(a, a, plain, options)?;
    let own_b = match b {
        Some(b) => crate::soft_dtw_pairs(b, b, plain, options)?,
        None => own_a.clone(),
    };
    let two = T::ONE + T::ONE;
    for ((i, j), value) in matrix.indexed_iter_mut() {
        *value = *value - (own_a[i] + own_b[j]) / two;
    }
    Ok(matrix)
}

/// Soft-DTW between `x` and `y` (`length x dims` each) and its gradient with
/// respect to `x`, on the CPU (with the metric's band; the divergence's
/// gradient if the metric is the divergence). For batches and the GPU see
/// [`crate::soft_dtw_pairs_gradient`].
pub fn soft_dtw_gradient<T: Float>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    metric: crate::SoftDtw,
) -> Result<(T, Array2<T>)> {
    let xs = SeriesSet::from_series([x])?;
    let ys = SeriesSet::from_series([y])?;
    let result =
        crate::soft_dtw_pairs_gradient(&xs, &ys, metric, &ComputeOptions::on(Device::Cpu), false)?;
    let gradient = result.grad_x.into_iter().next().expect("one pair");
    Ok((result.values[0], gradient))
}
