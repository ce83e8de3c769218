//! Every GPU of the host: results on all of them equal GPU 0's alone bit
//! for bit (streamed and stencil matrices, the triangle, resident sets
//! replicated and sharded, paired Soft-DTW values and gradients, k-NN), a
//! GPU that fails mid-run is named or its blocks retried on the others,
//! and an all-pairs matrix keeps every GPU busy to the end. These run on however many GPUs there are,
//! one included (the same code with one worker); the scheduling itself is
//! unit-tested with fake workers (`host/gpu/plan/spread.rs`).

use crate::common::{on_gpu, on_gpu_alone, rng};
use ndarray::Array2;
use rand::Rng;
use timewarp::gpu::Gpu;
use timewarp::internals::{inject_gpu_fault, split_resident_pairs};
use timewarp::{
    distance_matrix, distance_matrix_resident, nearest_neighbours, soft_dtw_pairs,
    soft_dtw_pairs_gradient, soft_dtw_pairs_gradient_resident, soft_dtw_pairs_resident, upload,
    ComputeOptions, Device, Dtw, Error, GpuSet, Metric, Placement, SeriesSet, SoftDtw, Twed,
    Variant,
};

/// `count` univariate series of 20 to 90 samples.
fn batch(count: usize, seed: u64) -> SeriesSet<f64> {
    let mut rng = rng(seed);
    let series: Vec<Array2<f64>> = (0..count)
        .map(|_| {
            let len = rng.random_range(20..90);
            Array2::from_shape_fn((len, 1), |_| rng.random_range(-2.0..2.0))
        })
        .collect();
    SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap()
}

fn metrics() -> [Metric; 3] {
    [
        Dtw::new().into(),
        SoftDtw::new(0.5).unwrap().into(),
        Twed::default().into(),
    ]
}

/// A budget small enough for many blocks of a few dozen series.
const SMALL: Option<usize> = Some(96 << 10);

fn on(gpus: GpuSet, variant: Option<Variant>, budget: Option<usize>) -> ComputeOptions {
    ComputeOptions {
        gpu_variant: variant,
        gpu_memory_budget: budget,
        ..ComputeOptions::on(Device::Gpu).with_gpus(gpus)
    }
}

fn gpu0() -> GpuSet {
    GpuSet::one(0).unwrap()
}

#[test]
fn multi_gpu_matrices_equal_gpu0() {
    let Some(_timed) = on_gpu("multi_gpu_matrices_equal_gpu0") else {
        return;
    };
    let (a, b) = (batch(150, 1), batch(70, 2));
    // The default variant in one piece and in many tiles (a small budget),
    // the warp and naive kernels forced (in many tiles the naive kernel
    // holds the GPU for seconds, and the tiling does not depend on it).
    let cases = [
        (None, None),
        (None, SMALL),
        (Some(Variant::Warp), None),
        (Some(Variant::Naive), None),
        (Some(Variant::Stencil), None),
        (Some(Variant::Stencil), SMALL),
    ];
    for metric in metrics() {
        for (variant, budget) in cases {
            for other in [Some(&b), None] {
                let one = distance_matrix(&a, other, metric, &on(gpu0(), variant, budget));
                let all = distance_matrix(&a, other, metric, &on(GpuSet::all(), variant, budget));
                let context = format!("{metric:?} {variant:?} {budget:?} b: {}", other.is_some());
                assert_eq!(all.unwrap(), one.unwrap(), "{context}");
            }
        }
    }
}

#[test]
fn multi_gpu_resident_replicated_and_sharded_equal_gpu0() {
    let Some(_timed) = on_gpu("multi_gpu_resident_replicated_and_sharded_equal_gpu0") else {
        return;
    };
    let (queries, database) = (batch(60, 3), batch(130, 4));
    for metric in metrics() {
        let expected =
            distance_matrix(&queries, Some(&database), metric, &on(gpu0(), None, None)).unwrap();
        for placement in [Placement::Auto, Placement::Replicate, Placement::Shard] {
            for budget in [None, SMALL] {
                let options = ComputeOptions {
                    placement,
                    ..on(GpuSet::all(), None, budget)
                };
                let resident = upload(&database, &options).unwrap();
                let ranges = resident.gpus();
                assert_eq!(resident.is_replicated(), placement != Placement::Shard);
                let got = distance_matrix_resident(&queries, &resident, metric, &options).unwrap();
                assert_eq!(
                    got, expected,
                    "{metric:?} {placement:?} {budget:?} {ranges:?}"
                );
            }
        }
    }
    // A budget that holds less than the set forces shards under Auto, or
    // fails on one GPU.
    let set_bytes = database.total_samples() * 8 + (database.len() + 1) * 8;
    let gpus = Gpu::select(GpuSet::all()).unwrap().len();
    let tight = Some(set_bytes * 3 / 4);
    let options = on(GpuSet::all(), None, tight);
    match upload(&database, &options) {
        Ok(resident) => {
            assert!(
                gpus > 1 && !resident.is_replicated(),
                "{:?}",
                resident.gpus()
            );
            let metric = Dtw::new().into();
            let expected =
                distance_matrix(&queries, Some(&database), metric, &on(gpu0(), None, None))
                    .unwrap();
            let got = distance_matrix_resident(&queries, &resident, metric, &options).unwrap();
            assert_eq!(got, expected);
        }
        Err(error) => assert!(
            gpus == 1 && error.to_string().contains("GPU 0 ("),
            "{error}"
        ),
    }
}

