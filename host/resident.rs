//! Batches kept where computations run ([`ResidentSet`], made by
//! [`upload`]): in device memory when uploaded to GPUs (a copy on each, or
//! a slice on each: [`Placement`]), else a host copy the CPU backend reads,
//! so that callers (`knn`) have one code path.

use crate::gpu::plan_shards;
use crate::gpu::{self, DeviceSeriesSet, Gpu, ResidentParts};
use crate::{Backend, ComputeOptions, Device, Error, Float, Placement, Result, SeriesSet};
use std::ops::Range;

/// A batch kept where computations run, for many queries against it without
/// moving it again ([`upload`], [`distance_matrix_resident`]): in device
/// memory when it was uploaded to a GPU, else a copy in host memory that
/// the CPU backend reads.
pub struct ResidentSet<T> {
    pub(crate) storage: Storage<T>,
}

pub(crate) enum Storage<T> {
    Host(SeriesSet<T>),
    Gpu(OnGpus<T>),
}

/// A set in the memory of one or more GPUs.
pub(crate) struct OnGpus<T> {
    /// Each GPU, the series it holds, and them on the device.
    parts: Vec<(&'static Gpu, Range<usize>, DeviceSeriesSet<T>)>,
    /// Every part holds the whole set (else each a slice of it).
    replicated: bool,
    len: usize,
    dims: usize,
    lengths: (usize, usize),
    total_samples: usize,
    /// The largest `|v|` of its values (for the k-NN's bounds: whether a
    /// distance might overflow).
    largest: f64,
}

impl<T: Float> OnGpus<T> {
    /// The largest `|v|` of its values.
    pub(crate) fn largest(&self) -> f64 {
        self.largest
    }

    /// The parts as a call reads them.
    pub(crate) fn parts(&self) -> ResidentParts<'_, T> {
        ResidentParts {
            parts: self
                .parts
                .iter()
                .map(|(gpu, range, set)| (*gpu, range.clone(), set))
                .collect(),
            replicated: self.replicated,
            len: self.len,
            lengths: self.lengths,
        }
    }

    /// Every GPU's copy of the whole set: each GPU's of a replicated set,
    /// the one of a set on one GPU; an error for a sharded one.
    pub(crate) fn copies(&self) -> Result<Vec<(&'static Gpu, &DeviceSeriesSet<T>)>> {
        let (first, _) = self.whole()?;
        if !self.replicated {
            return Ok(vec![(first, &self.parts[0].2)]);
        }
        Ok(self.parts.iter().map(|(gpu, _, set)| (*gpu, set)).collect())
    }

    /// The whole set on one GPU, for the paired computations: the first
    /// copy of a replicated set; an error for a sharded one.
    pub(crate) fn whole(&self) -> Result<(&'static Gpu, &DeviceSeriesSet<T>)> {
        match (&self.parts[..], self.replicated) {
            ([(gpu, _, set), ..], true) | ([(gpu, _, set)], false) => Ok((*gpu, set)),
            _ => Err(Error::InvalidInput(format!(
                "the resident set is sharded over {} GPUs; paired computations need it whole \
                 on one GPU: upload it with Placement::Replicate",
                self.parts.len()
            ))),
        }
    }
}

