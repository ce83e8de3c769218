//! The wavefront against the row driver and the oracle, with any tiling,
//! band and shape, on pools of one thread and of more threads than tiles.

use super::*;
use crate::cpu::lanes::Lanes;
use crate::cpu::lockstep::Lockstep;
use crate::oracle;
use ndarray::Array2;
use rayon::prelude::*;
use std::sync::OnceLock;
use timewarp_kernels::drivers::rows::{pair_value, RowPair};
use timewarp_kernels::{DtwParams, SoftDtwParams, TwedParams};

/// Values in `[-scale, scale)`, a linear congruential sequence (the
/// tests need variety, not statistics).
fn values(seed: u64, count: usize, scale: f64) -> Vec<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            scale * ((state >> 11) as f64 / (1u64 << 52) as f64 - 1.0)
        })
        .collect()
}

fn series<T>(values: &[T], dims: usize) -> Series<T> {
    Series {
        values: values.as_ptr(),
        times: std::ptr::null(),
        len: values.len() / dims,
        dims,
    }
}

/// The row driver's value of the pair: the reference, cell for cell.
fn rows<T: Real, M: Recurrence<T>>(measure: &M, a: &Series<T>, b: &Series<T>) -> T {
    let mut buffer = vec![T::ZERO; 2 * (b.len + 1)];
    let rows = RowPair {
        base: buffer.as_mut_ptr(),
        len: b.len + 1,
        stride: 1,
    };
    // SAFETY: the series are valid, the rows fit them.
    unsafe { pair_value(measure, a, b, rows) }
}

/// Shapes `(n, m, dims)`: single samples, unequal lengths, several
/// dimensions, lengths on and beside the tiles' edges, and ragged last
/// tiles of the backend's own size.
const SHAPES: [(usize, usize, usize); 10] = [
    (1, 1, 1),
    (1, 9, 1),
    (9, 1, 2),
    (2, 3, 1),
    (12, 12, 1),
    (13, 11, 3),
    (40, 17, 1),
    (17, 40, 2),
    (64, 65, 1),
    (300, 263, 1),
];

/// Tile sizes: one cell, thin, square, and larger than some pairs.
const TILES: [(usize, usize); 6] = [(1, 1), (1, 5), (5, 1), (3, 4), (8, 8), (256, 256)];

/// Bands: none, 0 (the diagonal only: infinite for unequal lengths
/// beyond the band's reach), 1 and 5.
const BANDS: [Option<usize>; 4] = [None, Some(0), Some(1), Some(5)];

/// Pools of one thread (the schedule's one worker computes every tile),
/// of two, and of more threads than most grids have tiles on an
/// anti-diagonal.
fn pools() -> &'static [rayon::ThreadPool] {
    static POOLS: OnceLock<Vec<rayon::ThreadPool>> = OnceLock::new();
    POOLS.get_or_init(|| {
        [1, 2, 7]
            .into_iter()
            .map(|threads| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a pool")
            })
            .collect()
    })
}

/// [`wavefront_value`] on `pool`'s threads.
///
/// # Safety
/// As [`wavefront_value`].
unsafe fn on<T: Real + Send, M: Recurrence<T> + Sync>(
    pool: &rayon::ThreadPool,
    measure: &M,
    (a, b): (&Series<T>, &Series<T>),
    tile: (usize, usize),
    build: Build,
) -> T {
    /// The series, to the pool's thread (only read, while this call
    /// waits for it).
    struct Sent<T>(Series<T>, Series<T>);
    // SAFETY: as above.
    unsafe impl<T> Send for Sent<T> {}
    let sent = Sent(*a, *b);
    pool.install(move || {
        let sent = sent;
        // SAFETY: the caller's.
        unsafe { wavefront_value(measure, &sent.0, &sent.1, tile, build) }
    })
}

