//! Distance matrices: of host batches on the chosen device, and of query
//! batches against a resident set; and the distance of one pair.

use super::soft_dtw::soft_dtw_pairs;
use crate::cpu::{self, CpuMeasure};
use crate::finite::check_finite;
use crate::gpu::{self, Gpu, KernelParams};
use crate::interrupt;
use crate::resident::Storage;
use crate::{
    Backend, ComputeOptions, Device, Error, Float, Metric, ResidentSet, Result, SeriesSet, SoftDtw,
    Variant,
};
use ndarray::{Array2, ArrayView2};
use timewarp_kernels::{DtwParams, Measure, SoftDtwParams, TwedParams};

/// `$body` with `$params` bound to the kernel parameters of `$metric` in
/// precision `$t` (a different type for each measure).
macro_rules! with_params {
    ($t:ty, $metric:expr, $params:ident => $body:expr) => {
        match $metric {
            Metric::Dtw(dtw) => {
                let $params = DtwParams::new(dtw.band());
                $body
            }
            Metric::SoftDtw(soft) => {
                let $params =
                    SoftDtwParams::new(<$t>::from_f64(soft.gamma())).with_band(soft.band());
                $body
            }
            Metric::Twed(twed) => {
                let $params = TwedParams::new(
                    <$t>::from_f64(twed.nu()),
                    <$t>::from_f64(twed.lambda()),
                    <$t>::from_f64(twed.degree()),
                );
                $body
            }
        }
    };
}

/// An error unless both batches have samples of the same dimensions.
fn check_dims(first: usize, second: usize) -> Result<()> {
    if first != second {
        return Err(Error::DimensionMismatch { first, second });
    }
    Ok(())
}

/// The distance of every series of `a` (rows) to every series of `b`
/// (columns); with `b = None`, of `a` to itself, each symmetric pair computed
/// once.
///
/// Errors: samples of different dimensions, no usable GPU when
/// [`Device::Gpu`] was asked for, a failing device, a result that overflowed
/// the precision, a matrix too large for the host's memory
/// ([`Error::OutOfMemory`], before any work).
pub fn distance_matrix<T: Float>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    options: &ComputeOptions,
) -> Result<Array2<T>> {
    if let Some(b) = b {
        check_dims(a.dims(), b.dims())?;
    }
    let backend = Backend::resolve_on(options.device, options.gpus)?;
    let running = interrupt::Running::start();
    let matrix = with_params!(T, metric, params => run(backend, options, params, a, b))?;
    let matrix = match metric {
        Metric::SoftDtw(soft) if soft.is_divergence() => {
            divergence_matrix(matrix, a, b, soft, options)?
        }
        _ => matrix,
    };
    interrupt::check()?;
    drop(running);
    // The GPU's results are checked where they come back (`gpu::matrix`);
    // the CPU's, and the divergence made of the GPU's, here.
    let divergence = matches!(metric, Metric::SoftDtw(soft) if soft.is_divergence());
    if !backend.is_gpu() || divergence {
        check_finite(standard(&matrix), backend.is_gpu())?;
    }
    Ok(matrix)
}

/// The values of a matrix this crate made (in standard layout).
fn standard<T: Float>(matrix: &Array2<T>) -> &[T] {
    matrix
        .as_slice()
        .expect("matrices are made in standard layout")
}

/// The GPU kernel variant [`distance_matrix`] computes `a` against `b` (or
/// `a` against itself) with on the GPU: `options.gpu_variant` if set, else
/// the default for their shapes: the tiled kernel for one or two long pairs
/// (unless a band narrow enough for one warp bounds them), else the warp
/// kernel. What `timewarp bench` times by default.
pub fn matrix_variant<T: Float>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    metric: Metric,
    options: &ComputeOptions,
) -> Variant {
    options
        .gpu_variant
        .unwrap_or_else(|| with_params!(T, metric, params => default_variant(&params, a, b)))
}

/// The default variant of `a` against `b` (or `a` against itself).
fn default_variant<T: Float, P: KernelParams<T>>(
    params: &P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
) -> Variant {
    let (pairs, shortest, band) = shape(params, a, b);
    gpu::matrix_variant(P::MEASURE, pairs, shortest, band)
}

/// What the choices of backend and variant go by: the pairs of `a`
/// against `b` (or against itself, each symmetric pair once), the
/// shortest series, and the widest band of the measure over the pairs.
fn shape<T: Float, P: KernelParams<T>>(
    params: &P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
) -> (usize, usize, Option<usize>) {
    let other = b.unwrap_or(a);
    let pairs = match b {
        Some(b) => a.len() * b.len(),
        None => a.len() * (a.len() + 1) / 2,
    };
    let shortest = a.min_len().min(other.min_len());
    (
        pairs,
        shortest,
        gpu::band_width(params, a.lengths(), other.lengths()),
    )
}