impl<T: Float> ResidentSet<T> {
    /// Number of series.
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.len(),
            Storage::Gpu(set) => set.len,
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
            Storage::Gpu(set) => set.dims,
        }
    }

    /// The longest series' length.
    pub fn max_len(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.max_len(),
            Storage::Gpu(set) => set.lengths.1,
        }
    }

    /// The shortest series' length.
    pub fn min_len(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.min_len(),
            Storage::Gpu(set) => set.lengths.0,
        }
    }

    /// Total number of samples of all series.
    pub fn total_samples(&self) -> usize {
        match &self.storage {
            Storage::Host(set) => set.total_samples(),
            Storage::Gpu(set) => set.total_samples,
        }
    }

    /// Whether it lives in GPU memory (else host memory, for the CPU).
    pub fn on_gpu(&self) -> bool {
        matches!(self.storage, Storage::Gpu(_))
    }

    /// The GPUs it lives on (none for a host copy), each with the range of
    /// series it holds: all of them on each when replicated.
    pub fn gpus(&self) -> Vec<(usize, Range<usize>)> {
        match &self.storage {
            Storage::Host(_) => Vec::new(),
            Storage::Gpu(set) => set
                .parts
                .iter()
                .map(|(gpu, range, _)| (gpu.info().ordinal, range.clone()))
                .collect(),
        }
    }

    /// Whether every GPU it lives on holds all of it (else each a slice).
    pub fn is_replicated(&self) -> bool {
        match &self.storage {
            Storage::Host(_) => true,
            Storage::Gpu(set) => set.replicated,
        }
    }

    /// Where it lives, for the computations that read it.
    pub(crate) fn stored(&self) -> Result<Stored<'_, T>> {
        Ok(match &self.storage {
            Storage::Host(set) => Stored::Host(set),
            Storage::Gpu(set) => Stored::Gpu(set.whole()?.0),
        })
    }

    /// Every GPU's copy of the whole set ([`OnGpus::copies`]); none on the
    /// host.
    pub(crate) fn gpu_copies(&self) -> Result<Vec<(&'static Gpu, &DeviceSeriesSet<T>)>> {
        match &self.storage {
            Storage::Host(_) => Ok(Vec::new()),
            Storage::Gpu(set) => set.copies(),
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
            (Storage::Gpu(set), Device::Auto | Device::Gpu) => Ok(Backend::Gpu(set.parts[0].0)),
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
    /// On GPUs, each holding it whole: the first of them.
    Gpu(&'static Gpu),
}

/// Keeps `set` where `options.device` computes: on the GPUs of
/// `options.gpus` (one upload each, through pinned buffers), or on the CPU
/// (a copy). Queries against it with [`distance_matrix_resident`] then move
/// only the queries and results. On several GPUs, `options.placement`
/// says how: a whole copy on each GPU (the queries are shared out between
/// them), or a slice on each in proportion to their budgets (every query
/// meets every slice); [`Placement::Auto`] replicates when a copy fits
/// every GPU's budget, else shards.
///
/// Errors: no usable GPU when [`Device::Gpu`] was asked for; a set larger
/// than `options.gpu_memory_budget` (default: 3/4 of the free device
/// memory) of each GPU, or of all of them together when sharded, which
/// [`distance_matrix`] computes with instead, streaming it; a failing
/// device.
pub fn upload<T: Float>(set: &SeriesSet<T>, options: &ComputeOptions) -> Result<ResidentSet<T>> {
    let storage = match Backend::resolve_on(options.device, options.gpus)? {
        Backend::Cpu => Storage::Host(set.clone()),
        Backend::Gpu(_) => Storage::Gpu(upload_to_gpus(set, options)?),
    };
    Ok(ResidentSet { storage })
}

/// `set` on the GPUs of `options`, replicated or sharded.
fn upload_to_gpus<T: Float>(set: &SeriesSet<T>, options: &ComputeOptions) -> Result<OnGpus<T>> {
    let gpus = Gpu::select(options.gpus)?;
    let budgets = gpu::budgets(&gpus, options.gpu_memory_budget)?;
    let all = 0..set.len();
    let bytes = gpu::set_bytes(set, all.clone());
    let fits_each = budgets.iter().all(|&budget| bytes <= budget);
    let replicated = match options.placement {
        Placement::Replicate => true,
        Placement::Shard => false,
        Placement::Auto => fits_each || gpus.len() == 1,
    };
    let ranges = if replicated {
        vec![all; gpus.len()]
    } else {
        plan_shards(set.len(), &budgets, |range| gpu::set_bytes(set, range)).ok_or_else(|| {
            Error::gpu_memory(format!(
                "the set takes {bytes} bytes of device memory, over the {} its {} GPUs have \
                 together; distance_matrix streams sets of any size instead",
                budgets.iter().sum::<usize>(),
                gpus.len()
            ))
        })?
    };
    let mut parts = Vec::with_capacity(gpus.len());
    for (gpu, range) in gpus.into_iter().zip(ranges) {
        if range.is_empty() {
            continue;
        }
        let device = gpu::upload_range(gpu, set, range.clone(), options.gpu_memory_budget)
            .map_err(|e| gpu::named(e, &gpu.name()))?;
        parts.push((gpu, range, device));
    }
    Ok(OnGpus {
        parts,
        replicated,
        len: set.len(),
        dims: set.dims(),
        lengths: (set.min_len(), set.max_len()),
        total_samples: set.total_samples(),
        largest: crate::search::whole::largest_magnitude(set),
    })
}
