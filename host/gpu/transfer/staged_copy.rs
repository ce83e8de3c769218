//! An upload's values staged through a kept pinned buffer
//! ([`stage_and_copy`]): written by the calling thread, or by a few staging
//! threads and the calling thread in pieces, each range copied to the
//! device as soon as it is written, the first copy small so that the bus
//! starts soon.

use super::image_writes::Image;
use crate::Result;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Staged bytes up to which the calling thread writes them all and then
/// copies them; more are written by the staging threads in pieces, each
/// copied to the device as soon as it is written ([`stage_and_copy`]).
const ONE_THREAD_STAGING_BYTES: usize = 256 << 10;
/// What a staging thread writes at a time.
const STAGING_WORK_BYTES: usize = 32 << 10;
/// The first copy of a staging of many bytes: small, so that the bus
/// starts soon; each next one is twice the one before, up to
/// [`LARGEST_COPY_BYTES`]. Each copy costs the host about 2.5 us, so more,
/// smaller copies (growth of 150%, all of 128 or 256 KiB) were slower.
const FIRST_COPY_BYTES: usize = 128 << 10;
/// The largest copy of a staging.
const LARGEST_COPY_BYTES: usize = 4 << 20;

/// `ranges` (in order) cut into copies: the first of [`FIRST_COPY_BYTES`],
/// each next twice the one before, up to [`LARGEST_COPY_BYTES`], a short
/// rest joined to the copy before it. While the bus carries one copy, the
/// staging threads write the next, and few copies cost few calls.
fn copy_schedule(ranges: &[Range<usize>]) -> Vec<Range<usize>> {
    let mut size = FIRST_COPY_BYTES;
    let mut copies = Vec::new();
    for range in ranges {
        let mut start = range.start;
        while start < range.end {
            let next = (2 * size).min(LARGEST_COPY_BYTES);
            let mut end = (start + size).min(range.end);
            // A short rest goes with this copy.
            if range.end - end < next / 2 {
                end = range.end;
            }
            copies.push(start..end);
            start = end;
            size = next;
        }
    }
    copies
}

/// A pinned staging buffer's address, shared by the staging threads that
/// write its pieces.
#[derive(Clone, Copy)]
pub(crate) struct Staging(pub(crate) *mut u8);

// SAFETY: each thread writes its own bytes of the buffer (`stage_and_copy`).
unsafe impl Send for Staging {}
// SAFETY: as for `Send`: no two threads write the same bytes.
unsafe impl Sync for Staging {}

impl Staging {
    /// The buffer's bytes `range`.
    ///
    /// # Safety
    /// They are in the buffer, and nothing else touches them meanwhile.
    unsafe fn bytes<'b>(self, range: Range<usize>) -> &'b mut [u8] {
        std::slice::from_raw_parts_mut(self.0.add(range.start), range.len())
    }
}

/// A piece of staging work: bytes `to` of the buffer, from image position
/// `from` on, part of the device copy `copy`.
struct StagingWork<'i, 'a> {
    image: &'i Image<'a>,
    to: Range<usize>,
    from: usize,
    copy: usize,
}

/// Says that a piece of staging work is done, also if it panicked (the copy
/// waiting for it then goes ahead with the bytes it has, and the scope
/// passes the panic on).
struct WorkDone<'c>(&'c AtomicUsize);

impl Drop for WorkDone<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// How long the staging threads keep spinning after a staging, for the
/// next one: threads that have fallen asleep take longer to start writing
/// than the first piece takes to write (spinning, the first 512 KiB of a
/// 1024 x 128 call were written 8 us sooner). A bounded cost, a few cores
/// for this long after a call that staged more than
/// [`ONE_THREAD_STAGING_BYTES`].
const STAGING_SPIN: std::time::Duration = std::time::Duration::from_micros(200);

/// Counts the stagings begun, so that threads spinning after one stop as
/// soon as the next begins (or began meanwhile).
static STAGINGS: AtomicUsize = AtomicUsize::new(0);

/// Keeps every staging thread spinning for [`STAGING_SPIN`] after staging
/// number `staging`, or until the next staging begins.
fn keep_spinning(pool: &rayon::ThreadPool, staging: usize) {
    for _ in 0..pool.current_num_threads() {
        pool.spawn(move || {
            let start = std::time::Instant::now();
            while STAGINGS.load(Ordering::Relaxed) == staging && start.elapsed() < STAGING_SPIN {
                std::hint::spin_loop();
            }
        });
    }
}

/// The threads that write an upload's values into staging memory: a few,
/// a pool of their own. Waking more (the copy threads, one a core) cost a
/// call more than they saved: 1 MiB staged in two pieces took 55 us with
/// 4 threads, 70 us with 16.
fn staging_threads() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores.min(4))
            .thread_name(|k| format!("timewarp-staging-{k}"))
            .build()
            .expect("the staging threads start")
    })
}

