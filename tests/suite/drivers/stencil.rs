//! The block driver's own code (the GPU's stencil, gradient and alignment
//! kernels' `stencil_value` and `stencil_backward`) run on emulated thread
//! blocks (`crate::common::emulator::run_block`: a thread per GPU thread, a
//! barrier for `_syncthreads`) against the oracle: every measure's value,
//! Soft-DTW's gradient with respect to both series and its expected
//! alignment (written to the window's cells only), blocks of 1 to 8 threads (fewer
//! than an anti-diagonal's cells, so threads take several), lengths 1 to
//! 20, unequal lengths, dims 1 and 3, bands. f64, tolerances as in
//! `crate::common::tolerance`. Shared memory is sized exactly as the host sizes
//! it, with a NaN-filled guard after it that must stay untouched, and NaN
//! before the run, so a read of a slot nobody wrote shows in the result.

use crate::common::hardware::{run_block, Shared};
use crate::common::{error_scale, oracle_pair, rng, tolerance};
use ndarray::{Array1, Array2};
use timewarp::{oracle, Dtw, Metric, SoftDtw, Twed};
use timewarp_kernels::drivers::antidiagonal_rows;
use timewarp_kernels::drivers::stencil::{
    interior_offset, interior_rows, ring_len, stencil_backward, stencil_gradient, stencil_value,
    Backward, GRADIENT_RINGS, VALUE_RINGS,
};
use timewarp_kernels::{DtwParams, Recurrence, Series, SoftDtwParams, TwedParams, Window};

const GUARD: usize = 16;

fn series_of(x: &Array2<f64>, t: &Array1<f64>) -> Series<f64> {
    Series {
        values: x.as_ptr(),
        times: t.as_ptr(),
        len: x.nrows(),
        dims: x.ncols(),
    }
}

/// Shared memory of `values` f64 slots plus the guard, all NaN.
fn shared_memory(values: usize) -> Vec<u64> {
    vec![f64::NAN.to_bits(); values + GUARD]
}

fn assert_guard(shared: &[u64], values: usize, context: &str) {
    assert!(
        shared[values..].iter().all(|&v| v == f64::NAN.to_bits()),
        "{context}: the driver wrote past its shared memory"
    );
}

/// A random pair with timestamps (TWED uses them).
struct Pair {
    a: Array2<f64>,
    b: Array2<f64>,
    ta: Array1<f64>,
    tb: Array1<f64>,
}

impl Pair {
    fn random(seed: u64, n: usize, m: usize, dims: usize) -> Pair {
        let mut rng = rng(seed);
        let a = crate::common::random_series(&mut rng, n, dims, 1.0);
        let b = crate::common::random_series(&mut rng, m, dims, 1.0);
        let ta = Array1::from_iter((0..n).map(|t| t as f64 * 0.7 + 0.2));
        let tb = Array1::from_iter((0..m).map(|t| t as f64 * 1.3 + 0.1));
        Pair { a, b, ta, tb }
    }
}

/// The pair's value by the block driver on `threads` emulated threads.
fn block_pair<M: Recurrence<f64> + Sync>(measure: &M, pair: &Pair, threads: usize) -> f64 {
    let (a, b) = (series_of(&pair.a, &pair.ta), series_of(&pair.b, &pair.tb));
    let ring = ring_len(a.len, b.len);
    let mut shared = shared_memory(VALUE_RINGS * ring);
    let series = Shared((a, b));
    let values = run_block(threads, &mut shared, |block| {
        use timewarp_kernels::hw::ThreadBlock;
        let (a, b) = series.get();
        // SAFETY: the shared memory holds three rings of `ring` values.
        unsafe {
            stencil_value(
                block,
                measure,
                &a,
                &b,
                block.shared(),
                ring,
                std::ptr::null_mut(),
            )
        }
    });
    assert_guard(&shared, VALUE_RINGS * ring, "block_value");
    assert!(
        values.iter().all(|v| v.to_bits() == values[0].to_bits()),
        "threads disagree on the value: {values:?}"
    );
    values[0]
}

fn check_value<M: Recurrence<f64> + Sync>(params: &M, metric: Metric, pair: &Pair) {
    let expected = oracle_pair(pair.a.view(), &pair.ta, pair.b.view(), &pair.tb, metric);
    let (n, m, d) = (pair.a.nrows(), pair.b.nrows(), pair.a.ncols());
    let bound =
        tolerance::<f64>(n, m, d) * error_scale(pair.a.view(), pair.b.view(), expected, metric);
    for threads in [1, 3, 8] {
        let got = block_pair(params, pair, threads);
        assert!(
            (got - expected).abs() <= bound,
            "{metric:?}, {n} x {m}, dims {d}, {threads} threads: got {got:e}, oracle {expected:e}"
        );
    }
}

