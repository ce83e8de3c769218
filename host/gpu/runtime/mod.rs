//! The GPU itself: the embedded PTX and its kernels, the GPUs the driver
//! reports, an open GPU and what it keeps between calls (its stream, its
//! loaded kernels, its pool of pinned host memory and the pipeline's
//! streams), the host's bounded waits for the device, and the GPUs held for
//! one call. It depends on `plan` only (the pinned pool's sizes, the spread
//! over several GPUs).
//!
//! The files, each depending only on those before it:
//!
//! ```text
//! ptx_index              where each kernel entry lies in the PTX (build.rs
//!                        compiles this file too)
//! ptx                    the embedded PTX, the record of its build, one
//!                        module per entry point
//! device                 the GPUs the driver reports, a device's memory pool
//! kernel_argument        the launch structs as the kernels' one parameter
//! setup                  the one-time work of the process, timed (no CUDA)
//! wait                   every wait of the host for the device, bounded
//! pinned                 pinned host buffers and the pipeline's streams, kept
//!                        per GPU, and the outputs mapped through them
//! streamed_values_state  what the streamed paired values keep per GPU
//! context                Gpu: open, begin a computation, load and launch a
//!                        kernel
//! several_gpus           the GPUs held for one call, their budgets, blocks
//!                        of pairs spread over them, the injected fault
//! ```

pub(super) mod context;
pub(super) mod device;
pub(super) mod kernel_argument;
pub(super) mod pinned;
pub(super) mod ptx;
// The indexer runs in build.rs; here only the tests run it.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) mod ptx_index;
pub(super) mod setup;
pub(super) mod several_gpus;
pub(super) mod streamed_values_state;
pub(super) mod wait;
