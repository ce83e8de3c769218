//! The GPUs the driver reports, and whether the kernels run on them,
//! found without panicking where there is no driver, and the pool of
//! stream-ordered device memory of one.

use super::ptx::{min_compute_capability, ptx_target};
use cudarc::driver::{result as driver, sys, CudaContext};

/// A GPU as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
}

impl GpuInfo {
    /// Whether timewarp's kernels can run on it, and if not, why.
    pub fn usable(&self) -> std::result::Result<(), String> {
        let needed = min_compute_capability();
        if self.compute_capability < needed {
            Err(format!(
                "compute capability {}.{} is below the {}.{} the kernels (PTX {}) need",
                self.compute_capability.0,
                self.compute_capability.1,
                needed.0,
                needed.1,
                ptx_target()
            ))
        } else {
            Ok(())
        }
    }
}

pub(crate) fn driver_error(what: &str) -> impl Fn(driver::DriverError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Every GPU the driver reports, or why none can be listed (no driver, a
/// driver that fails to initialise).
pub fn list_gpus() -> std::result::Result<Vec<GpuInfo>, String> {
    // SAFETY: only probes whether the driver library can be loaded; cudarc
    // panics on its first call without it, so nothing else runs before this.
    if !unsafe { sys::is_culib_present() } {
        return Err("no NVIDIA driver found (libcuda could not be loaded)".into());
    }
    driver::init().map_err(driver_error("the CUDA driver failed to initialise"))?;
    let count = driver::device::get_count().map_err(driver_error("counting devices"))?;
    (0..count)
        .map(|ordinal| {
            let device = driver::device::get(ordinal).map_err(driver_error("opening a device"))?;
            let attribute = |a| {
                // SAFETY: `device` is a valid handle from the driver.
                unsafe { driver::device::get_attribute(device, a) }
                    .map_err(driver_error("reading a device attribute"))
            };
            use sys::CUdevice_attribute::*;
            Ok(GpuInfo {
                ordinal: ordinal as usize,
                name: driver::device::get_name(device).map_err(driver_error("device name"))?,
                compute_capability: (
                    attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                    attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                ),
                // SAFETY: as above.
                total_memory: unsafe { driver::device::total_mem(device) }
                    .map_err(driver_error("device memory"))?,
            })
        })
        .collect()
}

/// A device's default pool of stream-ordered allocations.
#[derive(Clone, Copy)]
pub(crate) struct MemoryPool(sys::CUmemoryPool);

// SAFETY: a pool handle names a device-wide object; the driver's pool
// functions may be called from any thread.
unsafe impl Send for MemoryPool {}
// SAFETY: as for `Send`: the handle is only passed to the driver.
unsafe impl Sync for MemoryPool {}

impl MemoryPool {
    /// The pool of `context`'s device, set to keep what computations free,
    /// up to an eighth of the device's memory, for the next computation
    /// (whose allocations repeat the same sizes, call after call), instead
    /// of giving it back to the driver at every synchronisation to be
    /// mapped again. None without stream-ordered allocation; if the driver
    /// refuses the setting, memory is freed as before.
    pub(crate) fn keep_freed(context: &CudaContext, total_memory: usize) -> Option<MemoryPool> {
        if !context.has_async_alloc() {
            return None;
        }
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        let mut threshold = (total_memory / 8) as u64;
        // SAFETY: `pool` receives the device's default pool; the
        // attribute's value is a u64, as the driver's documentation gives it.
        unsafe {
            if sys::cuDeviceGetDefaultMemPool(&mut pool, context.cu_device())
                != sys::cudaError_enum::CUDA_SUCCESS
            {
                return None;
            }
            let _ = sys::cuMemPoolSetAttribute(
                pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                &mut threshold as *mut u64 as *mut std::ffi::c_void,
            );
        }
        Some(MemoryPool(pool))
    }

    /// Bytes the pool holds that no allocation uses: what allocations can
    /// take without the pool growing (0 if the driver does not say).
    pub(crate) fn spare(self) -> usize {
        let attribute = |attribute| {
            let mut value = 0u64;
            // SAFETY: the pool is the device's default, which lives as long
            // as the driver; these attributes' values are u64.
            let status = unsafe {
                sys::cuMemPoolGetAttribute(
                    self.0,
                    attribute,
                    &mut value as *mut u64 as *mut std::ffi::c_void,
                )
            };
            (status == sys::cudaError_enum::CUDA_SUCCESS).then_some(value)
        };
        use sys::CUmemPool_attribute::{
            CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT as RESERVED,
            CU_MEMPOOL_ATTR_USED_MEM_CURRENT as USED,
        };
        match (attribute(RESERVED), attribute(USED)) {
            (Some(reserved), Some(used)) => reserved.saturating_sub(used) as usize,
            _ => 0,
        }
    }
}
