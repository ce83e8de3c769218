//! Paired warp launches that start before their series are all written
//! ([`StreamedLaunch`]): the pairs live in mapped host memory, which the
//! host fills while the kernel runs, raising a count of the pairs written
//! so far. Each warp waits for its pair, copies its series into the
//! block's shared memory, and runs the column driver there, so that the
//! first pairs compute while the host still writes the last ones, and no
//! copy to device memory comes between.
//!
//! One warp more than pairs, the launch's last, reads the host's count (a
//! load across the bus each time) and hands it on to the others in device
//! memory, where their waiting costs the bus nothing (a thousand warps
//! reading host memory over and over ended a kernel about 970 us after
//! the host's last write, 64 warps about 55 us). The device words it uses
//! are kept from launch to launch, so that none is allocated or zeroed for
//! a call: the count it hands on carries the launch's number, and it zeroes
//! the count of warps through before it hands any count on. The warp that
//! makes every pair's warp through says so in host memory (`finished`),
//! so that the host can read the values without waiting for the kernel's
//! end to reach it. A warp that waits past the launch's patience, or finds
//! the host gave up ([`ABANDONED`]), stops without a value (and in the
//! first case says so in host memory), so that a host that fails midway,
//! or a kernel that runs before the host can write (a launch that blocks),
//! never hangs: the host then returns its error, or computes the pairs
//! another way.

use super::pairs::PairsLaunch;
use crate::drivers::columns::pair::warp_pair;
use crate::hw::{broadcast_u32, Warp};
use crate::{Real, Recurrence, Series};
use core::mem::size_of;

/// The count the host writes when it stops before every pair is written.
pub const ABANDONED: u32 = u32::MAX;

/// A paired warp launch over series in mapped host memory still being
/// written: `pairs` as for the `warp` kernels ([`PairsLaunch`], `a` and `b`
/// addressing host memory, numbering [`crate::launch::Numbering::Paired`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StreamedLaunch<T, P> {
    pub pairs: PairsLaunch<T, P>,
    /// Host memory: how many pairs, from the first, the host has written
    /// (it only grows), or [`ABANDONED`].
    pub written: *const u32,
    /// Device memory, kept between launches: `written` as the relay (the
    /// warp after the last pair) last read it, for the other warps, in the
    /// low 32 bits, and in the high 32 the launch that wrote it
    /// (`launch_number`): what an earlier launch left counts as nothing.
    pub relayed: *mut u64,
    /// Device memory, kept between launches: the warps of pairs that are
    /// through (value written, or given up), which the relay zeroes first.
    pub through: *mut u64,
    /// The number of this launch among those that use `relayed`: not the
    /// number of the launch before.
    pub launch_number: u32,
    /// Host memory, zero at the launch: 1 once a warp gave up waiting.
    pub gave_up: *mut u32,
    /// Host memory, zero at the launch: 1 once every pair's warp is
    /// through; every value written before is visible to the host then.
    pub finished: *mut u32,
    /// Shared memory each warp of a block takes, in values of `T`: the
    /// values (and timestamps) of the launch's largest pair.
    pub warp_values: u64,
    /// How long a warp waits for its pair, in nanoseconds.
    pub patience_ns: u64,
}

