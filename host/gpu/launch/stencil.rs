//! The stencil launch (a block a pair, `drivers::stencil`) as the distance
//! matrices, the paired values, the gradients and the expected alignment
//! all make it: its shared memory, and its launch arguments before each
//! caller adds its outputs. No CUDA here.

use crate::Float;
use timewarp_kernels::launch::pairs::{GradientBuffers, PairsLaunch, StencilLaunch};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::SetRef;

/// Bytes of shared memory of a stencil block for pairs of at most
/// `ring_len - 1` samples on their shorter side: `rings` anti-diagonals.
pub(crate) fn shared_bytes<T>(rings: usize, ring_len: usize) -> usize {
    rings * ring_len * std::mem::size_of::<T>()
}

/// A stencil launch of `pair_count` pairs of `a` and `b`, numbered as
/// `numbering` says, with rings of `ring_len` values, no output or gradient
/// yet.
pub(crate) fn stencil_launch<T: Float, P: Copy>(
    (a, b): (SetRef<T>, SetRef<T>),
    params: P,
    numbering: Numbering,
    pair_count: u64,
    ring_len: usize,
) -> StencilLaunch<T, P> {
    StencilLaunch {
        pairs: PairsLaunch {
            a,
            b,
            params,
            out: std::ptr::null_mut(),
            workspace: std::ptr::null_mut(),
            row_len: 1,
            first_pair: 0,
            pair_count,
            numbering,
        },
        ring_len: ring_len as u64,
        gradient: GradientBuffers::none(),
    }
}
