//! Subsequence search on the GPU (`SearchOptions::on(Device::Gpu)`): the
//! CPU's matches, the same starts and the same distances bit for bit, on
//! random walks with constant stretches, several `k` and exclusion zones,
//! bands 0, as a fraction and as a count, z-normalisation on and off,
//! multivariate series, matches across the GPU's chunks, many chunks (a
//! small `chunk` option: later chunks pruned and compacted on the device at
//! a finite cutoff), a series read from a file; the CLI's
//! `--device gpu`. Without a GPU these skip (and `Device::Gpu` is an
//! error, checked here), unless `REQUIRE_GPU=1`.

use crate::cli::timewarp;
use crate::common::{on_gpu, rng};
use ndarray::Array2;
use rand::rngs::StdRng;
use rand::Rng;
use rand_distr::StandardNormal;
use timewarp::search::{subsequences, Band, SearchOptions, SearchResult, SeriesFile};
use timewarp::{gpu, Device, Error};

/// A random walk, `n x dims`, with constant stretches (windows of std 0)
/// and scaled, noisy copies of `query` planted at `at`.
fn walk(
    rng: &mut StdRng,
    n: usize,
    dims: usize,
    query: Option<(&Array2<f64>, &[usize])>,
) -> Array2<f64> {
    let mut x = Array2::zeros((n, dims));
    for k in 0..dims {
        let mut v = rng.random_range(-5.0..5.0);
        for i in 0..n {
            v += rng.sample::<f64, _>(StandardNormal);
            x[[i, k]] = v;
        }
    }
    // Constant stretches (zero standard deviation) in series, not in the
    // short queries.
    let stretches = if n >= 1000 { 3 } else { 0 };
    for _ in 0..stretches {
        let at = rng.random_range(0..n - 200);
        let level = x[[at, 0]];
        x.slice_mut(ndarray::s![at..at + 150, ..]).fill(level);
    }
    if let Some((query, starts)) = query {
        for &at in starts {
            let scale = rng.random_range(0.5..3.0);
            for i in 0..query.nrows() {
                for k in 0..dims {
                    x[[at + i, k]] =
                        1.0 + scale * query[[i, k]] + 0.01 * rng.sample::<f64, _>(StandardNormal);
                }
            }
        }
    }
    x
}

/// The GPU's result and the CPU's: the same matches, bit for bit, and
/// every start a candidate; the GPU's statistics add up.
fn assert_same(gpu: &SearchResult, cpu: &SearchResult, context: &str) {
    assert_eq!(gpu.matches.len(), cpu.matches.len(), "{context}");
    for (g, c) in gpu.matches.iter().zip(&cpu.matches) {
        assert_eq!(g.start, c.start, "{context}: {gpu:?} {cpu:?}");
        assert_eq!(
            g.distance.to_bits(),
            c.distance.to_bits(),
            "{context}: start {}",
            g.start
        );
    }
    assert_eq!((gpu.radius, gpu.exclusion), (cpu.radius, cpu.exclusion));
    let s = gpu.stats;
    assert_eq!(s.candidates, cpu.stats.candidates, "{context}");
    assert_eq!(s.kim + s.keogh_query + s.keogh_data + s.dtw, s.candidates);
    assert!(s.abandoned <= s.dtw, "{context}");
}

/// Searches `series` for `query` with `options` on both devices, and on
/// the GPU twice: the same statistics too (the survivors a chunk's bounds
/// kernel lists, in whatever order, are sorted before their DTWs).
fn both(query: &Array2<f64>, series: &Array2<f64>, options: SearchOptions, context: &str) {
    let cpu = subsequences(query.view(), &series.view(), &options.on(Device::Cpu)).unwrap();
    let gpu = subsequences(query.view(), &series.view(), &options.on(Device::Gpu)).unwrap();
    assert_same(&gpu, &cpu, context);
    let again = subsequences(query.view(), &series.view(), &options.on(Device::Gpu)).unwrap();
    assert_eq!(again.matches, gpu.matches, "{context}");
    assert_eq!(again.stats, gpu.stats, "{context}");
}

#[test]
fn without_a_gpu_the_gpu_search_is_an_error() {
    if gpu::Gpu::get().is_ok() {
        return;
    }
    let series: Vec<f64> = (0..500).map(|i| (i as f64 * 0.1).sin()).collect();
    let query = Array2::from_shape_fn((20, 1), |(i, _)| series[100 + i]);
    let options = SearchOptions::default().on(Device::Gpu);
    let result = subsequences(query.view(), &series[..], &options);
    assert!(
        matches!(result, Err(Error::GpuUnavailable(_))),
        "{result:?}"
    );
    // Auto: a short series is searched on the CPU, with or without a GPU.
    let auto = subsequences(query.view(), &series[..], &options.on(Device::Auto)).unwrap();
    assert_eq!(auto.matches[0].start, 100);
}

