//! The tiles of a distance matrix: which series are uploaded together,
//! which are staged tile by tile, and how the budget is shared between the
//! pipeline's slots (`matrix::tile_pipeline` runs the plan), and the blocks of the
//! stencil kernels.

use super::layout::image_bytes;
use super::{count_ranges, ranges};
use crate::{Error, Float, Result, SeriesSet};
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::launch::tile_pairs;

/// Streams a computation spreads its tiles over: the pipeline's slots.
pub(crate) const SLOTS: usize = 4;
/// Largest chunk of a streamed batch (and piece of an upload) staged at
/// once: small enough that the first copy and the last kernel, which
/// nothing overlaps, are short; large enough that a chunk's kernels fill
/// the GPU.
pub(crate) const STAGING_BYTES: usize = 16 << 20;
/// Largest output of one tile.
const RESULT_BYTES: usize = 16 << 20;
/// Against a resident set, a block of queries is cut into tiles of at most
/// a [`SLOTS`]th of its outputs, but of no fewer than this many (a tile's
/// launch must fill the GPU): the host checks and copies the last tile's
/// results after the last kernel, the others' while kernels still run.
pub(crate) const SPLIT_OUTPUTS: usize = 1 << 16;
/// Streamed chunks get at least this many series (when the other side has
/// that many) before the uploaded block is cut smaller instead.
const MIN_CHUNK_SERIES: usize = 256;

/// One range of rows against one range of columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tile {
    pub rows: Range<usize>,
    pub cols: Range<usize>,
    /// `rows == cols`, a batch against itself: the upper triangle with its
    /// diagonal, both operands from the rows' device image.
    pub triangle: bool,
    /// Also write the transpose (a batch against itself, off the diagonal).
    pub mirror: bool,
}

impl Tile {
    pub(crate) fn outputs(&self) -> usize {
        self.rows.len() * self.cols.len()
    }

    pub(crate) fn pairs(&self) -> u64 {
        tile_pairs(
            self.rows.len() as u64,
            self.cols.len() as u64,
            self.triangle,
        )
    }
}

/// Which operand of the tiles a range of series is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Rows,
    Cols,
}

/// Series uploaded together, and the tiles that use them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Upload {
    pub series: Range<usize>,
    pub tiles: Vec<Tile>,
}

/// A computation as blocks of tiles: the `fixed` side is uploaded a block
/// at a time; the `staged` side, if any, is copied for every tile (with
/// neither, the columns are a resident set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub fixed: Side,
    pub staged: Option<Side>,
    pub uploads: Vec<Upload>,
}

impl Plan {
    pub(crate) fn tiles(&self) -> impl Iterator<Item = &Tile> {
        self.uploads.iter().flat_map(|u| u.tiles.iter())
    }
}

/// How a device-memory budget is shared: a quarter for the uploaded series;
/// the rest split between the slots, each a quarter of its share for a
/// staged chunk, a quarter for its outputs (at most [`STAGING_BYTES`] and
/// [`RESULT_BYTES`]) and half for the workspace of its launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caps {
    pub fixed_bytes: usize,
    pub chunk_bytes: usize,
    /// Outputs of one tile (at least 1).
    pub outputs: usize,
    pub workspace_bytes: usize,
}

impl Caps {
    pub(crate) fn new(budget: usize, element: usize) -> Caps {
        let fixed_bytes = budget / 4;
        let slot = (budget - fixed_bytes) / SLOTS;
        Caps {
            fixed_bytes,
            chunk_bytes: (slot / 4).min(STAGING_BYTES),
            outputs: ((slot / 4).min(RESULT_BYTES) / element).max(1),
            workspace_bytes: slot / 2,
        }
    }
}

