//! The device image of a range of series, as the host writes it: the
//! `count + 1` offsets (rebased to the range's first sample), the values,
//! then the timestamps if the batch has them ([`Layout`]). Streamed chunks,
//! uploaded blocks, resident sets and paired uploads all take this form;
//! the image's bytes are written straight from the batch's arrays into
//! staging memory. No CUDA here: the writes are unit-tested on the CPU.

use crate::gpu::plan::layout::Layout;
use crate::{Float, SeriesSet};
use rayon::prelude::*;
use std::mem::size_of;
use std::ops::Range;

/// Host copies at least this large are spread over threads, in pieces.
pub(crate) const PARALLEL_COPY_BYTES: usize = 1 << 20;
const COPY_PIECE_BYTES: usize = 256 << 10;

/// A range of series of a host batch, seen as the bytes of its device
/// image, straight from the batch's arrays (nothing is copied to build it).
pub(crate) struct Image<'a> {
    pub layout: Layout,
    /// `count + 1` offsets, before rebasing (they are rebased as written).
    pub offsets: &'a [u64],
    pub values: &'a [u8],
    pub times: &'a [u8],
    /// The batch's values and timestamps are page-locked: the device may
    /// copy them straight from there ([`Image::direct`]).
    pub page_locked: bool,
    /// The (shortest, longest) series of the whole batch, kept by it: when
    /// they are equal, so are the range's.
    pub lengths: (usize, usize),
}

pub(crate) fn as_bytes_u64(values: &[u64]) -> &[u8] {
    // SAFETY: u64 is plain bytes with no padding; the length is the
    // slice's own size in bytes.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) }
}

fn as_bytes<T: Float>(values: &[T]) -> &[u8] {
    // SAFETY: f32 and f64 are plain bytes with no padding; the length is
    // the slice's own size in bytes.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) }
}

