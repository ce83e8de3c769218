//! The open-ended subsequence alignment on the GPU, its policy (no CUDA):
//! when `Auto` takes the GPU, the kernel (query rows a lane), and how a
//! chunk of the series is cut into segments (a warp each) and tiles (a
//! checkpoint each) within the memory budget (docs/algorithms.md,
//! "Subsequence alignment", "On the GPU").

use crate::{Error, Result};
use std::cell::Cell;
use std::mem::size_of;
use timewarp_kernels::launch::subsequence::{Best, Reach};

/// `Device::Auto` aligns on the GPU (when one is usable) from this many
/// cells (`m * N`) on: the CPU computes about 0.8 G cells a second on one
/// core (docs/benchmarks.md, "Subsequence alignment"), so 2^24 cells are
/// 20 ms there, against a few milliseconds of launches, waits and the
/// series' copy (8 bytes a value) on the GPU.
pub(crate) const AUTO_MIN_CELLS: usize = 1 << 24;

/// ... and for queries of at least this many samples: a column costs the
/// CPU `m` cells, the GPU the copy of its sample whatever `m`.
pub(crate) const AUTO_MIN_QUERY: usize = 8;

/// Columns of a chunk of the series on the device, at most (32 MiB of
/// `f64` samples a dimension): a series of 10^7 samples is three chunks,
/// so that the host reads and checks the next while the GPU computes one
/// (a chunk's computation is milliseconds, its reading tens).
pub(crate) const CHUNK_COLUMNS: usize = 1 << 22;

/// A tile has at least this many columns (and at least `m`): each tile of
/// a panel takes `lanes - 1` steps more than its columns, and keeps a
/// column of `m` cells.
pub(crate) const MIN_TILE: usize = 512;

/// A segment has at least this many tiles: a rerun usually stops after
/// one or two.
pub(crate) const MIN_TILES: usize = 4;

/// Warps (segments) a chunk gives each SM, when it is long enough.
pub(crate) const WARPS_PER_SM: usize = 16;

/// Threads a block of the kernel (a warp a segment).
pub(crate) const THREADS: usize = 128;

/// Whether `Auto` aligns a query of `m` samples in a series of `n` on the
/// GPU.
pub(crate) fn auto_on_gpu(m: usize, n: usize) -> bool {
    m >= AUTO_MIN_QUERY && m.saturating_mul(n) >= AUTO_MIN_CELLS
}

/// How an alignment is cut for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AlignmentShape {
    /// Query rows a lane: the kernel `dtw_subsequence<rows>`.
    pub rows: u32,
    /// Columns between two checkpoints.
    pub tile: usize,
    /// Columns a segment (a multiple of `tile`).
    pub segment: usize,
    /// Columns a chunk holds at most.
    pub chunk: usize,
}

impl AlignmentShape {
    /// Segments of a chunk of `columns` columns.
    pub fn segments(&self, columns: usize) -> usize {
        columns.div_ceil(self.segment)
    }

    /// Tiles' slots a chunk of `columns` columns has: `segment / tile` a
    /// segment.
    pub fn slots(&self, columns: usize) -> usize {
        self.segments(columns) * (self.segment / self.tile)
    }
}

thread_local! {
    /// A shape forced by [`force_alignment_shape`] for this thread's calls.
    static FORCED: Cell<Option<(usize, usize, usize)>> = const { Cell::new(None) };
}

/// Forces this thread's alignments on the GPU into chunks of `chunk`
/// columns, segments of `segment` and tiles of `tile` (`segment` a
/// multiple of `tile`), until called with `None`: for the tests, which
/// need many chunks, segments and reruns on short series.
pub fn force_alignment_shape(shape: Option<(usize, usize, usize)>) {
    if let Some((chunk, tile, segment)) = shape {
        assert!(
            chunk >= 1 && tile >= 1 && segment >= tile && segment % tile == 0,
            "a chunk, and segments of whole tiles"
        );
    }
    FORCED.with(|forced| forced.set(shape));
}

/// Device bytes of a chunk of `columns` columns of `dims` values under
/// `shape`, for a query of `m` samples: the samples, the checkpoints and
/// tiles' bests, the segments' ends and handoffs, the panels' borders
/// (where the query takes more than one panel), the marks and counts, the
/// query and the column carried between chunks.
pub(crate) fn chunk_bytes(columns: usize, shape: &AlignmentShape, m: usize, dims: usize) -> usize {
    let reach = size_of::<Reach>();
    let segments = shape.segments(columns);
    let slots = shape.slots(columns);
    let panels = m.div_ceil(32 * shape.rows as usize);
    let borders = if panels > 1 {
        2 * segments * shape.tile * reach
    } else {
        0
    };
    columns * dims * size_of::<f64>()
        + slots * (m * reach + size_of::<Best>())
        + 3 * segments * m * reach
        + borders
        + (3 * segments + 2) * size_of::<u32>()
        + m * (dims * size_of::<f64>() + reach)
}

