//! The open-ended subsequence alignment's kernel (`launch::subsequence`,
//! `dtw_subsequence<rows>`) on emulated warps, through the host's own
//! passes and chunks (`internals::subsequence_best_end_on_host`), against
//! the CPU's `subsequence_alignment`: the same start, end and cost, bit for
//! bit. Narrow warps (4 lanes) put long queries in many panels; small
//! tiles, segments and chunks make every segment rerun, matches straddle
//! segments and chunks, and paths cross every segment of a chunk.

use crate::common::hardware::{run_numbered_warps, Shared};
use crate::common::{random_series, rng};
use ndarray::Array2;
use rand::Rng;
use std::cell::Cell;
use timewarp::search::subsequence_alignment;
use timewarp::{internals, Device, Error};

/// The kernel's forward pass of `query` over `series` on emulated warps of
/// `N` lanes, `R` rows a lane, in chunks, tiles and segments of `shape`
/// columns: `(start, end, accumulated cost)`, and the passes launched.
fn emulated<const N: usize, const R: usize>(
    query: &Array2<f64>,
    series: &Array2<f64>,
    shape: (usize, usize, usize),
) -> ((usize, usize, f64), usize) {
    let univariate = series.ncols() == 1;
    let flat: Vec<f64> = query.iter().copied().collect();
    let passes = Cell::new(0);
    let found = internals::subsequence_best_end_on_host(&flat, &series.view(), shape, |launch| {
        passes.set(passes.get() + 1);
        let launch = Shared(*launch);
        run_numbered_warps::<N, _>(launch.get().segments as usize, |warp, segment| {
            let launch = launch.get();
            let segment = segment as u64;
            // SAFETY: the host's buffers, sized for the launch; a warp a
            // segment, every lane of it together; the twin where `dims` is 1.
            unsafe {
                if univariate {
                    launch.run_segment::<_, R, true>(warp, segment)
                } else {
                    launch.run_segment::<_, R, false>(warp, segment)
                }
            }
        });
    });
    (found.unwrap(), passes.get())
}

/// The emulated kernel and the CPU: the same start, end and cost (the
/// square root of the accumulated cost), bit for bit, or both an overflow.
fn check<const N: usize, const R: usize>(
    query: &Array2<f64>,
    series: &Array2<f64>,
    shape: (usize, usize, usize),
    context: &str,
) -> usize {
    let ((start, end, cost), passes) = emulated::<N, R>(query, series, shape);
    let context = format!(
        "{context}: m {}, n {}, dims {}, {N} lanes x {R} rows, shape {shape:?}",
        query.nrows(),
        series.nrows(),
        series.ncols()
    );
    match subsequence_alignment(query.view(), &series.view(), Device::Cpu) {
        Ok(cpu) => {
            assert_eq!((start, end), (cpu.start, cpu.end), "{context}");
            assert_eq!(cost.sqrt().to_bits(), cpu.cost.to_bits(), "{context}");
        }
        Err(Error::Overflow { .. }) => assert!(cost.is_infinite(), "{context}: {cost}"),
        Err(other) => panic!("{context}: {other}"),
    }
    passes
}

/// A random walk, `n x dims`.
fn walk(rng: &mut rand::rngs::StdRng, n: usize, dims: usize) -> Array2<f64> {
    let mut x = random_series(rng, n, dims, 1.0);
    for i in 1..n {
        for k in 0..dims {
            x[[i, k]] += x[[i - 1, k]];
        }
    }
    x
}

#[test]
fn the_kernel_finds_the_cpus_match_for_every_query_length() {
    let mut rng = rng(81);
    for (case, &m) in [1, 2, 31, 32, 33, 100].iter().enumerate() {
        for dims in [1, 3] {
            let n = rng.random_range(150..400);
            let series = walk(&mut rng, n, dims);
            // The query: a stretch of the series, noisy.
            let at = rng.random_range(0..n.saturating_sub(m).max(1));
            let mut query = random_series(&mut rng, m, dims, 0.3);
            for i in 0..m.min(n - at) {
                for k in 0..dims {
                    query[[i, k]] += series[[at + i, k]];
                }
            }
            let context = format!("case {case}");
            // One row a lane and four; chunks, segments and tiles that do
            // not divide the series.
            check::<4, 1>(&query, &series, (n, 8, 24), &context);
            check::<4, 4>(&query, &series, (97, 16, 32), &context);
            check::<8, 4>(&query, &series, (n / 2 + 1, 13, 39), &context);
        }
    }
}