/// The wavefront of every shape, tile size and band, on every pool of
/// [`pools`], against the row driver (the same bits) and, as a check of
/// both, the oracle.
fn check<M, F>(make: F, oracle: impl Fn(&Array2<f64>, &Array2<f64>, Option<usize>) -> f64)
where
    M: Recurrence<f64> + Sync,
    F: Fn(Option<usize>) -> Option<M>,
{
    for (s, &(n, m, dims)) in SHAPES.iter().enumerate() {
        let x = values(2 * s as u64, n * dims, 3.0);
        let y = values(2 * s as u64 + 1, m * dims, 3.0);
        let (a, b) = (series(&x, dims), series(&y, dims));
        for band in BANDS {
            let Some(measure) = make(band) else { continue };
            let want = rows(&measure, &a, &b);
            let xa = Array2::from_shape_vec((n, dims), x.clone()).unwrap();
            let ya = Array2::from_shape_vec((m, dims), y.clone()).unwrap();
            let exact = oracle(&xa, &ya, band);
            let close = if exact.is_finite() {
                (want - exact).abs() <= 1e-12 * exact.abs().max(1.0)
            } else {
                want == exact
            };
            assert!(
                close,
                "{n}x{m}x{dims} band {band:?}: rows {want:e}, oracle {exact:e}"
            );
            for tile in TILES {
                for pool in pools() {
                    // SAFETY: the series are valid and non-empty.
                    let got = unsafe { on(pool, &measure, (&a, &b), tile, Build::Plain) };
                    let threads = pool.current_num_threads();
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{n}x{m}x{dims} band {band:?} tiles {tile:?} on {threads} threads: \
                         {got:e} vs {want:e}"
                    );
                }
            }
        }
    }
}

#[test]
fn dtw_wavefront_equals_the_rows() {
    check(
        |band| Some(DtwParams::new(band)),
        |a, b, band| oracle::dtw(a.view(), b.view(), band),
    );
}

#[test]
fn twed_wavefront_equals_the_rows() {
    let params = TwedParams::new(0.01, 0.5, 2.0);
    check(
        |band| band.is_none().then_some(params),
        |a, b, _| {
            let times = |k: usize| ndarray::Array1::from_iter((1..=k).map(|t| t as f64));
            let (ta, tb) = (times(a.nrows()), times(b.nrows()));
            oracle::twed(a.view(), ta.view(), b.view(), tb.view(), 0.01, 0.5, 2.0)
        },
    );
}

#[test]
fn soft_dtw_wavefront_equals_the_rows() {
    for gamma in [1.0, 0.01] {
        check(
            |band| Some(SoftDtwParams::new(gamma).with_band(band)),
            |a, b, band| oracle::soft_dtw_banded(a.view(), b.view(), gamma, band),
        );
    }
}

/// Soft-DTW over one lane (the lanes' own exp and ln), as the backend
/// runs a long pair: the same bits as the row driver over the lane,
/// compiled for AVX2 and FMA where the processor has them.
#[test]
fn soft_dtw_lane_wavefront_equals_the_rows() {
    let build = if super::super::units::lockstep_available() && cfg!(target_arch = "x86_64") {
        Build::Avx2
    } else {
        Build::Plain
    };
    let (n, m, dims) = (70, 45, 2);
    let x: Vec<Lanes<f64, 1>> = values(7, n * dims, 2.0)
        .into_iter()
        .map(|v| Lanes([v]))
        .collect();
    let y: Vec<Lanes<f64, 1>> = values(8, m * dims, 2.0)
        .into_iter()
        .map(|v| Lanes([v]))
        .collect();
    let (a, b) = (series(&x, dims), series(&y, dims));
    for band in BANDS {
        let params = SoftDtwParams::new(0.1).with_band(band);
        let lanes = Lockstep::<f64, 1>::lanes(&params);
        let want = rows(&lanes, &a, &b).0[0];
        for tile in TILES {
            for pool in pools() {
                // SAFETY: the series are valid and non-empty; Avx2 only
                // where the processor has it.
                let got = unsafe { on(pool, &lanes, (&a, &b), tile, build) }.0[0];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "band {band:?} tiles {tile:?} on {} threads",
                    pool.current_num_threads()
                );
            }
        }
    }
}

/// Many small pairs at once, each a wavefront of a few tiles (often fewer
/// than the pool's threads), started from the pool's own threads while
/// other pairs' workers wait on theirs: every value is the row driver's,
/// and none waits forever on a worker that never comes.
#[test]
fn many_small_wavefronts_at_once() {
    pools()[2].install(|| {
        (0..600usize).into_par_iter().for_each(|k| {
            let (n, m) = (1 + (k * 7) % 23, 1 + (k * 11) % 19);
            let tile = (1 + k % 6, 1 + (k / 6) % 5);
            let band = [None, Some(0), Some(2), Some(6)][k % 4];
            let x = values(3 * k as u64, n, 2.0);
            let y = values(3 * k as u64 + 1, m, 2.0);
            let (a, b) = (series(&x, 1), series(&y, 1));
            let measure = DtwParams::new(band);
            let want = rows(&measure, &a, &b);
            // SAFETY: the series are valid and non-empty.
            let got = unsafe { wavefront_value(&measure, &a, &b, tile, Build::Plain) };
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{n}x{m} tiles {tile:?} band {band:?}"
            );
        });
    });
}
