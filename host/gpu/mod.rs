//! The GPU runtime: finds a usable GPU without panicking, loads each kernel
//! of the embedded PTX on first use, and runs the kernels over batches of
//! any size.
//!
//! The modules, each depending only on those listed before it:
//!
//! ```text
//! ptx, device      the embedded PTX, its build and its modules' index; the
//!                  GPUs the driver reports, a device's memory pool
//! select, plan     kernel selection and plans that fit a budget (no CUDA)
//! setup            the one-time work of a process, timed (no CUDA)
//! layout           the device image of a range of series (no CUDA)
//! staging          pinned host buffers and streams
//! context          Gpu: open, begin a computation, load and launch a kernel
//! image            series in device memory (resident sets, uploads)
//! pipeline         the streamed tile pipeline of the pair kernels
//! multi            a call's blocks spread over several GPUs (plan::spread)
//! pairs · stencil · long_pair · antidiagonal · paired · gradient
//!                  the launchers, one file for what each runs (gradient:
//!                  also Soft-DTW's expected alignment of a pair)
//! streamed         paired values computed while the host writes the pairs
//! wait             the host's bounded waits for the device
//! page_locked      batches in page-locked host memory
//! foreign          paired Soft-DTW over the caller's device memory
//! path             last columns of a long pair's sub-pairs (alignment paths)
//! matrix           a distance matrix with any variant
//! ```

mod alignment;
mod antidiagonal;
mod context;
mod device;
mod foreign;
mod gradient;
mod image;
mod layout;
mod long_pair;
mod matrix;
mod multi;
mod output;
mod page_locked;
mod paired;
mod pairs;
mod path;
mod pipeline;
mod plan;
mod ptx;
// The indexer runs in build.rs; here only the tests run it.
#[cfg_attr(not(test), allow(dead_code))]
mod ptx_index;
mod select;
mod setup;
mod staged_copy;
mod staging;
mod stencil;
mod streamed;
mod streamed_state;
mod value_plan;
mod wait;

#[doc(hidden)]
pub use context::kernels_used; // for the sanitizer runs' coverage report
pub use context::{this_thread_busy_time, Gpu, GpuWork};
pub use device::{list_gpus, GpuInfo};
pub use image::DeviceSeriesSet;
#[doc(hidden)]
pub use layout::stream_copy; // for benches/host_copies.rs
#[doc(hidden)]
pub use long_pair::inject_stalled_panel;
#[doc(hidden)]
pub use multi::inject_gpu_fault;
pub use ptx::{
    kernels_build_error, min_compute_capability, ptx, ptx_entries, ptx_hash, ptx_rustc_version,
    ptx_target, ptx_toolchain,
};
#[doc(hidden)]
pub use select::force_kernel_shape; // for the tests that launch every kernel
pub use select::local_max_len;
pub use setup::{setup_steps, SetupKind, SetupStep};
#[doc(hidden)]
pub use streamed::{inject_streamed_fault, StreamedFault};
pub use streamed::{streamed_fallbacks, this_thread_streamed_calls};
pub use wait::device_wait_bound;

pub(crate) use alignment::pair_alignment;
pub(crate) use context::KernelParams;
pub(crate) use foreign::{output_len, paired_on_device, ForeignShape, Wanted};
pub(crate) use gradient::{
    paired_gradient_resident, paired_gradient_spread, paired_gradient_variant,
};
pub(crate) use layout::image_bytes as set_bytes;
pub(crate) use matrix::matrix;
pub(crate) use multi::budgets;
pub(crate) use paired::{paired_value_variant, paired_values_resident, paired_values_spread};
pub(crate) use pairs::{matrix_resident, upload_range, ResidentParts};
pub(crate) use path::DevicePathPair;
pub(crate) use plan::spread::{named, shards as plan_shards};
pub(crate) use select::{band_width, matrix_variant, resident_variant};