/// Writes the values and timestamps of each `(at, image)` of `staged` into
/// the staging buffer from byte `at` on, and calls `copy` with each range
/// of `copies` (in order) once every staged byte in it is written. Few
/// bytes are written on this thread; more by the staging threads, and the
/// ranges are cut into copies ([`copy_schedule`]), so that the device
/// copies the first while the threads write the rest. On this thread,
/// `prepare` runs before the first copy (while the threads write it, when
/// there are threads) and `after_first` once the first copy is queued
/// (while the bus carries it): the caller's work, off the upload's path.
///
/// # Safety
/// `buffer` holds every byte of `copies` and of the staged images, and
/// nothing else reads or writes it meanwhile.
pub(crate) unsafe fn stage_and_copy(
    buffer: Staging,
    staged: &[(usize, &Image)],
    copies: &[Range<usize>],
    prepare: impl FnOnce() -> Result<()>,
    after_first: impl FnOnce() -> Result<()>,
    copy: impl FnMut(Range<usize>) -> Result<()>,
) -> Result<()> {
    let copies = if staged_bytes(staged) <= ONE_THREAD_STAGING_BYTES {
        copies.to_vec()
    } else {
        copy_schedule(copies)
    };
    stage_in_order(buffer, staged, &copies, prepare, after_first, copy)
}

/// The bytes of values and timestamps of an image.
fn values_bytes(image: &Image) -> usize {
    image.layout.bytes() - image.layout.values_at()
}

/// The bytes of values and timestamps of the images `staged`.
fn staged_bytes(staged: &[(usize, &Image)]) -> usize {
    staged.iter().map(|(_, image)| values_bytes(image)).sum()
}

