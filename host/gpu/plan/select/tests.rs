//! The selection rules, on the CPU.

use super::*;
use timewarp_kernels::{DtwParams, TwedParams};

#[test]
fn shared_blocks_fit_their_memory() {
    let (default, opt_in) = (48 * 1024, 232_448);
    // Length 128 in f32: 1032 bytes a thread, 32 threads fit 48 KiB.
    assert_eq!(shared_threads(1032, default, opt_in), Some((32, false)));
    // Short rows: 128 threads.
    assert_eq!(
        shared_threads(2 * 17 * 8, default, opt_in),
        Some((128, false))
    );
    assert_eq!(shared_threads(500, default, opt_in), Some((64, false)));
    // Length 1000 in f64: 16 016 bytes, opt in to 14 threads.
    assert_eq!(shared_threads(16_016, default, opt_in), Some((14, true)));
    // Length 14 000 in f64 fits one thread; 15 000 does not.
    assert_eq!(
        shared_threads(2 * 14_001 * 8, default, opt_in),
        Some((1, true))
    );
    assert_eq!(shared_threads(2 * 15_001 * 8, default, opt_in), None);
}

#[test]
fn band_widths_cover_the_widest_pair() {
    let dtw = DtwParams::new(Some(3));
    // Equal lengths: 2 r + 1.
    assert_eq!(band_width::<f64, _>(&dtw, (10, 10), (10, 10)), Some(7));
    // Lengths 8..12 against 10..20: the widest pair is 8 x 20.
    assert_eq!(band_width::<f64, _>(&dtw, (8, 12), (10, 20)), Some(7 + 12));
    assert_eq!(
        band_width::<f64, _>(&DtwParams::new(None), (8, 8), (8, 8)),
        None
    );
    let twed = TwedParams::new(1.0, 1.0, 2.0);
    assert_eq!(band_width::<f64, _>(&twed, (8, 8), (8, 8)), None);
}

#[test]
fn warp_kernels_follow_the_lengths_and_the_band() {
    let f32 = Precision::F32;
    let many = (100_000, 528);
    let pick = |lengths, band| warp_kernel(Measure::Dtw, f32, lengths, 1, band, many);
    // Short DTW series take a sub-warp, univariate twin.
    let short = pick((64, 64), None);
    assert_eq!(short.id.to_string(), "dtw_warp8x8_1d_f32");
    assert_eq!(pick((128, 128), None).id.to_string(), "dtw_warp8x16_1d_f32");
    // Wider ones the narrowest whole-warp stripe that covers them.
    assert_eq!(pick((500, 129), None).id.to_string(), "dtw_warp16_1d_f32");
    let wide = pick((1024, 1024), None);
    assert_eq!(wide.id.to_string(), "dtw_warp16_1d_f32");
    assert_eq!(wide.workspace_per_pair, 1025);
    // A 10% band at 1024 takes the sheared band driver in 16 x 16.
    let banded = pick((1024, 1024), Some(205));
    assert_eq!(banded.id.to_string(), "dtw_sheared16x16_1d_f32");
    assert_eq!(banded.workspace_per_pair, 0);
    // Multivariate: no twin. TWED has no sub-warps.
    let twed = warp_kernel(Measure::Twed, Precision::F64, (60, 60), 3, None, many);
    assert_eq!(twed.id.to_string(), "twed_warp4_f64");
    // Soft-DTW takes the skewed kernel when the pairs give fewer warps
    // than the schedulers and the columns more than one panel of the
    // warp kernel: a stripe that covers the columns, a group a column.
    let soft = |n, m, pairs| warp_kernel(Measure::SoftDtw, f32, (n, m), 1, None, (pairs, 528));
    assert_eq!(soft(128, 128, 256).id.to_string(), "soft_dtw_warp4_1d_f32");
    assert_eq!(soft(512, 512, 1024).id.to_string(), "soft_dtw_warp4_1d_f32");
    assert_eq!(
        soft(512, 512, 256).id.to_string(),
        "soft_dtw_skewed16x1_1d_f32"
    );
    assert_eq!(
        soft(512, 129, 256).id.to_string(),
        "soft_dtw_skewed16x1_1d_f32"
    );
    let soft_wide = soft(1024, 1024, 64);
    assert_eq!(soft_wide.id.to_string(), "soft_dtw_skewed16x1_1d_f32");
    assert_eq!(soft_wide.workspace_per_pair, 1025);
    assert_eq!(soft(512, 512, 256).workspace_per_pair, 0);
    for kernel in [short, wide, banded, twed, soft_wide] {
        assert!(kernel.id.exists(), "{}", kernel.id);
    }
}

