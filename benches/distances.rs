//! Criterion benchmarks: distance matrices of CBF batches for each measure,
//! on the CPU backend and on each GPU kernel variant (when a GPU is usable).
//! Throughput is in DP cells (`count^2 * length^2`), so criterion's
//! elements/s is cells per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use timewarp::{
    distance_matrix, gpu::Gpu, ComputeOptions, Device, Dtw, Metric, SoftDtw, Twed, GPU_VARIANTS,
};

/// (series per batch, length) of each benchmarked size.
const SIZES: [(usize, usize); 2] = [(64, 128), (32, 512)];

fn backends() -> Vec<(String, ComputeOptions)> {
    let mut list = vec![("cpu".to_string(), ComputeOptions::on(Device::Cpu))];
    match Gpu::get() {
        Ok(_) => {
            // The anti-diagonal variants compute a batch pair after pair,
            // a barrier or a launch per anti-diagonal: not batch kernels.
            let batch_variants = GPU_VARIANTS.iter().filter(|v| !v.starts_with("diagonal"));
            for &variant in batch_variants {
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
    let backends = backends();
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

criterion_group!(benches, distances);
criterion_main!(benches);
