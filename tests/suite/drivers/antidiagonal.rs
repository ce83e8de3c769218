//! The device crate's new drivers run on the host against the oracle:
//!
//! - the anti-diagonal driver (the `diagonal` and `diagonal-launches` GPU
//!   kernels' own code): the persistent form on emulated grids of threads
//!   (`crate::common::grid`) synchronised by a `std::sync::Barrier` and by the
//!   GPU's own generation barrier, and the one-launch-per-anti-diagonal
//!   form with each anti-diagonal's threads run one after the other in
//!   both orders; grids narrower and wider than the anti-diagonals;
//! - the generation barrier alone, many rounds on several threads;
//! - the `local` and `shared` kernels' row placements (a fixed array per
//!   thread; rows interleaved across a block's threads).
//!
//! Every measure, lengths 1, 2, 3, 31, 32, 33 and unequal ones (1 x 50,
//! 50 x 7), dims 1 and 3, non-uniform timestamps, DTW bands, TWED with nu
//! and lambda zero and large. f64; tolerance as in `crate::common::tolerance`. The
//! anti-diagonal buffers start as a huge negative number and carry guard
//! values past their end, so a read of a cell never written, or a write out
//! of bounds, shows.

use crate::common::driver::{assert_close, with_params, Measure, Pair};
use crate::common::grid::{run_grid, BarrierKind};
use crate::common::hardware::clock_ns;
use crate::common::hardware::Shared;
use crate::common::{error_scale, oracle_pair, tolerance};
use ndarray::{Array1, Array2};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use timewarp_kernels::drivers::antidiagonal::{
    diagonal_cells, diagonal_pair, diagonal_value, Diagonals,
};
use timewarp_kernels::hw::{generation_barrier, WaitBound, WAIT_BOUND_NS};
use timewarp_kernels::launch::pairs::PairsLaunch;
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Recurrence, SetRef};

/// Never a value of a cell: a read of an unwritten cell makes the result
/// hugely negative.
const UNWRITTEN: f64 = -1e300;
/// Values past the end of a buffer, which must stay as they are.
const GUARD: f64 = -7.0;
const GUARDS: usize = 8;

/// The measures and parameters every form of the driver is checked with.
fn measures() -> Vec<Measure> {
    vec![
        Measure::Dtw(None),
        Measure::Dtw(Some(0)),
        Measure::Dtw(Some(3)),
        Measure::SoftDtw(0.1),
        Measure::SoftDtw(1.0),
        Measure::Twed(0.5, 1.0, 2.0),
        Measure::Twed(0.0, 0.0, 2.0),
        Measure::Twed(100.0, 50.0, 2.0),
        Measure::Twed(1.0, 1.0, 1.0),
        Measure::Twed(0.1, 0.5, 3.0),
    ]
}

/// Three anti-diagonals of `n + 1` values, followed by guards.
struct Buffers(Vec<f64>);

impl Buffers {
    fn new(n: usize) -> Buffers {
        let mut values = vec![UNWRITTEN; 3 * (n + 1) + GUARDS];
        values[3 * (n + 1)..].fill(GUARD);
        Buffers(values)
    }

    fn diagonals(&mut self, n: usize) -> Diagonals<f64> {
        Diagonals {
            base: self.0.as_mut_ptr(),
            len: (n + 1) as u64,
        }
    }

    fn assert_guards(&self, n: usize, context: &str) {
        assert!(
            self.0[3 * (n + 1)..].iter().all(|&v| v == GUARD),
            "{context}: a write past the anti-diagonals"
        );
    }
}