#[test]
fn paired_soft_dtw_takes_the_panels_kernel_for_few_wide_pairs() {
    let pick = |measure, (n, m), band, pairs| {
        panels_kernel(measure, Precision::F32, (n, m), 1, band, (pairs, 528))
    };
    let few_wide = pick(Measure::SoftDtw, (512, 512), None, 256).expect("panels");
    assert_eq!(few_wide.id.to_string(), "soft_dtw_panels4x4_1d_f32");
    assert_eq!(few_wide.lanes, 128);
    // The next-panel counter padded to 16 bytes, then two borders of 513
    // tagged values of 16 bytes, in f32 values.
    assert_eq!(few_wide.workspace_per_pair, (16 + 2 * 513 * 16) / 4);
    assert!(few_wide.id.exists());
    assert!(pick(Measure::SoftDtw, (512, 512), None, 1024).is_none());
    assert!(pick(Measure::SoftDtw, (128, 128), None, 256).is_none());
    assert!(pick(Measure::SoftDtw, (512, 512), Some(41), 256).is_none());
    assert!(pick(Measure::Dtw, (512, 512), None, 256).is_none());
}

#[test]
fn the_band_driver_pays_only_where_it_saves_lane_steps() {
    // Fits: at least 2 cells a lane, every diagonal in the warp.
    assert!(!band_pays(10, 100, 100, 32, 1));
    assert!(!band_pays(513, 1000, 1000, 32, 16));
    // A 10% band at L = 1024: far fewer steps than 2 panels.
    assert!(band_pays(205, 1024, 1024, 16, 16));
    // A band as wide as the matrix saves nothing.
    assert!(!band_pays(127, 64, 64, 8, 16));
}

#[test]
fn default_variants() {
    assert_eq!(
        matrix_variant(Measure::Twed, 1, 65_536, None),
        Variant::Tiled
    );
    assert_eq!(
        matrix_variant(Measure::Twed, 3, 65_536, None),
        Variant::Warp
    );
    assert_eq!(matrix_variant(Measure::Dtw, 1, 1024, None), Variant::Warp);
    // A long pair in a band that fits a warp: the warp kernel.
    assert_eq!(
        matrix_variant(Measure::Dtw, 1, 65_536, Some(133)),
        Variant::Warp
    );
    assert_eq!(
        matrix_variant(Measure::Dtw, 1, 65_536, Some(600)),
        Variant::Tiled
    );
    assert!(resident_variant(Some(Variant::Tiled)).is_err());
    assert!(resident_variant(Some(Variant::Stencil)).is_err());
    assert_eq!(
        resident_variant(Some(Variant::Naive)).unwrap(),
        Variant::Naive
    );
    assert_eq!(resident_variant(None).unwrap(), Variant::Warp);
    assert_eq!(paired_variant(None, 2, 4096).unwrap(), Variant::Tiled);
    assert_eq!(paired_variant(None, 64, 128).unwrap(), Variant::Warp);
    assert_eq!(
        paired_variant(Some(Variant::Stencil), 64, 128).unwrap(),
        Variant::Stencil
    );
    assert!(paired_variant(Some(Variant::Naive), 64, 128).is_err());
}

#[test]
fn tiled_shapes() {
    // The warps an SM held of each kernel on an H200 (ncu's register
    // limit): (stripe, f32, f64).
    let held = |measure| match measure {
        Measure::Twed => [(4, 20, 16), (8, 16, 8)],
        _ => [(4, 24, 20), (16, 16, 12)],
    };
    let stripe = |measure, columns, f64: bool| {
        let mut asked = Vec::new();
        let chosen = tiled_stripe(measure, columns, |s| {
            asked.push(s);
            let &(_, f32_warps, f64_warps) = held(measure).iter().find(|h| h.0 == s).unwrap();
            Ok(if f64 { f64_warps } else { f32_warps })
        })
        .unwrap();
        (chosen, asked.len())
    };
    // Too few columns for two stripes' panels: no kernel is asked about.
    assert_eq!(stripe(Measure::Twed, 65_536, true), (4, 0));
    assert_eq!(stripe(Measure::Twed, 1000, false), (4, 0));
    assert_eq!(stripe(Measure::Dtw, 200_000, false), (4, 0));
    assert_eq!(stripe(Measure::SoftDtw, 1 << 20, true), (4, 0));
    // Both give enough panels: the registers decide.
    assert_eq!(stripe(Measure::Twed, 1 << 20, true), (4, 2));
    assert_eq!(stripe(Measure::Twed, 1 << 20, false), (8, 2));
    assert_eq!(stripe(Measure::Dtw, 1 << 20, true), (16, 2));
    assert_eq!(stripe(Measure::Dtw, 1 << 20, false), (16, 2));
    // A failing query is the caller's error.
    let failed = tiled_stripe(Measure::Twed, 1 << 20, |_| {
        Err(Error::GpuFailure("no".into()))
    });
    assert!(failed.is_err());
    assert_eq!(local_max_len(), 1024);
    assert_eq!(
        local_kernel(Measure::Dtw, Precision::F64, 300)
            .unwrap()
            .to_string(),
        "dtw_local1024_f64"
    );
    assert!(local_kernel(Measure::Dtw, Precision::F64, 1025).is_err());
}

