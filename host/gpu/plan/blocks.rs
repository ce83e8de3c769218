//! How a computation is cut into blocks for several GPUs, so that they
//! finish together: each block's cost known before it is handed out (its
//! cells, [`Cells`]), the blocks handed out largest first and sized so
//! that the last ones are small ([`blocks`]), tiles small enough that
//! every GPU gets several blocks ([`spread_caps`], [`spread_side`]). The
//! shared queue that hands them out is `spread`.
//!
//! With one GPU nothing changes: one block per upload, in the plan's
//! order, and the tiles of the budget alone. A long single pair is not
//! cut: it runs on one GPU (the tiled kernel spreads it over that GPU).

use super::matrix_tiles::{Caps, Plan, Tile, Upload, SLOTS, SPLIT_OUTPUTS};
use std::ops::Range;

/// Blocks each GPU gets of a spread computation, before the last ones are
/// cut smaller: enough that a GPU that is slower (or busier) takes fewer
/// and the others make up for it.
pub(crate) const BLOCKS_PER_GPU: usize = 8;
/// Tiles of a block of the pair kernels' pipeline: one for each of its
/// slots, so that a block's copies overlap its kernels.
const TILES_PER_BLOCK: usize = SLOTS;
/// The last blocks, which together are at most this many blocks' worth of
/// work a GPU, are cut into blocks this many times smaller: the GPUs that
/// finish first then wait for small blocks only.
const TAIL_SPLIT: u64 = 4;

/// The cost of a tile: the cells of its pairs' cost matrices (`n x m` for
/// a pair of lengths `n` and `m`; within a band of `band` diagonals, at
/// most `band x (n + m)`), from the sample offsets of the rows' and the
/// columns' sets.
pub(crate) struct Cells<'a> {
    pub rows: &'a [u64],
    pub cols: &'a [u64],
    pub band: Option<usize>,
}

impl Cells<'_> {
    pub(crate) fn of(&self, tile: &Tile) -> u64 {
        let samples =
            |offsets: &[u64], range: &Range<usize>| offsets[range.end] - offsets[range.start];
        let (rows, cols) = (
            samples(self.rows, &tile.rows),
            samples(self.cols, &tile.cols),
        );
        let (row_count, col_count) = (tile.rows.len() as u64, tile.cols.len() as u64);
        let full = rows.saturating_mul(cols);
        let band = self.band.map_or(u64::MAX, |width| {
            (width as u64).saturating_mul(rows * col_count + row_count * cols)
        });
        let cells = full.min(band);
        if !tile.triangle {
            return cells;
        }
        // The pairs `i <= j`: half the square, and half its diagonal more.
        let diagonal: u64 = tile
            .rows
            .clone()
            .map(|k| {
                let n = self.rows[k + 1] - self.rows[k];
                self.band
                    .map_or(n * n, |width| (n * n).min(2 * width as u64 * n))
            })
            .sum();
        cells / 2 + diagonal / 2
    }
}

/// `caps` with tiles of at most as many outputs as spread `outputs` (the
/// whole computation's) over `gpus` GPUs in [`BLOCKS_PER_GPU`] blocks of
/// [`TILES_PER_BLOCK`] tiles each, but of no fewer than a tile needs to
/// fill a GPU; one GPU keeps `caps`.
pub(crate) fn spread_caps(caps: Caps, outputs: usize, gpus: usize) -> Caps {
    if gpus <= 1 {
        return caps;
    }
    let per_tile = outputs / (gpus * BLOCKS_PER_GPU * TILES_PER_BLOCK);
    Caps {
        outputs: caps.outputs.min(per_tile.max(SPLIT_OUTPUTS)),
        ..caps
    }
}

/// The side of the stencil kernels' square tiles for `outputs` outputs
/// over `gpus` GPUs: at most `side`, and small enough for
/// [`BLOCKS_PER_GPU`] tiles a GPU (each tile is a block), but no smaller
/// than a tile needs to fill a GPU; one GPU keeps `side`.
pub(crate) fn spread_side(side: usize, outputs: usize, gpus: usize) -> usize {
    if gpus <= 1 {
        return side;
    }
    let per_tile = (outputs / (gpus * BLOCKS_PER_GPU)).max(SPLIT_OUTPUTS);
    side.min((per_tile as f64).sqrt() as usize).max(1)
}

/// Consecutive items of one group (the tiles of an upload, the pairs of
/// a batch), handed out together, and their cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub group: usize,
    pub items: Range<usize>,
    pub cost: u64,
}