/// The shape of an alignment of a query of `m` samples of `dims` values in
/// a series of `n` samples, on a GPU of `sms` SMs, within `budget` bytes:
/// `rows` 1 for queries of up to 32 samples (a panel of a row a lane), else
/// 4; tiles of `max(512, m)` columns; chunks of up to [`CHUNK_COLUMNS`]
/// (fewer where the budget is short), each cut into about
/// [`WARPS_PER_SM`] segments an SM of at least [`MIN_TILES`] tiles. An
/// error when not even a chunk of one segment fits.
pub(crate) fn alignment_shape(
    (m, dims): (usize, usize),
    n: usize,
    sms: usize,
    budget: usize,
) -> Result<AlignmentShape> {
    let rows = if m <= 32 { 1 } else { 4 };
    if let Some((chunk, tile, segment)) = FORCED.with(Cell::get) {
        return Ok(AlignmentShape {
            rows,
            tile,
            segment,
            chunk,
        });
    }
    let tile = m.max(MIN_TILE);
    let warps = sms.max(1) * WARPS_PER_SM;
    let shape_of = |chunk: usize| {
        let per_warp = chunk.div_ceil(warps).div_ceil(tile).max(MIN_TILES);
        AlignmentShape {
            rows,
            tile,
            segment: per_warp * tile,
            chunk,
        }
    };
    // The bytes grow with the chunk: the largest that fits, by halving.
    let mut chunk = n.clamp(1, CHUNK_COLUMNS);
    while chunk > 1 && chunk_bytes(chunk, &shape_of(chunk), m, dims) > budget {
        chunk = chunk.div_ceil(2);
    }
    let shape = shape_of(chunk);
    let bytes = chunk_bytes(chunk, &shape, m, dims);
    if bytes > budget {
        return Err(Error::GpuOutOfMemory {
            what: format!(
                "an alignment with a query of {m} samples of {dims} values needs {bytes} bytes \
                 for one column, more than the budget of {budget} bytes"
            ),
            source: None,
        });
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_the_gpu_for_long_series_and_queries() {
        assert!(!auto_on_gpu(128, (1 << 17) - 1));
        assert!(auto_on_gpu(128, 1 << 17));
        assert!(!auto_on_gpu(4, 1 << 30));
        assert!(auto_on_gpu(8, 1 << 21));
        assert!(!auto_on_gpu(usize::MAX, 0));
    }

    #[test]
    fn a_long_series_gives_every_sm_segments_of_whole_tiles() {
        let budget = 8 << 30;
        let shape = alignment_shape((128, 1), 10_000_000, 132, budget).unwrap();
        assert_eq!((shape.rows, shape.tile), (4, MIN_TILE));
        assert_eq!(shape.chunk, CHUNK_COLUMNS);
        assert_eq!(shape.segment % shape.tile, 0);
        let segments = shape.segments(shape.chunk);
        assert!(segments <= 132 * WARPS_PER_SM && segments > 100 * WARPS_PER_SM);
        assert!(chunk_bytes(shape.chunk, &shape, 128, 1) <= budget);
        // Shorter than a chunk: one chunk of the whole series.
        let shape = alignment_shape((128, 1), 1_000_000, 132, budget).unwrap();
        assert_eq!(shape.chunk, 1_000_000);
        // Short queries: a row a lane; long ones: tiles of the query's
        // length.
        assert_eq!(alignment_shape((32, 1), 1000, 132, budget).unwrap().rows, 1);
        let long = alignment_shape((4096, 2), 10_000_000, 132, budget).unwrap();
        assert_eq!((long.rows, long.tile), (4, 4096));
        assert!(long.segment >= MIN_TILES * long.tile);
    }

    #[test]
    fn a_short_series_is_one_chunk_of_at_least_one_segment() {
        let shape = alignment_shape((100, 3), 700, 132, 1 << 30).unwrap();
        assert_eq!(shape.chunk, 700);
        assert_eq!(shape.segment, MIN_TILES * MIN_TILE);
        assert_eq!(shape.segments(700), 1);
        assert_eq!(shape.slots(700), MIN_TILES);
    }

    #[test]
    fn a_small_budget_cuts_the_chunk_and_a_tiny_one_is_refused() {
        let small = 16 << 20;
        let shape = alignment_shape((128, 3), 10_000_000, 132, small).unwrap();
        assert!(shape.chunk < 10_000_000);
        assert!(chunk_bytes(shape.chunk, &shape, 128, 3) <= small);
        let error = alignment_shape((4096, 4), 1000, 132, 1000).unwrap_err();
        assert!(matches!(error, Error::GpuOutOfMemory { .. }), "{error}");
    }

    #[test]
    fn a_forced_shape_holds_on_its_thread_only() {
        force_alignment_shape(Some((3000, 64, 256)));
        let shape = alignment_shape((40, 1), 10_000, 132, 1 << 30).unwrap();
        assert_eq!((shape.chunk, shape.tile, shape.segment), (3000, 64, 256));
        std::thread::spawn(|| {
            let other = alignment_shape((40, 1), 10_000, 132, 1 << 30).unwrap();
            assert_eq!(other.tile, MIN_TILE);
        })
        .join()
        .unwrap();
        force_alignment_shape(None);
        assert_eq!(
            alignment_shape((40, 1), 10_000, 132, 1 << 30).unwrap().tile,
            MIN_TILE
        );
    }
}
