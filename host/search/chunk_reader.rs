//! The GPU search's chunk reader: the chunks of a series in order, each
//! read into a page-locked buffer in pieces on the copy threads and
//! checked (docs/algorithms.md, "Search"), while the GPU and the host
//! search the chunk before.

use super::{Plan, SeriesSource};
use crate::gpu::{copy_threads, ChunkBuffer};
use crate::{Error, Result};
use rayon::prelude::*;
use std::sync::mpsc::{Receiver, SyncSender};

/// A chunk's first start, the buffer that holds its samples (its starts
/// and `m - 1` more) and their count of values.
pub(super) type Chunk<B> = Result<(usize, B, usize)>;

/// Where the reader writes a chunk: a page-locked buffer (a plain vector
/// in the tests).
pub(super) trait ChunkValues: Send {
    /// Room for a whole chunk.
    fn values_mut(&mut self) -> &mut [f64];
}

impl ChunkValues for ChunkBuffer {
    fn values_mut(&mut self) -> &mut [f64] {
        ChunkBuffer::values_mut(self)
    }
}

/// Reads the chunks of `chunk_starts` starts of `series` in order, each
/// with the `m - 1` samples after its starts, into the buffers that come
/// from `emptied`, checks that their values are finite, and sends them;
/// stops after an error (sent as the last chunk), once the receiver hangs
/// up, or once no buffer comes back. Returns `emptied`, with the buffers
/// it holds.
pub(super) fn read_ahead<S: SeriesSource + ?Sized, B: ChunkValues>(
    plan: &Plan,
    series: &S,
    chunk_starts: usize,
    send: &SyncSender<Chunk<B>>,
    emptied: Receiver<B>,
) -> Receiver<B> {
    let (m, d) = (plan.m, plan.dims);
    let mut first = 0;
    while first < plan.starts {
        let Ok(mut buffer) = emptied.recv() else {
            break;
        };
        let starts = chunk_starts.min(plan.starts - first);
        let len = (starts + m - 1) * d;
        let chunk =
            fill(series, first, &mut buffer.values_mut()[..len]).map(|()| (first, buffer, len));
        let failed = chunk.is_err();
        if send.send(chunk).is_err() || failed {
            break;
        }
        first += starts;
    }
    emptied
}

/// Samples of a chunk that one copy thread reads and checks at a time.
const FILL_SAMPLES: usize = 1 << 16;

/// Writes the samples of `series` from `first` on into `out` (a whole
/// number of samples), on the copy threads, and checks that they are
/// finite: the first value that is not, in order, is the error.
fn fill<S: SeriesSource + ?Sized>(series: &S, first: usize, out: &mut [f64]) -> Result<()> {
    let d = series.dims();
    let pieces: Vec<Result<()>> = copy_threads().install(|| {
        out.par_chunks_mut(FILL_SAMPLES * d)
            .enumerate()
            .map(|(k, piece)| {
                let start = first + k * FILL_SAMPLES;
                series.read_into(start, piece.len() / d, piece)?;
                match piece.iter().position(|v| !v.is_finite()) {
                    Some(at) => Err(non_finite(piece[at], start + at / d, at % d, d)),
                    None => Ok(()),
                }
            })
            .collect()
    });
    pieces.into_iter().collect()
}

/// The error of a non-finite value, as the CPU's search words it.
fn non_finite(value: f64, sample: usize, k: usize, dims: usize) -> Error {
    let dimension = if dims > 1 {
        format!(", dimension {k}")
    } else {
        String::new()
    };
    Error::InvalidInput(format!(
        "the series has a non-finite value ({value}) at sample {sample}{dimension}"
    ))
}

#[cfg(test)]
mod tests {
    use super::super::{plan, SearchOptions};
    use super::*;
    use ndarray::ArrayView2;
    use std::sync::mpsc::sync_channel;

    /// A walk of `n` samples of `dims` values (an integer sequence's
    /// steps).
    fn walk(n: usize, dims: usize) -> Vec<f64> {
        let mut x = vec![0.0; n * dims];
        for i in 1..n * dims {
            x[i] = x[i - 1] + ((i * 7919) % 13) as f64 - 6.0;
        }
        x
    }

    impl ChunkValues for Vec<f64> {
        fn values_mut(&mut self) -> &mut [f64] {
            self
        }
    }

    #[test]
    fn chunks_are_read_ahead_in_order_up_to_the_first_non_finite_value() {
        let (n, dims, m) = (1000, 2, 40);
        let mut x = walk(n, dims);
        let series = ArrayView2::from_shape((n, dims), &x).unwrap();
        let query = series.slice(ndarray::s![100..100 + m, ..]);
        let plan = plan(query, n, dims, &SearchOptions::default()).unwrap();
        // Every chunk in a buffer of its own (the search reuses two).
        let read = |x: &[f64]| {
            let series = ArrayView2::from_shape((n, dims), x).unwrap();
            let (send, chunks) = sync_channel(1);
            let (free, emptied) = sync_channel(8);
            for _ in 0..8 {
                free.send(vec![f64::NAN; (300 + m - 1) * dims]).unwrap();
            }
            std::thread::scope(|scope| {
                let (plan, series) = (&plan, &series);
                scope.spawn(move || read_ahead(plan, series, 300, &send, emptied));
                chunks.into_iter().collect::<Vec<_>>()
            })
        };
        let chunks = read(&x);
        let firsts: Vec<usize> = chunks.iter().map(|c| c.as_ref().unwrap().0).collect();
        assert_eq!(firsts, [0, 300, 600, 900]);
        for chunk in &chunks {
            let (first, values, len) = chunk.as_ref().unwrap();
            let rows = 300.min(n - m + 1 - first) + m - 1;
            assert_eq!(*len, rows * dims);
            assert_eq!(values[..*len], x[first * dims..(first + rows) * dims]);
        }
        // A NaN in the third chunk alone (and the fourth's overlap): two
        // chunks, then its error, then nothing.
        x[(650 * dims) + 1] = f64::NAN;
        let chunks = read(&x);
        assert_eq!(chunks.len(), 3);
        let error = chunks[2].as_ref().unwrap_err().to_string();
        assert!(error.contains("at sample 650, dimension 1"), "{error}");
    }

    #[test]
    fn a_chunk_is_filled_in_pieces_and_the_first_non_finite_value_named() {
        // Three pieces and a half of 2-D samples, f32 widened as read.
        let (rows, dims) = (3 * FILL_SAMPLES + FILL_SAMPLES / 2, 2);
        let mut x: Vec<f32> = (0..rows * dims).map(|k| (k % 1000) as f32).collect();
        let first = 5;
        let mut out = vec![f64::NAN; (rows - first) * dims];
        let series = ArrayView2::from_shape((rows, dims), &x).unwrap();
        fill(&series, first, &mut out).unwrap();
        assert!(out
            .iter()
            .zip(&x[first * dims..])
            .all(|(&o, &v)| o == f64::from(v)));
        // Values that are not finite in the third piece and the second:
        // the second's is named.
        x[(first + 2 * FILL_SAMPLES + 9) * dims] = f32::INFINITY;
        x[(first + FILL_SAMPLES + 7) * dims + 1] = f32::NAN;
        let series = ArrayView2::from_shape((rows, dims), &x).unwrap();
        let error = fill(&series, first, &mut out).unwrap_err().to_string();
        let sample = first + FILL_SAMPLES + 7;
        assert!(
            error.contains(&format!("at sample {sample}, dimension 1")),
            "{error}"
        );
    }
}
