//! Batches in page-locked host memory ([`SeriesSet::into_page_locked`]):
//! the GPU copies their values straight from there instead of staging
//! them, and every result equals the ordinary batch's bit for bit (the
//! same bytes reach the device): streamed matrices of the pair kernels
//! (both sides, a set against itself, budgets that cut the work into many
//! chunks and blocks), resident uploads, paired Soft-DTW values and
//! gradients (also of batches large enough that the ordinary ones are
//! staged in pieces), a long pair. Without a GPU, page-locking is an error
//! and the batch's other uses are unchanged.

use crate::common::*;
use timewarp::{
    distance_matrix, distance_matrix_resident, soft_dtw_pairs, soft_dtw_pairs_gradient, upload,
    ComputeOptions, Device, Dtw, Error, Float, Metric, SeriesSet, SoftDtw, Twed, Variant,
};

/// Ragged queries and references (1 to 260 samples), `dims` dimensions,
/// random timestamps when `times`.
fn batches(seed: u64, dims: usize, times: bool) -> (SeriesSet<f64>, SeriesSet<f64>) {
    let mut rng = rng(seed);
    let query_lengths = [1, 2, 17, 64, 130, 33, 5, 200, 90];
    let reference_lengths: Vec<usize> = (0..60).map(|k| 1 + (k * 37) % 260).collect();
    let queries = random_set(&mut rng, &query_lengths, dims, 1.0);
    let references = random_set(&mut rng, &reference_lengths, dims, 1.0);
    if times {
        let queries = with_random_timestamps(&mut rng, queries);
        return (queries, with_random_timestamps(&mut rng, references));
    }
    (queries, references)
}

fn metrics() -> [Metric; 4] {
    [
        Dtw::new().into(),
        Dtw::with_band(5).into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::new(0.5, 1.0, 1.0).unwrap().into(),
    ]
}

fn gpu_with(variant: Option<Variant>, budget: Option<usize>) -> ComputeOptions {
    ComputeOptions {
        device: Device::Gpu,
        gpu_memory_budget: budget,
        gpu_variant: variant,
        ..ComputeOptions::default()
    }
}

// ---------------------------------------------------------------- CPU

/// Without a usable GPU, page-locking is a typed error that says why; the
/// batch itself is untouched by the attempt (it was moved in, so the
/// caller keeps a clone to go on with).
#[test]
fn page_locking_without_a_gpu_is_an_error() {
    if timewarp::gpu::Gpu::get().is_ok() {
        skip("page_locking_without_a_gpu_is_an_error", "there is a GPU");
        return;
    }
    let (queries, _) = batches(1, 2, true);
    assert!(!queries.is_page_locked());
    match queries.clone().into_page_locked() {
        Err(Error::GpuUnavailable(reason)) => {
            assert!(reason.contains("page-locked"), "{reason}")
        }
        other => panic!("expected GpuUnavailable, got {:?}", other.map(|_| ())),
    }
}

// ---------------------------------------------------------------- GPU

/// A page-locked copy equals the batch, says it is page-locked, and its
/// clones and slices are ordinary batches with the same contents.
fn copies_are_the_same_batch() {
    let (queries, _) = batches(2, 3, true);
    let locked = queries.clone().into_page_locked().unwrap();
    assert!(locked.is_page_locked());
    assert_eq!(locked, queries);
    let clone = locked.clone();
    assert!(!clone.is_page_locked());
    assert_eq!(clone, queries);
    let slice = locked.slice(2..5);
    assert!(!slice.is_page_locked());
    assert_eq!(slice, queries.slice(2..5));
    // Page-locking a page-locked batch keeps it.
    let again = locked.into_page_locked().unwrap();
    assert!(again.is_page_locked());
    assert_eq!(again, queries);
    // Timestamps added afterwards are in ordinary memory: the batch is not
    // page-locked as a whole (and is staged like an ordinary one) until it
    // is made so again, which locks the timestamps alone; the same results.
    let (plain, references) = batches(3, 1, false);
    let stamped = with_random_timestamps(&mut rng(4), plain.clone());
    let half = with_random_timestamps(&mut rng(4), plain.into_page_locked().unwrap());
    assert!(!half.is_page_locked());
    assert_eq!(half, stamped);
    let twed: Metric = Twed::new(0.5, 1.0, 1.0).unwrap().into();
    let options = gpu_with(None, Some(48 << 10));
    let expected = distance_matrix(&references, Some(&stamped), twed, &options).unwrap();
    let got = distance_matrix(&references, Some(&half), twed, &options).unwrap();
    assert_eq!(got, expected);
    let whole = half.into_page_locked().unwrap();
    assert!(whole.is_page_locked());
    let got = distance_matrix(&references, Some(&whole), twed, &options).unwrap();
    assert_eq!(got, expected);
}