#[test]
fn multi_gpu_knn_sharded_equals_the_cpu() {
    let Some(_timed) = on_gpu("multi_gpu_knn_sharded_equals_the_cpu") else {
        return;
    };
    let (queries, database) = (batch(45, 5), batch(110, 6));
    let k = 5;
    for metric in metrics() {
        // The reference: the CPU's whole matrix, each row sorted (ties by
        // index).
        let cpu = ComputeOptions::on(Device::Cpu);
        let matrix = distance_matrix(&queries, Some(&database), metric, &cpu).unwrap();
        for placement in [Placement::Replicate, Placement::Shard] {
            let options = ComputeOptions {
                placement,
                ..on(GpuSet::all(), None, SMALL)
            };
            let resident = upload(&database, &options).unwrap();
            let found = nearest_neighbours(&queries, &resident, k, metric, &options).unwrap();
            for (q, row) in matrix.outer_iter().enumerate() {
                let mut order: Vec<usize> = (0..row.len()).collect();
                order.sort_by(|&i, &j| row[i].total_cmp(&row[j]).then(i.cmp(&j)));
                let context = format!("{metric:?} {placement:?} query {q}");
                assert_eq!(found.indices.row(q).to_vec(), order[..k], "{context}");
                for (rank, &j) in order[..k].iter().enumerate() {
                    // The GPU's cells round differently from the CPU's:
                    // relative 1e-12 in f64 over at most 90 x 90 cells.
                    let (got, want) = (found.distances[[q, rank]], row[j]);
                    assert!(
                        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                        "{context}"
                    );
                }
            }
        }
    }
}

#[test]
fn multi_gpu_paired_soft_dtw_equals_gpu0() {
    let Some(_timed) = on_gpu("multi_gpu_paired_soft_dtw_equals_gpu0") else {
        return;
    };
    let (x, y) = (batch(97, 5), batch(97, 6));
    for soft in [
        SoftDtw::new(0.5).unwrap(),
        SoftDtw::new(0.5).unwrap().divergence(),
    ] {
        for variant in [None, Some(Variant::Warp), Some(Variant::Stencil)] {
            let one = soft_dtw_pairs(&x, &y, soft, &on(gpu0(), variant, None)).unwrap();
            let all = soft_dtw_pairs(&x, &y, soft, &on(GpuSet::all(), variant, None)).unwrap();
            assert_eq!(all, one, "{soft:?} {variant:?}");
        }
        // Gradients, with respect to x alone and to both, in many chunks
        // too (a budget of a few pairs' cost matrices).
        for (with_y, budget) in [(false, None), (true, None), (true, Some(256 << 10))] {
            let one = soft_dtw_pairs_gradient(&x, &y, soft, &on(gpu0(), None, budget), with_y);
            let all =
                soft_dtw_pairs_gradient(&x, &y, soft, &on(GpuSet::all(), None, budget), with_y);
            assert_eq!(
                all.unwrap(),
                one.unwrap(),
                "{soft:?} gradient {with_y} {budget:?}"
            );
        }
    }
}

