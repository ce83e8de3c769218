//! The block rule on the CPU: every pair once, one GPU as before, and the
//! shared queue simulated with equal and unequal workers.

use super::super::layout::test_sets::set;
use super::super::matrix_tiles::{resident_plan, streamed_plan, Side};
use super::*;
use crate::SeriesSet;

/// When each worker finishes blocks of `costs`, handed out in order from
/// one queue to whichever worker is free first (the lowest on a tie),
/// worker `k` computing `speeds[k]` cost a second: how `spread` schedules
/// them, without the threads.
fn finishing_times(costs: impl IntoIterator<Item = u64>, speeds: &[f64]) -> Vec<f64> {
    let mut free = vec![0.0f64; speeds.len()];
    for cost in costs {
        let first = (0..free.len())
            .min_by(|&i, &j| free[i].total_cmp(&free[j]))
            .expect("a worker");
        free[first] += cost as f64 / speeds[first];
    }
    free
}

/// The gap between the first and the last worker to finish, as a share
/// of the call's time (the last one's).
fn gap(costs: &[u64], speeds: &[f64]) -> f64 {
    let times = finishing_times(costs.iter().copied(), speeds);
    let last = times.iter().copied().fold(0.0, f64::max);
    let first = times.iter().copied().fold(f64::MAX, f64::min);
    (last - first) / last
}

/// Equal workers and workers of which every other one is half as fast.
fn speeds(gpus: usize) -> [Vec<f64>; 2] {
    let unequal = (0..gpus).map(|k| if k % 2 == 0 { 2.0 } else { 1.0 });
    [vec![1.0; gpus], unequal.collect()]
}

/// Uniform sample offsets: `count` series of `len` samples.
fn offsets(count: usize, len: u64) -> Vec<u64> {
    (0..=count as u64).map(|k| k * len).collect()
}

/// The tiles of `plan`, sorted, each checked to lie in its upload.
fn sorted_tiles(plan: &Plan) -> Vec<(Range<usize>, Range<usize>, bool, bool)> {
    let mut tiles = Vec::new();
    for upload in &plan.uploads {
        for tile in &upload.tiles {
            let fixed = match plan.fixed {
                Side::Rows => &tile.rows,
                Side::Cols => &tile.cols,
            };
            assert!(upload.series.start <= fixed.start && fixed.end <= upload.series.end);
            tiles.push((
                tile.rows.clone(),
                tile.cols.clone(),
                tile.triangle,
                tile.mirror,
            ));
        }
    }
    tiles.sort_by_key(|(rows, cols, ..)| (rows.start, cols.start));
    tiles
}

/// `plan` spread over 1, 2 and 4 GPUs (made with the caps for that many
/// by `make`): one GPU's plan is `make`'s as it is; several GPUs' hold the
/// same tiles as an unsplit plan of the same caps (so every pair once),
/// at least 4 blocks a GPU, and the queue leaves the GPUs finishing within
/// 10% of the call's time of each other, equal or not.
fn check_spread(what: &str, make: impl Fn(usize) -> Plan, cost: impl Fn(&Tile) -> u64) {
    assert_eq!(spread_plan(make(1), 1, &cost), make(1), "{what}");
    for gpus in [2, 4] {
        let whole = make(gpus);
        let spread = spread_plan(whole.clone(), gpus, &cost);
        assert_eq!(sorted_tiles(&spread), sorted_tiles(&whole), "{what}");
        let costs: Vec<u64> = spread
            .uploads
            .iter()
            .map(|u| u.tiles.iter().map(&cost).sum())
            .collect();
        assert!(costs.len() >= 4 * gpus, "{what}: {} blocks", costs.len());
        for speeds in speeds(gpus) {
            let gap = gap(&costs, &speeds);
            assert!(gap < 0.1, "{what}, {speeds:?}: gap {gap:.3}, {costs:?}");
        }
    }
}

/// Caps of an H200's budget for `f32` results, spread over `gpus` GPUs.
fn caps(outputs: usize, gpus: usize) -> Caps {
    spread_caps(Caps::new(100 << 30, 4), outputs, gpus)
}

