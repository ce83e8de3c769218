//! Open-ended subsequence alignment on the GPU (`subsequence_alignment`
//! with `Device::Gpu`): the CPU's result, the same start, end and cost bit
//! for bit and the same path, for queries of 1 to 4096 samples, one and
//! three dimensions, ties, huge and tiny values; series streamed in many
//! chunks and segments (a forced shape), matches straddling a chunk's end,
//! a path across every segment, series read from files and in `f32`; the
//! CLI's `search --align --device gpu`. Without a GPU these skip (and
//! `Device::Gpu` is an error, checked here), unless `REQUIRE_GPU=1`.

use crate::cli::timewarp;
use crate::common::{on_gpu, random_series, rng};
use ndarray::Array2;
use rand::rngs::StdRng;
use rand::Rng;
use timewarp::search::{subsequence_alignment, SeriesFile, SeriesSource, SubsequenceAlignment};
use timewarp::{gpu, internals, Device, Error};

/// A random walk, `n x dims`, with noisy copies of `query` planted at each
/// of `starts`.
fn walk(
    rng: &mut StdRng,
    n: usize,
    dims: usize,
    query: Option<(&Array2<f64>, &[usize])>,
) -> Array2<f64> {
    let mut x = random_series(rng, n, dims, 1.0);
    for i in 1..n {
        for k in 0..dims {
            x[[i, k]] += x[[i - 1, k]];
        }
    }
    if let Some((query, starts)) = query {
        for &at in starts {
            for i in 0..query.nrows().min(n - at) {
                for k in 0..dims {
                    x[[at + i, k]] = query[[i, k]] + 0.01 * rng.random_range(-1.0..1.0);
                }
            }
        }
    }
    x
}

/// The GPU's result and the CPU's: the same start, end, cost bits and path.
fn assert_same(gpu: &SubsequenceAlignment, cpu: &SubsequenceAlignment, context: &str) {
    assert_eq!((gpu.start, gpu.end), (cpu.start, cpu.end), "{context}");
    assert_eq!(gpu.cost.to_bits(), cpu.cost.to_bits(), "{context}");
    assert_eq!(gpu.path, cpu.path, "{context}");
}

/// `series` aligned on both devices: the same result, or the same error.
fn both<S: SeriesSource + ?Sized>(query: &Array2<f64>, series: &S, context: &str) {
    let cpu = subsequence_alignment(query.view(), series, Device::Cpu);
    let gpu = subsequence_alignment(query.view(), series, Device::Gpu);
    match (gpu, cpu) {
        (Ok(gpu), Ok(cpu)) => assert_same(&gpu, &cpu, context),
        (Err(gpu), Err(cpu)) => assert_eq!(gpu.to_string(), cpu.to_string(), "{context}"),
        (gpu, cpu) => panic!("{context}: the GPU gave {gpu:?}, the CPU {cpu:?}"),
    }
}

/// Forces the GPU's chunks, tiles and segments on this thread while it
/// lives.
struct Forced;

impl Forced {
    fn shape(chunk: usize, tile: usize, segment: usize) -> Forced {
        internals::force_alignment_shape(Some((chunk, tile, segment)));
        Forced
    }
}

impl Drop for Forced {
    fn drop(&mut self) {
        internals::force_alignment_shape(None);
    }
}

#[test]
fn without_a_gpu_the_gpu_alignment_is_an_error() {
    if gpu::Gpu::get().is_ok() {
        return;
    }
    let series: Vec<f64> = (0..500).map(|i| (i as f64 * 0.1).sin()).collect();
    let query = Array2::from_shape_fn((20, 1), |(i, _)| series[100 + i]);
    let result = subsequence_alignment(query.view(), &series[..], Device::Gpu);
    assert!(
        matches!(result, Err(Error::GpuUnavailable(_))),
        "{result:?}"
    );
    // Auto: the CPU, without a GPU.
    let auto = subsequence_alignment(query.view(), &series[..], Device::Auto).unwrap();
    assert_eq!((auto.start, auto.end, auto.cost), (100, 119, 0.0));
}

#[test]
fn gpu_alignment_equals_the_cpu_for_every_query_length() {
    let Some(_gpu) = on_gpu("subsequence_gpu::gpu_alignment_equals_the_cpu_for_every_query_length")
    else {
        return;
    };
    let mut rng = rng(91);
    for m in [1, 2, 31, 32, 33, 100, 128, 300] {
        for dims in [1, 3] {
            let query = walk(&mut rng, m, dims, None);
            let n = 20_000 + rng.random_range(0..1000);
            let at = rng.random_range(0..n - m);
            let series = walk(&mut rng, n, dims, Some((&query, &[at])));
            both(&query, &series.view(), &format!("m {m}, dims {dims}"));
        }
    }
    // Series shorter than the query, and of one sample.
    for n in [1, 7, 100] {
        let query = walk(&mut rng, 150, 2, None);
        let series = walk(&mut rng, n, 2, None);
        both(&query, &series.view(), &format!("a series of {n}"));
    }
}

