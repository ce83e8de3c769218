//! The tiled variants of a distance matrix (`tiled`, `tiled-launches`):
//! every pair one after the other over the whole GPU, with the pipelined
//! launch of one pair (`launch::pipelined_pair`) or square tiles an
//! anti-diagonal of tiles per launch. Device memory is linear in the
//! lengths.

use crate::error::DriverCall;
use crate::gpu::launch::pipelined_pair::{
    check_fits, pair_pipelined_on, pipelined_bytes, stripe_for,
};
use crate::gpu::plan::layout::image_bytes;
use crate::gpu::plan::select::tile_rows;
use crate::gpu::runtime::context::{poison, Gpu, KernelParams};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::call_uploads::{upload_ranges, AsyncCopies, UPLOAD_SLACK};
use crate::results::zeros;
use crate::{Float, Result, SeriesSet, Variant};
use cudarc::driver::DevicePtr;
use ndarray::Array2;
use std::mem::size_of;
use timewarp_kernels::drivers::columns::long_pair::{diagonal_tiles, tile_counts, TileGrid};
use timewarp_kernels::hw::LANES;
use timewarp_kernels::launch::long_pair::TileLaunch;
use timewarp_kernels::{Driver, KernelId};

/// Device memory of one pair: both series' images and `workspace` bytes.
fn pair_bytes<T: Float>(a: &SeriesSet<T>, b: &SeriesSet<T>, workspace: usize) -> usize {
    image_bytes(a, 0..1) + image_bytes(b, 0..1) + UPLOAD_SLACK + workspace
}

/// Every pair of `a` and `b` (or the upper triangle of `a`) with a tiled
/// kernel, one pair after the other.
pub(crate) fn pairs_one_by_one<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    variant: Variant,
    params: P,
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    budget: usize,
) -> Result<Array2<T>> {
    let triangle = b.is_none();
    let b = b.unwrap_or(a);
    let mut out = zeros(a.len(), b.len())?;
    for i in 0..a.len() {
        for j in if triangle { i } else { 0 }..b.len() {
            let (x, y) = (a.slice(i..i + 1), b.slice(j..j + 1));
            let value = if variant == Variant::TiledLaunches {
                pair_by_tile_diagonals(gpu, params, &x, &y, budget)
            } else {
                pair_pipelined(gpu, params, &x, &y, budget)
            }?;
            out[[i, j]] = value;
            if triangle {
                out[[j, i]] = value;
            }
        }
    }
    Ok(out)
}

/// One pair (the single series of `a` against that of `b`) in one
/// launch: column bands, each warp right behind the band to its left.
fn pair_pipelined<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    budget: usize,
) -> Result<T> {
    let (n, m) = (a.max_len(), b.max_len());
    let workspace = pipelined_bytes::<T>(n);
    check_fits(n, m, pair_bytes(a, b, workspace), budget)?;
    let uploaded = upload_ranges(gpu, &[a, b], 0..1, AsyncCopies::Waited)?;
    let pair = (
        uploaded.batch(0, a).view(0..1),
        uploaded.batch(1, b).view(0..1),
    );
    pair_pipelined_on(gpu, params, pair, (n, m), budget)
}

/// One pair in square tiles, the anti-diagonals of tiles in order, one
/// launch each, a warp a tile.
fn pair_by_tile_diagonals<T: Float, P: KernelParams<T>>(
    gpu: &Gpu,
    params: P,
    a: &SeriesSet<T>,
    b: &SeriesSet<T>,
    budget: usize,
) -> Result<T> {
    let (n, m) = (a.max_len(), b.max_len());
    let tiled = |stripe| Driver::TiledLaunches { stripe };
    let stripe = stripe_for::<T, P>(gpu, m, a.dims() == 1, tiled)?;
    let tile_rows = tile_rows(stripe);
    let (tiles_down, tiles_across) = tile_counts(n, m, tile_rows, LANES * stripe);
    let borders = (n + m + 2 + tiles_down) * size_of::<T>();
    check_fits(n, m, pair_bytes(a, b, borders), budget)?;
    let driver = Driver::TiledLaunches {
        stripe: stripe as u32,
    };
    let id = KernelId::new(P::MEASURE, driver, a.dims() == 1, T::PRECISION);
    let function = gpu.function(id)?;
    let stream = &gpu.stream;
    let uploaded = upload_ranges(gpu, &[a, b], 0..1, AsyncCopies::Waited)?;
    let (a_ref, b_ref) = (
        uploaded.batch(0, a).view(0..1),
        uploaded.batch(1, b).view(0..1),
    );
    let border = |len: usize| {
        stream
            .clone_htod(&vec![T::INFINITY; len])
            .call("copying to the device")
    };
    let rows = border(m + 1)?;
    let cols = border(n + 1)?;
    let mut corners = vec![T::INFINITY; tiles_down];
    corners[0] = T::ZERO;
    let corners = stream.clone_htod(&corners).call("copying to the device")?;
    let mut out = stream
        .alloc_zeros::<T>(1)
        .call("allocating device memory")?;
    let out_ptr = poison(stream, &mut out)?;
    let grid = TileGrid {
        rows: rows.device_ptr(stream).0 as *mut T,
        cols: cols.device_ptr(stream).0 as *mut T,
        corners: corners.device_ptr(stream).0 as *mut T,
        tile_rows: tile_rows as u64,
    };
    for diagonal in 0..tiles_down + tiles_across - 1 {
        let (first, last) = diagonal_tiles(diagonal, tiles_down, tiles_across);
        let launch = TileLaunch {
            a: a_ref,
            b: b_ref,
            params,
            grid,
            out: out_ptr as *mut T,
            diagonal: diagonal as u64,
        };
        // A block a tile: the few tiles of an anti-diagonal spread over
        // as many SMs.
        let blocks = (last - first + 1) as u32;
        // SAFETY: the borders hold m + 1, n + 1 and tiles_down values,
        // `out` one; the series are uploaded; launches on one stream run
        // in order, so every earlier anti-diagonal is done.
        unsafe { gpu.launch_blocks(&function, (blocks, LANES as u32), 0, launch) }?;
    }
    wait_stream(stream, &id.to_string())?;
    Ok(stream.clone_dtoh(&out).call("copying to the host")?[0])
}
