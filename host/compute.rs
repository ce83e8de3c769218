//! The public entry points: distance matrices on the chosen device, resident
//! sets and the matrices against them, single distances, and the Soft-DTW
//! gradient.

use crate::cpu::CpuMeasure;
use crate::gpu::{DeviceSeriesSet, Gpu, KernelParams, Variant};
use crate::{cpu, Error, Float, Metric, Result, SeriesSet};
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;
use timewarp_kernels::{DtwParams, SoftDtwParams, TwedParams};

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
    let matrix = with_params!(T, metric, params => run(backend, options, params, metric, a, b))?;
    let matrix = match metric {
        Metric::SoftDtw(soft) if soft.is_divergence() => {
            divergence_matrix(matrix, a, b, soft, options)?
        }
        _ => matrix,
    };
    check_finite(&matrix, backend)?;
    Ok(matrix)
}

/// `$body` with `$params` bound to the kernel parameters of `$metric` in
/// precision `$t` (a different type for each measure).
macro_rules! with_params {
    ($t:ty, $metric:expr, $params:ident => $body:expr) => {
        match $metric {
            Metric::Dtw(dtw) => {
                let $params = DtwParams {
                    band: dtw.band().map_or(DtwParams::NO_BAND, |r| r as u64),
                };
                $body
            }
            Metric::SoftDtw(soft) => {
                let $params =
                    SoftDtwParams::new(<$t>::from_f64(soft.gamma())).with_band(soft.band());
                $body
            }
            Metric::Twed(twed) => {
                let $params = TwedParams {
                    nu: <$t>::from_f64(twed.nu()),
                    lambda: <$t>::from_f64(twed.lambda()),
                    degree: <$t>::from_f64(twed.degree()),
                };
                $body
            }
        }
    };
}
use with_params;

fn run<T: Float, P: CpuMeasure<T> + KernelParams>(
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
            gpu_variant(
                options,
                pairs(a, b),
                shortest(a, b),
                params.band_width(a.lengths(), b.unwrap_or(a).lengths()),
            )?,
            params,
            a,
            b,
            options.gpu_memory_budget,
        ),
    }
}

/// Pairs of `a` against `b`, or of `a` against itself counted once.
fn pairs<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>) -> usize {
    match b {
        Some(b) => a.len() * b.len(),
        None => a.len() * (a.len() + 1) / 2,
    }
}

/// The shortest series of `a` and `b`.
fn shortest<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>) -> usize {
    a.min_len().min(b.map_or(usize::MAX, |b| b.min_len()))
}

/// The variant asked for, or the one [`Variant::choose`] picks for `pairs`
/// pairs whose shorter series has at least `shortest` samples, in a band of
/// at most `band_width` diagonals if any.
fn gpu_variant(
    options: &ComputeOptions,
    pairs: usize,
    shortest: usize,
    band_width: Option<usize>,
) -> Result<Variant> {
    match options.gpu_variant {
        None => Ok(Variant::choose(pairs, shortest, band_width)),
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
    let first_bad = |values: &[T]| values.iter().copied().find(|v| !v.is_finite());
    // Large matrices (a query batch against millions of series) on all cores.
    let bad = match matrix.as_slice() {
        Some(values) => values.par_chunks(1 << 16).find_map_first(first_bad),
        None => matrix.iter().copied().find(|v| !v.is_finite()),
    };
    if let Some(bad) = bad {
        if backend.is_gpu() && bad.to_f64().is_nan() {
            return Err(Error::Gpu("a kernel left a distance unwritten".into()));
        }
        return Err(Error::Overflow { precision: T::NAME });
    }
    Ok(())
}

/// A batch kept where computations run, for many queries against it without
/// moving it again ([`upload`], [`distance_matrix_resident`]): in device
/// memory when it was uploaded to a GPU, else a copy in host memory that
/// the CPU backend reads.
pub struct ResidentSet<T> {
    storage: Storage<T>,
}

enum Storage<T> {
    Host(SeriesSet<T>),
    Gpu(DeviceSeriesSet<T>),
}

impl<T: Float> ResidentSet<T> {
    /// Number of series.
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.len(),
            Storage::Gpu(set) => set.len(),
        }
    }

    /// Always false: a batch has at least one series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimensions of each sample.
    pub fn dims(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.dims(),
            Storage::Gpu(set) => set.dims(),
        }
    }

    /// The longest series' length.
    pub fn max_len(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.max_len(),
            Storage::Gpu(set) => set.max_len(),
        }
    }

    /// The shortest series' length.
    pub fn min_len(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.min_len(),
            Storage::Gpu(set) => set.min_len(),
        }
    }

    /// Total number of samples of all series.
    pub fn total_samples(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.total_samples(),
            Storage::Gpu(set) => set.total_samples(),
        }
    }

    /// Whether it lives in GPU memory (else host memory, for the CPU).
    pub fn on_gpu(&self) -> bool {
        matches!(self.storage, Storage::Gpu(_))
    }

    /// Where it lives, for the computations that read it.
    pub(crate) fn stored(&self) -> Stored<'_, T> {
        match &self.storage {
            Storage::Host(set) => Stored::Host(set),
            Storage::Gpu(set) => Stored::Gpu(set),
        }
    }

    /// Where it lives, in words.
    pub(crate) fn lives(&self) -> &'static str {
        match self.storage {
            Storage::Host(_) => "host memory (uploaded for the CPU)",
            Storage::Gpu(_) => "GPU memory",
        }
    }

    /// The backend that computes with it: where it lives, if `device`
    /// agrees (`Auto` always does).
    pub(crate) fn backend(&self, device: Device) -> Result<Backend> {
        match (&self.storage, device) {
            (Storage::Host(_), Device::Auto | Device::Cpu) => Ok(Backend::Cpu),
            (Storage::Gpu(_), Device::Auto | Device::Gpu) => Ok(Backend::Gpu(Gpu::get()?)),
            (_, device) => Err(Error::InvalidInput(format!(
                "the resident set lives in {}, but the options ask for {device:?}; \
                 upload it with the same device",
                self.lives()
            ))),
        }
    }
}