/// The persistent driver on an emulated grid of `threads` threads.
fn persistent<M: Recurrence<f64> + Sync>(
    params: &M,
    pair: &Pair,
    threads: usize,
    kind: BarrierKind,
    context: &str,
) -> f64 {
    let (a, b) = pair.series();
    let mut buffers = Buffers::new(a.len);
    let shared = Shared((a, b, buffers.diagonals(a.len)));
    let value = run_grid(threads, kind, |grid| {
        let (a, b, diagonals) = shared.get();
        // SAFETY: the buffers hold 3 (n + 1) values; the series outlive the grid.
        unsafe { diagonal_pair(grid, params, &a, &b, &diagonals) }
    });
    buffers.assert_guards(a.len, context);
    value
}

/// The one-launch-per-anti-diagonal driver: each anti-diagonal a "launch"
/// of `threads` threads, run one after the other, last thread first if
/// `reverse` (a cell reading another cell of its own anti-diagonal would
/// show as a difference).
fn launches<M: Recurrence<f64>>(
    params: &M,
    pair: &Pair,
    threads: usize,
    reverse: bool,
    context: &str,
) -> f64 {
    let (a, b) = pair.series();
    let mut buffers = Buffers::new(a.len);
    let diagonals = buffers.diagonals(a.len);
    for k in 0..=a.len + b.len {
        let mut order: Vec<usize> = (0..threads).collect();
        if reverse {
            order.reverse();
        }
        for thread in order {
            // SAFETY: as above; every earlier anti-diagonal is complete.
            unsafe { diagonal_cells(params, &a, &b, &diagonals, k, thread, threads) };
        }
    }
    // SAFETY: the last anti-diagonal is complete.
    let value = unsafe { diagonal_value(&diagonals, a.len, b.len) };
    buffers.assert_guards(a.len, context);
    value
}

/// Every form of the driver on one pair and measure.
fn check(measure: Measure, pair: &Pair) {
    let expected = pair.oracle(measure);
    let (n, m, d) = (pair.a.nrows(), pair.b.nrows(), pair.a.ncols());
    let context = |what: &str| format!("{measure:?}, {n} x {m}, dims {d}, {what}");
    with_params!(measure, |p| {
        for (threads, kind) in [(4, BarrierKind::Std), (3, BarrierKind::Generation)] {
            let what = context(&format!("persistent, {threads} threads, {kind:?} barrier"));
            assert_close(&what, persistent(&p, pair, threads, kind, &what), expected);
        }
        for threads in [1, 5] {
            for reverse in [false, true] {
                let what = context(&format!("launches, {threads} threads, reverse {reverse}"));
                assert_close(&what, launches(&p, pair, threads, reverse, &what), expected);
            }
        }
    });
}

#[test]
fn the_diagonal_driver_matches_the_oracle() {
    let shapes = [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
        (3, 3),
        (3, 1),
        (31, 31),
        (32, 32),
        (33, 33),
        (31, 33),
        (1, 50),
        (50, 1),
        (50, 7),
        (7, 50),
    ];
    for (k, &(n, m)) in shapes.iter().enumerate() {
        for dims in [1, 3] {
            let pair = Pair::random(500 + 10 * k as u64 + dims as u64, n, m, dims);
            for measure in measures() {
                check(measure, &pair);
            }
        }
    }
}

#[test]
fn a_grid_wider_than_every_anti_diagonal() {
    // 40 threads: more than the 34 cells of the longest anti-diagonal.
    for (k, &(n, m)) in [(33, 33), (50, 7), (2, 40)].iter().enumerate() {
        let pair = Pair::random(700 + k as u64, n, m, 1);
        for measure in [
            Measure::Dtw(Some(2)),
            Measure::SoftDtw(0.5),
            Measure::Twed(0.5, 1.0, 2.0),
        ] {
            let expected = pair.oracle(measure);
            let what = format!("{measure:?}, {n} x {m}, 40 threads");
            with_params!(measure, |p| {
                let got = persistent(&p, &pair, 40, BarrierKind::Generation, &what);
                assert_close(&what, got, expected);
                assert_close(&what, launches(&p, &pair, 40, true, &what), expected);
            });
        }
    }
}