/// Tiles of a streamed computation. Against itself: blocks of `a` whose
/// square fits a tile's outputs, the triangle of each block from its
/// upload, and the series after the block streamed against it and
/// mirrored. Against `b`: the side with the smaller image is uploaded in
/// blocks, the other streamed against each block.
pub(crate) fn streamed_plan<T: Float>(
    a: &SeriesSet<T>,
    b: Option<&SeriesSet<T>>,
    caps: &Caps,
) -> Plan {
    let Some(b) = b else {
        let side = ((caps.outputs as f64).sqrt() as usize).max(1);
        let uploads = ranges(a, 0..a.len(), caps.fixed_bytes, side)
            .into_iter()
            .map(|rows| {
                let mut tiles = vec![Tile {
                    rows: rows.clone(),
                    cols: rows.clone(),
                    triangle: true,
                    mirror: false,
                }];
                let per_chunk = (caps.outputs / rows.len()).max(1);
                tiles.extend(
                    ranges(a, rows.end..a.len(), caps.chunk_bytes, per_chunk)
                        .into_iter()
                        .map(|cols| Tile {
                            rows: rows.clone(),
                            cols,
                            triangle: false,
                            mirror: true,
                        }),
                );
                Upload {
                    series: rows,
                    tiles,
                }
            })
            .collect();
        return Plan {
            fixed: Side::Rows,
            staged: Some(Side::Cols),
            uploads,
        };
    };
    let image_bytes = |s: &SeriesSet<T>| image_bytes(s, 0..s.len());
    let (fixed, staged, uploaded, streamed) = if image_bytes(a) <= image_bytes(b) {
        (Side::Rows, Side::Cols, a, b)
    } else {
        (Side::Cols, Side::Rows, b, a)
    };
    let max_fixed = (caps.outputs / streamed.len().min(MIN_CHUNK_SERIES)).max(1);
    let uploads = ranges(uploaded, 0..uploaded.len(), caps.fixed_bytes, max_fixed)
        .into_iter()
        .map(|block| {
            let per_chunk = (caps.outputs / block.len()).max(1);
            let tiles = ranges(streamed, 0..streamed.len(), caps.chunk_bytes, per_chunk)
                .into_iter()
                .map(|chunk| {
                    let (rows, cols) = match fixed {
                        Side::Rows => (block.clone(), chunk),
                        Side::Cols => (chunk, block.clone()),
                    };
                    Tile {
                        rows,
                        cols,
                        triangle: false,
                        mirror: false,
                    }
                })
                .collect();
            Upload {
                series: block,
                tiles,
            }
        })
        .collect();
    Plan {
        fixed,
        staged: Some(staged),
        uploads,
    }
}

/// Tiles of queries against the series `columns` of a resident set: the
/// queries uploaded in blocks, the resident set in ranges of columns whose
/// outputs against a block fit a tile, and up to [`SLOTS`] ranges where
/// each has [`SPLIT_OUTPUTS`] outputs or more.
pub(crate) fn resident_plan<T: Float>(
    queries: &SeriesSet<T>,
    columns: Range<usize>,
    caps: &Caps,
) -> Plan {
    let database = columns.len();
    let max_fixed = (caps.outputs / database.min(MIN_CHUNK_SERIES)).max(1);
    let uploads = ranges(queries, 0..queries.len(), caps.fixed_bytes, max_fixed)
        .into_iter()
        .map(|rows| {
            let split = database
                .div_ceil(SLOTS)
                .max(SPLIT_OUTPUTS.div_ceil(rows.len()));
            let per_tile = (caps.outputs / rows.len()).clamp(1, split);
            let tiles = count_ranges(database, per_tile)
                .into_iter()
                .map(|cols| Tile {
                    rows: rows.clone(),
                    cols: columns.start + cols.start..columns.start + cols.end,
                    triangle: false,
                    mirror: false,
                })
                .collect();
            Upload {
                series: rows,
                tiles,
            }
        })
        .collect();
    Plan {
        fixed: Side::Rows,
        staged: None,
        uploads,
    }
}

/// What the slots' buffers must hold for a plan.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sizes {
    /// Pinned staging bytes: the largest staged chunk, and upload pieces.
    pub staging: usize,
    /// Device bytes of the largest staged chunk.
    pub chunk: usize,
    /// Outputs of the largest tile.
    pub outputs: usize,
    /// Pairs one launch's workspace holds (0: the kernel needs none).
    pub workspace_pairs: u64,
}