#[test]
fn gpu_search_equals_the_cpu_on_random_walks() {
    let Some(_gpu) = on_gpu("search_gpu::gpu_search_equals_the_cpu_on_random_walks") else {
        return;
    };
    let mut rng = rng(41);
    for (case, (m, band, k, exclusion, znorm)) in [
        (64, Band::Fraction(0.05), 1, None, true),
        (64, Band::Count(0), 5, None, true),
        (100, Band::Fraction(0.1), 3, Some(1), true),
        (32, Band::Count(4), 10, Some(200), true),
        (50, Band::Fraction(1.0), 4, None, true),
        (64, Band::Count(6), 3, None, false),
        (128, Band::Count(0), 2, Some(0), false),
    ]
    .into_iter()
    .enumerate()
    {
        let query = walk(&mut rng, m, 1, None);
        let series = walk(&mut rng, 30_000, 1, Some((&query, &[500, 9000, 20_000])));
        let mut options = SearchOptions::default()
            .with_band(band)
            .with_k(k)
            .with_znorm(znorm);
        if let Some(e) = exclusion {
            options = options.with_exclusion(e);
        }
        both(&query, &series, options, &format!("case {case}"));
        // The same with many chunks on the GPU (64 units of 100 starts).
        both(
            &query,
            &series,
            options.with_chunk(100),
            &format!("case {case}, chunk 100"),
        );
    }
}

/// Copies of the query across the GPU's chunk boundaries (chunks of 64 *
/// `chunk` starts, each read with `m - 1` samples more) and at both ends.
#[test]
fn gpu_matches_straddling_chunks_are_found() {
    let Some(_gpu) = on_gpu("search_gpu::gpu_matches_straddling_chunks_are_found") else {
        return;
    };
    let mut rng = rng(42);
    let m = 80;
    let query = walk(&mut rng, m, 1, None);
    let n = 50_000;
    for chunk in [37, 100, 256] {
        let gpu_chunk = 64 * chunk;
        let starts = [0, gpu_chunk - m / 2, 3 * gpu_chunk - 1, n - m];
        let series = walk(&mut rng, n, 1, Some((&query, &starts)));
        let options = SearchOptions::default().with_k(4).with_chunk(chunk);
        let gpu_found =
            subsequences(query.view(), &series.view(), &options.on(Device::Gpu)).unwrap();
        let mut found: Vec<usize> = gpu_found.matches.iter().map(|m| m.start).collect();
        found.sort();
        assert_eq!(found, starts.to_vec(), "chunk {chunk}");
        both(&query, &series, options, &format!("chunk {chunk}"));
    }
}

#[test]
fn gpu_search_of_constant_stretches_and_constant_queries() {
    let Some(_gpu) = on_gpu("search_gpu::gpu_search_of_constant_stretches_and_constant_queries")
    else {
        return;
    };
    let mut series = Array2::from_shape_fn((5000, 1), |(i, _)| ((i * i) % 17) as f64);
    series.slice_mut(ndarray::s![500..900, ..]).fill(4.5);
    series.slice_mut(ndarray::s![3000..3100, ..]).fill(-1.0);
    let flat = Array2::from_elem((20, 1), -3.0);
    let varied = Array2::from_shape_fn((20, 1), |(i, _)| (i % 5) as f64);
    for query in [&flat, &varied] {
        for k in [1, 3, 8] {
            for znorm in [true, false] {
                let options = SearchOptions::default().with_k(k).with_znorm(znorm);
                both(query, &series, options, &format!("k {k} znorm {znorm}"));
                both(query, &series, options.with_chunk(7), "chunk 7");
            }
        }
    }
}

#[test]
fn gpu_search_of_multivariate_series() {
    let Some(_gpu) = on_gpu("search_gpu::gpu_search_of_multivariate_series") else {
        return;
    };
    let mut rng = rng(43);
    for dims in [2, 3] {
        let query = walk(&mut rng, 48, dims, None);
        let series = walk(&mut rng, 20_000, dims, Some((&query, &[1000, 15_000])));
        for band in [Band::Count(0), Band::Fraction(0.1)] {
            let options = SearchOptions::default().with_band(band).with_k(3);
            both(&query, &series, options, &format!("dims {dims}"));
            both(&query, &series, options.with_chunk(50), "chunk 50");
        }
    }
}

/// A series of 2^20 and more samples, read from a file in chunks:
/// `Auto` (on the GPU or the CPU, by the host's threads: `auto_gpu_samples`)
/// and the GPU find the CPU's matches.
#[test]
fn gpu_search_of_a_long_file() {
    let Some(_gpu) = on_gpu("search_gpu::gpu_search_of_a_long_file") else {
        return;
    };
    let mut rng = rng(44);
    let query = walk(&mut rng, 128, 1, None);
    let n = (1 << 20) + 12_345;
    let series = walk(&mut rng, n, 1, Some((&query, &[77, 600_000, n - 128])));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("series.f64");
    let bytes: Vec<u8> = series.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&path, bytes).unwrap();
    let file = SeriesFile::open(&path).unwrap();
    let options = SearchOptions::default().with_k(5);
    let cpu = subsequences(query.view(), &file, &options.on(Device::Cpu)).unwrap();
    for device in [Device::Gpu, Device::Auto] {
        let gpu = subsequences(query.view(), &file, &options.on(device)).unwrap();
        assert_same(&gpu, &cpu, &format!("{device:?}"));
    }
}

#[test]
fn gpu_search_from_the_cli() {
    let Some(_gpu) = on_gpu("search_gpu::gpu_search_from_the_cli") else {
        return;
    };
    let mut rng = rng(45);
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
            .args(["search", "--k", "3", "--device", device])
            .arg(&query_path)
            .arg(&series_path)
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    assert_eq!(run("gpu"), run("cpu"));
}