/// The generation barrier of `parties` host threads over the three words
/// at `state`, its waits bounded by `bound` on the host's clock.
///
/// # Safety
/// As `generation_barrier`.
unsafe fn host_barrier(state: *mut u32, parties: usize, bound: &WaitBound) {
    generation_barrier(
        state,
        parties as u32,
        bound,
        clock_ns,
        std::thread::yield_now,
    )
}

/// Each round every thread stores the round number, meets the others, and
/// must then see every thread's store of that round; then meets them again
/// before the next round's stores.
#[test]
fn the_generation_barrier_orders_every_round() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 300;
    let state = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
    let slots: Vec<AtomicUsize> = (0..THREADS).map(|_| AtomicUsize::new(0)).collect();
    let state_ptr = Shared(state.as_ptr() as *mut u32);
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let slots = &slots;
            scope.spawn(move || {
                let bound = WaitBound::new(state_ptr.get().wrapping_add(2));
                // SAFETY: three u32 words used only by these threads.
                let wait = || unsafe { host_barrier(state_ptr.get(), THREADS, &bound) };
                for round in 1..=ROUNDS {
                    slots[thread].store(round, Ordering::Relaxed);
                    wait();
                    for (other, slot) in slots.iter().enumerate() {
                        let seen = slot.load(Ordering::Relaxed);
                        assert_eq!(
                            seen, round,
                            "thread {thread} saw thread {other}'s round {seen} in round {round}"
                        );
                    }
                    wait();
                }
            });
        }
    });
    // After complete barriers the count is back to zero, and no wait gave
    // up.
    assert_eq!(state[0].load(Ordering::Relaxed), 0);
    assert_eq!(state[1].load(Ordering::Relaxed), 2 * ROUNDS as u32);
    assert_eq!(state[2].load(Ordering::Relaxed), 0);
}

/// A participant that never arrives does not hang the others: each gives
/// up once its wait passes the bound (`WAIT_BOUND_NS`), the fault word
/// says so, and later barriers no longer wait for it.
#[test]
fn the_generation_barrier_gives_up_on_a_missing_participant() {
    const THREADS: usize = 3;
    let state = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
    let state_ptr = Shared(state.as_ptr() as *mut u32);
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        // Thread THREADS - 1 of the barrier's parties never arrives.
        for _ in 0..THREADS - 1 {
            scope.spawn(move || {
                let bound = WaitBound::new(state_ptr.get().wrapping_add(2));
                for _ in 0..5 {
                    // SAFETY: three u32 words used only by these threads.
                    unsafe { host_barrier(state_ptr.get(), THREADS, &bound) };
                }
            });
        }
    });
    let waited = started.elapsed();
    assert_eq!(state[2].load(Ordering::Relaxed), 1, "the fault word is set");
    let bound = std::time::Duration::from_nanos(WAIT_BOUND_NS);
    // One bound for the first barrier, none for the four after it.
    assert!(
        waited >= bound,
        "gave up after {waited:?}, before the bound"
    );
    assert!(waited < 3 * bound, "waited {waited:?}: more than one bound");
}

/// A batch as the kernels see it, in host memory.
struct HostSet {
    values: Vec<f64>,
    offsets: Vec<u64>,
    times: Vec<f64>,
    series: Vec<OneSeries>,
}

/// One series of a batch: values (`len x dims`) and timestamps.
struct OneSeries {
    x: Array2<f64>,
    t: Array1<f64>,
}

impl HostSet {
    fn random(seed: u64, lengths: &[usize], dims: usize) -> HostSet {
        let mut set = HostSet {
            values: Vec::new(),
            offsets: vec![0],
            times: Vec::new(),
            series: Vec::new(),
        };
        for (k, &len) in lengths.iter().enumerate() {
            let pair = Pair::random(seed + k as u64, len, 1, dims);
            set.values.extend(pair.a.iter());
            set.times.extend(pair.ta.iter());
            set.offsets.push(set.offsets.last().unwrap() + len as u64);
            set.series.push(OneSeries {
                x: pair.a,
                t: pair.ta,
            });
        }
        set
    }