#[test]
fn cells_count_the_pairs_cost_matrices() {
    let rows = [0, 3, 8]; // lengths 3 and 5
    let cols = [0, 2, 6]; // lengths 2 and 4
    let tile = |triangle| Tile {
        rows: 0..2,
        cols: 0..2,
        triangle,
        mirror: false,
    };
    let full = Cells {
        rows: &rows,
        cols: &cols,
        band: None,
    };
    assert_eq!(full.of(&tile(false)), 8 * 6);
    // (0, 0), (0, 1), (1, 1): 9 + 15 + 25.
    let square = Cells {
        cols: &rows,
        ..full
    };
    assert_eq!(square.of(&tile(true)), 49);
    // A band of one diagonal: at most n + m cells a pair.
    let band = Cells {
        band: Some(1),
        ..full
    };
    assert_eq!(band.of(&tile(false)), 5 + 7 + 7 + 9);
}

#[test]
fn one_gpu_keeps_the_plan_and_its_caps() {
    let groups = vec![vec![5, 1, 7], vec![], vec![2]];
    let whole = blocks(&groups, 1);
    let items: Vec<_> = whole.iter().map(|b| (b.group, b.items.clone())).collect();
    assert_eq!(items, [(0, 0..3), (1, 0..0), (2, 0..1)]);
    let whole = pair_blocks(10, 1, |_| 1, 1);
    assert!(whole.len() == 1 && whole[0] == (0..10), "{whole:?}");
    let caps = Caps::new(1 << 30, 4);
    assert_eq!(spread_caps(caps, 1 << 30, 1), caps);
    assert_eq!(spread_side(2048, 1 << 30, 1), 2048);
}

#[test]
fn blocks_hold_every_item_once_largest_first_the_last_small() {
    // Items of costs 1 to 40 in groups of 1 to 30 items.
    let groups: Vec<Vec<u64>> = (0..23)
        .map(|g| {
            (0..1 + g * 7 % 30)
                .map(|k| 1 + (g * 13 + k * 7) % 40)
                .collect()
        })
        .collect();
    let total: u64 = groups.iter().flatten().sum();
    for gpus in [2, 3, 4, 8] {
        let blocks = blocks(&groups, gpus);
        let mut seen: Vec<Vec<u32>> = groups.iter().map(|g| vec![0; g.len()]).collect();
        for block in &blocks {
            let costs = &groups[block.group][block.items.clone()];
            assert_eq!(block.cost, costs.iter().sum::<u64>());
            block.items.clone().for_each(|k| seen[block.group][k] += 1);
        }
        assert!(seen.iter().flatten().all(|&n| n == 1), "{gpus} GPUs");
        let target = total.div_ceil((gpus * BLOCKS_PER_GPU) as u64);
        assert!(blocks.iter().all(|b| b.cost <= target.max(40)));
        // The last blocks are the tail's: a fraction of a block each.
        let last = blocks.last().unwrap().cost;
        assert!(last <= (target / TAIL_SPLIT).max(40), "{last} of {target}");
        for speeds in speeds(gpus) {
            let costs: Vec<u64> = blocks.iter().map(|b| b.cost).collect();
            assert!(gap(&costs, &speeds) < 0.1, "{gpus} GPUs {speeds:?}");
        }
    }
}

#[test]
fn a_set_against_itself_spreads_evenly() {
    // DTW all pairs, 4,096 series of 128 samples; then lengths of 20 to
    // 300 samples, whose tiles' costs differ more.
    let uniform = set(&[128; 4096], 1, false);
    let lengths: Vec<usize> = (0..3000).map(|k| 20 + (k * 37 + k * k / 5) % 280).collect();
    let varied = set(&lengths, 1, false);
    for a in [&uniform, &varied] {
        let n = a.len();
        let offsets = a.parts().1;
        let cells = Cells {
            rows: offsets,
            cols: offsets,
            band: None,
        };
        let make = |gpus| streamed_plan(a, None, &caps(n * (n + 1) / 2, gpus));
        check_spread(&format!("{n} x {n}"), make, |t| cells.of(t));
        // Within a band of 10 diagonals.
        let band = Cells {
            band: Some(10),
            ..cells
        };
        check_spread(&format!("{n} x {n}, band"), make, |t| band.of(t));
    }
}

#[test]
fn a_times_b_spreads_evenly() {
    let a = set(&[200; 1500], 1, false);
    let b = set(&[64; 5000], 1, false);
    let (ao, bo) = (a.parts().1, b.parts().1);
    for (x, y, xo, yo) in [(&a, &b, ao, bo), (&b, &a, bo, ao)] {
        let cells = Cells {
            rows: xo,
            cols: yo,
            band: None,
        };
        let make = |gpus| streamed_plan(x, Some(y), &caps(x.len() * y.len(), gpus));
        check_spread(&format!("{} x {}", x.len(), y.len()), make, |t| cells.of(t));
    }
}

