//! The open-ended subsequence alignment's forward pass on a device, its
//! host side (no CUDA): the series read in chunks by a helper thread (and
//! checked) while the device computes the chunk before; each chunk's
//! passes (the first over every segment, then the reruns of the segments
//! whose input changed, until a pass changes none: docs/algorithms.md,
//! "Subsequence alignment", "On the GPU"); the tiles' best ends merged in
//! the series' order, the earliest least. The device is the GPU
//! (`crate::gpu::AlignmentDevice`) or host memory ([`HostSegments`], where
//! the tests run the kernel's code on emulated warps).

use super::forward::{check_finite, BestEnd};
use super::SeriesSource;
use crate::gpu::{AlignmentDevice, Gpu};
use crate::interrupt;
use crate::{Error, Result};
use std::sync::mpsc::{sync_channel, SyncSender};
use timewarp_kernels::launch::subsequence::{Best, Reach, SubsequenceLaunch};

/// What the passes need of a device that runs the `dtw_subsequence`
/// kernels over a chunk at a time.
pub(crate) trait SegmentDevice {
    /// Columns a chunk holds at most.
    fn chunk_columns(&self) -> usize;
    /// Puts chunk `x` (whole samples, finite) whose first sample is the
    /// series' `first` on the device, its marks and counts zeroed; the
    /// column carried from the chunk before (before the first chunk, the
    /// infinite one) is its first segment's input. Returns its segments.
    fn load(&mut self, first: usize, x: &[f64]) -> Result<usize>;
    /// Pass `pass` over the chunk (`SubsequenceLaunch::pass`): the
    /// segments whose last column changed and that have a successor.
    fn pass(&mut self, pass: u32) -> Result<u32>;
    /// The chunk's tiles' best ends, in the series' order; the chunk's last
    /// column is then carried to the next.
    fn finish(&mut self) -> Result<Vec<Best>>;
}

/// Where the best match of `query` (`m x dims`, row-major, finite) in
/// `series` ends and starts, and its accumulated cost, on `gpu`.
pub(crate) fn on_gpu<S: SeriesSource + ?Sized>(
    query: &[f64],
    series: &S,
    gpu: &Gpu,
) -> Result<BestEnd> {
    let mut device = AlignmentDevice::open(gpu, query, series.dims(), series.len(), None)?;
    best_end(&mut device, series)
}

impl SegmentDevice for AlignmentDevice<'_> {
    fn chunk_columns(&self) -> usize {
        AlignmentDevice::chunk_columns(self)
    }

    fn load(&mut self, first: usize, x: &[f64]) -> Result<usize> {
        AlignmentDevice::load(self, first, x)
    }

    fn pass(&mut self, pass: u32) -> Result<u32> {
        AlignmentDevice::pass(self, pass)
    }

    fn finish(&mut self) -> Result<Vec<Best>> {
        let slots = AlignmentDevice::finish(self)?;
        Ok(chunk_bests(&slots, self.columns(), self.tiles()))
    }
}

/// Where the best match ends and starts, and its accumulated cost, from
/// the forward pass of `device` over `series` (the query is the device's).
pub(crate) fn best_end<D: SegmentDevice, S: SeriesSource + ?Sized>(
    device: &mut D,
    series: &S,
) -> Result<BestEnd> {
    let mut best = BestEnd {
        start: 0,
        end: 0,
        cost: f64::INFINITY,
    };
    let columns = device.chunk_columns();
    std::thread::scope(|scope| {
        let (send, chunks) = sync_channel(1);
        scope.spawn(move || read_ahead(series, columns, &send));
        for chunk in chunks {
            interrupt::check()?;
            let (first, x) = chunk?;
            let segments = device.load(first, &x)?;
            // At most a pass a segment changes a column with a successor
            // (after pass `t`, segments `0..=t` have their true inputs).
            let mut pass = 0;
            while device.pass(pass)? > 0 {
                interrupt::check()?;
                pass += 1;
                if pass as usize > segments {
                    return Err(Error::GpuFailure(format!(
                        "the alignment's chunk of {segments} segments did not settle in {pass} passes"
                    )));
                }
            }
            for tile in device.finish()? {
                // Strictly less: the earliest end on a tie.
                if tile.cost < best.cost {
                    best = BestEnd {
                        start: tile.start as usize,
                        end: tile.end as usize,
                        cost: tile.cost,
                    };
                }
            }
        }
        // An early return drops `chunks` first: the reader stops at its
        // next chunk, and the scope waits for it.
        Ok(())
    })?;
    Ok(best)
}

/// A chunk's first sample and its values.
type Chunk = Result<(usize, Vec<f64>)>;

/// Reads `series` in chunks of `columns` samples, in order, checks that
/// their values are finite (naming the first that is not, as the CPU's
/// pass does), and sends them; stops after an error (sent as the last
/// chunk) or once the receiver hangs up.
fn read_ahead<S: SeriesSource + ?Sized>(series: &S, columns: usize, send: &SyncSender<Chunk>) {
    let mut first = 0;
    while first < series.len() {
        let count = columns.min(series.len() - first);
        let mut x = Vec::new();
        let chunk = series
            .read(first, count, &mut x)
            .and_then(|()| check_finite(&x, first, series.dims()))
            .map(|()| (first, x));
        let failed = chunk.is_err();
        if send.send(chunk).is_err() || failed {
            return;
        }
        first += count;
    }
}