/// [`stage_and_copy`] with the ranges as given, each one `copy` call: the
/// caller cuts them (a call that hands each range to a kernel already
/// running, rather than to a copy, wants many small ones).
///
/// # Safety
/// As [`stage_and_copy`].
pub(crate) unsafe fn stage_in_order(
    buffer: Staging,
    staged: &[(usize, &Image)],
    copies: &[Range<usize>],
    prepare: impl FnOnce() -> Result<()>,
    after_first: impl FnOnce() -> Result<()>,
    mut copy: impl FnMut(Range<usize>) -> Result<()>,
) -> Result<()> {
    if staged_bytes(staged) <= ONE_THREAD_STAGING_BYTES {
        prepare()?;
        for &(at, image) in staged {
            let to = buffer.bytes(at..at + values_bytes(image));
            image.write(to, image.layout.values_at());
        }
        let mut after_first = Some(after_first);
        for range in copies {
            copy(range.clone())?;
            if let Some(after_first) = after_first.take() {
                after_first()?;
            }
        }
        return after_first.map_or(Ok(()), |after_first| after_first());
    }
    let pool = staging_threads();
    // Threads still spinning after an earlier staging stop for this one's
    // work.
    let staging = STAGINGS.fetch_add(1, Ordering::Relaxed) + 1;
    let mut work = Vec::new();
    for (k, range) in copies.iter().enumerate() {
        for &(at, image) in staged {
            let end = at + values_bytes(image);
            let (start, stop) = (range.start.max(at), range.end.min(end));
            for to in (start..stop).step_by(STAGING_WORK_BYTES) {
                let to = to..(to + STAGING_WORK_BYTES).min(stop);
                let from = image.layout.values_at() + (to.start - at);
                work.push(StagingWork {
                    image,
                    to,
                    from,
                    copy: k,
                });
            }
        }
    }
    let mut pending: Vec<AtomicUsize> = (0..copies.len()).map(|_| AtomicUsize::new(0)).collect();
    for piece in &work {
        *pending[piece.copy].get_mut() += 1;
    }
    // The pieces are claimed in order, by the staging threads and, for the
    // copy it waits for, by this thread too.
    let next = AtomicUsize::new(0);
    let mut after_first = Some(after_first);
    let write = |k: usize| {
        let piece = &work[k];
        let _done = WorkDone(&pending[piece.copy]);
        // SAFETY: the pieces are disjoint bytes of the buffer (the
        // caller's promise covers them).
        let to = unsafe { buffer.bytes(piece.to.clone()) };
        piece.image.write(to, piece.from);
    };
    pool.in_place_scope_fifo(|scope| {
        for _ in 0..pool.current_num_threads() {
            scope.spawn_fifo(|_| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= work.len() {
                    break;
                }
                write(k);
            });
        }
        let copied = (|| {
            prepare()?;
            for (k, (range, pending)) in copies.iter().zip(&pending).enumerate() {
                let mut spins = 0u32;
                while pending.load(Ordering::Acquire) != 0 {
                    // Help with this copy's pieces; once they are all
                    // claimed, spin briefly, then give the core to the
                    // threads.
                    let claimed = next.load(Ordering::Relaxed);
                    if work.get(claimed).is_some_and(|piece| piece.copy == k)
                        && next
                            .compare_exchange(
                                claimed,
                                claimed + 1,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            )
                            .is_ok()
                    {
                        write(claimed);
                        continue;
                    }
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                copy(range.clone())?;
                if let Some(after_first) = after_first.take() {
                    after_first()?;
                }
            }
            Ok(())
        })();
        // On an error nothing more is copied, and no piece more is begun.
        if copied.is_err() {
            next.store(work.len(), Ordering::Relaxed);
        }
        copied
    })?;
    keep_spinning(pool, staging);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::plan::layout::test_sets::set;
    use crate::SeriesSet;

    /// The values then the timestamps of a whole batch, as bytes.
    fn values_and_times(set: &SeriesSet<f64>) -> Vec<u8> {
        let (values, _, times) = set.parts();
        let times = times.unwrap_or(&[]);
        values
            .iter()
            .chain(times)
            .flat_map(|v| v.to_ne_bytes())
            .collect()
    }

    /// The copies cover the ranges in order, a small one first, each twice
    /// the one before (a short rest joined to it), none far past the
    /// largest.
    #[test]
    fn copies_start_small_and_grow() {
        let k = 1 << 10;
        let one_mib = 0..1024 * k;
        assert_eq!(
            copy_schedule(std::slice::from_ref(&one_mib)),
            [0..128 * k, 128 * k..384 * k, 384 * k..1024 * k]
        );
        let short = 5..70;
        assert_eq!(copy_schedule(std::slice::from_ref(&short)), [short]);
        for ranges in [
            vec![0..3 * k, 4 * k..40 * 1024 * k],
            vec![0..64, 256..200 * k, 200 * k..(200 * k + 9 * 1024 * k)],
        ] {
            let copies = copy_schedule(&ranges);
            let covered = copies.iter().flat_map(|range| range.clone());
            assert!(covered.eq(ranges.iter().flat_map(|range| range.clone())));
            assert!(copies.iter().all(|copy| copy.len() <= 6 * 1024 * k));
            assert!(copies[0].len() < 256 * k);
        }
    }

    /// Each copy finds every staged byte of its range written, the copies
    /// come in order and cover their ranges exactly, on this thread (few
    /// bytes) and on the staging threads (more, in pieces).
    #[test]
    fn staged_bytes_are_written_before_they_are_copied() {
        for lengths in [&[3, 1, 7][..], &[40_000, 3, 25_000, 1]] {
            let sets = [set(lengths, 2, true), set(&lengths[1..], 1, false)];
            let images: Vec<Image> = sets
                .iter()
                .map(|set| Image::new(set, &(0..set.len())))
                .collect();
            let expected: Vec<Vec<u8>> = sets.iter().map(values_and_times).collect();
            // As an upload lays them out: 64 bytes of offsets, each image's
            // values at the next multiple of 256.
            let first = 256;
            let second = (first + expected[0].len()).next_multiple_of(256);
            let len = second + expected[1].len();
            let staged = [(first, &images[0]), (second, &images[1])];
            let whole = Range { start: 0, end: len };
            for copies in [
                vec![whole],
                vec![0..64, first..first + expected[0].len(), second..len],
            ] {
                let mut buffer = vec![0u8; len];
                let at = buffer.as_mut_ptr();
                let mut copied = Vec::new();
                let steps = std::cell::RefCell::new(Vec::new());
                // SAFETY: the buffer holds every range; only the staging
                // writes it while the copies read it.
                unsafe {
                    stage_and_copy(
                        Staging(at),
                        &staged,
                        &copies,
                        || {
                            steps.borrow_mut().push("prepare");
                            Ok(())
                        },
                        || {
                            steps.borrow_mut().push("after first");
                            Ok(())
                        },
                        |range| {
                            steps.borrow_mut().push("copy");
                            // Only the range: the threads may still write others.
                            let bytes =
                                std::slice::from_raw_parts(at.add(range.start), range.len());
                            for (&(start, _), expected) in staged.iter().zip(&expected) {
                                let end = start + expected.len();
                                let (from, to) = (range.start.max(start), range.end.min(end));
                                if from < to {
                                    assert_eq!(
                                        bytes[from - range.start..to - range.start],
                                        expected[from - start..to - start]
                                    );
                                }
                            }
                            copied.push(range);
                            Ok(())
                        },
                    )
                }
                .unwrap();
                let mut covered = copied.iter().flat_map(|range| range.clone());
                let wanted = copies.iter().flat_map(|range| range.clone());
                assert!(
                    covered.by_ref().eq(wanted),
                    "the copies cover their ranges in order"
                );
                if lengths.len() > 3 {
                    assert!(copied.len() > copies.len(), "large stagings go in pieces");
                }
                let steps = steps.into_inner();
                assert_eq!(steps[..3], ["prepare", "copy", "after first"]);
                assert!(steps[3..].iter().all(|&step| step == "copy"));
            }
        }
    }
}