/// Many chunks of a few segments of small tiles (a forced shape): every
/// segment reruns, matches straddle chunks and segments, a path stays in
/// one row across every segment of a chunk and into the next; the series
/// from an `.npy` file and in `f32`.
#[test]
fn gpu_alignment_in_many_chunks_and_segments() {
    let Some(_gpu) = on_gpu("subsequence_gpu::gpu_alignment_in_many_chunks_and_segments") else {
        return;
    };
    let _forced = Forced::shape(5000, 64, 256);
    let mut rng = rng(92);
    // Each query sample twice, across the end of the fourth chunk.
    let query = random_series(&mut rng, 24, 1, 3.0);
    let mut series = random_series(&mut rng, 40_000, 1, 1.0);
    for i in 0..48 {
        series[[19_980 + i, 0]] = query[[i / 2, 0]];
    }
    let found = subsequence_alignment(query.view(), &series.view(), Device::Gpu).unwrap();
    assert_eq!((found.start, found.end, found.cost), (19_981, 20_026, 0.0));
    both(&query, &series.view(), "planted across chunks");
    for (m, dims) in [(1, 1), (40, 1), (40, 3), (200, 2)] {
        let query = walk(&mut rng, m, dims, None);
        let series = walk(&mut rng, 23_456, dims, Some((&query, &[4990, 15_000])));
        both(
            &query,
            &series.view(),
            &format!("chunks, m {m}, dims {dims}"),
        );
        let narrow = series.mapv(|v| v as f32);
        both(&query, &narrow.view(), &format!("f32, m {m}, dims {dims}"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("series.npy");
        ndarray_npy::write_npy(&path, &series).unwrap();
        let file = SeriesFile::open(&path).unwrap();
        both(&query, &file, &format!("file, m {m}, dims {dims}"));
    }
    // A path of cost 0 in the query's second row from the first sample to
    // the last: a rerun of one segment after another, in every chunk.
    let mut flat = Array2::zeros((12_000, 1));
    flat[[0, 0]] = 1000.0;
    let query = Array2::from_shape_vec((2, 1), vec![1000.0, 0.0]).unwrap();
    both(&query, &flat.view(), "a path across every segment");
}

/// Small integers, constant series, huge values (an overflow on both),
/// tiny ones (subnormal squares).
#[test]
fn gpu_alignment_of_ties_and_extreme_values() {
    let Some(_gpu) = on_gpu("subsequence_gpu::gpu_alignment_of_ties_and_extreme_values") else {
        return;
    };
    let mut rng = rng(93);
    for case in 0..6 {
        let dims = [1, 2][case % 2];
        let integers = |rng: &mut StdRng, len: usize| {
            Array2::from_shape_fn((len, dims), |_| f64::from(rng.random_range(0..3_i32)))
        };
        let query = integers(&mut rng, [1, 5, 40][case % 3]);
        let mut series = integers(&mut rng, 30_000);
        if case >= 3 {
            series.fill(1.0);
        }
        both(&query, &series.view(), &format!("ties, case {case}"));
    }
    for scale in [1e200, 1e150, 1e-150, 1e-160, 1e-300] {
        for dims in [1, 3] {
            let series = random_series(&mut rng, 5000, dims, scale);
            let query = random_series(&mut rng, 50, dims, scale);
            both(
                &query,
                &series.view(),
                &format!("scale {scale:e}, dims {dims}"),
            );
        }
    }
}

/// Queries in many panels of the warp (128 rows each), to 4096 samples.
#[test]
fn gpu_alignment_of_long_queries() {
    let Some(_gpu) = on_gpu("subsequence_gpu::gpu_alignment_of_long_queries") else {
        return;
    };
    let mut rng = rng(94);
    for (m, dims) in [(1000, 1), (4096, 1), (1500, 2)] {
        let query = walk(&mut rng, m, dims, None);
        let series = walk(&mut rng, 40_000, dims, Some((&query, &[10_000])));
        both(&query, &series.view(), &format!("m {m}, dims {dims}"));
    }
}

#[test]
fn gpu_alignment_from_the_cli() {
    let Some(_gpu) = on_gpu("subsequence_gpu::gpu_alignment_from_the_cli") else {
        return;
    };
    let mut rng = rng(95);
    let query = walk(&mut rng, 60, 1, None);
    let series = walk(&mut rng, 20_000, 1, Some((&query, &[4000])));
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, values: &Array2<f64>| {
        let path = dir.path().join(name);
        let text: String = values.iter().map(|v| format!("{v:?}\n")).collect();
        std::fs::write(&path, text).unwrap();
        path
    };
    let (query_path, series_path) = (write("q.txt", &query), write("s.txt", &series));
    let run = |device: &str| {
        let out = timewarp()
            .args(["search", "--align", "--device", device])
            .arg(&query_path)
            .arg(&series_path)
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    assert_eq!(run("gpu"), run("cpu"));
}