#[test]
fn anti_diagonal_layout() {
    for n in 1..12 {
        for m in 1..12 {
            let mut cells = 0;
            for d in 2..=n + m {
                let (first, last) = interior_rows(d, n, m);
                assert_eq!(interior_offset(d, n, m), cells, "{n} x {m}, diagonal {d}");
                assert!(first <= last && last - first < ring_len(n, m));
                cells += last - first + 1;
                let (lo, hi) = antidiagonal_rows(d, n, m);
                assert!(lo <= first && last <= hi && hi - lo < ring_len(n, m));
            }
            assert_eq!(cells, n * m);
            assert_eq!(interior_offset(n + m + 1, n, m), n * m);
        }
    }
}

#[test]
fn stencil_values_match_the_oracle() {
    let shapes = [
        (1, 1),
        (1, 6),
        (6, 1),
        (2, 2),
        (3, 3),
        (7, 12),
        (12, 7),
        (20, 20),
    ];
    for (k, &(n, m)) in shapes.iter().enumerate() {
        for dims in [1, 3] {
            let pair = Pair::random(500 + 10 * k as u64 + dims as u64, n, m, dims);
            for band in [None, Some(0), Some(2)] {
                let params = DtwParams::new(band);
                let metric = band.map_or(Dtw::new(), Dtw::with_band).into();
                check_value(&params, metric, &pair);
                for gamma in [0.1, 1.0] {
                    let params = SoftDtwParams::new(gamma).with_band(band);
                    let soft = SoftDtw::new(gamma).unwrap();
                    let metric = band.map_or(soft, |r| soft.with_band(r)).into();
                    check_value(&params, metric, &pair);
                }
            }
            let params = TwedParams::new(0.5, 1.0, 2.0);
            check_value(&params, Twed::new(0.5, 1.0, 2.0).unwrap().into(), &pair);
        }
    }
}

/// Value and gradients (with respect to `a` and `b`) by the block drivers
/// on `threads` emulated threads, and the stored cost matrix.
fn block_gradient_of(
    params: &SoftDtwParams<f64>,
    pair: &Pair,
    threads: usize,
) -> (f64, Array2<f64>, Array2<f64>) {
    let (a, b) = (series_of(&pair.a, &pair.ta), series_of(&pair.b, &pair.tb));
    let ring = ring_len(a.len, b.len);
    let mut shared = shared_memory(GRADIENT_RINGS * ring);
    let mut store = vec![f64::NAN; a.len * b.len];
    let mut grad_a = Array2::<f64>::zeros(pair.a.raw_dim());
    let mut grad_b = Array2::<f64>::zeros(pair.b.raw_dim());
    let pointers = Shared((
        a,
        b,
        store.as_mut_ptr(),
        grad_a.as_mut_ptr(),
        grad_b.as_mut_ptr(),
    ));
    let values = run_block(threads, &mut shared, |block| {
        use timewarp_kernels::hw::ThreadBlock;
        let (a, b, store, grad_a, grad_b) = pointers.get();
        let ring_ptr = block.shared::<f64>();
        // SAFETY: six rings of `ring` values; the store holds n x m cells,
        // the gradients the series' shapes.
        unsafe {
            let value = stencil_value(block, params, &a, &b, ring_ptr, ring, store);
            block.barrier();
            stencil_gradient(block, params, &a, &b, ring_ptr, ring, store, grad_a, grad_b);
            value
        }
    });
    assert_guard(&shared, GRADIENT_RINGS * ring, "block_gradient");
    if !params.window.is_banded() {
        assert!(store.iter().all(|v| v.is_finite()), "a cell was not stored");
    }
    (values[0], grad_a, grad_b)
}

