//! Kernels forced by name, for benchmarks (`TIMEWARP_WARP_KERNEL`) and for
//! the tests that launch every kernel of the catalogue.

use std::cell::Cell;
use std::sync::OnceLock;
use timewarp_kernels::catalogue::drivers;
use timewarp_kernels::{Driver, Measure};

thread_local! {
    /// A shape forced by [`force_kernel_shape`] for this thread's calls.
    static FORCED_HERE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Forces the kernels that this thread's calls choose to the driver and
/// shape `name` names (as in the kernel names: `warp4`, `sheared16x16`,
/// `panels4x4`, `tiled16`, `warp_gradient8`), where the measure has it and
/// the call can take it, until called with `None`: for the tests that run
/// every kernel of the catalogue, including those the rules pick only for
/// workloads too large for a test, or never (kept for `timewarp bench`).
/// It takes precedence over `TIMEWARP_WARP_KERNEL`.
pub fn force_kernel_shape(name: Option<&'static str>) {
    FORCED_HERE.with(|forced| forced.set(name));
}

/// The shape forced on this thread, else `TIMEWARP_WARP_KERNEL` if set,
/// read once: the kernels are chosen several times a call, and each read
/// of the environment takes its lock.
pub(crate) fn forced_name() -> Option<&'static str> {
    static FORCED: OnceLock<Option<String>> = OnceLock::new();
    FORCED_HERE.with(Cell::get).or_else(|| {
        FORCED
            .get_or_init(|| std::env::var("TIMEWARP_WARP_KERNEL").ok())
            .as_deref()
    })
}

/// The warp kernel named by `TIMEWARP_WARP_KERNEL` or [`force_kernel_shape`]
/// (a driver and shape as in the kernel names: `warp4`, `skewed16x1`,
/// `sheared16x16`), if the measure has it: for comparing the shapes of one
/// workload in `timewarp bench`. A sheared band kernel only for pairs in a
/// band of `band_width` diagonals that fits it.
pub(super) fn forced_driver(measure: Measure, band_width: Option<usize>) -> Option<Driver> {
    let name = forced_name()?;
    drivers(measure).find(|&driver| {
        let takes = match driver {
            Driver::Warp { .. } | Driver::Skewed { .. } => true,
            Driver::Sheared { lanes, stripe } => band_width.is_some_and(|width| {
                timewarp_kernels::drivers::sheared_band::fits(
                    width,
                    lanes as usize,
                    stripe as usize,
                )
            }),
            _ => false,
        };
        takes && driver.to_string() == name
    })
}