impl<'a> Image<'a> {
    pub(crate) fn new<T: Float>(set: &'a SeriesSet<T>, range: &Range<usize>) -> Image<'a> {
        let (values, offsets, times) = set.parts();
        let (start, end) = (offsets[range.start] as usize, offsets[range.end] as usize);
        let dims = set.dims();
        Image {
            layout: Layout::of(set, range),
            offsets: &offsets[range.start..=range.end],
            values: as_bytes(&values[start * dims..end * dims]),
            times: times.map_or(&[][..], |t| as_bytes(&t[start..end])),
            page_locked: set.is_page_locked(),
            lengths: set.lengths(),
        }
    }

    /// How many of the image's first bytes go through staging memory: all
    /// of them, or from a page-locked batch its offsets alone (rebased, so
    /// not the batch's own bytes); the rest is [`Image::direct`].
    pub(crate) fn staged_bytes(&self) -> usize {
        if self.page_locked {
            self.layout.values_at()
        } else {
            self.layout.bytes()
        }
    }

    /// The parts of the image the device copies straight from a page-locked
    /// batch, with where each goes in the image: its values, then its
    /// timestamps if any; none from a batch in ordinary memory.
    pub(crate) fn direct(&self) -> Vec<(usize, &'a [u8])> {
        if !self.page_locked {
            return Vec::new();
        }
        [
            (self.layout.values_at(), self.values),
            (self.layout.times_at(), self.times),
        ]
        .into_iter()
        .filter(|(_, bytes)| !bytes.is_empty())
        .collect()
    }

    /// Writes bytes `start .. start + dst.len()` of the image to `dst`.
    pub(crate) fn write(&self, dst: &mut [u8], start: usize) {
        const WORD: usize = size_of::<u64>();
        let base = self.offsets[0];
        let offset_bytes = self.layout.values_at();
        let mut at = 0;
        while at < dst.len() {
            let position = start + at;
            let rest = &mut dst[at..];
            at += if position < offset_bytes {
                let (k, within) = (position / WORD, position % WORD);
                if within == 0 && rest.len() >= WORD {
                    let n = (rest.len() / WORD).min(self.offsets.len() - k);
                    for (d, &o) in rest[..n * WORD]
                        .chunks_exact_mut(WORD)
                        .zip(&self.offsets[k..k + n])
                    {
                        d.copy_from_slice(&(o - base).to_ne_bytes());
                    }
                    n * WORD
                } else {
                    let word = (self.offsets[k] - base).to_ne_bytes();
                    let n = (WORD - within).min(rest.len());
                    rest[..n].copy_from_slice(&word[within..within + n]);
                    n
                }
            } else {
                let position = position - offset_bytes;
                let (source, position) = if position < self.values.len() {
                    (self.values, position)
                } else {
                    (self.times, position - self.values.len())
                };
                let n = (source.len() - position).min(rest.len());
                stream_copy(&mut rest[..n], &source[position..position + n]);
                n
            };
        }
    }

    /// [`Image::write`], spread over threads for large windows.
    pub(crate) fn write_parallel(&self, dst: &mut [u8], start: usize) {
        if dst.len() < PARALLEL_COPY_BYTES {
            return self.write(dst, start);
        }
        copy_threads().install(|| {
            dst.par_chunks_mut(COPY_PIECE_BYTES)
                .enumerate()
                .for_each(|(k, piece)| self.write(piece, start + k * COPY_PIECE_BYTES))
        });
    }
}

/// `dst.copy_from_slice(src)` with stores that bypass the CPU's caches
/// where the CPU has them (x86-64): staging memory is written once and then
/// read by the GPU's copy engine, which reads lines from memory much faster
/// than lines the CPU still holds modified in its caches (1 MiB staged by
/// 4 threads and copied: 77 us with plain stores, 63 us with these).
pub fn stream_copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "stream_copy: equal lengths");
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        const LINE: usize = 64;
        // Non-temporal stores need 16-byte aligned destinations: the
        // unaligned head and the tail that fills no line go the plain way.
        let head = dst.as_ptr().align_offset(16).min(dst.len());
        let lines = (dst.len() - head) / LINE;
        if lines == 0 {
            dst.copy_from_slice(src);
            return;
        }
        dst[..head].copy_from_slice(&src[..head]);
        let body = head + lines * LINE;
        // SAFETY: SSE2 is part of x86-64; `dst[head..body]` is 16-byte
        // aligned and both slices hold `body` bytes; the loads are
        // unaligned ones. The fence orders the streamed stores before
        // whatever the caller does next (publishing the buffer to the GPU).
        unsafe {
            let (to, from) = (dst.as_mut_ptr().add(head), src.as_ptr().add(head));
            for line in 0..lines {
                let to = to.add(line * LINE).cast::<__m128i>();
                let from = from.add(line * LINE).cast::<__m128i>();
                let words = [0, 1, 2, 3].map(|k| _mm_loadu_si128(from.add(k)));
                for (k, word) in words.into_iter().enumerate() {
                    _mm_stream_si128(to.add(k), word);
                }
            }
            _mm_sfence();
        }
        dst[body..].copy_from_slice(&src[body..]);
    }
    #[cfg(not(target_arch = "x86_64"))]
    dst.copy_from_slice(src);
}

