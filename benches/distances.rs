//! Criterion benchmarks: distance matrices of CBF batches for each measure,
//! on the CPU backend and on each batch GPU kernel variant, and one long
//! pair on each pair-at-a-time variant (when a GPU is usable). Throughput is
//! in DP cells (`count^2 * length^2`), so criterion's elements/s is cells
//! per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use timewarp::{
    distance_matrix, gpu::Gpu, ComputeOptions, Device, Dtw, Metric, SoftDtw, Twed, Variant,
};

/// (series per batch, length) of each benchmarked size.
const SIZES: [(usize, usize); 2] = [(64, 128), (32, 512)];

/// Length of the long pair.
const PAIR_LENGTH: usize = 16384;

fn backends(pair_variants: bool) -> Vec<(String, ComputeOptions)> {
    let mut list = vec![("cpu".to_string(), ComputeOptions::on(Device::Cpu))];
    if pair_variants {
        list.clear(); // the CPU takes seconds a pair at this length
    }
    match Gpu::get() {
        Ok(_) => {
            let wanted = Variant::ALL
                .into_iter()
                .filter(|v| v.is_pair_by_pair() == pair_variants);
            for variant in wanted {
                list.push((
                    format!("gpu-{variant}"),
                    ComputeOptions {
                        device: Device::Gpu,
                        gpu_variant: Some(variant),
                        ..ComputeOptions::default()
                    },
                ));
            }
        }
        Err(reason) => eprintln!("GPU benchmarks skipped: {reason}"),
    }
    list
}

fn distances(c: &mut Criterion) {
    let metrics: [(&str, Metric); 3] = [
        ("dtw", Dtw::new().into()),
        ("soft-dtw", SoftDtw::new(1.0).unwrap().into()),
        ("twed", Twed::default().into()),
    ];
    let backends = backends(false);
    for (name, metric) in metrics {
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        for (count, length) in SIZES {
            let (queries, _) = timewarp::data::cbf(count, length, 1);
            let (references, _) = timewarp::data::cbf(count, length, 2);
            let (queries, references) = (
                queries.cast::<f32>().unwrap(),
                references.cast::<f32>().unwrap(),
            );
            group.throughput(Throughput::Elements(
                (count * count * length * length) as u64,
            ));
            for (backend, options) in &backends {
                group.bench_with_input(
                    BenchmarkId::new(format!("{backend}/f32"), format!("{count}x{length}")),
                    &options,
                    |bench, options| {
                        bench.iter(|| {
                            distance_matrix(&queries, Some(&references), metric, options).unwrap()
                        })
                    },
                );
            }
        }
        group.finish();
    }
}

/// One random pair of `PAIR_LENGTH` samples, TWED (cuTWED's single-pair
/// workload) and DTW, f64, on the pair-at-a-time variants.
fn long_pair(c: &mut Criterion) {
    let backends = backends(true);
    if backends.is_empty() {
        return;
    }
    let a = timewarp::data::random_normal(1, PAIR_LENGTH, 1, 1);
    let b = timewarp::data::random_normal(1, PAIR_LENGTH, 1, 2);
    let metrics: [(&str, Metric); 2] = [
        ("twed-pair", Twed::new(1.0, 1.0, 2.0).unwrap().into()),
        ("dtw-pair", Dtw::new().into()),
    ];
    for (name, metric) in metrics {
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        group.throughput(Throughput::Elements((PAIR_LENGTH * PAIR_LENGTH) as u64));
        for (backend, options) in &backends {
            group.bench_with_input(
                BenchmarkId::new(format!("{backend}/f64"), format!("1x{PAIR_LENGTH}")),
                &options,
                |bench, options| {
                    bench.iter(|| distance_matrix(&a, Some(&b), metric, options).unwrap())
                },
            );
        }
        group.finish();
    }
}

criterion_group!(benches, distances, long_pair);
criterion_main!(benches);