/// A resident set's series: a host copy (for the CPU) or a device set.
pub(crate) enum Stored<'a, T> {
    Host(&'a SeriesSet<T>),
    Gpu(&'a DeviceSeriesSet<T>),
}

/// Keeps `set` where `options.device` computes: on the GPU (one upload,
/// through pinned buffers), or on the CPU (a copy). Queries against it with
/// [`distance_matrix_resident`] then move only the queries and results.
///
/// Errors: no usable GPU when [`Device::Gpu`] was asked for; a set larger
/// than `options.gpu_memory_budget` (default: 3/4 of the free device
/// memory), which [`distance_matrix`] computes with instead, streaming it;
/// a failing device.
pub fn upload<T: Float>(set: &SeriesSet<T>, options: &ComputeOptions) -> Result<ResidentSet<T>> {
    let storage = match Backend::resolve(options.device)? {
        Backend::Cpu => Storage::Host(set.clone()),
        Backend::Gpu(gpu) => Storage::Gpu(gpu.upload_set(set, options.gpu_memory_budget)?),
    };
    Ok(ResidentSet { storage })
}

/// The distance of every series of `queries` (rows) to every series of the
/// resident `database` (columns), computed where the database lives: the
/// queries go to the device in blocks, the results come back as the next
/// tiles run, and the database does not move.
///
/// `options.gpu_memory_budget` bounds what the call allocates besides the
/// resident set (larger query batches and outputs run in chunks);
/// `options.gpu_variant` may be `naive` or `warp` (the default picks the
/// warp kernel): the tiled variants take one long pair at a time from host
/// memory and are an error here. `options.device` must agree with where
/// the set lives (`Auto` always does).
///
/// Errors: samples of different dimensions, a device that disagrees, a
/// tiled variant, a failing device, a result that overflowed the precision.
pub fn distance_matrix_resident<T: Float>(
    queries: &SeriesSet<T>,
    database: &ResidentSet<T>,
    metric: Metric,
    options: &ComputeOptions,
) -> Result<Array2<T>> {
    if queries.dims() != database.dims() {
        return Err(Error::DimensionMismatch {
            first: queries.dims(),
            second: database.dims(),
        });
    }
    let backend = database.backend(options.device)?;
    if matches!(metric, Metric::SoftDtw(soft) if soft.is_divergence()) {
        return Err(Error::InvalidInput(
            "the soft-DTW divergence needs each database series against itself; \
             use distance_matrix for it"
                .into(),
        ));
    }
    let matrix = with_params!(T, metric, params => match (&database.storage, backend) {
        (Storage::Gpu(set), Backend::Gpu(gpu)) => {
            let variant = resident_variant(options, queries.len() * set.len(), queries.min_len().min(set.min_len()))?;
            gpu.matrix_resident(metric.name(), variant, params, queries, set, options.gpu_memory_budget)
        }
        (Storage::Host(set), _) => Ok(cpu::matrix(queries, Some(set), &params)),
        (Storage::Gpu(_), Backend::Cpu) => unreachable!("a GPU set computes on the GPU"),
    })?;
    check_finite(&matrix, backend)?;
    Ok(matrix)
}

/// The kernel variant against a resident set: as [`gpu_variant`], but the
/// warp kernel where that would pick a tiled one, and an error where one
/// was asked for.
fn resident_variant(options: &ComputeOptions, pairs: usize, shortest: usize) -> Result<Variant> {
    match gpu_variant(options, pairs, shortest, None)? {
        Variant::Tiled | Variant::TiledLaunches if options.gpu_variant.is_some() => {
            Err(Error::InvalidInput(format!(
                "GPU variant {:?} computes one long pair at a time from host memory; \
                 against a resident set use naive or warp (or distance_matrix)",
                options.gpu_variant.unwrap_or_default()
            )))
        }
        Variant::Tiled | Variant::TiledLaunches => Ok(Variant::Warp),
        variant => Ok(variant),
    }
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