#[test]
fn gradient_shapes() {
    let soft = Measure::SoftDtw;
    let fits = |_| Ok(true);
    let default = |columns| gradient_shape(soft, None, columns, fits).unwrap();
    // One warp of the narrowest stripe that covers the columns up to 256,
    // then 4 warps' panels of 4 and 8 columns a lane.
    for (columns, shape) in [
        (1, (1, 4)),
        (128, (1, 4)),
        (129, (1, 8)),
        (256, (1, 8)),
        (257, (4, 4)),
        (512, (4, 4)),
        (513, (4, 8)),
        (1024, (4, 8)),
    ] {
        assert_eq!(default(columns), Some(shape), "{columns} columns");
    }
    // Panels whose warps would fill more than half the GPU give way to one
    // warp a pair where that covers the columns (and are asked about only
    // then).
    let crowded = |columns| {
        let mut asked = Vec::new();
        let shape = gradient_shape(soft, None, columns, |shape| {
            asked.push(shape);
            Ok(false)
        });
        (shape.unwrap(), asked)
    };
    assert_eq!(crowded(100), (Some((1, 4)), vec![]));
    assert_eq!(crowded(200), (Some((1, 8)), vec![]));
    assert_eq!(crowded(300), (Some((1, 16)), vec![(4, 4)]));
    assert_eq!(crowded(512), (Some((1, 16)), vec![(4, 4)]));
    assert_eq!(crowded(700), (Some((4, 8)), vec![]));
    let failing = gradient_shape(soft, None, 300, |_| {
        Err(crate::Error::GpuFailure("no occupancy".into()))
    });
    assert!(failing.is_err());
    // Past the widest panels, the stencil driver.
    assert_eq!(default(1025), None);
    assert_eq!(
        gradient_shape(soft, Some(Variant::Stencil), 10, fits).unwrap(),
        None
    );
    assert_eq!(
        gradient_shape(soft, Some(Variant::Warp), 300, fits).unwrap(),
        Some((4, 4))
    );
    let error = gradient_shape(soft, Some(Variant::Warp), 1025, fits).unwrap_err();
    assert!(error.to_string().contains("up to 1024 samples"), "{error}");
    assert!(gradient_shape(soft, Some(Variant::Tiled), 10, fits).is_err());
    // DTW has no warp gradient kernels (nor any gradient).
    assert_eq!(gradient_shape(Measure::Dtw, None, 10, fits).unwrap(), None);
    assert_eq!(gradient_driver((1, 16)).to_string(), "warp_gradient16");
    assert_eq!(gradient_driver((4, 8)).to_string(), "panels_gradient4x8");
}

/// The wavefront steps of a warp kernel of `driver` for one pair of `n`
/// rows and `m` columns, in a band of `(below, above)` diagonals if any:
/// each step is a chain of `stripe` cells (`groups * chain` for the skewed
/// driver) in every lane. The sheared driver steps through the rows once;
/// the column driver through the rows that the band reaches in each panel
/// (`Window::rows`), its wavefront filling and draining in each; the
/// skewed driver through every row of each panel.
fn warp_steps(driver: Driver, n: usize, m: usize, band: Option<(usize, usize)>) -> usize {
    let band_rows = |first: usize, last: usize| match band {
        // Rows `j - above ..= j + below` meet column `j` (`band_rows`).
        Some((below, above)) => (last + below).min(n) + 1 - first.saturating_sub(above).max(1),
        None => n,
    };
    let all_rows = |_: usize, _: usize| n;
    let panels = |width: usize, lanes: usize, rows: &dyn Fn(usize, usize) -> usize| -> usize {
        (0..m.div_ceil(width))
            .map(|p| rows(p * width + 1, ((p + 1) * width).min(m)) + lanes - 1)
            .sum()
    };
    match driver {
        Driver::Sheared { stripe, .. } => {
            let (below, above) = band.unwrap_or((n, m));
            n + (below + above + 1).div_ceil(stripe as usize) - 1
        }
        Driver::Warp { lanes, stripe } => {
            panels((lanes * stripe) as usize, lanes as usize, &band_rows)
        }
        Driver::Skewed { groups, chain } => {
            let lanes = LANES * groups as usize;
            panels(lanes * chain as usize, lanes, &all_rows)
        }
        _ => unreachable!("warp kernels only"),
    }
}

