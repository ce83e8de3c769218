//! The warp driver's own code (the GPU kernels' `warp_pair` and `warp_tile`)
//! run on emulated warps (`crate::common::emulator`) against the oracle: every
//! measure, stripes of 1, 2 and 4 columns per lane, warps of 4 and 32
//! lanes, lengths around the band and tile widths, unequal lengths,
//! multivariate samples, DTW bands and TWED timestamps, and the tiles of
//! each anti-diagonal in both orders (a tile reading what another tile of
//! its anti-diagonal writes would show as a difference). f64 throughout:
//! this checks the driver's logic, the precisions are the GPU tests' job;
//! tolerance as in `crate::common::tolerance` (1e-12 of the accumulated scale).

use crate::common::driver::{assert_close, with_params, Measure, Pair};
use crate::common::hardware::{run_warp, run_warps, Shared};
use timewarp_kernels::drivers::columns::long_pair::{
    diagonal_tiles, pipelined_pair, tile_counts, warp_tile, PanelHandoff, TileGrid, NO_STALL,
};
use timewarp_kernels::drivers::columns::pair::warp_pair;
use timewarp_kernels::drivers::columns::skewed::skewed_pair;
use timewarp_kernels::drivers::sheared_band::{band_in_warp, band_pair};
use timewarp_kernels::hw::{Scope, Tagged};
use timewarp_kernels::launch::pairs::{panel_workspace, PairsLaunch};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Recurrence, Series, SetRef, Window};

/// The whole pair in one emulated warp of `N` lanes, `S` columns per lane.
fn in_warp<M: Recurrence<f64> + Sync, const N: usize, const S: usize>(
    measure: &M,
    pair: &Pair,
) -> f64 {
    let (a, b) = pair.series();
    // NaN where nothing was written: a read of it would poison the result.
    let mut border = vec![f64::NAN; a.len + 1];
    let shared = Shared((a, b, border.as_mut_ptr()));
    run_warp::<N, _>(|warp| {
        let (a, b, border) = shared.get();
        // SAFETY: the border holds a.len + 1 values; the series outlive the warp.
        unsafe { warp_pair::<f64, M, _, S>(warp, measure, &a, &b, border) }
    })
}

/// The whole pair in one emulated warp of `N` lanes with the skewed
/// column driver, `G` groups of `C` columns per lane.
fn in_skewed<M: Recurrence<f64> + Sync, const N: usize, const G: usize, const C: usize>(
    measure: &M,
    pair: &Pair,
) -> f64 {
    let (a, b) = pair.series();
    let mut border = vec![f64::NAN; a.len + 1];
    let shared = Shared((a, b, border.as_mut_ptr()));
    run_warp::<N, _>(|warp| {
        let (a, b, border) = shared.get();
        // SAFETY: as in `in_warp`.
        unsafe { skewed_pair::<f64, M, _, G, C>(warp, measure, &a, &b, border) }
    })
}

/// The pair in tiles of `tile_rows` rows, anti-diagonal by anti-diagonal,
/// the tiles of each in the given order.
fn in_tiles<M: Recurrence<f64> + Sync, const N: usize, const S: usize>(
    measure: &M,
    pair: &Pair,
    tile_rows: usize,
    reverse: bool,
) -> f64 {
    let (a, b) = pair.series();
    let (down, across) = tile_counts(a.len, b.len, tile_rows, N * S);
    let mut rows = vec![f64::INFINITY; b.len + 1];
    let mut cols = vec![f64::INFINITY; a.len + 1];
    let mut corners = vec![f64::INFINITY; down];
    corners[0] = 0.0;
    let grid = TileGrid {
        rows: rows.as_mut_ptr(),
        cols: cols.as_mut_ptr(),
        corners: corners.as_mut_ptr(),
        tile_rows: tile_rows as u64,
    };
    let shared = Shared((a, b, grid));
    let mut value = None;
    for diagonal in 0..down + across - 1 {
        let (first, last) = diagonal_tiles(diagonal, down, across);
        let mut order: Vec<usize> = (first..=last).collect();
        if reverse {
            order.reverse();
        }
        for tile_row in order {
            let result = run_warp::<N, _>(|warp| {
                let (a, b, grid) = shared.get();
                // SAFETY: the borders have the sizes TileGrid documents and
                // every earlier anti-diagonal is done.
                unsafe {
                    warp_tile::<f64, M, _, S>(warp, measure, &a, &b, &grid, diagonal, tile_row)
                }
            });
            if let Some(v) = result {
                assert!(value.is_none(), "two tiles returned the pair's value");
                value = Some(v);
            }
        }
    }
    value.expect("no tile returned the pair's value")
}