    fn set_ref(&self, dims: usize) -> SetRef<f64> {
        SetRef {
            values: self.values.as_ptr(),
            offsets: self.offsets.as_ptr(),
            times: self.times.as_ptr(),
            count: self.series.len() as u64,
            dims: dims as u64,
            uniform_len: 0,
            uniform_first: 0,
        }
    }

    fn max_len(&self) -> usize {
        self.series.iter().map(|s| s.x.nrows()).max().unwrap()
    }
}

/// All pairs of two batches through `run` (given the launch and a pair
/// index), against the oracle.
fn check_row_placement<M: Recurrence<f64> + Copy>(
    params: M,
    measure: Measure,
    dims: usize,
    what: &str,
    run: impl Fn(&PairsLaunch<f64, M>, u64),
) {
    let a = HostSet::random(900, &[1, 2, 5, 17, 40], dims);
    let b = HostSet::random(950, &[3, 1, 40, 17], dims);
    let mut out = vec![f64::NAN; a.series.len() * b.series.len()];
    let launch = PairsLaunch {
        a: a.set_ref(dims),
        b: b.set_ref(dims),
        params,
        out: out.as_mut_ptr(),
        workspace: std::ptr::null_mut(),
        row_len: (a.max_len().max(b.max_len()) + 1) as u64,
        first_pair: 0,
        pair_count: (a.series.len() * b.series.len()) as u64,
        numbering: Numbering::Matrix,
    };
    for index in 0..launch.pair_count {
        run(&launch, index);
    }
    for (i, x) in a.series.iter().enumerate() {
        for (j, y) in b.series.iter().enumerate() {
            let metric = measure.metric();
            let expected = oracle_pair(x.x.view(), &x.t, y.x.view(), &y.t, metric);
            let bound = tolerance::<f64>(x.x.nrows(), y.x.nrows(), dims)
                * error_scale(x.x.view(), y.x.view(), expected, metric);
            let got = out[i * b.series.len() + j];
            let context = format!("{what}, {measure:?}, dims {dims}, pair ({i}, {j})");
            assert_close(&context, got, (expected, bound));
        }
    }
}

#[test]
fn local_rows_match_the_oracle() {
    for dims in [1, 3] {
        for measure in measures() {
            with_params!(measure, |p| {
                // Rows of 41 values: exactly the longest series of b plus one.
                check_row_placement(p, measure, dims, "local rows of 41", |launch, index| {
                    // SAFETY: index < pair_count; b's series have <= 40 samples.
                    unsafe { launch.run_pair_in_local::<41>(index) }
                });
            });
        }
    }
}

#[test]
fn shared_rows_are_interleaved_per_thread_and_match_the_oracle() {
    const THREADS: usize = 3;
    for dims in [1, 3] {
        for measure in measures() {
            with_params!(measure, |p| {
                let what = format!("shared rows, {THREADS} threads a block");
                check_row_placement(p, measure, dims, &what, |launch, index| {
                    // A fresh block's memory per pair, the pair's thread
                    // `index % THREADS`: it must touch only its own words.
                    let words = THREADS * 2 * launch.row_len as usize;
                    let mut block = vec![GUARD; words + GUARDS];
                    let thread = index as usize % THREADS;
                    // SAFETY: the block holds THREADS * 2 * row_len values.
                    unsafe {
                        launch.run_pair_in_block_rows(index, block.as_mut_ptr(), thread, THREADS)
                    };
                    for (word, &v) in block.iter().enumerate() {
                        if word >= words || word % THREADS != thread {
                            assert_eq!(v, GUARD, "{what}: thread {thread} wrote word {word}");
                        }
                    }
                });
            });
        }
    }
}