#[test]
fn a_whole_warp_of_32_lanes_with_one_and_several_panels() {
    let mut rng = rng(82);
    for (m, dims) in [(128, 1), (129, 2), (20, 1)] {
        let series = walk(&mut rng, 300, dims);
        let query = walk(&mut rng, m, dims);
        check::<32, 4>(&query, &series, (300, 50, 100), "32 lanes");
        check::<32, 1>(&query, &series, (170, 40, 80), "32 lanes");
    }
}

#[test]
fn series_shorter_than_the_query_and_of_one_sample() {
    let mut rng = rng(83);
    for n in [1, 2, 5, 17] {
        for dims in [1, 3] {
            let series = random_series(&mut rng, n, dims, 1.0);
            let query = random_series(&mut rng, 40, dims, 1.0);
            check::<4, 4>(&query, &series, (3, 1, 2), "short series");
            check::<4, 1>(&query, &series, (n, 4, 4), "short series");
        }
    }
}

/// Small integers, constant stretches, and one constant series: equal
/// costs everywhere, so the tie rules decide the start and the end.
#[test]
fn ties_decide_as_on_the_cpu() {
    let mut rng = rng(84);
    for case in 0..12 {
        let dims = [1, 2][case % 2];
        let n = rng.random_range(50..200);
        let m = rng.random_range(1..40);
        let integers = |rng: &mut rand::rngs::StdRng, len: usize| {
            Array2::from_shape_fn((len, dims), |_| f64::from(rng.random_range(0..3_i32)))
        };
        let mut series = integers(&mut rng, n);
        let query = integers(&mut rng, m);
        if case % 3 == 0 {
            series.fill(1.0);
        } else if case % 3 == 1 {
            let from = rng.random_range(0..n / 2);
            series
                .slice_mut(ndarray::s![from..from + n / 3, ..])
                .fill(2.0);
        }
        let context = format!("ties, case {case}");
        check::<4, 1>(&query, &series, (n, 8, 16), &context);
        check::<4, 4>(&query, &series, (n / 3 + 1, 5, 10), &context);
    }
}

/// Values whose squares overflow (every cost infinite: an overflow on both),
/// values near it, and values whose squares are subnormal or zero.
#[test]
fn huge_and_tiny_values() {
    let mut rng = rng(85);
    for scale in [1e200, 1e150, 1e-150, 1e-160, 1e-300] {
        for dims in [1, 3] {
            let series = random_series(&mut rng, 120, dims, scale);
            let query = random_series(&mut rng, 10, dims, scale);
            let context = format!("scale {scale:e}");
            check::<4, 4>(&query, &series, (120, 8, 24), &context);
            check::<4, 1>(&query, &series, (50, 10, 20), &context);
        }
    }
}

/// A path that stays in the query's second row from the series' first
/// sample to its last: no segment's first pass from the infinite column
/// has it, so every segment's rerun changes its last column and its
/// successor's, one pass after another, through the whole chunk.
#[test]
fn a_path_across_every_segment_takes_a_pass_a_segment() {
    let mut series = Array2::zeros((400, 1));
    series[[0, 0]] = 1000.0;
    let query = Array2::from_shape_vec((2, 1), vec![1000.0, 0.0]).unwrap();
    let passes = check::<4, 1>(&query, &series, (400, 10, 20), "a long path");
    // 20 segments: a first pass, a rerun of the 19 others one by one, and
    // the pass that changes nothing more.
    assert_eq!(passes, 20);
    // Random data: the reruns stop after a tile, in one pass or two.
    let mut rng = rng(86);
    let series = walk(&mut rng, 2000, 1);
    let query = walk(&mut rng, 30, 1);
    let passes = check::<4, 1>(&query, &series, (2000, 50, 100), "a random walk");
    assert!(passes <= 4, "{passes} passes");
}

/// A copy of the query, each sample twice, straddling a chunk's end and a
/// segment's: found at cost 0, as on the CPU.
#[test]
fn a_match_across_chunks_and_segments() {
    let mut rng = rng(87);
    let mut series = random_series(&mut rng, 3000, 1, 1.0);
    let query = random_series(&mut rng, 24, 1, 3.0);
    for i in 0..48 {
        series[[1480 + i, 0]] = query[[i / 2, 0]];
    }
    for shape in [(1500, 16, 64), (1000, 20, 100), (3000, 7, 21)] {
        check::<4, 4>(&query, &series, shape, "planted");
        let ((start, end, cost), _) = emulated::<4, 4>(&query, &series, shape);
        assert_eq!((start, end, cost), (1481, 1526, 0.0));
    }
}