/// Paired Soft-DTW values and gradients of resident sets that every GPU
/// holds whole (replicated): the pairs spread over the GPUs in blocks,
/// values equal bit for bit to the same batches from the host on GPU 0,
/// gradients to the sets resident on GPU 0 alone; on one GPU too, with
/// the GPU counted as three (a test hook), which cuts the blocks as for
/// three GPUs and runs them one after another.
#[test]
fn multi_gpu_paired_resident_equals_gpu0() {
    let Some(_timed) = on_gpu("multi_gpu_paired_resident_equals_gpu0") else {
        return;
    };
    let (x, y) = (batch(97, 7), batch(97, 8));
    let replicated = ComputeOptions {
        placement: Placement::Replicate,
        ..on(GpuSet::all(), None, None)
    };
    let (rx, ry) = (
        upload(&x, &replicated).unwrap(),
        upload(&y, &replicated).unwrap(),
    );
    assert!(rx.is_replicated() && ry.is_replicated());
    for soft in [
        SoftDtw::new(0.5).unwrap(),
        SoftDtw::new(0.5).unwrap().divergence(),
    ] {
        for variant in [None, Some(Variant::Warp), Some(Variant::Stencil)] {
            let host = soft_dtw_pairs(&x, &y, soft, &on(gpu0(), variant, None)).unwrap();
            for workers in [1, 3] {
                split_resident_pairs(workers);
                let options = ComputeOptions {
                    gpu_variant: variant,
                    ..replicated
                };
                let got = soft_dtw_pairs_resident(&rx, &ry, soft, &options);
                split_resident_pairs(1);
                assert_eq!(got.unwrap(), host, "{soft:?} {variant:?}, {workers} a GPU");
            }
        }
        // Gradients, with respect to x alone and to both, in one chunk a
        // block and in many (a budget of a few pairs' cost matrices).
        let alone = on(gpu0(), None, None);
        let (ox, oy) = (upload(&x, &alone).unwrap(), upload(&y, &alone).unwrap());
        for (with_y, budget) in [(false, None), (true, None), (true, Some(512 << 10))] {
            let options = |gpus| ComputeOptions {
                placement: Placement::Replicate,
                ..on(gpus, None, budget)
            };
            let one = soft_dtw_pairs_gradient_resident(&ox, &oy, soft, &options(gpu0()), with_y);
            let one = one.unwrap();
            for workers in [1, 3] {
                split_resident_pairs(workers);
                let all = options(GpuSet::all());
                let got = soft_dtw_pairs_gradient_resident(&rx, &ry, soft, &all, with_y);
                split_resident_pairs(1);
                assert_eq!(
                    got.unwrap(),
                    one,
                    "{soft:?} gradient {with_y} {budget:?}, {workers} a GPU"
                );
            }
        }
    }
}

/// The injected fault: on one GPU the call fails naming it; on several the
/// failed GPU's block is retried on the others and the result is the
/// fault-free one.
#[test]
fn multi_gpu_fault_names_the_gpu_or_is_retried() {
    let Some(_timed) = on_gpu("multi_gpu_fault_names_the_gpu_or_is_retried") else {
        return;
    };
    let gpus = Gpu::select(GpuSet::all()).unwrap();
    let (a, b) = (batch(150, 7), batch(70, 8));
    let metric: Metric = Dtw::new().into();
    let options = on(GpuSet::all(), None, SMALL);
    let expected = distance_matrix(&a, Some(&b), metric, &options).unwrap();
    inject_gpu_fault(0, 1);
    let got = distance_matrix(&a, Some(&b), metric, &options);
    let (x, y) = (batch(40, 9), batch(40, 10));
    let soft = SoftDtw::new(0.5).unwrap();
    let paired_expected = soft_dtw_pairs(&x, &y, soft, &options).unwrap();
    inject_gpu_fault(0, 0);
    let paired = soft_dtw_pairs(&x, &y, soft, &options);
    if gpus.len() == 1 {
        for result in [got.map(|_| ()), paired.map(|_| ())] {
            match result {
                Err(error @ Error::GpuFailure(_)) => {
                    let message = error.to_string();
                    let name = format!("GPU 0 ({})", gpus[0].info().name);
                    assert!(message.contains(&name), "{message}");
                    assert!(message.contains("injected fault"), "{message}");
                }
                other => panic!("expected a GPU error naming GPU 0, got {other:?}"),
            }
        }
    } else {
        assert_eq!(got.unwrap(), expected);
        assert_eq!(paired.unwrap(), paired_expected);
    }
    // The hook fires once: the next call is whole again.
    assert_eq!(
        distance_matrix(&a, Some(&b), metric, &options).unwrap(),
        expected
    );
}

#[test]
fn multi_gpu_a_missing_ordinal_is_an_error() {
    let Some(_timed) = on_gpu("multi_gpu_a_missing_ordinal_is_an_error") else {
        return;
    };
    let count = Gpu::count();
    let missing = GpuSet::one(count).unwrap();
    let a = batch(3, 11);
    let error = distance_matrix(&a, None, Dtw::new().into(), &on(missing, None, None)).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&format!("there is no GPU {count}")),
        "{message}"
    );
    // Even with Auto: a GPU asked for by ordinal is not silently replaced.
    let auto = ComputeOptions::on(Device::Auto).with_gpus(missing);
    assert!(distance_matrix(&a, None, Dtw::new().into(), &auto).is_err());
}

