//! The one parameter every kernel takes: a launch struct of the kernel
//! crate, passed by value.

use cudarc::driver::DeviceRepr;
use timewarp_kernels::launch::long_pair::{DiagonalLaunch, PanelLaunch, TileLaunch};
use timewarp_kernels::launch::neighbours::{GatherLaunch, KnnLaunch};
use timewarp_kernels::launch::pairs::{PairsLaunch, StencilLaunch};
use timewarp_kernels::launch::search::SearchLaunch;
use timewarp_kernels::launch::streamed::StreamedLaunch;
use timewarp_kernels::launch::subsequence::SubsequenceLaunch;

/// The one kernel parameter, a `#[repr(C)]` struct shared with the device
/// crate, passed by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
pub(crate) struct KernelArgument<A>(pub(crate) A);

macro_rules! kernel_arguments {
    ($($launch:ident),*) => {$(
        // SAFETY: the launch structs are `#[repr(C)]` and `Copy`, laid out alike by the host
        // and the nvptx64 compiler (one definition, 64-bit pointers on both).
        unsafe impl<T: Copy, P: Copy> DeviceRepr for KernelArgument<$launch<T, P>> {}
    )*};
}

kernel_arguments!(
    PairsLaunch,
    StreamedLaunch,
    StencilLaunch,
    TileLaunch,
    PanelLaunch,
    DiagonalLaunch
);

// SAFETY: `SearchLaunch` is `#[repr(C)]` and `Copy`, laid out alike by the
// host and the nvptx64 compiler (one definition, 64-bit pointers on both).
unsafe impl DeviceRepr for KernelArgument<SearchLaunch> {}

// SAFETY: the k-NN's launch structs are `#[repr(C)]` and `Copy`, laid out
// alike by the host and the nvptx64 compiler (one definition, 64-bit
// pointers on both).
unsafe impl<T: Copy> DeviceRepr for KernelArgument<KnnLaunch<T>> {}
// SAFETY: as above.
unsafe impl<T: Copy> DeviceRepr for KernelArgument<GatherLaunch<T>> {}
// SAFETY: `SubsequenceLaunch` is `#[repr(C)]` and `Copy`, laid out alike by
// the host and the nvptx64 compiler (one definition, 64-bit pointers on
// both).
unsafe impl DeviceRepr for KernelArgument<SubsequenceLaunch> {}