impl Sizes {
    /// Sizes for `plan` over the host batches `rows` and `cols` (`cols` is
    /// `None` for a resident set), for a kernel that needs
    /// `workspace_per_pair` values of workspace a pair, within `caps`; an
    /// error if one pair's workspace does not fit.
    pub(crate) fn new<T: Float>(
        plan: &Plan,
        rows: &SeriesSet<T>,
        cols: Option<&SeriesSet<T>>,
        workspace_per_pair: usize,
        caps: &Caps,
        longest: usize,
    ) -> Result<Sizes> {
        let set_of = |side: Side| match side {
            Side::Rows => rows,
            Side::Cols => cols.unwrap_or(rows),
        };
        let range_of = |tile: &Tile, side: Side| match side {
            Side::Rows => tile.rows.clone(),
            Side::Cols => tile.cols.clone(),
        };
        let chunk = match plan.staged {
            None => 0,
            Some(side) => plan
                .tiles()
                .filter(|t| !t.triangle)
                .map(|t| image_bytes(set_of(side), range_of(t, side)))
                .max()
                .unwrap_or(0),
        };
        let upload = plan
            .uploads
            .iter()
            .map(|u| image_bytes(set_of(plan.fixed), u.series.clone()))
            .max()
            .unwrap_or(0);
        let pairs = plan.tiles().map(Tile::pairs).max().unwrap_or(0);
        let bytes_per_pair = workspace_per_pair * size_of::<T>();
        if bytes_per_pair > caps.workspace_bytes {
            return Err(Error::gpu_memory(format!(
                "a series of {longest} samples needs {bytes_per_pair} bytes of workspace, over the {} available",
                caps.workspace_bytes
            )));
        }
        Ok(Sizes {
            staging: chunk.max(upload.min(STAGING_BYTES)),
            chunk,
            outputs: plan.tiles().map(Tile::outputs).max().unwrap_or(0),
            workspace_pairs: match bytes_per_pair {
                0 => 0,
                bytes => pairs.min((caps.workspace_bytes / bytes) as u64),
            },
        })
    }
}

/// How the stencil kernels cut a computation to fit a device-memory budget:
/// blocks of `a` and of `b` whose data take at most a quarter of it each,
/// and tiles (block pairs) whose output takes at most a quarter.
pub(crate) struct TilePlan {
    pub a_blocks: Vec<Range<usize>>,
    pub b_blocks: Vec<Range<usize>>,
}

