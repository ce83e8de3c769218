//! The device crate's host-testable pieces: pair numbering, the DTW band's
//! column ranges, and the row driver with interleaved (GPU-style) rows.

use proptest::prelude::*;
use timewarp_kernels::drivers::rows::{pair_value, RowPair};
use timewarp_kernels::launch::{tile_pairs, triangle_pair};
use timewarp_kernels::measures::window::{band_columns, band_rows};
use timewarp_kernels::{DtwParams, Series, TwedParams};

#[test]
fn triangle_numbering_is_row_major_upper_triangle() {
    for n in 1..=70u64 {
        let mut k = 0;
        for i in 0..n {
            for j in i..n {
                assert_eq!(triangle_pair(k, n), (i, j), "n = {n}, k = {k}");
                k += 1;
            }
        }
        assert_eq!(k, tile_pairs(n, n, true));
    }
}

#[test]
fn triangle_numbering_for_large_batches() {
    // Rows start at i*n - i*(i-1)/2: check the first and last pair of rows
    // spread over the whole range, where a float estimate could be off.
    for n in [1_000u64, 65_537, 1_000_003, 3_000_000] {
        for i in [0, 1, 2, n / 3, n / 2, n - 3, n - 2, n - 1] {
            let start = i * n - i * i.saturating_sub(1) / 2;
            assert_eq!(triangle_pair(start, n), (i, i), "n = {n}, row {i} start");
            assert_eq!(
                triangle_pair(start + (n - 1 - i), n),
                (i, n - 1),
                "n = {n}, row {i} end"
            );
        }
    }
}

proptest! {
    /// The 1-based column range of each row is exactly the set of cells the
    /// band's definition allows, and it moves as the row driver needs.
    #[test]
    fn band_columns_match_the_definition(n in 1usize..40, m in 1usize..40, r in 0usize..12) {
        let mut previous: Option<(usize, usize)> = None;
        for i in 1..=n {
            let (lo, hi) = band_columns(i, n, m, r);
            let allowed = |j: usize| {
                let (i0, j0) = ((i - 1) as i64, (j - 1) as i64);
                let (n, m, r) = (n as i64, m as i64, r as i64);
                i0 - r - (n - m).max(0) <= j0 && j0 <= i0 + r + (m - n).max(0)
            };
            for j in 1..=m {
                prop_assert_eq!(allowed(j), (lo..=hi).contains(&j), "row {}, column {}", i, j);
            }
            if let Some((plo, phi)) = previous {
                prop_assert!(lo >= plo && hi <= phi + 1);
            }
            previous = Some((lo, hi));
        }
        prop_assert_eq!(band_columns(n, n, m, r).1, m, "the last cell is always reachable");
    }

    /// The rows a range of columns gets (what the warp driver's column
    /// bands compute) are exactly the rows whose band meets the range, and
    /// both ends never move up as the range moves right.
    #[test]
    fn band_rows_are_the_rows_whose_band_meets_the_columns(
        n in 1usize..40,
        m in 1usize..40,
        r in 0usize..12,
        width in 1usize..9,
    ) {
        let mut previous: Option<(usize, usize)> = None;
        for first in (1..=m).step_by(width) {
            let last = (first + width - 1).min(m);
            let (lo, hi) = band_rows(first, last, n, m, r);
            for i in 1..=n {
                let (clo, chi) = band_columns(i, n, m, r);
                let meets = clo <= last && first <= chi;
                prop_assert_eq!(meets, (lo..=hi).contains(&i), "row {}, columns {}..={}", i, first, last);
            }
            if let Some((plo, phi)) = previous {
                prop_assert!(lo >= plo && hi >= phi);
            }
            previous = Some((lo, hi));
        }
    }
}

/// Rows interleaved with other pairs' rows (stride > 1, as in GPU global
/// memory) give exactly the result of contiguous rows.
#[test]
fn interleaved_rows_equal_contiguous_rows() {
    let a: Vec<f64> = (0..23).map(|k| ((k * 7) % 11) as f64 * 0.3 - 1.0).collect();
    let b: Vec<f64> = (0..17).map(|k| ((k * 5) % 13) as f64 * 0.2 - 1.2).collect();
    let series = |v: &Vec<f64>| Series {
        values: v.as_ptr(),
        times: std::ptr::null(),
        len: v.len(),
        dims: 1,
    };
    let row_len = b.len() + 1;
    let value = |measure: &dyn Fn(RowPair<f64>) -> f64, stride: usize| {
        let mut buffer = vec![f64::NAN; 2 * row_len * stride];
        measure(RowPair {
            base: buffer.as_mut_ptr(),
            len: row_len,
            stride,
        })
    };
    // SAFETY: the series point into `a` and `b`, alive for the test, and the
    // rows into a buffer of two rows of `row_len` at the stride.
    let dtw =
        |rows| unsafe { pair_value(&DtwParams::new(Some(4)), &series(&a), &series(&b), rows) };
    let twed = |rows| {
        let params = TwedParams::new(0.5, 0.25, 2.0);
        // SAFETY: as for `dtw`.
        unsafe { pair_value(&params, &series(&a), &series(&b), rows) }
    };
    for stride in [2, 7, 32] {
        assert_eq!(value(&dtw, 1), value(&dtw, stride));
        assert_eq!(value(&twed, 1), value(&twed, stride));
    }
    assert!(value(&dtw, 1).is_finite() && value(&twed, 1).is_finite());
}