/// The blocks of `groups` (each its items' costs) for `gpus` GPUs, in the
/// order to hand them out. One GPU: each group whole, in order. Several:
/// runs of items of at most a [`BLOCKS_PER_GPU`]th of a GPU's share each
/// (a costlier item alone), largest first; then the last ones, at most a
/// block a GPU together, cut [`TAIL_SPLIT`] times smaller and handed out
/// last, largest first. Every item is in exactly one block.
pub(crate) fn blocks(groups: &[Vec<u64>], gpus: usize) -> Vec<Block> {
    blocks_of_at_least(groups, gpus, 0)
}

/// [`blocks`] of at least `least` cost each (but for the last of a group,
/// and no more than a GPU's share: every GPU still gets a block).
fn blocks_of_at_least(groups: &[Vec<u64>], gpus: usize, least: u64) -> Vec<Block> {
    let whole = |group: usize| Block {
        group,
        items: 0..groups[group].len(),
        cost: groups[group].iter().sum(),
    };
    if gpus <= 1 {
        return (0..groups.len()).map(whole).collect();
    }
    let total: u64 = groups.iter().flatten().sum();
    let share = total.div_ceil(gpus as u64);
    let target = total
        .div_ceil((gpus * BLOCKS_PER_GPU) as u64)
        .max(least.min(share))
        .max(1);
    let mut main: Vec<Block> = (0..groups.len())
        .flat_map(|group| cut(&groups[group], whole(group), target))
        .collect();
    largest_first(&mut main);
    let mut tail_cost = 0;
    let mut tail_start = main.len();
    while tail_start > 0 && tail_cost + main[tail_start - 1].cost <= gpus as u64 * target {
        tail_start -= 1;
        tail_cost += main[tail_start].cost;
    }
    let mut tail: Vec<Block> = main
        .split_off(tail_start)
        .into_iter()
        .flat_map(|block| {
            cut(
                &groups[block.group],
                block,
                (target / TAIL_SPLIT).max(least),
            )
        })
        .collect();
    largest_first(&mut tail);
    main.extend(tail);
    main
}

/// `block` cut into consecutive runs of at most `target` cost (an item
/// that costs more alone).
fn cut(costs: &[u64], block: Block, target: u64) -> Vec<Block> {
    let mut runs = Vec::new();
    let mut run = Block {
        group: block.group,
        items: block.items.start..block.items.start,
        cost: 0,
    };
    for k in block.items {
        if !run.items.is_empty() && run.cost + costs[k] > target {
            let next = Block {
                group: run.group,
                items: k..k,
                cost: 0,
            };
            runs.push(std::mem::replace(&mut run, next));
        }
        run.items.end = k + 1;
        run.cost += costs[k];
    }
    if !run.items.is_empty() {
        runs.push(run);
    }
    runs
}

/// Sorts `blocks` by cost, the largest first (equal ones in their order).
fn largest_first(blocks: &mut [Block]) {
    blocks.sort_by_key(|block| std::cmp::Reverse(block.cost));
}

/// `plan` cut for `gpus` GPUs: its uploads' tiles in [`blocks`] (each an
/// upload of the same series with some of its tiles), in the order to
/// hand them out, each tile's cost `cost(tile)`. One GPU: `plan` as it is.
pub(crate) fn spread_plan(plan: Plan, gpus: usize, cost: impl Fn(&Tile) -> u64) -> Plan {
    if gpus <= 1 {
        return plan;
    }
    let groups: Vec<Vec<u64>> = plan
        .uploads
        .iter()
        .map(|upload| upload.tiles.iter().map(&cost).collect())
        .collect();
    let uploads = blocks(&groups, gpus)
        .into_iter()
        .map(|block| {
            let upload = &plan.uploads[block.group];
            Upload {
                series: upload.series.clone(),
                tiles: upload.tiles[block.items].to_vec(),
            }
        })
        .collect();
    Plan { uploads, ..plan }
}

/// Ranges of `pairs` pairs for `gpus` GPUs (pair `k` costing `cost(k)`),
/// in [`blocks`] in the order to hand them out, each of at least
/// `least_pairs` pairs' mean cost: a block too small to fill a GPU leaves
/// it mostly idle while it runs, so a short call goes out in as few as a
/// block a GPU.
pub(crate) fn pair_blocks(
    pairs: usize,
    gpus: usize,
    cost: impl Fn(usize) -> u64,
    least_pairs: usize,
) -> Vec<Range<usize>> {
    let costs: Vec<u64> = (0..pairs).map(cost).collect();
    let total: u64 = costs.iter().sum();
    let least = (total as u128 * least_pairs as u128 / pairs.max(1) as u128) as u64;
    blocks_of_at_least(&[costs], gpus, least)
        .into_iter()
        .map(|block| block.items)
        .collect()
}

#[cfg(test)]
mod tests;
