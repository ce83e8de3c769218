//! The GPUs the driver reports, and whether the kernels run on them,
//! found without panicking where there is no driver.

use super::ptx::{min_compute_capability, ptx_target};
use cudarc::driver::{result as driver, sys};

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

/// A failing driver call, as the crate's error.
pub(crate) fn gpu_error(error: driver::DriverError) -> crate::Error {
    crate::Error::Gpu(error.to_string())
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