impl TilePlan {
    pub(crate) fn new<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>, budget: usize) -> Self {
        Self::of_side(a, b, budget, Self::side::<T>(budget))
    }

    /// The side of the largest square tile whose output takes a quarter
    /// of `budget`.
    pub(crate) fn side<T: Float>(budget: usize) -> usize {
        ((budget / 4 / size_of::<T>()) as f64).sqrt().max(1.0) as usize
    }

    /// The plan of tiles of at most `side x side` outputs.
    pub(crate) fn of_side<T: Float>(
        a: &SeriesSet<T>,
        b: Option<&SeriesSet<T>>,
        budget: usize,
        side: usize,
    ) -> Self {
        let quarter = budget / 4;
        let a_blocks = ranges(a, 0..a.len(), quarter, side);
        let b_blocks = match b {
            Some(b) => ranges(b, 0..b.len(), quarter, side),
            None => a_blocks.clone(),
        };
        TilePlan { a_blocks, b_blocks }
    }

    /// Every block of `a` against every block of `b`, or against itself
    /// (`triangle_matrix`) the blocks of the upper triangle: those on the
    /// diagonal triangles, the others mirrored; rows before columns.
    pub(crate) fn tiles(&self, triangle_matrix: bool) -> Vec<Tile> {
        let mut tiles = Vec::new();
        for (row_index, rows) in self.a_blocks.iter().enumerate() {
            for (column_index, cols) in self.b_blocks.iter().enumerate() {
                if triangle_matrix && column_index < row_index {
                    continue; // the mirror of a tile before
                }
                let triangle = triangle_matrix && column_index == row_index;
                tiles.push(Tile {
                    rows: rows.clone(),
                    cols: cols.clone(),
                    triangle,
                    mirror: triangle_matrix && !triangle,
                });
            }
        }
        tiles
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::test_sets::set;
    use super::*;
    use ndarray::Array2;

    /// How many times each output a plan writes.
    fn coverage(plan: &Plan, rows: usize, cols: usize) -> Array2<u32> {
        let mut counts = Array2::zeros((rows, cols));
        for upload in &plan.uploads {
            for tile in &upload.tiles {
                let fixed = match plan.fixed {
                    Side::Rows => &tile.rows,
                    Side::Cols => &tile.cols,
                };
                assert!(
                    upload.series.start <= fixed.start && fixed.end <= upload.series.end,
                    "{tile:?} outside its upload {:?}",
                    upload.series
                );
                for i in tile.rows.clone() {
                    for j in tile.cols.clone() {
                        if tile.triangle && i > j {
                            continue;
                        }
                        counts[[i, j]] += 1;
                        if (tile.triangle || tile.mirror) && i != j {
                            counts[[j, i]] += 1;
                        }
                    }
                }
            }
        }
        counts
    }

    fn check_caps(plan: &Plan, caps: &Caps) {
        for tile in plan.tiles() {
            assert!(
                tile.outputs() <= caps.outputs || tile.outputs() == 1,
                "{tile:?}"
            );
        }
    }

    #[test]
    fn plans_cover_every_pair_once() {
        let a = set(&[5, 1, 17, 3, 40, 2, 2, 9, 30, 1, 6], 2, false);
        let b = set(&[2, 60, 1, 8, 8, 8, 3], 2, true);
        for budget in [64, 1 << 10, 4 << 10, 16 << 10, 1 << 20, 1 << 30] {
            let caps = Caps::new(budget, 8);
            let ones = |r, c| Array2::<u32>::ones((r, c));
            for (x, y) in [(&a, &b), (&b, &a), (&a, &a)] {
                let plan = streamed_plan(x, Some(y), &caps);
                assert_eq!(coverage(&plan, x.len(), y.len()), ones(x.len(), y.len()));
                check_caps(&plan, &caps);
            }
            let plan = streamed_plan(&a, None, &caps);
            assert_eq!(coverage(&plan, a.len(), a.len()), ones(a.len(), a.len()));
            check_caps(&plan, &caps);
            let plan = resident_plan(&a, 0..23, &caps);
            assert_eq!(coverage(&plan, a.len(), 23), ones(a.len(), 23));
            check_caps(&plan, &caps);
        }
    }

    #[test]
    fn the_smaller_side_is_uploaded_and_tight_budgets_give_many_tiles() {
        let queries = set(&[10], 1, false);
        let database = set(&[10; 40], 1, false);
        let caps = Caps::new(1 << 30, 4);
        let plan = streamed_plan(&queries, Some(&database), &caps);
        assert_eq!((plan.fixed, plan.staged), (Side::Rows, Some(Side::Cols)));
        assert_eq!(plan.tiles().count(), 1);
        let plan = streamed_plan(&database, Some(&queries), &caps);
        assert_eq!((plan.fixed, plan.staged), (Side::Cols, Some(Side::Rows)));
        let tight = Caps::new(4 << 10, 4);
        assert!(
            streamed_plan(&queries, Some(&database), &tight)
                .tiles()
                .count()
                > 4
        );
        assert!(resident_plan(&database, 0..40, &tight).tiles().count() > 4);
    }

    #[test]
    fn large_resident_blocks_give_a_tile_a_slot() {
        let caps = Caps::new(1 << 30, 4);
        let one = set(&[10], 1, false);
        let columns = |plan: &Plan| -> Vec<usize> { plan.tiles().map(|t| t.cols.len()).collect() };
        // One query against 2^20 series: four tiles of a quarter.
        let plan = resident_plan(&one, 0..1 << 20, &caps);
        assert_eq!(columns(&plan), vec![1 << 18; 4]);
        // Tiles of no fewer than SPLIT_OUTPUTS outputs.
        let plan = resident_plan(&one, 0..SPLIT_OUTPUTS, &caps);
        assert_eq!(columns(&plan), vec![SPLIT_OUTPUTS]);
        let plan = resident_plan(&one, 0..2 * SPLIT_OUTPUTS, &caps);
        assert_eq!(columns(&plan), vec![SPLIT_OUTPUTS; 2]);
        let three = set(&[10, 10, 10], 1, false);
        let plan = resident_plan(&three, 0..SPLIT_OUTPUTS, &caps);
        let per_tile = SPLIT_OUTPUTS.div_ceil(3);
        assert_eq!(
            columns(&plan),
            vec![per_tile, per_tile, SPLIT_OUTPUTS - 2 * per_tile]
        );
    }

    #[test]
    fn caps_share_the_budget() {
        for (budget, element) in [(1usize << 30, 4), (100 << 30, 8), (16 << 10, 8)] {
            let caps = Caps::new(budget, element);
            let slot = caps.chunk_bytes + caps.outputs * element + caps.workspace_bytes;
            assert!(
                caps.fixed_bytes + SLOTS * slot <= budget,
                "{budget}: {caps:?}"
            );
        }
        let caps = Caps::new(1 << 30, 4);
        assert_eq!(caps.chunk_bytes, STAGING_BYTES);
        assert_eq!(caps.outputs, RESULT_BYTES / 4);
        assert_eq!(Caps::new(64, 8).outputs, 1);
    }
}
