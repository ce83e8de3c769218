//! `timewarp::interrupt` stops one long pair on the CPU: its value (the
//! wavefront over tiles), and DTW's and TWED's paths, Soft-DTW's
//! alignment and a subsequence alignment's pass over a long series, each
//! return `Error::Interrupted` instead of running to the end, and the next
//! computation runs undisturbed.
//!
//! A binary of its own, not a topic of `tests/suite`: an interrupt reaches
//! every computation running in the process, so it would stop the other
//! tests' computations too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use timewarp::ndarray::Array2;
use timewarp::{ComputeOptions, Device, Dtw, Error, Metric, Result, SoftDtw, Twed};

/// A smooth series of `len` samples (the values do not matter, the
/// number of cells does).
fn series(len: usize, phase: f64) -> Array2<f64> {
    Array2::from_shape_fn((len, 1), |(i, _)| (i as f64 * 0.001 + phase).sin())
}

/// `work`'s result while another thread calls `interrupt` every 10 ms
/// until it returns (an interrupt before the computation starts reaches
/// nothing, so one call alone could miss it).
fn interrupted<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
                timewarp::interrupt();
            }
        });
        let result = work();
        done.store(true, Ordering::SeqCst);
        result
    })
}

fn assert_interrupted<T>(what: &str, result: Result<T>) {
    match result {
        Err(Error::Interrupted) => {}
        Err(other) => panic!("{what}: {other}, not interrupted"),
        Ok(_) => panic!("{what} ran to its end"),
    }
}

#[test]
fn an_interrupt_stops_one_long_pair() {
    // 40,000 x 40,000 cells: seconds on any CPU, for every measure.
    let (x, y) = (series(40_000, 0.0), series(40_000, 1.0));
    let cpu = ComputeOptions::on(Device::Cpu);
    let metrics = [
        Metric::Dtw(Dtw::new()),
        Metric::Twed(Twed::new(0.001, 1.0, 2.0).unwrap()),
        Metric::SoftDtw(SoftDtw::new(1.0).unwrap()),
    ];
    for metric in metrics {
        let result = interrupted(|| timewarp::distance(x.view(), y.view(), metric));
        assert_interrupted(&format!("{metric:?}"), result);
    }
    // On pools of more threads than the machine may have cores: the
    // wavefront's workers that wait for a ready tile stop too, and the
    // call returns.
    for threads in [3, 8] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for metric in &metrics[..2] {
            let result =
                pool.install(|| interrupted(|| timewarp::distance(x.view(), y.view(), *metric)));
            assert_interrupted(&format!("{metric:?} on {threads} threads"), result);
        }
    }
    // Beyond the paths' workspace: Hirschberg's passes.
    let result = interrupted(|| timewarp::dtw_path(x.view(), y.view(), Dtw::new(), &cpu));
    assert_interrupted("dtw_path", result);
    let twed = Twed::new(0.001, 1.0, 2.0).unwrap();
    let result = interrupted(|| timewarp::twed_path(x.view(), y.view(), None, None, twed, &cpu));
    assert_interrupted("twed_path", result);
    // Within the workspaces: the full-matrix tracebacks and passes.
    let (short_x, short_y) = (series(12_000, 0.0), series(12_000, 1.0));
    let result =
        interrupted(|| timewarp::dtw_path(short_x.view(), short_y.view(), Dtw::new(), &cpu));
    assert_interrupted("dtw_path (traceback)", result);
    let result =
        interrupted(|| timewarp::twed_path(short_x.view(), short_y.view(), None, None, twed, &cpu));
    assert_interrupted("twed_path (traceback)", result);
    let soft = SoftDtw::new(1.0).unwrap();
    let long = series(16_000, 0.0);
    let result = interrupted(|| {
        timewarp::soft_dtw_alignment(
            long.view(),
            short_y.slice(timewarp::ndarray::s![..1000, ..]),
            soft,
            &cpu,
        )
    });
    assert_interrupted("soft_dtw_alignment", result);
    // The forward pass of a subsequence alignment: 2,000 x 4,000,000 cells.
    let query = series(2000, 0.5);
    let recording: Vec<f64> = (0..4_000_000).map(|i| (i as f64 * 0.003).sin()).collect();
    let result = interrupted(|| {
        timewarp::search::subsequence_alignment(query.view(), &recording[..], Device::Cpu)
    });
    assert_interrupted("subsequence_alignment", result);

    // The next computation is not interrupted, and equals the pair's value
    // computed alone by the full-matrix oracle.
    // On 3 threads, the pair (over 2^20 cells) is a wavefront.
    let (a, b) = (series(1100, 0.0), series(1000, 1.0));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    let value = pool
        .install(|| timewarp::distance(a.view(), b.view(), Metric::Dtw(Dtw::new())))
        .unwrap();
    let exact = timewarp::oracle::dtw(a.view(), b.view(), None);
    assert!((value - exact).abs() <= 1e-12 * exact, "{value} vs {exact}");
}