/// The tiles' bests of a chunk of `columns` columns, in order, from the
/// slots `launch`'s kernel wrote (`segment / tile` a segment; the last
/// segment's may be fewer).
pub(crate) fn chunk_bests(
    slots: &[Best],
    columns: usize,
    (tile, segment): (usize, usize),
) -> Vec<Best> {
    let per_segment = segment / tile;
    (0..columns.div_ceil(segment))
        .flat_map(|b| {
            let len = segment.min(columns - b * segment);
            (0..len.div_ceil(tile)).map(move |k| b * per_segment + k)
        })
        .map(|slot| slots[slot])
        .collect()
}

/// The kernel's buffers in host memory, and a closure that runs a launch
/// over them (a warp a segment): the device of [`best_end`] for the tests,
/// which run the kernel's own code on emulated warps.
pub struct HostSegments<F> {
    query: Vec<f64>,
    m: usize,
    dims: usize,
    /// Chunk, tile and segment columns.
    shape: (usize, usize, usize),
    x: Vec<f64>,
    first: usize,
    carried: Vec<Reach>,
    checkpoints: Vec<Reach>,
    ends: Vec<Reach>,
    handoff: Vec<Reach>,
    bests: Vec<Best>,
    borders: Vec<Reach>,
    dirty: Vec<u32>,
    changed: Vec<u32>,
    run: F,
}

impl<F: FnMut(&SubsequenceLaunch)> HostSegments<F> {
    /// For `query` (`m x dims`, row-major) in chunks of `chunk` columns,
    /// segments of `segment` and tiles of `tile` (a divisor of `segment`),
    /// launches run by `run`.
    pub fn new(
        query: &[f64],
        dims: usize,
        (chunk, tile, segment): (usize, usize, usize),
        run: F,
    ) -> Self {
        assert!(chunk >= 1 && tile >= 1 && segment % tile == 0 && segment >= tile);
        let m = query.len() / dims;
        HostSegments {
            query: query.to_vec(),
            m,
            dims,
            shape: (chunk, tile, segment),
            x: Vec::new(),
            first: 0,
            carried: vec![Reach::INFINITE; m],
            checkpoints: Vec::new(),
            ends: Vec::new(),
            handoff: Vec::new(),
            bests: Vec::new(),
            borders: Vec::new(),
            dirty: Vec::new(),
            changed: Vec::new(),
            run,
        }
    }

    fn columns(&self) -> usize {
        self.x.len() / self.dims
    }

    fn segments(&self) -> usize {
        self.columns().div_ceil(self.shape.2)
    }
}

impl<F: FnMut(&SubsequenceLaunch)> SegmentDevice for HostSegments<F> {
    fn chunk_columns(&self) -> usize {
        self.shape.0
    }

    fn load(&mut self, first: usize, x: &[f64]) -> Result<usize> {
        (self.x, self.first) = (x.to_vec(), first);
        let (m, (_, tile, segment)) = (self.m, self.shape);
        let segments = self.segments();
        let slots = segments * (segment / tile);
        // Stale values of another chunk, where a device would have them.
        let stale = Reach {
            cost: -1.0,
            start: u64::MAX,
        };
        self.checkpoints = vec![stale; slots * m];
        self.ends = vec![stale; segments * m];
        self.handoff = vec![stale; 2 * segments * m];
        self.bests = vec![
            Best {
                cost: f64::NAN,
                end: u64::MAX,
                start: u64::MAX
            };
            slots
        ];
        self.borders = vec![stale; 2 * segments * tile];
        self.dirty = vec![0; 2 * segments];
        self.changed = vec![0; segments + 1];
        Ok(segments)
    }

    fn pass(&mut self, pass: u32) -> Result<u32> {
        let (_, tile, segment) = self.shape;
        let launch = SubsequenceLaunch {
            query: self.query.as_ptr(),
            m: self.m as u64,
            dims: self.dims as u64,
            series: self.x.as_ptr(),
            columns: self.columns() as u64,
            first: self.first as u64,
            segment: segment as u64,
            tile: tile as u64,
            segments: self.segments() as u64,
            pass: u64::from(pass),
            carried: self.carried.as_ptr(),
            checkpoints: self.checkpoints.as_mut_ptr(),
            ends: self.ends.as_mut_ptr(),
            handoff: self.handoff.as_mut_ptr(),
            bests: self.bests.as_mut_ptr(),
            borders: self.borders.as_mut_ptr(),
            dirty: self.dirty.as_mut_ptr(),
            changed: self.changed.as_mut_ptr(),
        };
        (self.run)(&launch);
        Ok(self.changed[pass as usize])
    }

    fn finish(&mut self) -> Result<Vec<Best>> {
        let (_, tile, segment) = self.shape;
        let last = (self.segments() - 1) * self.m;
        self.carried
            .copy_from_slice(&self.ends[last..last + self.m]);
        Ok(chunk_bests(&self.bests, self.columns(), (tile, segment)))
    }
}

/// The forward pass of `query` (`m x dims`, row-major) over `series` on
/// host memory, in chunks of `chunk` columns, segments of `segment` and
/// tiles of `tile`, each launch run by `run`: the match's `(start, end,
/// accumulated cost)`. For the tests of the kernel's code
/// (`internals::subsequence_best_end_on_host`).
pub fn best_end_on_host<S: SeriesSource + ?Sized>(
    query: &[f64],
    series: &S,
    shape: (usize, usize, usize),
    run: impl FnMut(&SubsequenceLaunch),
) -> Result<(usize, usize, f64)> {
    let mut device = HostSegments::new(query, series.dims(), shape, run);
    let best = best_end(&mut device, series)?;
    Ok((best.start, best.end, best.cost))
}