/// Every streamed and resident matrix from page-locked batches equals the
/// ordinary batches' exactly, whichever side streams and however the
/// budget cuts the work.
fn matrices_equal<T: Float>(dims: usize, times: bool) {
    let (queries, references) = batches(10 + dims as u64, dims, times);
    let queries = queries.cast::<T>().unwrap();
    let references = references.cast::<T>().unwrap();
    let locked_queries = queries.clone().into_page_locked().unwrap();
    let locked_references = references.clone().into_page_locked().unwrap();
    for variant in [None, Some(Variant::Naive)] {
        for metric in metrics() {
            // The naive kernel's workspace cuts a small budget into
            // hundreds of tiles, each a copy and a launch (seconds a call):
            // the default variant covers the tiling.
            let budgets = match variant {
                Some(Variant::Naive) => &[None][..],
                _ => &[None, Some(256 << 10), Some(48 << 10)],
            };
            for &budget in budgets {
                let context = format!("{} {variant:?} {metric:?} budget {budget:?}", T::NAME);
                let options = gpu_with(variant, budget);
                let ordinary = distance_matrix(&queries, Some(&references), metric, &options);
                let ordinary = ordinary.unwrap();
                // Both page-locked, and each side alone (the references
                // stream here: the larger image; the queries when swapped).
                for (a, b) in [
                    (&locked_queries, &locked_references),
                    (&queries, &locked_references),
                    (&locked_queries, &references),
                ] {
                    let got = distance_matrix(a, Some(b), metric, &options).unwrap();
                    assert_eq!(got, ordinary, "{context}");
                }
                let swapped = distance_matrix(&locked_references, Some(&queries), metric, &options);
                let expected = distance_matrix(&references, Some(&queries), metric, &options);
                assert_eq!(swapped.unwrap(), expected.unwrap(), "{context}, swapped");
                let itself = distance_matrix(&locked_references, None, metric, &options);
                let expected = distance_matrix(&references, None, metric, &options);
                assert_eq!(itself.unwrap(), expected.unwrap(), "{context}, itself");
            }
            // Uploaded from page-locked memory, queried from it too.
            let options = gpu_with(variant, None);
            let resident = upload(&locked_references, &options).unwrap();
            let got = distance_matrix_resident(&locked_queries, &resident, metric, &options);
            let expected = distance_matrix(&queries, Some(&references), metric, &options);
            assert_eq!(
                got.unwrap(),
                expected.unwrap(),
                "{variant:?} {metric:?} resident"
            );
        }
    }
}

/// Two random `f32` batches of series of `lengths` samples of `dims` values.
fn f32_batches(
    rng: &mut rand::rngs::StdRng,
    lengths: &[usize],
    dims: usize,
) -> (SeriesSet<f32>, SeriesSet<f32>) {
    let mut batch = || random_set(rng, lengths, dims, 1.0).cast::<f32>().unwrap();
    (batch(), batch())
}

