//! The queue of `spread` and `spread_pipelined` with fake workers.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A fake GPU: how long a block takes, after how many blocks it fails
/// and with which error.
struct Fake {
    ordinal: usize,
    delay: Duration,
    fail_after: Option<(usize, fn() -> Error)>,
    done: usize,
    /// Started blocks whose results are not in place yet (pipelined).
    open: Vec<usize>,
}

fn fake(ordinal: usize, millis: u64) -> Fake {
    Fake {
        ordinal,
        delay: Duration::from_millis(millis),
        fail_after: None,
        done: 0,
        open: Vec::new(),
    }
}

fn name(worker: &Fake) -> String {
    format!("GPU {} (fake)", worker.ordinal)
}

/// Runs `count` blocks, each writing its number times ten into its own
/// cell of one output; returns the shares, the output and each block's
/// computations.
fn run(workers: &mut [Fake], count: usize) -> (Result<Vec<Share>>, Vec<usize>, Vec<usize>) {
    let out = Mutex::new(vec![0; count]);
    let computed: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
    let shares = spread(workers, count, name, |worker, block| {
        if let Some((after, error)) = worker.fail_after {
            if worker.done == after {
                return Err(error());
            }
        }
        std::thread::sleep(worker.delay);
        computed[block].fetch_add(1, Ordering::Relaxed);
        out.lock().unwrap()[block] = block * 10;
        worker.done += 1;
        Ok(())
    });
    let counts = computed.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    (shares, out.into_inner().unwrap(), counts)
}

/// [`run`] through [`spread_pipelined`], with workers whose blocks are
/// in place one start later (a pipeline's last tiles come back while
/// the next block computes), and whose failure loses the open block.
fn run_pipelined(
    workers: &mut [Fake],
    count: usize,
    fail_in_finish: bool,
) -> (Result<Vec<Share>>, Vec<usize>, Vec<usize>) {
    let out = Mutex::new(vec![0; count]);
    let computed: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
    let place = |worker: &mut Fake| -> Vec<usize> {
        let done: Vec<usize> = worker.open.drain(..).collect();
        for &block in &done {
            computed[block].fetch_add(1, Ordering::Relaxed);
            out.lock().unwrap()[block] = block * 10;
        }
        done
    };
    // The armed error, when its time has come: at the start after
    // `after` blocks, or (`fail_in_finish`) at the finish after them.
    let armed = |worker: &Fake, in_finish: bool| match worker.fail_after {
        Some((after, error)) if in_finish == fail_in_finish && worker.done >= after => {
            Some(error())
        }
        _ => None,
    };
    let shares = spread_pipelined(
        workers,
        count,
        name,
        |worker, block| {
            if let Some(error) = armed(worker, false) {
                return Err(error);
            }
            std::thread::sleep(worker.delay);
            let done = place(worker);
            worker.open.push(block);
            worker.done += 1;
            Ok(done)
        },
        |worker| match armed(worker, true) {
            Some(error) => Err(error),
            None => Ok(place(worker)),
        },
    );
    let counts = computed.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    (shares, out.into_inner().unwrap(), counts)
}

fn out_of_memory() -> Error {
    Error::gpu_memory("a block needs more than the budget")
}

/// How many blocks each share holds.
fn counts(shares: &[Share]) -> Vec<usize> {
    shares.iter().map(|s| s.blocks.len()).collect()
}

/// Every block appears in exactly one share.
fn assert_partition(shares: &[Share], count: usize) {
    let mut all: Vec<usize> = shares.iter().flat_map(|s| s.blocks.clone()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..count).collect::<Vec<_>>());
}

#[test]
fn every_block_once_and_in_its_place() {
    for workers in 1..=4 {
        let mut fakes: Vec<Fake> = (0..workers).map(|k| fake(k, 1)).collect();
        let (shares, out, counts) = run(&mut fakes, 37);
        assert_partition(&shares.unwrap(), 37);
        assert_eq!(out, (0..37).map(|b| b * 10).collect::<Vec<_>>());
        assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    }
}

#[test]
fn pipelined_every_block_once_and_in_its_place() {
    for workers in 1..=4 {
        let mut fakes: Vec<Fake> = (0..workers).map(|k| fake(k, 1)).collect();
        let (shares, out, counts) = run_pipelined(&mut fakes, 37, false);
        assert_partition(&shares.unwrap(), 37);
        assert_eq!(out, (0..37).map(|b| b * 10).collect::<Vec<_>>());
        assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    }
}

