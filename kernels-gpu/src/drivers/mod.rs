//! The drivers: every kernel shape, each generic over [`crate::Recurrence`]
//! (so each measure gets every shape) and over the hardware traits of
//! [`crate::hw`] (so the host tests run the GPU's own code on emulated
//! hardware).
//!
//! | driver | computes | kernels |
//! |---|---|---|
//! | [`rows`] | a pair row by row, two rolling rows wherever the caller puts them | `naive`, `local`, `shared`; the CPU backend |
//! | [`columns`] | a region of the matrix per warp, a lane's stripe of columns in registers, rows passed by shuffles; a pair in panels of columns, a long pair in tiles or pipelined panels; or a pair with each stripe cut into groups a row apart, for latency-bound cells ([`columns::skewed`]); a pair's forward pass storing its cells and the backward pass over them, a warp a pair or a warp a panel of one ([`columns::gradient`]) | `warp`, `skewed`, `panels`, `tiled`, `tiled_launches`, `warp_gradient`, `panels_gradient` |
//! | [`sheared_band`] | a pair's Sakoe-Chiba band per warp, lanes holding the band's diagonals: only the band's cells | `warp`, when the host chooses it |
//! | [`stencil`] | a pair per thread block, anti-diagonal by anti-diagonal in shared memory, and the backward pass | `stencil`, `gradient`; the CPU backend's latency-bound measures |
//! | [`antidiagonal`] | one pair, a thread per cell of an anti-diagonal, rolling anti-diagonals in global memory | `diagonal`, `diagonal_step` |
//!
//! Which driver computes a pair is the host's choice (its kernel
//! selection), never a driver's.

pub mod antidiagonal;
pub mod columns;
pub mod rows;
pub mod sheared_band;
pub mod stencil;

use crate::hw::Warp;
use crate::Real;

/// The rows `first..=last` of the cells `(i, d - i)` on anti-diagonal `d`
/// of the `(n + 1) x (m + 1)` matrix with its boundary row and column,
/// `d <= n + m`.
#[inline(always)]
pub fn antidiagonal_rows(d: usize, n: usize, m: usize) -> (usize, usize) {
    (d.saturating_sub(m), d.min(n))
}

/// Cell `k` of the warp's stripes of `S` cells a lane (cell `k % S` of lane
/// `k / S`), on every lane: how the warp drivers hand out a pair's last
/// cell.
///
/// # Safety
/// All lanes call it together; `k < W::LANES * S`.
#[inline(always)]
pub(crate) unsafe fn stripe_cell<T: Real, W: Warp, const S: usize>(
    warp: &W,
    cells: &[T; S],
    k: usize,
) -> T {
    let (owner, index) = (k / S, k % S);
    // A select per cell rather than an index: the stripe stays in registers.
    let mut mine = cells[0];
    for (slot, &cell) in cells.iter().enumerate().skip(1) {
        if slot == index {
            mine = cell;
        }
    }
    warp.broadcast(mine, owner)
}