/// The threads of the GPU runtime's host copies (staging, results): a
/// pool of their own, so that a computation holding the GPU never waits
/// behind other work the process runs on rayon's global pool (CPU
/// computations, a caller's own tasks).
pub(crate) fn copy_threads() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(4, usize::from);
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|k| format!("timewarp-copy-{k}"))
            .build()
            .expect("the copy threads start")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::plan::layout::test_sets::set;

    /// The image built the plain way: rebased offsets, values, timestamps.
    fn expected_image(set: &SeriesSet<f64>, range: Range<usize>) -> Vec<u8> {
        let (values, offsets, times) = set.parts();
        let (start, end) = (offsets[range.start], offsets[range.end]);
        let mut bytes = Vec::new();
        for &o in &offsets[range.start..=range.end] {
            bytes.extend((o - start).to_ne_bytes());
        }
        let (start, end) = (start as usize, end as usize);
        for v in &values[start * set.dims()..end * set.dims()] {
            bytes.extend(v.to_ne_bytes());
        }
        if let Some(times) = times {
            for t in &times[start..end] {
                bytes.extend(t.to_ne_bytes());
            }
        }
        bytes
    }

    #[test]
    fn images_write_any_window() {
        for (dims, times) in [(1, false), (3, false), (2, true)] {
            let set = set(&[3, 1, 7, 2, 5], dims, times);
            for range in [0..5, 1..4, 2..3, 4..5] {
                let expected = expected_image(&set, range.clone());
                let image = Image::new(&set, &range);
                assert_eq!(image.layout.bytes(), expected.len());
                // Every window, including ones that split an offset.
                for start in 0..expected.len() {
                    for len in [1, 3, 8, 13, expected.len() - start] {
                        let len = len.min(expected.len() - start);
                        let mut window = vec![0u8; len];
                        image.write(&mut window, start);
                        assert_eq!(window, expected[start..start + len]);
                    }
                }
            }
        }
    }

    /// The staged bytes and the direct parts of an image together are the
    /// whole image: staged all of it for a batch in ordinary memory.
    #[test]
    fn staged_and_direct_parts_make_the_image() {
        for (dims, times) in [(1, false), (2, true)] {
            let set = set(&[3, 1, 7, 2, 5], dims, times);
            let range = 1..4;
            let expected = expected_image(&set, range.clone());
            let mut image = Image::new(&set, &range);
            assert!(!image.page_locked);
            assert_eq!(image.staged_bytes(), expected.len());
            assert!(image.direct().is_empty());
            // As the image of a page-locked batch of the same values.
            image.page_locked = true;
            let mut built = vec![0u8; image.staged_bytes()];
            image.write(&mut built, 0);
            assert_eq!(built.len(), (range.len() + 1) * 8);
            built.resize(expected.len(), 0);
            let direct = image.direct();
            assert_eq!(direct.len(), if times { 2 } else { 1 });
            for (at, bytes) in direct {
                built[at..at + bytes.len()].copy_from_slice(bytes);
            }
            assert_eq!(built, expected);
        }
    }

    /// Every alignment of destination and source, every length around the
    /// streamed lines' edges.
    #[test]
    fn stream_copy_is_a_copy() {
        let source: Vec<u8> = (0..700u32).map(|k| (k * 7 + 3) as u8).collect();
        for dst_shift in 0..17 {
            for src_shift in [0, 1, 5, 16] {
                for len in [0, 1, 15, 16, 63, 64, 65, 127, 128, 200, 640] {
                    let src = &source[src_shift..src_shift + len];
                    let mut buffer = vec![0xeeu8; len + 40];
                    stream_copy(&mut buffer[dst_shift..dst_shift + len], src);
                    assert_eq!(&buffer[dst_shift..dst_shift + len], src);
                    assert!(buffer[..dst_shift].iter().all(|&b| b == 0xee));
                    assert!(buffer[dst_shift + len..].iter().all(|&b| b == 0xee));
                }
            }
        }
    }

    #[test]
    fn parallel_writes_match() {
        let set = set(&[50_000, 3, 90_000, 1], 2, true);
        let range = 0..4;
        let expected = expected_image(&set, range.clone());
        let image = Image::new(&set, &range);
        let mut all = vec![0u8; expected.len()];
        image.write_parallel(&mut all, 0);
        assert_eq!(all, expected);
        let mut part = vec![0u8; expected.len() - 1001];
        image.write_parallel(&mut part, 1001);
        assert_eq!(part, expected[1001..]);
    }
}