/// A worker that fails with a block started and not in place hands it
/// back: the others compute it, and it counts for them alone.
#[test]
fn a_failing_pipelined_worker_hands_back_its_open_block() {
    let mut fakes = vec![fake(0, 1), fake(1, 1), fake(2, 1)];
    fakes[1].fail_after = Some((3, out_of_memory));
    let (shares, out, counts) = run_pipelined(&mut fakes, 40, false);
    let shares = shares.unwrap();
    // Three started; the first two in place; the third lost.
    assert_eq!(shares[1].blocks.len(), 2, "{shares:?}");
    assert_partition(&shares, 40);
    assert_eq!(out, (0..40).map(|b| b * 10).collect::<Vec<_>>());
    assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    // A failure in the finish loses the last block started.
    let mut fakes = vec![fake(0, 1), fake(1, 1)];
    fakes[1].fail_after = Some((1, out_of_memory));
    let (shares, out, counts) = run_pipelined(&mut fakes, 20, true);
    let shares = shares.unwrap();
    assert!(!shares[1].blocks.is_empty(), "{shares:?}");
    assert_partition(&shares, 20);
    assert_eq!(out, (0..20).map(|b| b * 10).collect::<Vec<_>>());
    assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
    // Every worker fails: the call fails, naming them.
    let mut two = vec![fake(0, 1), fake(1, 1)];
    two[0].fail_after = Some((2, out_of_memory));
    two[1].fail_after = Some((5, out_of_memory));
    let error = run_pipelined(&mut two, 50, false).0.unwrap_err();
    let error = error.to_string();
    assert!(
        error.contains("GPU 0 (fake)") && error.contains("GPU 1 (fake)"),
        "{error}"
    );
}

/// A worker takes its next block while one is open, but none of the
/// last blocks (one a worker): those go to workers with none open.
#[test]
fn the_last_blocks_go_to_workers_with_none_open() {
    let count = 20;
    let taken_while_open = Mutex::new(Vec::new());
    let mut fakes = vec![fake(0, 1), fake(1, 1)];
    let shares = spread_pipelined(
        &mut fakes,
        count,
        name,
        |worker, block| {
            if !worker.open.is_empty() {
                taken_while_open.lock().unwrap().push(block);
            }
            std::thread::sleep(worker.delay);
            let done = std::mem::take(&mut worker.open);
            worker.open.push(block);
            Ok(done)
        },
        |worker| Ok(std::mem::take(&mut worker.open)),
    );
    assert_partition(&shares.unwrap(), count);
    let taken = taken_while_open.into_inner().unwrap();
    assert!(!taken.is_empty(), "no block was taken while one was open");
    // No failures: blocks are handed out in order.
    assert!(taken.iter().all(|&b| b < count - 2), "{taken:?}");
}

#[test]
fn a_slower_worker_takes_fewer_blocks() {
    let mut fakes = vec![fake(0, 1), fake(1, 8)];
    let (shares, _, counts) = run(&mut fakes, 60);
    let shares = counts_of(shares);
    assert!(shares[0] > 2 * shares[1], "{shares:?}");
    assert!(counts.iter().all(|&c| c == 1));
}

fn counts_of(shares: Result<Vec<Share>>) -> Vec<usize> {
    counts(&shares.unwrap())
}

/// Each share's time is its blocks' time: at least their delays, and
/// not the time its worker waited or idled; so blocks over time is the
/// worker's own rate, a slow one's lower.
#[test]
fn each_share_times_its_own_blocks() {
    let mut fakes = vec![fake(0, 2), fake(1, 10)];
    let (shares, ..) = run(&mut fakes, 40);
    let shares = shares.unwrap();
    assert_partition(&shares, 40);
    for (share, delay) in shares.iter().zip([2u32, 10]) {
        let least = Duration::from_millis(delay.into()) * share.blocks.len() as u32;
        assert!(share.time >= least, "{share:?}");
    }
    let rate = |s: &Share| s.blocks.len() as f64 / s.time.as_secs_f64();
    assert!(rate(&shares[0]) > 2.0 * rate(&shares[1]), "{shares:?}");
    // One worker: every block, in order, on the calling thread.
    let mut one = vec![fake(0, 1)];
    let share = &run(&mut one, 5).0.unwrap()[0];
    assert_eq!(share.blocks, [0, 1, 2, 3, 4]);
    assert!(share.time >= Duration::from_millis(5), "{share:?}");
}