/// The pair in column bands by `warps` emulated warps running at once,
/// each right behind the band to its left.
fn in_pipeline<M: Recurrence<f64> + Sync, const N: usize, const S: usize>(
    measure: &M,
    pair: &Pair,
    warps: usize,
) -> f64 {
    let (a, b) = pair.series();
    let mut borders: Vec<Tagged> = vec![[0; 2]; 2 * (a.len + 1)];
    let (mut next_panel, mut fault) = (0u32, 0u32);
    let mut last_row = vec![f64::NAN; b.len + 1];
    let pipeline = PanelHandoff {
        borders: borders.as_mut_ptr(),
        next_panel: &mut next_panel,
        last_row: last_row.as_mut_ptr(),
        fault: &mut fault,
        stall_panel: NO_STALL,
    };
    let shared = Shared((a, b, pipeline));
    let values = run_warps::<N, _>(warps, |warp| {
        let (a, b, pipeline) = shared.get();
        // SAFETY: the pipeline's arrays have the documented sizes, zeroed.
        unsafe { pipelined_pair::<f64, M, _, S>(warp, Scope::Launch, measure, &a, &b, &pipeline) }
    });
    let done: Vec<f64> = values.into_iter().flatten().collect();
    assert_eq!(fault, 0, "no wait gave up");
    assert_eq!(done.len(), 1, "exactly one warp does the last band");
    // The last row ends in the pair's value (the window always holds the
    // last cell), bit for bit.
    assert_eq!(last_row[b.len].to_bits(), done[0].to_bits());
    done[0]
}

/// Every driver configuration of one measure on one pair.
fn check_pair<M: Recurrence<f64> + Sync>(params: &M, measure: Measure, pair: &Pair, tiles: bool) {
    let expected = pair.oracle(measure);
    let (n, m, d) = (pair.a.nrows(), pair.b.nrows(), pair.a.ncols());
    let context = |what: &str| format!("{measure:?}, {n} x {m}, dims {d}, {what}");
    assert_close(
        &context("warp 4x1"),
        in_warp::<M, 4, 1>(params, pair),
        expected,
    );
    assert_close(
        &context("warp 4x2"),
        in_warp::<M, 4, 2>(params, pair),
        expected,
    );
    assert_close(
        &context("warp 4x4"),
        in_warp::<M, 4, 4>(params, pair),
        expected,
    );
    for (what, got) in [
        ("skewed 4 lanes, 1x1", in_skewed::<M, 4, 1, 1>(params, pair)),
        ("skewed 4 lanes, 2x1", in_skewed::<M, 4, 2, 1>(params, pair)),
        ("skewed 4 lanes, 4x1", in_skewed::<M, 4, 4, 1>(params, pair)),
        ("skewed 4 lanes, 2x2", in_skewed::<M, 4, 2, 2>(params, pair)),
        ("skewed 4 lanes, 3x2", in_skewed::<M, 4, 3, 2>(params, pair)),
    ] {
        assert_close(&context(what), got, expected);
    }
    if tiles {
        for warps in [1, 3] {
            let got = in_pipeline::<M, 4, 2>(params, pair, warps);
            assert_close(
                &context(&format!("pipelined bands, {warps} warps")),
                got,
                expected,
            );
        }
        for tile_rows in [1, 3, 8, 13] {
            for reverse in [false, true] {
                let what = format!("tiles of {tile_rows} x 8 (4x2), reverse {reverse}");
                let got = in_tiles::<M, 4, 2>(params, pair, tile_rows, reverse);
                assert_close(&context(&what), got, expected);
            }
        }
    }
}

fn measures() -> Vec<Measure> {
    vec![
        Measure::Dtw(None),
        Measure::Dtw(Some(0)),
        Measure::Dtw(Some(3)),
        Measure::SoftDtw(0.1),
        Measure::SoftDtw(1.0),
        Measure::Twed(0.5, 1.0, 2.0),
        Measure::Twed(0.0, 0.0, 3.0),
    ]
}

fn check_all(measure: Measure, pair: &Pair, tiles: bool) {
    with_params!(measure, |params| check_pair(&params, measure, pair, tiles))
}