/// Each GPU's work (`Gpu::work`): a streamed matrix's pairs counted once
/// over the GPUs that computed them, whatever the tiling (a batch against
/// itself: its triangle), each with the time it spent; paired values and
/// gradients on several GPUs too. Work on one GPU (the tiled kernel) is not
/// spread and not counted.
#[test]
fn multi_gpu_work_counts_every_pair_once() {
    let Some(_timed) = on_gpu_alone("multi_gpu_work_counts_every_pair_once") else {
        return;
    };
    let gpus = Gpu::select(GpuSet::all()).unwrap();
    let work = || -> Vec<_> { gpus.iter().map(|g| g.work()).collect() };
    // The pairs and each working GPU's time that `run` adds to the
    // counters. They are the process's, so GPU tests running meanwhile
    // add theirs: `run` is repeated until one run adds exactly `expected`
    // (a count that is wrong when alone is never exact, so the check still
    // fails then).
    let counts = |expected: u64, what: &str, run: &dyn Fn()| {
        let mut seen = Vec::new();
        for _ in 0..20 {
            let before = work();
            run();
            let each: Vec<_> = work()
                .iter()
                .zip(&before)
                .map(|(n, b)| n.since(*b))
                .collect();
            let pairs: u64 = each.iter().map(|w| w.pairs).sum();
            if pairs == expected {
                let busy = each.iter().filter(|w| w.pairs > 0);
                assert!(busy.clone().all(|w| w.time.as_secs_f64() > 0.0), "{what}");
                return;
            }
            seen.push(pairs);
        }
        panic!("{what}: expected {expected} pairs, counted {seen:?}");
    };
    let (a, b) = (batch(150, 1), batch(70, 2));
    let metric = Dtw::new().into();
    for budget in [None, SMALL] {
        let options = on(GpuSet::all(), None, budget);
        counts(150 * 70, &format!("a x b {budget:?}"), &|| {
            distance_matrix(&a, Some(&b), metric, &options).unwrap();
        });
        counts(150 * 151 / 2, &format!("a's triangle {budget:?}"), &|| {
            distance_matrix(&a, None, metric, &options).unwrap();
        });
    }
    let soft = SoftDtw::new(0.5).unwrap();
    let options = on(GpuSet::all(), None, None);
    // Paired values and gradients spread only over several GPUs.
    let spread = |pairs: u64| if gpus.len() > 1 { pairs } else { 0 };
    counts(spread(150), "paired values", &|| {
        soft_dtw_pairs(&a, &a, soft, &options).unwrap();
    });
    counts(spread(3 * 150), "a divergence's three launches", &|| {
        soft_dtw_pairs_gradient(&a, &a, soft.divergence(), &options, true).unwrap();
    });
    let long = batch(1, 3);
    let tiled = on(GpuSet::all(), Some(Variant::Tiled), None);
    counts(0, "the tiled kernel", &|| {
        distance_matrix(&long, None, metric, &tiled).unwrap();
    });
}

/// DTW all pairs of 4,096 series of 128 samples in f32 on every GPU: the
/// blocks are cut and handed out so that the GPUs finish together, each
/// busy at least 90% of the call's time (the busy times and call times
/// the host records, `Gpu::work`). Needs two GPUs or more; with one it
/// says so and passes.
#[test]
fn multi_gpu_all_pairs_keep_every_gpu_busy() {
    let test = "multi_gpu_all_pairs_keep_every_gpu_busy";
    let Some(_timed) = on_gpu_alone(test) else {
        return;
    };
    let gpus = Gpu::select(GpuSet::all()).unwrap();
    if gpus.len() < 2 {
        eprintln!("{test}: skipped: one GPU; the balance of several needs two or more");
        return;
    }
    let mut rng = rng(12);
    let series: Vec<Array2<f32>> = (0..4096)
        .map(|_| Array2::from_shape_fn((128, 1), |_| rng.random_range(-2.0..2.0)))
        .collect();
    let set = SeriesSet::from_series(series.iter().map(|s| s.view())).unwrap();
    let metric: Metric = Dtw::new().into();
    let options = on(GpuSet::all(), None, None);
    // The first call loads the kernel and makes the pipelines.
    distance_matrix(&set, None, metric, &options).unwrap();
    let work = || -> Vec<_> { gpus.iter().map(|g| g.work()).collect() };
    let pairs = 4096 * 4097 / 2;
    // The counters are the process's: a run during which another test's
    // work was counted (more pairs than this call's) is run again.
    let mut seen = Vec::new();
    for _ in 0..10 {
        let before = work();
        distance_matrix(&set, None, metric, &options).unwrap();
        let each: Vec<_> = work()
            .iter()
            .zip(&before)
            .map(|(n, b)| n.since(*b))
            .collect();
        if each.iter().map(|w| w.pairs).sum::<u64>() != pairs {
            continue;
        }
        let busy: Vec<f64> = each
            .iter()
            .map(|w| w.time.as_secs_f64() / w.call.as_secs_f64())
            .collect();
        if busy.iter().all(|&b| b >= 0.9) {
            return;
        }
        seen.push(busy);
    }
    panic!("each GPU's share of the call's time busy, run by run: {seen:?}");
}