impl<T: Real, P: Recurrence<T>> StreamedLaunch<T, P> {
    /// Pair `index` by one warp with the column driver, `S` columns a lane,
    /// once the host has written it; the warp's series in `room`
    /// (`warp_values` values of shared memory of its own). `UNIVARIATE` as
    /// for [`PairsLaunch::run_pair_in_warp`]. The warp after the last pair
    /// hands the host's count on ([`Self::relay`]); warps past it return at
    /// once.
    ///
    /// # Safety
    /// All lanes of the warp call it together; the launch has a warp more
    /// than pairs, every one resident at once (a cooperative launch), so
    /// that the relay runs while the others wait; pointers valid as
    /// documented, the offsets of `a` and `b` (if any) written before the
    /// launch; no other launch uses `relayed` and `through` meanwhile.
    #[inline(always)]
    pub unsafe fn run_pair_in_warp<W: Warp, const S: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        index: u64,
        room: *mut T,
    ) {
        let launch = &self.pairs;
        if index == launch.pair_count {
            self.relay(warp);
            return;
        }
        if index > launch.pair_count {
            return;
        }
        if self.wait_for(warp, index) {
            self.compute::<W, S, UNIVARIATE>(warp, index, room);
        }
        self.go_through(warp);
    }

    /// Pair `index`, written: copied into `room`, computed, and its value
    /// written.
    ///
    /// # Safety
    /// As [`Self::run_pair_in_warp`]; the host has written the pair.
    #[inline(always)]
    unsafe fn compute<W: Warp, const S: usize, const UNIVARIATE: bool>(
        &self,
        warp: &W,
        index: u64,
        room: *mut T,
    ) {
        let launch = &self.pairs;
        let (i, j) = launch.pair(index);
        let a = launch.a.series_of::<UNIVARIATE>(i);
        let b = launch.b.series_of::<UNIVARIATE>(j);
        let (a_values, b_values) = (a.len * a.dims, b.len * b.dims);
        let times = room.add(a_values + b_values);
        let a_local = local(&a, room, times);
        let b_local = local(&b, room.add(a_values), times.add(a.len));
        copy_parts(
            warp,
            [
                part(a.values, a_local.values, a_values),
                part(b.values, b_local.values, b_values),
                part(a.times, a_local.times, a.len),
                part(b.times, b_local.times, b.len),
            ],
        );
        // The lanes read each other's copies.
        warp.sync();
        let border = launch.border_of(index);
        let value = warp_pair::<T, P, W, S>(warp, &launch.params, &a_local, &b_local, border);
        if warp.lane() == 0 {
            launch.write(i, j, value);
        }
    }

    /// Counts this pair's warp through (lane 0, which wrote its value or
    /// said it gave up); the last one tells the host that every pair's is.
    ///
    /// # Safety
    /// As [`Self::run_pair_in_warp`].
    #[inline(always)]
    unsafe fn go_through<W: Warp>(&self, warp: &W) {
        if warp.lane() == 0 && warp.count_up(self.through) + 1 == self.pairs.pair_count {
            warp.store_host_flag(self.finished, 1);
        }
    }

    /// `count` with this launch's number, as the relay hands it on.
    #[inline(always)]
    fn numbered(&self, count: u32) -> u64 {
        (self.launch_number as u64) << 32 | count as u64
    }

    /// The count in `relayed`: 0 if an earlier launch wrote it.
    #[inline(always)]
    fn count_of(&self, relayed: u64) -> u32 {
        if (relayed >> 32) as u32 == self.launch_number {
            relayed as u32
        } else {
            0
        }
    }

    /// Reads the host's count (across the bus) and hands it on to the other
    /// warps in device memory, until every pair is written, the host gives
    /// up, or the launch's patience runs out (then says so).
    ///
    /// # Safety
    /// As [`Self::run_pair_in_warp`].
    #[inline(always)]
    unsafe fn relay<W: Warp>(&self, warp: &W) {
        if warp.lane() != 0 {
            return;
        }
        // Before any count: a warp counts itself through once it has seen
        // one of this launch (or waited its whole patience, long after
        // this).
        warp.store_count(self.through, 0);
        let started = warp.clock_ns();
        let mut handed_on = 0;
        loop {
            let count = warp.load_host_count(self.written);
            if count != handed_on {
                warp.store_count(self.relayed, self.numbered(count));
                handed_on = count;
            }
            if count == ABANDONED || count as u64 >= self.pairs.pair_count {
                return;
            }
            if self.out_of_patience(warp, started) {
                warp.store_count(self.relayed, self.numbered(ABANDONED));
                return;
            }
            warp.pause();
        }
    }

    /// Waits until the relay says the host has written pair `index`: true
    /// then, false if the host gave up or the launch's patience ran out
    /// (the warp has then said so).
    ///
    /// # Safety
    /// As [`Self::run_pair_in_warp`].
    #[inline(always)]
    unsafe fn wait_for<W: Warp>(&self, warp: &W, index: u64) -> bool {
        let started = warp.clock_ns();
        loop {
            let count = broadcast_u32(warp, self.count_of(warp.load_count(self.relayed)), 0);
            if count == ABANDONED {
                return false;
            }
            if count as u64 > index {
                // What lane 0's acquire made visible, to every lane.
                warp.sync();
                return true;
            }
            if self.out_of_patience(warp, started) {
                return false;
            }
            warp.pause();
        }
    }

    /// Whether a warp that began waiting at `started` has waited too long;
    /// if so, it tells the host (lane 0).
    ///
    /// # Safety
    /// As [`Self::run_pair_in_warp`].
    #[inline(always)]
    unsafe fn out_of_patience<W: Warp>(&self, warp: &W, started: u64) -> bool {
        let out = warp.clock_ns().wrapping_sub(started) > self.patience_ns;
        if out && warp.lane() == 0 {
            warp.store_host_flag(self.gave_up, 1);
        }
        out
    }
}