#[test]
fn queries_against_a_replicated_set_split_by_columns() {
    // One query against 2^22 series of 511 samples, and 64 against 2^20
    // of 127.
    for (queries, count, len) in [(1, 1 << 22, 511), (64, 1 << 20, 127)] {
        let queries: SeriesSet<f64> = set(&vec![len as usize; queries], 1, false);
        let columns = offsets(count, len);
        let cells = Cells {
            rows: queries.parts().1,
            cols: &columns,
            band: None,
        };
        let outputs = queries.len() * count;
        let make = |gpus| resident_plan(&queries, 0..count, &caps(outputs, gpus));
        check_spread(&format!("{} x {count}", queries.len()), make, |t| {
            cells.of(t)
        });
    }
}

#[test]
fn paired_blocks_spread_evenly() {
    // 65,536 pairs of 512 samples, then of 16 to 1,000.
    for varied in [false, true] {
        let cost = |k: usize| {
            let n = if varied { 16 + (k * 7919) % 985 } else { 512 } as u64;
            n * n
        };
        let pairs = 1 << 16;
        for gpus in [2, 4] {
            let ranges = pair_blocks(pairs, gpus, cost, 1);
            let mut covered: Vec<_> = ranges.clone();
            covered.sort_by_key(|r| r.start);
            assert_eq!(covered.first().unwrap().start, 0);
            assert_eq!(covered.last().unwrap().end, pairs);
            assert!(covered.windows(2).all(|w| w[0].end == w[1].start));
            assert!(ranges.len() >= 4 * gpus);
            let costs: Vec<u64> = ranges.iter().map(|r| r.clone().map(cost).sum()).collect();
            for speeds in speeds(gpus) {
                assert!(gap(&costs, &speeds) < 0.1, "{varied} {gpus} {speeds:?}");
            }
        }
    }
}

#[test]
fn paired_blocks_fill_a_gpu_each_but_every_gpu_gets_one() {
    // 65,536 pairs of one cost; blocks of at least `least` pairs.
    let pairs = 1 << 16;
    for (gpus, least, blocks) in [(2, 33_792, 2), (4, 33_792, 4), (2, 8_192, 8), (2, 1, 22)] {
        let ranges = pair_blocks(pairs, gpus, |_| 512 * 512, least);
        let mut covered = ranges.clone();
        covered.sort_by_key(|r| r.start);
        assert!(covered.windows(2).all(|w| w[0].end == w[1].start));
        assert_eq!((covered[0].start, covered.last().unwrap().end), (0, pairs));
        assert_eq!(ranges.len(), blocks, "{gpus} GPUs, {least}: {ranges:?}");
        let smallest = ranges.iter().map(|r| r.len()).min().unwrap();
        assert!(smallest >= least.min(pairs / gpus), "{ranges:?}");
    }
}

#[test]
fn stencil_tiles_shrink_for_several_gpus_but_fill_one() {
    let outputs = 4096 * 4097 / 2;
    assert_eq!(spread_side(2048, outputs, 1), 2048);
    let side = spread_side(2048, outputs, 2);
    // Square tiles of `side`: at least BLOCKS_PER_GPU a GPU.
    let tiles = outputs / (side * side);
    assert!(tiles >= 2 * BLOCKS_PER_GPU, "{side}");
    assert!(side * side >= SPLIT_OUTPUTS / 2, "{side}");
    // A small matrix is not cut below a tile that fills a GPU.
    assert_eq!(spread_side(2048, 1000, 4), 256);
}

#[test]
fn stencil_tiles_cover_every_pair_once() {
    use super::super::matrix_tiles::TilePlan;
    let a = set(&[5, 1, 17, 3, 40, 2, 2, 9, 30, 1, 6], 1, false);
    let b = set(&[2, 60, 1, 8, 8, 8, 3], 1, false);
    for side in [1, 2, 3, 5, 100] {
        for (other, rows, cols) in [(Some(&b), 11, 7), (None, 11, 11)] {
            let plan = TilePlan::of_side(&a, other, 1 << 20, side);
            let mut counts = vec![vec![0; cols]; rows];
            for tile in plan.tiles(other.is_none()) {
                for i in tile.rows.clone() {
                    for j in tile.cols.clone().filter(|&j| !tile.triangle || i <= j) {
                        counts[i][j] += 1;
                        if (tile.triangle || tile.mirror) && i != j {
                            counts[j][i] += 1;
                        }
                    }
                }
            }
            assert!(
                counts.iter().flatten().all(|&n| n == 1),
                "{side}: {counts:?}"
            );
        }
    }
}
