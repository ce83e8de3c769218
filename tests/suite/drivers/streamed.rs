//! The streamed launch (`launch::streamed`) on emulated warps while a host
//! thread writes the pairs one after another, raising the count after
//! each. The series start as NaN, so a warp that read its pair before the
//! count said it was written would poison its value; and the launch's
//! device words start as an earlier launch left them (its count numbered
//! with the launch before, saying every pair is written; its warps through
//! counted), so a launch that trusted them would start early or never say
//! it is finished. Every value must equal the launch of the same pairs
//! fully written (`run_pair_in_warp` of the `warp` kernels) bit for bit,
//! and the oracle within `crate::common::tolerance`; the launch must say it
//! is finished exactly once every pair's warp is through. Every measure
//! (the launch is generic; only Soft-DTW has streamed kernels), a DTW
//! band, TWED's timestamps, multivariate samples, pairs of one sample,
//! pairs wider than one panel, launch numbers that wrap, and a host that
//! gives up midway.

use crate::common::driver::{assert_close, with_params, Measure, Pair};
use crate::common::hardware::{run_numbered_warps, Shared};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use timewarp_kernels::launch::pairs::PairsLaunch;
use timewarp_kernels::launch::streamed::{StreamedLaunch, ABANDONED};
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Recurrence, SetRef};

/// Emulated warps of 8 lanes, 4 columns a lane: one panel is 32 columns.
const LANES: usize = 8;
const STRIPE: usize = 4;

/// A batch of series laid out as the host lays it out: offsets, values,
/// timestamps.
struct Batch {
    offsets: Vec<u64>,
    values: Vec<f64>,
    times: Vec<f64>,
    dims: usize,
}

impl Batch {
    /// Series `k` of the batch: `a` or `b` of pair `k`.
    fn of(pairs: &[Pair], b: bool) -> Batch {
        let mut offsets = vec![0];
        let (mut values, mut times) = (Vec::new(), Vec::new());
        for pair in pairs {
            let (x, t) = if b {
                (&pair.b, &pair.tb)
            } else {
                (&pair.a, &pair.ta)
            };
            values.extend(x.iter());
            times.extend(t.iter());
            offsets.push(offsets.last().unwrap() + x.nrows() as u64);
        }
        Batch {
            offsets,
            values,
            times,
            dims: pairs[0].a.ncols(),
        }
    }

    /// The same layout, every value and timestamp NaN.
    fn unwritten(&self) -> Batch {
        Batch {
            offsets: self.offsets.clone(),
            values: vec![f64::NAN; self.values.len()],
            times: vec![f64::NAN; self.times.len()],
            dims: self.dims,
        }
    }

    fn set_ref(&self) -> SetRef<f64> {
        SetRef {
            values: self.values.as_ptr(),
            offsets: self.offsets.as_ptr(),
            times: self.times.as_ptr(),
            count: self.offsets.len() as u64 - 1,
            dims: self.dims as u64,
            uniform_len: 0,
            uniform_first: 0,
        }
    }

    fn longest(&self) -> usize {
        self.offsets.windows(2).map(|w| w[1] - w[0]).max().unwrap() as usize
    }

    /// Copies series `series` (values and timestamps) to `to`, through raw
    /// pointers: the warps read the batch meanwhile.
    ///
    /// # Safety
    /// `to` has this layout; no warp reads this series yet.
    unsafe fn copy_series(&self, to: (*mut f64, *mut f64), series: usize) {
        let (start, end) = (
            self.offsets[series] as usize,
            self.offsets[series + 1] as usize,
        );
        for k in start * self.dims..end * self.dims {
            to.0.add(k).write_volatile(self.values[k]);
        }
        for k in start..end {
            to.1.add(k).write_volatile(self.times[k]);
        }
    }
}

/// How the writer of [`streamed`] runs.
#[derive(Clone, Copy, Debug)]
enum Writer {
    /// Slower than the warps, which then wait for every pair: one that
    /// starts early finds NaN.
    Slow,
    /// As fast as it goes.
    Fast,
    /// Writes that many pairs, then `ABANDONED`.
    GivesUpAfter(usize),
}

/// What a streamed launch leaves: the values (NaN where none was written)
/// and its words.
struct Streamed {
    values: Vec<f64>,
    finished: u32,
    through: u64,
    gave_up: u32,
}