/// `series` as copied to `values` (and its timestamps, if any, to
/// `times`).
#[inline(always)]
fn local<T>(series: &Series<T>, values: *mut T, times: *mut T) -> Series<T> {
    Series {
        values,
        times: if series.times.is_null() {
            series.times
        } else {
            times
        },
        ..*series
    }
}

/// A part of what [`copy_parts`] copies: `count` values from `from` to `to`,
/// as 32-bit words; nothing where `from` is null (a series without
/// timestamps).
#[inline(always)]
fn part<T>(from: *const T, to: *const T, count: usize) -> (*const u32, *mut u32, usize) {
    let words = if from.is_null() {
        0
    } else {
        count * size_of::<T>() / size_of::<u32>()
    };
    (from as *const u32, to as *mut u32, words)
}

/// Words each lane loads before it stores any: the loads of a batch cross
/// the bus together, so that a pair of 128 samples in `f32` (256 words)
/// costs one round trip, not one a word or a series.
const LOAD_BATCH: usize = 8;

/// The `parts` copied by the warp's lanes as one run of words, 32 bits a
/// lane at a time, each word loaded afresh ([`Warp::load_fresh`]),
/// [`LOAD_BATCH`] words a lane in flight at once (across the parts). The
/// lanes must synchronize before they read each other's words.
///
/// # Safety
/// All lanes call it together; each part's `from` holds its words, written
/// as [`Warp::load_fresh`] requires, and its `to` room for them in memory
/// no other warp touches; both 4-byte aligned.
#[inline(always)]
unsafe fn copy_parts<W: Warp, const N: usize>(warp: &W, parts: [(*const u32, *mut u32, usize); N]) {
    let words: usize = parts.iter().map(|part| part.2).sum();
    // The part of word `w` of the run, and the word's place in it.
    let locate = |mut w: usize| {
        for &(from, to, count) in &parts {
            if w < count {
                return (from.add(w), to.add(w));
            }
            w -= count;
        }
        (parts[N - 1].0, parts[N - 1].1)
    };
    let mut first = warp.lane();
    while first < words {
        let word = |b: usize| first + b * W::LANES;
        let mut loaded = [0u32; LOAD_BATCH];
        for (b, value) in loaded.iter_mut().enumerate() {
            if word(b) < words {
                *value = warp.load_fresh(locate(word(b)).0);
            }
        }
        for (b, &value) in loaded.iter().enumerate() {
            if word(b) < words {
                *locate(word(b)).1 = value;
            }
        }
        first += LOAD_BATCH * W::LANES;
    }
}