/// The GPU kernel variant [`distance_matrix_resident`] computes with on a
/// GPU: `options.gpu_variant` if it reads resident sets (naive, warp, local
/// or shared), the warp kernel by default; an error for the others.
pub fn resident_matrix_variant(options: &ComputeOptions) -> Result<Variant> {
    gpu::resident_variant(options.gpu_variant)
}

fn run<T: Float, P: CpuMeasure<T> + KernelParams<T>>(
    backend: Backend,
    options: &ComputeOptions,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
) -> Result<Array2<T>> {
    if let Backend::Cpu = backend {
        // A series against itself is 0 apart in DTW and TWED, not in Soft-DTW.
        let zero_diagonal = P::MEASURE != Measure::SoftDtw;
        return cpu::matrix(a, b, &params, zero_diagonal);
    }
    let variant = options
        .gpu_variant
        .unwrap_or_else(|| default_variant(&params, a, b));
    // Only the GPUs the variant computes on are opened.
    let gpus = if variant.spreads_over_gpus() {
        Gpu::select(options.gpus)?
    } else {
        vec![Gpu::first(options.gpus)?]
    };
    gpu::matrix(&gpus, variant, params, a, b, options.gpu_memory_budget)
}

/// The distance of every series of `queries` (rows) to every series of the
/// resident `database` (columns), computed where the database lives: the
/// queries go to the device in blocks, the results come back as the next
/// tiles run, and the database does not move.
///
/// It computes on the GPUs the set lives on (`options.gpus` does not
/// apply): a replicated set shares the queries out between them, a sharded
/// one runs every query on every slice.
/// `options.gpu_memory_budget` bounds what the call allocates besides the
/// resident set (larger query batches and outputs run in chunks);
/// `options.gpu_variant` may be `naive`, `warp`, `local` or `shared` (the
/// default picks the warp kernel): the others read their series from host
/// memory and are an error here. `options.device` must agree with where
/// the set lives (`Auto` always does).
///
/// Errors: samples of different dimensions, a device that disagrees, a
/// variant that reads host memory, a failing device, a result that
/// overflowed the precision.
pub fn distance_matrix_resident<T: Float>(
    queries: &SeriesSet<T>,
    database: &ResidentSet<T>,
    metric: Metric,
    options: &ComputeOptions,
) -> Result<Array2<T>> {
    check_dims(queries.dims(), database.dims())?;
    let backend = database.backend(options.device)?;
    if matches!(metric, Metric::SoftDtw(soft) if soft.is_divergence()) {
        return Err(Error::InvalidInput(
            "the soft-DTW divergence needs each database series against itself; \
             use distance_matrix for it"
                .into(),
        ));
    }
    let budget = options.gpu_memory_budget;
    let running = interrupt::Running::start();
    let matrix = with_params!(T, metric, params => match (&database.storage, backend) {
        (Storage::Gpu(set), Backend::Gpu(_)) => {
            let variant = resident_matrix_variant(options)?;
            gpu::matrix_resident(variant, params, queries, &set.parts(), budget)
        }
        (Storage::Host(set), _) => cpu::matrix(queries, Some(set), &params, false),
        (Storage::Gpu(_), Backend::Cpu) => unreachable!("a GPU set computes on the GPU"),
    })?;
    interrupt::check()?;
    drop(running);
    // The GPU's results are checked tile by tile as they come back.
    if !matches!(database.storage, Storage::Gpu(_)) {
        check_finite(standard(&matrix), false)?;
    }
    Ok(matrix)
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
    soft: SoftDtw,
    options: &ComputeOptions,
) -> Result<Array2<T>> {
    let plain = SoftDtw::new(soft.gamma())?;
    let plain = match soft.band() {
        Some(r) => plain.with_band(r),
        None => plain,
    };
    // The self-terms are paired batches: a variant that computes matrices
    // only leaves them to the default choice.
    let paired = ComputeOptions {
        gpu_variant: options
            .gpu_variant
            .filter(|v| matches!(v, Variant::Stencil | Variant::Warp | Variant::Tiled)),
        ..*options
    };
    let own_a = soft_dtw_pairs(a, a, plain, &paired)?;
    let own_b = match b {
        Some(b) => soft_dtw_pairs(b, b, plain, &paired)?,
        None => own_a.clone(),
    };
    let two = T::ONE + T::ONE;
    for ((i, j), value) in matrix.indexed_iter_mut() {
        *value = *value - (own_a[i] + own_b[j]) / two;
    }
    Ok(matrix)
}