/// `count` as launch `number` hands it on.
fn numbered(number: u32, count: u32) -> u64 {
    (number as u64) << 32 | count as u64
}

/// The pairs `(a[p], b[p])` streamed as launch `number`: a writer thread
/// fills NaN copies of the batches pair by pair, raising the count after
/// each, while `pairs + 1` emulated warps run the launch, its device words
/// as the launch before left them.
fn streamed<M: Recurrence<f64> + Sync + Copy>(
    measure: M,
    (a, b): (&Batch, &Batch),
    writer: Writer,
    number: u32,
) -> Streamed {
    let pairs = a.offsets.len() - 1;
    let (mut a_host, mut b_host) = (a.unwritten(), b.unwritten());
    let mut out = vec![f64::NAN; pairs];
    let row_len = a.longest() + 1;
    let mut workspace = vec![f64::NAN; pairs * row_len];
    let written = AtomicU32::new(0);
    // The launch before wrote every pair, and counted its warps through.
    let relayed = AtomicU64::new(numbered(number.wrapping_sub(1), pairs as u32));
    let through = AtomicU64::new(3 * pairs as u64);
    let (gave_up, finished) = (AtomicU32::new(0), AtomicU32::new(0));
    let warp_values = (a.longest() + b.longest()) * (a.dims + 1);
    let mut rooms = vec![f64::NAN; (pairs + 1) * warp_values];
    let launch = Shared(StreamedLaunch {
        pairs: paired_launch(measure, (&a_host, &b_host), &mut out, &mut workspace),
        written: written.as_ptr(),
        relayed: relayed.as_ptr(),
        through: through.as_ptr(),
        launch_number: number,
        gave_up: gave_up.as_ptr(),
        finished: finished.as_ptr(),
        warp_values: warp_values as u64,
        // Real time on emulated warps: never reached by a test that passes.
        patience_ns: 60_000_000_000,
    });
    let rooms_at = Shared(rooms.as_mut_ptr());
    let a_to = Shared((a_host.values.as_mut_ptr(), a_host.times.as_mut_ptr()));
    let b_to = Shared((b_host.values.as_mut_ptr(), b_host.times.as_mut_ptr()));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for p in 0..pairs {
                if matches!(writer, Writer::GivesUpAfter(q) if q == p) {
                    written.store(ABANDONED, Ordering::Release);
                    return;
                }
                if !matches!(writer, Writer::Fast) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                // SAFETY: the warps read pair `p` only once the count below
                // says it is written.
                unsafe {
                    a.copy_series(a_to.get(), p);
                    b.copy_series(b_to.get(), p);
                }
                written.store(p as u32 + 1, Ordering::Release);
            }
        });
        run_numbered_warps::<LANES, _>(pairs + 1, |warp, index| {
            // SAFETY: every pointer of the launch outlives the warps; each
            // warp has `warp_values` values of room of its own; the relay
            // runs beside the others.
            unsafe {
                let room = rooms_at.get().add(index * warp_values);
                launch
                    .get()
                    .run_pair_in_warp::<_, STRIPE, false>(warp, index as u64, room);
            }
        });
    });
    Streamed {
        values: out,
        finished: finished.into_inner(),
        through: through.into_inner(),
        gave_up: gave_up.into_inner(),
    }
}

/// The same pairs fully written, by the `warp` kernels' launch.
fn resident<M: Recurrence<f64> + Sync + Copy>(measure: M, (a, b): (&Batch, &Batch)) -> Vec<f64> {
    let pairs = a.offsets.len() - 1;
    let mut out = vec![f64::NAN; pairs];
    let mut workspace = vec![f64::NAN; pairs * (a.longest() + 1)];
    let launch = Shared(paired_launch(measure, (a, b), &mut out, &mut workspace));
    run_numbered_warps::<LANES, _>(pairs, |warp, index| {
        // SAFETY: the sets, outputs and workspace outlive the warps.
        unsafe {
            launch
                .get()
                .run_pair_in_warp::<_, STRIPE, false>(warp, index as u64);
        }
    });
    out
}

