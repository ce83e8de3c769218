//! Long pairs, one at a time over the whole GPU: the tiled kernels
//! (pipelined column bands in one launch, or square tiles an anti-diagonal
//! per launch). Device memory is linear in the lengths.

use super::{entry_name, gpu_error, poison, tiled_stripes, Gpu, Variant};
use crate::{Error, Float, Result, SeriesSet};
use cudarc::driver::DevicePtr;
use ndarray::Array2;
use timewarp_kernels::warp::{diagonal_tiles, tile_counts, Pipeline, TileGrid, LANES};
use timewarp_kernels::{PipelineLaunch, SetRef, TileLaunch};

/// The tiled kernels' stripe for `columns` columns: the widest that still
/// gives `TILED_MIN_BANDS` bands or tiles side by side, else the narrowest.
fn tiled_stripe(measure: &str, precision: &str, columns: usize) -> usize {
    let stripes = tiled_stripes(measure, precision);
    stripes
        .iter()
        .rev()
        .copied()
        .find(|&s| columns / (LANES * s) >= TILED_MIN_BANDS)
        .unwrap_or(stripes[0])
}

/// Bands (warps) a long pair should give at least, about 4 on each of an
/// H200's 132 SMs. The kernel is latency bound (ncu: one warp per scheduler
/// leaves 82% of issue cycles idle at 512 bands), but narrower stripes for
/// more bands lose more than they gain: each band trails the one to its
/// left by about 47 rows, so 1024 bands of 2 columns a lane took 74.3 ms
/// for TWED at n = 65,536 against 59.4 ms for 512 bands of 4 (H200).
const TILED_MIN_BANDS: usize = 512;

/// Rows of a tile of the per-anti-diagonal kernel with `stripe` columns per
/// lane: square tiles, at least 256 rows so that the wavefront's fill and
/// drain (31 steps) stay small.
fn tile_rows(stripe: usize) -> usize {
    (LANES * stripe).max(256)
}

/// Device memory of one pair: both series (values, timestamps, offsets)
/// and `borders` values and `flags` counters.
fn pair_bytes<T: Float>(a: &SeriesSet<T>, b: &SeriesSet<T>, borders: usize, flags: usize) -> usize {
    let series = |s: &SeriesSet<T>| {
        let samples = s.total_samples();
        let times = if s.has_timestamps() { samples } else { 0 };
        (samples * s.dims() + times) * std::mem::size_of::<T>() + 2 * std::mem::size_of::<u64>()
    };
    series(a) + series(b) + borders * std::mem::size_of::<T>() + flags * std::mem::size_of::<u32>()
}

