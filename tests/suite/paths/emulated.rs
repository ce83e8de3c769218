//! The GPU provider's launch without a GPU: the pipelined kernel's driver
//! on emulated warps (`crate::common::hardware`), given a pass the way
//! `host/gpu/paths/last_columns.rs` launches it (the transposed sub-pair,
//! its last row read back), against the CPU provider's column, for DTW's and TWED's
//! passes. This checks the transposition and the series' addressing (the
//! sample before each of TWED's passes included) where CI can run it; the
//! GPU tests (`paths::gpu`, `paths::gpu_twed`) check the real launches.

use super::twed::random_times;
use super::{pair_series, rng};
use crate::common::hardware::{run_warps, Shared};
use timewarp::internals::{
    CpuLastColumn, DtwPair, LastColumn, Pass, PassSeries, PathPair, SubPair, TwedPair,
};
use timewarp::Twed;
use timewarp_kernels::drivers::columns::long_pair::{pipelined_pair, PanelHandoff, NO_STALL};
use timewarp_kernels::hw::{Scope, Tagged};
use timewarp_kernels::{Recurrence, Series};

/// Samples `range` of series `which` of the pass series, as the kernels
/// see them.
fn view<P: Copy>(
    series: &PassSeries<f64, P>,
    which: usize,
    range: std::ops::Range<usize>,
) -> Series<f64> {
    let dims = series.dims();
    Series {
        // SAFETY: the add stays in the series: the pass was checked against it.
        values: unsafe { series.values()[which].as_ptr().add(range.start * dims) },
        // SAFETY: as for the values.
        times: series.times().map_or(std::ptr::null(), |t| unsafe {
            t[which].as_ptr().add(range.start)
        }),
        len: range.len(),
        dims,
    }
}

/// The pass's last column from the pipelined driver on three emulated
/// warps of 4 lanes, 2 columns a lane: the sub-pair transposed (`y`'s
/// samples as rows), its last row.
fn emulated_column<P: Recurrence<f64> + Copy + Sync>(
    series: &PassSeries<f64, P>,
    pass: &Pass,
) -> Vec<f64> {
    series.check(pass).unwrap();
    let (x, y) = PassSeries::<f64, P>::series_of(pass);
    let (a, b) = (
        view(series, y, pass.cols.clone()),
        view(series, x, pass.rows.clone()),
    );
    let mut borders: Vec<Tagged> = vec![[0; 2]; 2 * (a.len + 1)];
    let (mut next_panel, mut fault) = (0u32, 0u32);
    let mut last_row = vec![f64::NAN; b.len + 1];
    let handoff = PanelHandoff {
        borders: borders.as_mut_ptr(),
        next_panel: &mut next_panel,
        last_row: last_row.as_mut_ptr(),
        fault: &mut fault,
        stall_panel: NO_STALL,
    };
    let params = series.params();
    let shared = Shared((a, b, handoff));
    run_warps::<4, _>(3, |warp| {
        let (a, b, handoff) = shared.get();
        // SAFETY: the handoff's arrays have the documented sizes, zeroed.
        unsafe { pipelined_pair::<f64, P, _, 2>(warp, Scope::Launch, &params, &a, &b, &handoff) }
    });
    last_row.remove(0);
    last_row
}

/// Every pass of each part, emulated against the CPU's: the same cell
/// updates, so equal within 1e-12 (both are the kernels' code; the
/// transposed matrix swaps the operands of each difference and the two
/// deletions, which leaves the roundings as they are).
fn check<Q: PathPair<f64>>(pair: &Q, parts: &[SubPair], context: &str)
where
    Q::Params: Sync,
{
    let cpu = CpuLastColumn::new(pair);
    for part in parts {
        for pass in pair.passes(part) {
            let expected = cpu
                .last_column(pass.rows.clone(), pass.cols.clone(), pass.reversed)
                .unwrap();
            let got = emulated_column(pair.pass_series(), &pass);
            assert_eq!(got.len(), expected.len(), "{context} {pass:?}");
            for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
                assert!(
                    (g - e).abs() <= 1e-12 * e.abs().max(1.0),
                    "{context} {pass:?}, row {i}: {g} vs {e}"
                );
            }
        }
    }
}

#[test]
fn emulated_gpu_passes_match_the_cpu() {
    let mut rng = rng(41);
    let (n, m) = (37, 29);
    for dims in [1, 3] {
        let (x, _) = pair_series::<f64>(&mut rng, n, dims);
        let (y, _) = pair_series::<f64>(&mut rng, m, dims);
        let (tx, ty) = (
            random_times::<f64>(&mut rng, n).0,
            random_times::<f64>(&mut rng, m).0,
        );
        let twed = Twed::new(0.3, 0.5, if dims == 1 { 2.0 } else { 3.0 }).unwrap();
        let pair = TwedPair::new(
            (x.view(), Some(tx.view())),
            (y.view(), Some(ty.view())),
            twed,
        )
        .unwrap();
        let parts = [
            SubPair {
                rows: 0..n + 1,
                cols: 0..m + 1,
            },
            SubPair {
                rows: 3..20,
                cols: 5..25,
            },
            SubPair {
                rows: n - 1..n + 1,
                cols: 2..m + 1,
            },
        ];
        check(&pair, &parts, &format!("TWED, dims {dims}"));
        let pair = DtwPair::new(x.view(), y.view()).unwrap();
        let parts = [
            SubPair {
                rows: 0..n,
                cols: 0..m,
            },
            SubPair {
                rows: 3..20,
                cols: 5..25,
            },
        ];
        check(&pair, &parts, &format!("DTW, dims {dims}"));
    }
}