#[test]
fn stencil_gradients_match_the_oracle() {
    let shapes = [(1, 1), (1, 5), (5, 1), (2, 3), (9, 9), (13, 6), (6, 13)];
    for (k, &(n, m)) in shapes.iter().enumerate() {
        for dims in [1, 3] {
            let pair = Pair::random(700 + 10 * k as u64 + dims as u64, n, m, dims);
            for band in [None, Some(0), Some(2)] {
                for gamma in [0.1, 1.0] {
                    let params = SoftDtwParams::new(gamma).with_band(band);
                    let (value, grad_a) = oracle::soft_dtw_with_gradient_banded(
                        pair.a.view(),
                        pair.b.view(),
                        gamma,
                        band,
                    );
                    let (_, grad_b) = oracle::soft_dtw_with_gradient_banded(
                        pair.b.view(),
                        pair.a.view(),
                        gamma,
                        band,
                    );
                    let metric: Metric = SoftDtw::new(gamma).unwrap().into();
                    let scale = error_scale(pair.a.view(), pair.b.view(), value, metric);
                    let largest = grad_a
                        .iter()
                        .chain(grad_b.iter())
                        .fold(0.0f64, |s, g| s.max(g.abs()));
                    // As tests/soft_dtw_gradient.rs: 64 u (scale / gamma + 2 (n + m)).
                    let bound = 64.0 * f64::EPSILON / 2.0
                        * (scale / gamma + 2.0 * (n + m) as f64)
                        * largest;
                    for threads in [1, 4, 5] {
                        let context =
                            format!("{n} x {m}, dims {dims}, band {band:?}, gamma {gamma}, {threads} threads");
                        let (got, ga, gb) = block_gradient_of(&params, &pair, threads);
                        assert!(
                            (got - value).abs() <= 1e-12 * scale,
                            "{context}: value {got} vs {value}"
                        );
                        for (g, e) in ga.iter().zip(grad_a.iter()) {
                            assert!((g - e).abs() <= bound, "{context}: grad a {g} vs {e}");
                        }
                        for (g, e) in gb.iter().zip(grad_b.iter()) {
                            assert!((g - e).abs() <= bound, "{context}: grad b {g} vs {e}");
                        }
                    }
                }
            }
        }
    }
}

/// Value and alignment matrix by the block drivers on `threads` emulated
/// threads; the matrix starts as NaN, so cells the driver leaves alone
/// show.
fn block_alignment_of(
    params: &SoftDtwParams<f64>,
    pair: &Pair,
    threads: usize,
) -> (f64, Array2<f64>) {
    let (a, b) = (series_of(&pair.a, &pair.ta), series_of(&pair.b, &pair.tb));
    let ring = ring_len(a.len, b.len);
    let mut shared = shared_memory(GRADIENT_RINGS * ring);
    let mut store = vec![f64::NAN; a.len * b.len];
    let mut alignment = Array2::<f64>::from_elem((a.len, b.len), f64::NAN);
    let pointers = Shared((a, b, store.as_mut_ptr(), alignment.as_mut_ptr()));
    let values = run_block(threads, &mut shared, |block| {
        use timewarp_kernels::hw::ThreadBlock;
        let (a, b, store, alignment) = pointers.get();
        let ring_ptr = block.shared::<f64>();
        // SAFETY: six rings of `ring` values; the store and the alignment
        // hold n x m cells.
        unsafe {
            let value = stencil_value(block, params, &a, &b, ring_ptr, ring, store);
            block.barrier();
            let output = Backward::Alignment(alignment);
            stencil_backward(block, params, &a, &b, ring_ptr, ring, store, output);
            value
        }
    });
    assert_guard(&shared, GRADIENT_RINGS * ring, "block_alignment");
    (values[0], alignment)
}

/// The alignment within `4 (n + m) u (1 + scale / gamma)` of the oracle's
/// (tests/suite/paths/soft_dtw.rs derives it), in the window; outside it
/// untouched (the host zeroes those cells, the kernel never writes them).
#[test]
fn stencil_alignments_match_the_oracle() {
    let shapes = [(1, 1), (1, 5), (5, 1), (2, 3), (9, 9), (13, 6), (6, 13)];
    for (k, &(n, m)) in shapes.iter().enumerate() {
        for dims in [1, 3] {
            let pair = Pair::random(900 + 10 * k as u64 + dims as u64, n, m, dims);
            for band in [None, Some(0), Some(2)] {
                for gamma in [0.01, 1.0, 10.0] {
                    let params = SoftDtwParams::new(gamma).with_band(band);
                    let (expected_e, value) =
                        oracle::soft_dtw_alignment(pair.a.view(), pair.b.view(), gamma, band);
                    let metric: Metric = SoftDtw::new(gamma).unwrap().into();
                    let scale = error_scale(pair.a.view(), pair.b.view(), value, metric);
                    let bound = 4.0 * (n + m) as f64 * f64::EPSILON / 2.0 * (1.0 + scale / gamma);
                    for threads in [1, 4, 5] {
                        let context = format!(
                            "{n} x {m}, dims {dims}, band {band:?}, gamma {gamma}, {threads} threads"
                        );
                        let (got, e) = block_alignment_of(&params, &pair, threads);
                        assert!(
                            (got - value).abs() <= 1e-12 * scale,
                            "{context}: value {got} vs {value}"
                        );
                        for ((i, j), &g) in e.indexed_iter() {
                            let (lo, hi) = params.window.columns(i + 1, n, m);
                            if (lo..=hi).contains(&(j + 1)) {
                                let want = expected_e[[i, j]];
                                assert!(
                                    (g - want).abs() <= bound,
                                    "{context}: E[{i}][{j}] {g} vs {want}"
                                );
                            } else {
                                assert!(
                                    g.is_nan(),
                                    "{context}: E[{i}][{j}] outside the band written"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
