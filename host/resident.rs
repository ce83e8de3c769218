//! Batches kept where computations run ([`ResidentSet`], made by
//! [`upload`]): in device memory when uploaded to a GPU, else a host copy
//! the CPU backend reads, so that callers (`knn`) have one code path.

use crate::gpu::{self, DeviceSeriesSet, Gpu};
use crate::{Backend, ComputeOptions, Device, Error, Float, Result, SeriesSet};

/// A batch kept where computations run, for many queries against it without
/// moving it again ([`upload`], [`distance_matrix_resident`]): in device
/// memory when it was uploaded to a GPU, else a copy in host memory that
/// the CPU backend reads.
pub struct ResidentSet<T> {
    pub(crate) storage: Storage<T>,
}

pub(crate) enum Storage<T> {
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
        Backend::Gpu(gpu) => Storage::Gpu(gpu::upload_set(gpu, set, options.gpu_memory_budget)?),
    };
    Ok(ResidentSet { storage })
}