impl Gpu {
    /// Every pair of `a` and `b` (or the upper triangle of `a`) with a tiled
    /// kernel, one pair after the other.
    pub(super) fn pairs_one_by_one<T: Float, P: Copy>(
        &self,
        measure: &str,
        variant: Variant,
        params: P,
        a: &SeriesSet<T>,
        b: Option<&SeriesSet<T>>,
        budget: usize,
    ) -> Result<Array2<T>> {
        let triangle = b.is_none();
        let b = b.unwrap_or(a);
        let mut out = Array2::from_elem((a.len(), b.len()), T::ZERO);
        for i in 0..a.len() {
            for j in if triangle { i } else { 0 }..b.len() {
                let (x, y) = (a.slice(i..i + 1), b.slice(j..j + 1));
                let value = if variant == Variant::TiledLaunches {
                    self.pair_by_tile_diagonals(measure, params, &x, &y, budget)
                } else {
                    self.pair_pipelined(measure, params, &x, &y, budget)
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
    pub(super) fn pair_pipelined<T: Float, P: Copy>(
        &self,
        measure: &str,
        params: P,
        a: &SeriesSet<T>,
        b: &SeriesSet<T>,
        budget: usize,
    ) -> Result<T> {
        let (n, m) = (a.max_len(), b.max_len());
        let (borders, flags) = pipelined_workspace(measure, T::NAME, n, m);
        check_fits(n, m, pair_bytes(a, b, borders, flags), budget)?;
        let stream = &self.stream;
        let (a_set, b_set) = (self.upload(a)?, self.upload(b)?);
        self.pair_pipelined_on(
            measure,
            params,
            (a_set.set_ref(stream), b_set.set_ref(stream)),
            (n, m),
            budget,
        )
    }

    /// [`Gpu::pair_pipelined`] of the single series of each of `pair`,
    /// already on the device, of lengths `n` and `m`; `budget` bounds the
    /// workspace it allocates. Returns once the value is back (the series
    /// may be freed then).
    pub(super) fn pair_pipelined_on<T: Float, P: Copy>(
        &self,
        measure: &str,
        params: P,
        (a, b): (SetRef<T>, SetRef<T>),
        (n, m): (usize, usize),
        budget: usize,
    ) -> Result<T> {
        debug_assert!(a.count == 1 && b.count == 1);
        let stripe = tiled_stripe(measure, T::NAME, m);
        let bands = m.div_ceil(LANES * stripe);
        let (border_values, flag_count) = pipelined_workspace(measure, T::NAME, n, m);
        let workspace = border_values * std::mem::size_of::<T>()
            + flag_count * std::mem::size_of::<u32>()
            + std::mem::size_of::<T>();
        check_fits(n, m, workspace, budget)?;
        let kernel = format!("tiled{stripe}");
        let function = self.function(&entry_name(measure, &kernel, a.dims as usize, T::NAME))?;
        let stream = &self.stream;
        let borders = stream.alloc_zeros::<T>(border_values).map_err(gpu_error)?;
        let flags = stream.alloc_zeros::<u32>(flag_count).map_err(gpu_error)?;
        let mut out = stream.alloc_zeros::<T>(1).map_err(gpu_error)?;
        let out_ptr = poison(stream, &mut out)?;
        let flags_ptr = flags.device_ptr(stream).0 as *mut u32;
        let launch = PipelineLaunch {
            a,
            b,
            params,
            pipeline: Pipeline {
                borders: borders.device_ptr(stream).0 as *mut T,
                ready: flags_ptr,
                // SAFETY: `flags` holds bands + 1 counters.
                next_band: unsafe { flags_ptr.add(bands) },
            },
            out: out_ptr as *mut T,
        };
        // A warp a band: the atomic band counter hands the bands out in
        // the order the warps start, so none waits for a warp not running.
        // One warp a block, so that registers alone bound the warps an SM
        // holds: with blocks of 4 warps a kernel of 170 registers a thread
        // fits 2 blocks (8 warps), with blocks of 1 warp, 11.
        let blocks = bands as u32;
        // SAFETY: the borders hold 2 (n + 1) values, the flags bands + 1
        // zeroed counters, `out` one value; the caller's series are on the
        // device.
        unsafe { self.launch(&function, blocks, LANES as u32, launch) }?;
        Ok(stream.clone_dtoh(&out).map_err(gpu_error)?[0])
    }

    /// One pair in square tiles, the anti-diagonals of tiles in order, one
    /// launch each, a warp a tile.
    fn pair_by_tile_diagonals<T: Float, P: Copy>(
        &self,
        measure: &str,
        params: P,
        a: &SeriesSet<T>,
        b: &SeriesSet<T>,
        budget: usize,
    ) -> Result<T> {
        let (n, m) = (a.max_len(), b.max_len());
        let stripe = tiled_stripe(measure, T::NAME, m);
        let tile_rows = tile_rows(stripe);
        let (tiles_down, tiles_across) = tile_counts(n, m, tile_rows, LANES * stripe);
        check_fits(n, m, pair_bytes(a, b, n + m + 2 + tiles_down, 0), budget)?;
        let function = self.function(&format!("{measure}_tiled_launches{stripe}_{}", T::NAME))?;
        let stream = &self.stream;
        let (a_set, b_set) = (self.upload(a)?, self.upload(b)?);
        let border = |len: usize| {
            stream
                .clone_htod(&vec![T::INFINITY; len])
                .map_err(gpu_error)
        };
        let rows = border(m + 1)?;
        let cols = border(n + 1)?;
        let mut corners = vec![T::INFINITY; tiles_down];
        corners[0] = T::ZERO;
        let corners = stream.clone_htod(&corners).map_err(gpu_error)?;
        let mut out = stream.alloc_zeros::<T>(1).map_err(gpu_error)?;
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
                a: a_set.set_ref(stream),
                b: b_set.set_ref(stream),
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
            unsafe { self.launch(&function, blocks, LANES as u32, launch) }?;
        }
        Ok(stream.clone_dtoh(&out).map_err(gpu_error)?[0])
    }
}

/// The workspace of [`Gpu::pair_pipelined`] for an `n x m` pair: border
/// values (two columns of `n + 1`) and counters (one a band, and one).
pub(super) fn pipelined_workspace(
    measure: &str,
    precision: &str,
    n: usize,
    m: usize,
) -> (usize, usize) {
    let stripe = tiled_stripe(measure, precision, m);
    (2 * (n + 1), m.div_ceil(LANES * stripe) + 1)
}

/// A pair that does not fit the budget is an error before anything is
/// allocated.
pub(super) fn check_fits(n: usize, m: usize, bytes: usize, budget: usize) -> Result<()> {
    if bytes > budget {
        return Err(Error::Gpu(format!(
            "a pair of {n} x {m} samples needs {bytes} bytes of device memory, over the {budget} available"
        )));
    }
    Ok(())
}