#[test]
fn warp_and_tiles_match_the_oracle_on_short_and_unequal_pairs() {
    // Around the widths of a lane's stripe (1, 2, 4), a warp's band (4, 8,
    // 16 columns) and a tile (8 columns; 1 to 13 rows).
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (3, 3),
        (1, 17),
        (17, 1),
        (7, 8),
        (8, 9),
        (9, 16),
        (16, 17),
        (33, 12),
        (12, 33),
    ];
    for (k, &(n, m)) in shapes.iter().enumerate() {
        // Several dimensions change only each cell's cost: on every
        // second shape.
        let dims: &[usize] = if k % 2 == 0 { &[1] } else { &[1, 3] };
        for &dims in dims {
            let pair = Pair::random(100 + k as u64 * 7 + dims as u64, n, m, dims);
            for measure in measures() {
                check_all(measure, &pair, true);
            }
        }
    }
}

#[test]
fn a_full_warp_matches_the_oracle() {
    // 32 lanes as on the GPU: one band (31 columns), two bands (70), and
    // tiles of 32 x 32 and 32 x 64 columns.
    for (k, &(n, m)) in [(40, 31), (45, 70), (70, 45)].iter().enumerate() {
        let pair = Pair::random(300 + k as u64, n, m, 1);
        for measure in [
            Measure::Dtw(None),
            Measure::Dtw(Some(2)),
            Measure::SoftDtw(0.5),
            Measure::Twed(0.5, 1.0, 2.0),
        ] {
            let expected = pair.oracle(measure);
            let context = format!("{measure:?}, {n} x {m}, 32 lanes");
            let (warp1, warp2, tiled, skewed) = with_params!(measure, |p| (
                in_warp::<_, 32, 1>(&p, &pair),
                in_warp::<_, 32, 2>(&p, &pair),
                in_tiles::<_, 32, 1>(&p, &pair, 16, true),
                in_skewed::<_, 32, 2, 1>(&p, &pair)
            ));
            assert_close(&format!("{context}, skewed 2x1"), skewed, expected);
            assert_close(&format!("{context}, 1 column per lane"), warp1, expected);
            assert_close(&format!("{context}, 2 columns per lane"), warp2, expected);
            assert_close(&format!("{context}, tiles 16 x 32"), tiled, expected);
        }
    }
}

#[test]
fn banded_pairs_skip_rows_outside_the_band_and_match_the_oracle() {
    // Many column bands (4 lanes of 1 or 2 columns) whose rows the band
    // limits, so the blocks start and end at different rows: each takes
    // its corner and its left border's rows from the band before, and
    // reads as infinite the rows that band never computed.
    for (k, &(n, m)) in [(61, 47), (47, 61), (64, 64), (9, 40), (40, 9)]
        .iter()
        .enumerate()
    {
        let pair = Pair::random(500 + k as u64, n, m, 1);
        // A radius past both lengths is the unbanded case, tested above.
        for radius in [0, 1, 5] {
            check_all(Measure::Dtw(Some(radius)), &pair, true);
        }
    }
}

/// The pair by the band driver itself, in an emulated warp of `N` lanes,
/// `S` cells a lane, if its band fits.
fn in_band<M: Recurrence<f64> + Sync, const N: usize, const S: usize>(
    measure: &M,
    pair: &Pair,
) -> Option<f64> {
    let (a, b) = pair.series();
    let band = measure.window().diagonals(a.len, b.len)?;
    if band.0 + band.1 + 1 > N * S {
        return None;
    }
    let shared = Shared((a, b));
    Some(run_warp::<N, _>(|warp| {
        let (a, b) = shared.get();
        // SAFETY: the band fits N * S cells; the series outlive the warp.
        unsafe { band_pair::<f64, M, _, S>(warp, measure, &a, &b, band) }
    }))
}