/// The cells a warp kernel evaluates in one wavefront step, in all lanes.
fn cells_per_step(driver: Driver) -> usize {
    match driver {
        Driver::Sheared { lanes, stripe } | Driver::Warp { lanes, stripe } => {
            (lanes * stripe) as usize
        }
        Driver::Skewed { groups, chain } => LANES * (groups * chain) as usize,
        _ => unreachable!("warp kernels only"),
    }
}

/// A long pair in a band takes a warp kernel whose work follows the band,
/// not the matrix: the cells it evaluates (its steps, `warp_steps`, times
/// the cells of a step) are at most 4 times the band's cells plus a
/// wavefront's fill and drain along both sides. The Soft-DTW pair of
/// 100,000 x 100,100 samples in a radius of 30 (161 diagonals, wider than
/// its sheared kernel) took the skewed kernel, which computes every row of
/// every panel: 4 x 10^10 cells for the band's 1.6 x 10^7.
#[test]
fn banded_pairs_take_kernels_that_compute_the_band_only() {
    let cases: [(usize, usize, usize); 7] = [
        (100_000, 100_100, 30),
        (100_000, 100_000, 100),
        (100_100, 100_000, 5),
        (65_536, 70_000, 300),
        (20_000, 20_000, 0),
        (4_096, 4_096, 2_000),
        (1 << 20, 1 << 20, 1_000),
    ];
    for measure in [Measure::Dtw, Measure::SoftDtw] {
        for precision in Precision::ALL {
            for (n, m, radius) in cases {
                let (below, above) = (radius + n.saturating_sub(m), radius + m.saturating_sub(n));
                let width = below + above + 1;
                let band_cells: usize = (1..=n)
                    .map(|i| (i + above).min(m) + 1 - i.saturating_sub(below).max(1))
                    .sum();
                for pairs in [1, 4, 100_000] {
                    let kernel =
                        warp_kernel(measure, precision, (n, m), 1, Some(width), (pairs, 528));
                    let driver = kernel.id.driver;
                    let steps = warp_steps(driver, n, m, Some((below, above)));
                    let cells = steps * cells_per_step(driver);
                    let bound = 4 * band_cells + 4 * (n + m) * cells_per_step(driver);
                    assert!(
                        cells <= bound,
                        "{measure} {precision} {n} x {m} radius {radius}, {pairs} pairs: {} \
                         evaluates {cells} cells, over {bound} for {band_cells} in the band",
                        kernel.id
                    );
                }
            }
        }
    }
}

/// The step counts of the three warp drivers on small cases counted by
/// hand.
#[test]
fn warp_steps_count_the_rows_each_driver_walks() {
    let sheared = Driver::Sheared {
        lanes: 32,
        stripe: 4,
    };
    // 10 rows, 7 diagonals in lanes of 4 cells: 2 lanes, one step of skew.
    assert_eq!(warp_steps(sheared, 10, 10, Some((3, 3))), 11);
    let warp = Driver::Warp {
        lanes: 2,
        stripe: 2,
    };
    // Panels of 4 columns of a 10 x 8 matrix: every row twice without a
    // band, a step of skew each.
    assert_eq!(warp_steps(warp, 10, 8, None), 2 * (10 + 1));
    // Radius 1: columns 1..=4 meet rows 1..=5, columns 5..=8 rows 4..=9.
    assert_eq!(warp_steps(warp, 10, 8, Some((1, 1))), (5 + 1) + (6 + 1));
    let skewed = Driver::Skewed {
        groups: 2,
        chain: 1,
    };
    // One panel of 64 columns: every row, 63 steps of skew, band or not.
    assert_eq!(warp_steps(skewed, 10, 64, Some((1, 1))), 10 + 63);
    assert_eq!(warp_steps(skewed, 10, 65, None), 2 * (10 + 63));
}