/// Pair `k` of `a` and `b` a warp, values to `out`, borders of pairs wider
/// than a panel in `workspace` (a row of `a`'s longest series and one more
/// a pair).
fn paired_launch<M>(
    measure: M,
    (a, b): (&Batch, &Batch),
    out: &mut [f64],
    workspace: &mut [f64],
) -> PairsLaunch<f64, M> {
    PairsLaunch {
        a: a.set_ref(),
        b: b.set_ref(),
        params: measure,
        out: out.as_mut_ptr(),
        workspace: workspace.as_mut_ptr(),
        row_len: a.longest() as u64 + 1,
        first_pair: 0,
        pair_count: out.len() as u64,
        numbering: Numbering::Paired,
    }
}

/// Random pairs of the given lengths and dimension (timestamps included).
fn pairs_of(seed: u64, lengths: &[(usize, usize)], dims: usize) -> Vec<Pair> {
    lengths
        .iter()
        .enumerate()
        .map(|(k, &(n, m))| Pair::random(seed + k as u64, n, m, dims))
        .collect()
}

#[test]
fn streamed_pairs_equal_written_ones_bit_for_bit() {
    let measures = [
        Measure::SoftDtw(0.1),
        Measure::SoftDtwBand(1.0, 3),
        Measure::Dtw(None),
        Measure::Dtw(Some(2)),
        Measure::Twed(0.5, 1.0, 1.0),
    ];
    let cases: [(&[(usize, usize)], usize); 4] = [
        // Unequal lengths; a pair of one sample.
        (&[(40, 32), (1, 1), (17, 9), (33, 32), (64, 20)], 1),
        // Two dimensions.
        (&[(7, 5), (12, 30), (3, 3)], 2),
        // Wider than one panel (32 columns).
        (&[(50, 70), (9, 33)], 1),
        // Series of `a` of one sample against long ones; three dimensions.
        (&[(1, 40), (2, 25)], 3),
    ];
    // Launch numbers whose predecessors wrap.
    let numbers = [0, 1, 77, u32::MAX];
    for (k, &(lengths, dims)) in cases.iter().enumerate() {
        let pairs = pairs_of(4000 + 10 * k as u64, lengths, dims);
        let (a, b) = (Batch::of(&pairs, false), Batch::of(&pairs, true));
        for (m, measure) in measures.into_iter().enumerate() {
            for writer in [Writer::Slow, Writer::Fast] {
                let number = numbers[(k + m) % numbers.len()];
                let context = format!("case {k}, {measure:?}, {writer:?} writer, launch {number}");
                let (got, expected) = with_params!(measure, |params| (
                    streamed(params, (&a, &b), writer, number),
                    resident(params, (&a, &b)),
                ));
                assert_eq!(got.finished, 1, "{context}: finished");
                assert_eq!(got.through, pairs.len() as u64, "{context}: through");
                assert_eq!(got.gave_up, 0, "{context}: no warp gives up");
                for (p, pair) in pairs.iter().enumerate() {
                    let context = format!("{context}, pair {p}");
                    assert_eq!(got.values[p].to_bits(), expected[p].to_bits(), "{context}");
                    assert_close(&context, got.values[p], pair.oracle(measure));
                }
            }
        }
    }
}

#[test]
fn warps_stop_when_the_host_gives_up() {
    let pairs = pairs_of(4100, &[(10, 5), (40, 20), (30, 30), (60, 12)], 1);
    let (a, b) = (Batch::of(&pairs, false), Batch::of(&pairs, true));
    let params = timewarp_kernels::SoftDtwParams::new(0.1);
    // The host writes pairs 0 and 1, then gives up.
    let got = streamed(params, (&a, &b), Writer::GivesUpAfter(2), 5);
    let expected = resident(params, (&a, &b));
    assert!(expected.iter().all(|v| v.is_finite()));
    // Pairs 0 and 1: their values, if their warps saw the count before the
    // host gave up; pairs 2 and 3: none. Every warp is through either way.
    for (value, expected) in got.values.iter().zip(&expected).take(2) {
        assert!(value.is_nan() || value.to_bits() == expected.to_bits());
    }
    assert!(
        got.values[2..].iter().all(|v| v.is_nan()),
        "{:?}",
        got.values
    );
    assert_eq!((got.finished, got.through), (1, pairs.len() as u64));
}