/// Paired Soft-DTW values and gradients (each chunk uploaded for the
/// call, the copies from page-locked memory left running while the
/// launches are enqueued) and a long pair (tiled) from page-locked batches
/// equal the ordinary ones exactly; the batches are dropped right after the
/// calls, so a call that returned before its copies were done would show.
fn paired_and_long_pairs_equal() {
    let mut rng = rng(30);
    let lengths: Vec<usize> = (0..40).map(|k| 1 + (k * 23) % 120).collect();
    let soft = SoftDtw::new(0.3).unwrap();
    for dims in [1, 2] {
        let (x, y) = f32_batches(&mut rng, &lengths, dims);
        for variant in [None, Some(Variant::Warp), Some(Variant::Stencil)] {
            // One chunk, and chunks of a few pairs.
            for budget in [None, Some(64 << 10)] {
                for metric in [soft, soft.divergence()] {
                    let options = gpu_with(variant, budget);
                    let expected = soft_dtw_pairs(&x, &y, metric, &options).unwrap();
                    let (px, py) = (
                        x.clone().into_page_locked().unwrap(),
                        y.clone().into_page_locked().unwrap(),
                    );
                    let got = soft_dtw_pairs(&px, &py, metric, &options).unwrap();
                    drop((px, py));
                    let context = format!("dims {dims} {variant:?} {budget:?} {metric:?}");
                    assert_eq!(got, expected, "{context}");
                }
            }
        }
    }
    let (x, y) = f32_batches(&mut rng, &lengths, 2);
    let options = gpu_with(None, None);
    let expected = soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap();
    let (px, py) = (
        x.clone().into_page_locked().unwrap(),
        y.clone().into_page_locked().unwrap(),
    );
    let got = soft_dtw_pairs_gradient(&px, &py, soft, &options, true).unwrap();
    drop((px, py));
    assert_eq!(got.values, expected.values);
    assert_eq!(got.grad_x, expected.grad_x);
    assert_eq!(got.grad_y, expected.grad_y);

    let long = random_set(&mut rng, &[5000, 4100], 1, 1.0);
    let (a, b) = (long.slice(0..1), long.slice(1..2));
    let metric: Metric = Twed::default().into();
    let expected = distance_matrix(&a, Some(&b), metric, &options).unwrap();
    let (pa, pb) = (a.into_page_locked().unwrap(), b.into_page_locked().unwrap());
    let got = distance_matrix(&pa, Some(&pb), metric, &options).unwrap();
    assert_eq!(got, expected);
}

/// Batches in ordinary memory large enough that their values are staged by
/// several threads and copied in pieces while the rest is written equal
/// the same batches page-locked (copied straight from where they are) bit
/// for bit: ragged and of one length (no offsets), uni- and multivariate,
/// in one chunk and in chunks that start inside the batches, values and
/// gradients.
fn large_paired_batches_equal() {
    let mut rng = rng(31);
    let ragged: Vec<usize> = (0..1500).map(|k| 1 + (k * 131) % 300).collect();
    let soft = SoftDtw::new(0.3).unwrap();
    for (lengths, dims) in [(vec![128; 1024], 1), (ragged.clone(), 1), (ragged, 3)] {
        let (x, y) = f32_batches(&mut rng, &lengths, dims);
        let (px, py) = (
            x.clone().into_page_locked().unwrap(),
            y.clone().into_page_locked().unwrap(),
        );
        for budget in [None, Some(3 << 20)] {
            let options = gpu_with(None, budget);
            let context = format!("{} series of {dims} dimensions, budget {budget:?}", x.len());
            let expected = soft_dtw_pairs(&px, &py, soft, &options).unwrap();
            let got = soft_dtw_pairs(&x, &y, soft, &options).unwrap();
            assert_eq!(got, expected, "{context}");
            assert!(got.iter().all(|v| v.is_finite()), "{context}");
        }
        let options = gpu_with(None, None);
        let expected = soft_dtw_pairs_gradient(&px, &py, soft, &options, true).unwrap();
        let got = soft_dtw_pairs_gradient(&x, &y, soft, &options, true).unwrap();
        assert_eq!(got.values, expected.values);
        assert_eq!(got.grad_x, expected.grad_x);
        assert_eq!(got.grad_y, expected.grad_y);
    }
}

macro_rules! gpu_tests {
    ($($name:ident => $body:expr;)*) => {
        $( #[test]
        fn $name() {
            if let Some(_timed) = on_gpu(stringify!($name)) {
                $body;
            }
        } )*
    };
}

gpu_tests! {
    gpu_page_locked_copies_are_the_same_batch => copies_are_the_same_batch();
    gpu_page_locked_matrices_equal_f32 => matrices_equal::<f32>(1, false);
    gpu_page_locked_matrices_equal_multivariate_f64 => matrices_equal::<f64>(3, true);
    gpu_page_locked_paired_and_long_pairs_equal => paired_and_long_pairs_equal();
    gpu_page_locked_large_paired_batches_equal => large_paired_batches_equal();
}
