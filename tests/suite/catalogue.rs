//! The kernel catalogue against the PTX, both ways: every kernel the
//! catalogue names is an entry point of the embedded PTX, and every entry
//! point of the PTX is in the catalogue. Also the names themselves, which
//! follow the rule `kernels-gpu/src/catalogue.rs` states, and the typed
//! variants' names.

use std::collections::BTreeSet;
use timewarp::{gpu, Variant};
use timewarp_kernels::{Driver, KernelId, Measure, Precision};

#[test]
fn the_catalogue_and_the_ptx_name_the_same_kernels() {
    if gpu::ptx().is_none() {
        let reason = gpu::kernels_build_error().unwrap_or("no PTX");
        crate::common::skip(
            "catalogue::the_catalogue_and_the_ptx_name_the_same_kernels",
            reason,
        );
        return;
    }
    let catalogue: BTreeSet<String> = KernelId::all().map(|id| id.to_string()).collect();
    let ptx: BTreeSet<String> = gpu::ptx_entries().into_iter().map(String::from).collect();
    let missing: Vec<_> = catalogue.difference(&ptx).collect();
    let unlisted: Vec<_> = ptx.difference(&catalogue).collect();
    assert!(
        missing.is_empty(),
        "in the catalogue, not in the PTX: {missing:?}"
    );
    assert!(
        unlisted.is_empty(),
        "in the PTX, not in the catalogue: {unlisted:?}"
    );
    assert_eq!(catalogue.len(), KernelId::all().count(), "duplicate names");
}

#[test]
fn kernel_names_follow_the_rule() {
    let name = |measure, driver, univariate, precision| {
        KernelId::new(measure, driver, univariate, precision).to_string()
    };
    use Precision::{F32, F64};
    let warp = |lanes, stripe| Driver::Warp { lanes, stripe };
    assert_eq!(
        name(Measure::Dtw, warp(32, 16), true, F32),
        "dtw_warp16_1d_f32"
    );
    assert_eq!(
        name(Measure::Dtw, warp(8, 16), false, F64),
        "dtw_warp8x16_f64"
    );
    assert_eq!(
        name(Measure::SoftDtw, Driver::Gradient, false, F32),
        "soft_dtw_gradient_f32"
    );
    assert_eq!(
        name(
            Measure::Twed,
            Driver::TiledLaunches { stripe: 8 },
            true,
            F64
        ),
        "twed_tiled_launches8_1d_f64"
    );
    assert_eq!(
        name(Measure::Twed, Driver::Local { capacity: 256 }, false, F64),
        "twed_local256_f64"
    );
    // Drivers without a twin ignore `univariate`.
    assert_eq!(
        name(Measure::Dtw, Driver::Naive, true, F32),
        "dtw_naive_f32"
    );
    // Every measure has every variant's driver, in both precisions.
    for measure in Measure::ALL {
        for driver in [
            Driver::Naive,
            Driver::Shared,
            Driver::Diagonal,
            Driver::DiagonalStep,
            Driver::Stencil,
        ] {
            for precision in Precision::ALL {
                assert!(KernelId::new(measure, driver, false, precision).exists());
            }
        }
        let drivers: Vec<_> = timewarp_kernels::catalogue::drivers(measure).collect();
        for kind in ["local", "warp", "tiled", "tiled_launches"] {
            assert!(
                drivers.iter().any(|d| d
                    .to_string()
                    .trim_end_matches(|c: char| c.is_ascii_digit() || c == 'x')
                    == kind),
                "{measure} has no {kind} kernel"
            );
        }
    }
    assert_eq!(
        name(Measure::SoftDtw, Driver::Alignment, false, F64),
        "soft_dtw_alignment_f64"
    );
    for driver in [Driver::Gradient, Driver::Alignment] {
        for precision in Precision::ALL {
            assert!(KernelId::new(Measure::SoftDtw, driver, false, precision).exists());
        }
        assert!(!KernelId::new(Measure::Dtw, driver, false, F64).exists());
    }
}

#[test]
fn variants_parse_their_own_names_only() {
    for variant in Variant::ALL {
        assert_eq!(variant.name().parse::<Variant>().unwrap(), variant);
        assert_eq!(variant.to_string(), variant.name());
    }
    let error = "warps".parse::<Variant>().unwrap_err().to_string();
    assert!(
        error.contains("warps") && error.contains("tiled-launches"),
        "{error}"
    );
}