#[test]
fn the_band_driver_matches_the_oracle() {
    // Bands of every width from one diagonal (radius 0, equal lengths) to
    // wider than the shorter series, on equal and unequal lengths (the
    // band then widens on the longer side), lengths 1 and 2 included;
    // lanes of 2, 3 and 5 cells, so the band's last lane has spare cells
    // or none, and warps of 4 and 8 lanes.
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (5, 5),
        (30, 30),
        (30, 24),
        (24, 30),
        (13, 40),
        (40, 13),
    ];
    let mut checked = 0;
    for (k, &(n, m)) in shapes.iter().enumerate() {
        for dims in [1, 3] {
            let pair = Pair::random(700 + k as u64 * 5 + dims as u64, n, m, dims);
            for radius in [0, 1, 2, 3, 6, 11, 40] {
                for measure in [
                    Measure::Dtw(Some(radius)),
                    Measure::SoftDtwBand(0.5, radius),
                ] {
                    let expected = pair.oracle(measure);
                    let context =
                        |what: &str| format!("{measure:?}, {n} x {m}, dims {dims}, {what}");
                    let got = with_params!(measure, |p| [
                        in_band::<_, 4, 2>(&p, &pair),
                        in_band::<_, 4, 3>(&p, &pair),
                        in_band::<_, 8, 5>(&p, &pair),
                    ]);
                    for (what, got) in ["4 x 2", "4 x 3", "8 x 5"].into_iter().zip(got) {
                        if let Some(got) = got {
                            assert_close(&context(what), got, expected);
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 300, "only {checked} pairs fitted a band");
}

/// A launch of the one pair `(a, b)` (sample offsets `offsets`), its value
/// to `out[0]`, with `workspace` (its length the launch's `row_len`).
fn one_pair_launch<M: Copy>(
    measure: M,
    (a, b): (&Series<f64>, &Series<f64>),
    offsets: &[[u64; 2]; 2],
    out: &mut [f64; 1],
    workspace: &mut [f64],
    numbering: Numbering,
) -> PairsLaunch<f64, M> {
    let set = |s: &Series<f64>, offsets: &[u64; 2]| SetRef {
        values: s.values,
        offsets: offsets.as_ptr(),
        times: s.times,
        count: 1,
        dims: s.dims as u64,
        uniform_len: 0,
        uniform_first: 0,
    };
    PairsLaunch {
        a: set(a, &offsets[0]),
        b: set(b, &offsets[1]),
        params: measure,
        out: out.as_mut_ptr(),
        workspace: workspace.as_mut_ptr(),
        row_len: workspace.len() as u64,
        first_pair: 0,
        pair_count: 1,
        numbering,
    }
}

/// A pair launched as the `warp` kernels (`sheared`: the `sheared`
/// kernels) launch it, `S` columns a lane on an `N`-lane warp, as a
/// univariate twin (`U`) or not; `None` if the launch left it unwritten.
fn launched<M: Recurrence<f64> + Sync + Copy, const N: usize, const S: usize, const U: bool>(
    measure: M,
    pair: &Pair,
    sheared: bool,
) -> Option<f64> {
    let (a, b) = pair.series();
    let offsets = [[0u64, a.len as u64], [0, b.len as u64]];
    let mut out = [f64::NAN];
    let mut border = vec![f64::NAN; a.len.max(b.len) + 1];
    let launch = Shared(one_pair_launch(
        measure,
        (&a, &b),
        &offsets,
        &mut out,
        &mut border,
        Numbering::Matrix,
    ));
    run_warp::<N, _>(|warp| {
        let launch = launch.get();
        // SAFETY: the launch's sets, output and border are valid and
        // outlive the warp.
        unsafe {
            if sheared {
                launch.run_band_in_warp::<_, S, U>(warp, 0)
            } else {
                launch.run_pair_in_warp::<_, S, U>(warp, 0)
            }
        }
    });
    (!out[0].is_nan()).then_some(out[0])
}

#[test]
fn the_warp_and_sheared_launches_match_the_oracle() {
    // A pair of 200 samples in a warp of 8 lanes x 4 columns (7 panels of
    // 32): radius 3 (7 diagonals) fits the sheared band driver, radius 20
    // (41) does not, and the sheared launch leaves the pair unwritten (the
    // host launches it only for bands that fit).
    let pair = Pair::random(900, 200, 200, 1);
    for radius in [3, 20] {
        let measure = Measure::Dtw(Some(radius));
        let params = timewarp_kernels::DtwParams::new(Some(radius));
        let fits = band_in_warp::<f64, _>(&params, 200, 200, 8, 4).is_some();
        assert_eq!(fits, radius == 3);
        let expected = pair.oracle(measure);
        let context = format!("radius {radius}");
        for got in [
            launched::<_, 8, 4, false>(params, &pair, false),
            launched::<_, 8, 4, true>(params, &pair, false),
        ] {
            assert_close(&context, got.expect("written"), expected);
        }
        for got in [
            launched::<_, 8, 4, false>(params, &pair, true),
            launched::<_, 8, 4, true>(params, &pair, true),
        ] {
            match got {
                Some(got) => assert_close(&format!("{context}, sheared"), got, expected),
                None => assert!(!fits, "{context}: a band that fits was not computed"),
            }
        }
    }
}

/// The `panels` launch (a pair by several warps, its panels pipelined) on
/// `warps` emulated warps of `N` lanes, `S` columns each: its workspace the
/// pair's panel counts and borders, zeroed, as the host allocates it.
fn panels_launched<M: Recurrence<f64> + Sync + Copy, const N: usize, const S: usize>(
    measure: M,
    pair: &Pair,
    warps: usize,
) -> f64 {
    let (a, b) = pair.series();
    let offsets = [[0u64, a.len as u64], [0, b.len as u64]];
    let mut out = [f64::NAN];
    let mut workspace = vec![0.0f64; panel_workspace::<f64>(a.len)];
    let launch = Shared(one_pair_launch(
        measure,
        (&a, &b),
        &offsets,
        &mut out,
        &mut workspace,
        Numbering::Paired,
    ));
    run_warps::<N, _>(warps, |warp| {
        let launch = launch.get();
        // SAFETY: the launch's sets, output and zeroed workspace are valid
        // and outlive the warps, which all take pair 0.
        unsafe { launch.run_pair_in_panels::<_, S, false>(warp, 0) }
    });
    out[0]
}

#[test]
fn the_panels_launch_matches_the_oracle() {
    // 7 panels of 8 lanes x 4 columns (and 1 x 1 pairs, one panel) on 1, 3
    // and 4 warps: each warp takes the next panel and follows the one to
    // its left through the pair's own counts and borders.
    for (k, &(n, m, dims)) in [(200, 200, 1), (57, 200, 3), (200, 31, 1), (1, 1, 1)]
        .iter()
        .enumerate()
    {
        let pair = Pair::random(950 + k as u64, n, m, dims);
        for measure in [
            Measure::SoftDtw(0.5),
            Measure::Dtw(None),
            Measure::Dtw(Some(5)),
            Measure::Twed(0.5, 1.0, 2.0),
        ] {
            let expected = pair.oracle(measure);
            for warps in [1, 3, 4] {
                let got = with_params!(measure, |p| panels_launched::<_, 8, 4>(p, &pair, warps));
                let context = format!("{measure:?}, {n} x {m}, dims {dims}, {warps} warps");
                assert_close(&context, got, expected);
            }
        }
    }
}

/// A panel that never publishes its border (the test hook of
/// `PanelHandoff::stall_panel`) does not hang the pipeline: the warp of the
/// next panel waits until its bound (`WAIT_BOUND_NS`), records the fault,
/// and the launch runs to its end within about one bound, the pair's value
/// NaN. Without the bound the warp behind it would wait forever.
#[test]
fn a_panel_that_never_publishes_ends_in_a_fault_within_the_bound() {
    let pair = Pair::random(77, 40, 32, 1);
    let (a, b) = pair.series();
    let params = timewarp_kernels::DtwParams::new(None);
    for stall_panel in [0u32, 2] {
        let mut borders: Vec<Tagged> = vec![[0; 2]; 2 * (a.len + 1)];
        let (mut next_panel, mut fault) = (0u32, 0u32);
        let handoff = PanelHandoff {
            borders: borders.as_mut_ptr(),
            next_panel: &mut next_panel,
            last_row: std::ptr::null_mut(),
            fault: &mut fault,
            stall_panel,
        };
        let shared = Shared((a, b, handoff));
        let started = std::time::Instant::now();
        // Panels of 4 lanes x 2 columns: 4 panels, 4 warps.
        let values = run_warps::<4, _>(4, |warp| {
            let (a, b, handoff) = shared.get();
            // SAFETY: the handoff's arrays have the documented sizes, zeroed.
            unsafe {
                pipelined_pair::<f64, _, _, 2>(warp, Scope::Launch, &params, &a, &b, &handoff)
            }
        });
        let waited = started.elapsed();
        let done: Vec<f64> = values.into_iter().flatten().collect();
        assert_eq!(
            fault, 1,
            "panel {stall_panel} stalled: the fault word is set"
        );
        assert!(
            done.len() == 1 && done[0].is_nan(),
            "the value is NaN: {done:?}"
        );
        let bound = std::time::Duration::from_nanos(timewarp_kernels::hw::WAIT_BOUND_NS);
        assert!(
            waited >= bound,
            "gave up after {waited:?}, before the bound"
        );
        assert!(waited < 3 * bound, "waited {waited:?}: more than one bound");
    }
}