#[test]
fn a_failing_worker_s_block_is_retried_on_the_others() {
    let mut fakes = vec![fake(0, 1), fake(1, 1), fake(2, 1)];
    fakes[1].fail_after = Some((2, out_of_memory));
    let (shares, out, counts) = run(&mut fakes, 40);
    let shares = shares.unwrap();
    // The failed block counts for the worker that computed it.
    assert_eq!(shares[1].blocks.len(), 2);
    assert_partition(&shares, 40);
    assert_eq!(out, (0..40).map(|b| b * 10).collect::<Vec<_>>());
    assert!(counts.iter().all(|&c| c == 1), "{counts:?}");
}

#[test]
fn the_call_fails_naming_the_gpu_when_all_fail() {
    let mut one = vec![fake(0, 0)];
    one[0].fail_after = Some((3, out_of_memory));
    let error = run(&mut one, 10).0.unwrap_err();
    assert!(matches!(error, Error::GpuOutOfMemory { .. }), "{error}");
    let error = error.to_string();
    assert!(error.contains("GPU 0 (fake): a block needs"), "{error}");

    let mut two = vec![fake(0, 1), fake(1, 1)];
    two[0].fail_after = Some((1, out_of_memory));
    two[1].fail_after = Some((4, out_of_memory));
    let error = run(&mut two, 50).0.unwrap_err();
    assert!(matches!(error, Error::GpuOutOfMemory { .. }), "{error}");
    let error = error.to_string();
    assert!(error.contains("GPU 1 (fake): a block needs"), "{error}");
    assert!(error.contains("GPU 0 (fake): a block needs"), "{error}");
}

#[test]
fn other_errors_stop_every_worker_unnamed() {
    let mut fakes = vec![fake(0, 1), fake(1, 1)];
    fakes[0].fail_after = Some((2, || Error::Interrupted));
    let (result, _, counts) = run(&mut fakes, 200);
    assert!(matches!(result, Err(Error::Interrupted)));
    assert!(counts.iter().sum::<usize>() < 200);
}

#[test]
fn no_blocks_and_no_workers() {
    let mut fakes = vec![fake(0, 0), fake(1, 0)];
    assert_eq!(counts_of(run(&mut fakes, 0).0), [0, 0]);
    assert!(run(&mut [], 3).0.is_err());
}

#[test]
#[allow(clippy::single_range_in_vec_init)] // A list of one shard is meant.
fn shards_follow_the_budgets_and_fit() {
    // 10 series of 100 bytes, 8 bytes per range.
    let bytes = |r: Range<usize>| r.len() * 100 + 8;
    assert_eq!(shards(10, &[2000], bytes), Some(vec![0..10]));
    assert_eq!(shards(10, &[1000, 1000], bytes), Some(vec![0..5, 5..10]));
    assert_eq!(shards(10, &[3000, 1000], bytes), Some(vec![0..7, 7..10]));
    // A small budget's share rounds down to no series at all.
    assert_eq!(shards(10, &[308, 5000], bytes), Some(vec![0..0, 0..10]));
    assert_eq!(shards(10, &[400, 800], bytes), Some(vec![0..3, 3..10]));
    assert_eq!(shards(10, &[500, 500], bytes), None);
    assert_eq!(shards(1, &[1000, 1000], bytes), Some(vec![0..0, 0..1]));
    for budgets in [[700, 400, 900], [108, 5000, 5000], [5000, 5000, 108]] {
        let got = shards(10, &budgets, bytes).unwrap();
        assert_eq!(got.first().unwrap().start, 0);
        assert_eq!(got.last().unwrap().end, 10);
        for (k, pair) in got.windows(2).enumerate() {
            assert_eq!(pair[0].end, pair[1].start, "{got:?}");
            assert!(bytes(pair[0].clone()) <= budgets[k]);
        }
    }
}

#[test]
fn each_runs_every_worker_and_names_a_failure() {
    let mut fakes = vec![fake(0, 0), fake(1, 0), fake(2, 0)];
    let got = each(&mut fakes, name, |w| Ok(w.ordinal * 2)).unwrap();
    assert_eq!(got, [0, 2, 4]);
    let error = each(&mut fakes, name, |w| {
        if w.ordinal == 2 {
            Err(out_of_memory())
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert!(error.to_string().contains("GPU 2 (fake)"), "{error}");
}
