//! Similarity search: the `k` best places of a query in a long series
//! under banded DTW, with the UCR Suite's cascade of lower bounds
//! (Rakthanmanon et al., "Searching and Mining Trillions of Time Series
//! Subsequences under Dynamic Time Warping", KDD 2012); and
//! [`subsequence_alignment`], the one best match of a query under DTW with
//! a free start and a free end (any length, no normalisation, with its
//! path).
//!
//! ```
//! use ndarray::Array2;
//! use timewarp::search::{subsequences, Band, SearchOptions};
//!
//! // A sine wave, and its second period as the query.
//! let series: Vec<f64> = (0..1000).map(|t| (t as f64 * 0.05).sin()).collect();
//! let query = Array2::from_shape_vec((126, 1), series[126..252].to_vec()).unwrap();
//! let options = SearchOptions::default().with_band(Band::Fraction(0.05)).with_k(3);
//! let found = subsequences(query.view(), &series[..], &options)?;
//! assert_eq!(found.matches.len(), 3);
//! assert_eq!(found.matches[0].distance, 0.0); // the query's own place, or a period away
//! # Ok::<(), timewarp::Error>(())
//! ```
//!
//! What is computed, exactly: every start `s` of the series (`0..=N-m`)
//! has a cost, the DTW (squared Euclidean local cost, Sakoe-Chiba band of
//! radius `r`, as [`crate::oracle::dtw`]) between the z-normalised query
//! and the z-normalised subsequence `series[s..s+m]`. The matches are
//! chosen greedily: the lowest cost (ties: the smaller start), then the
//! lowest among the starts at least `exclusion` away from every match
//! chosen, and so on, `k` times. A match's `distance` is the square root
//! of its cost, as the UCR Suite prints it. The lower bounds only skip
//! work: the matches and their distances are those of that definition,
//! bit for bit (docs/algorithms.md, "Search", says how).
//!
//! z-normalisation: `(x - mean) / std` per dimension, with the mean and
//! the population standard deviation of the `m` values (two passes). A
//! subsequence whose values are all equal (std 0), or whose std rounds to
//! 0, normalises to zeros (the UCR Suite would divide by zero): it is at
//! cost `sum(q^2) = m * dims` from any non-constant z-normalised query, and
//! at 0 from a constant one.

mod bounds;
mod cascade;
mod chunk_reader;
mod dtw;
mod file;
mod forward;
mod gpu;
pub(crate) mod gpu_knn;
mod kept;
mod pruned;
mod scan;
mod select;
mod source;
mod stats;
mod subsequence;
pub(crate) mod subsequence_gpu;
pub(crate) mod whole;

pub use bounds::{envelope, lb_keogh, lb_kim};
pub use file::{read_text, SeriesFile};
pub use source::SeriesSource;
pub use subsequence::{subsequence_alignment, SubsequenceAlignment};

use crate::gpu::Gpu;
use crate::{Device, Error, Result};

/// The Sakoe-Chiba band, as the UCR Suite's `R`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Band {
    /// A fraction of the query's length, in [0, 1]: radius `floor(f * m)`.
    Fraction(f64),
    /// A radius in samples (capped at `m - 1`, where it no longer binds).
    Count(usize),
}

impl Band {
    /// The radius for a query of length `m`.
    pub fn radius(self, m: usize) -> Result<usize> {
        let r = match self {
            Band::Fraction(f) => {
                if !(0.0..=1.0).contains(&f) {
                    return Err(Error::InvalidParameter {
                        name: "band",
                        value: f,
                        requirement:
                            "a band given as a fraction of the query's length must be in [0, 1]",
                    });
                }
                (f * m as f64).floor() as usize
            }
            Band::Count(r) => r,
        };
        Ok(r.min(m.saturating_sub(1)))
    }
}

/// How to search.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchOptions {
    /// The Sakoe-Chiba band (default 5% of the query's length);
    /// `Band::Count(0)` is the Euclidean distance.
    pub band: Band,
    /// How many matches (default 1). Fewer come back when the series has
    /// fewer places `exclusion` apart.
    pub k: usize,
    /// z-normalise the query and each subsequence (default on).
    pub znorm: bool,
    /// Matches start at least this far apart (default `m / 2`; 0 or 1:
    /// any two different starts).
    pub exclusion: Option<usize>,
    /// Where to search: `Cpu` (all cores), `Gpu` (an error if none is
    /// usable) or `Auto`: the GPU for a series of at least
    /// [`auto_gpu_samples`] samples when one is usable, else the CPU. Both
    /// find the same matches at the same distances, bit for bit
    /// (docs/algorithms.md, "Search").
    pub device: Device,
    /// Starts per unit of parallel work (default [`DEFAULT_CHUNK`]); each
    /// unit reads its starts and the `m - 1` samples after them. On the
    /// GPU a chunk is 64 units (fewer where the device memory is short).
    /// The results do not depend on it.
    pub chunk: usize,
}

/// Starts per unit of parallel work: enough for the per-unit set-up
/// (statistics, envelopes) to be a small part, few enough that two cores
/// share a million-point series evenly.
pub const DEFAULT_CHUNK: usize = 1 << 14;

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            band: Band::Fraction(0.05),
            k: 1,
            znorm: true,
            exclusion: None,
            device: Device::Auto,
            chunk: DEFAULT_CHUNK,
        }
    }
}

impl SearchOptions {
    pub fn with_band(self, band: Band) -> Self {
        Self { band, ..self }
    }
    pub fn with_k(self, k: usize) -> Self {
        Self { k, ..self }
    }
    pub fn with_znorm(self, znorm: bool) -> Self {
        Self { znorm, ..self }
    }
    pub fn with_exclusion(self, exclusion: usize) -> Self {
        Self {
            exclusion: Some(exclusion),
            ..self
        }
    }
    pub fn on(self, device: Device) -> Self {
        Self { device, ..self }
    }
    pub fn with_chunk(self, chunk: usize) -> Self {
        Self { chunk, ..self }
    }
}

/// One match: where it starts and its distance (the square root of the
/// DTW cost, as the UCR Suite reports it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    pub start: usize,
    pub distance: f64,
}

/// What the cascade did with the candidates: every start of a search,
/// every pair of a query and a database series of a k-NN
/// ([`crate::nearest_neighbours`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruningStats {
    pub candidates: u64,
    /// Pruned by LB_Kim (first and last points).
    pub kim: u64,
    /// Pruned by LB_Keogh on the query's envelope.
    pub keogh_query: u64,
    /// Pruned by LB_Keogh on the data's envelope (a k-NN's database
    /// series').
    pub keogh_data: u64,
    /// DTWs started: those that finished are `dtw - abandoned`.
    pub dtw: u64,
    /// DTWs abandoned early (the partial cost and the remaining bound
    /// passed the best so far; a k-NN's also those that ended above it).
    pub abandoned: u64,
}

impl PruningStats {
    /// The fraction of candidates pruned before any DTW.
    pub fn pruned_before_dtw(&self) -> f64 {
        if self.candidates == 0 {
            return 0.0;
        }
        (self.kim + self.keogh_query + self.keogh_data) as f64 / self.candidates as f64
    }

    /// Adds `other`'s counts (of another part of the work).
    pub fn add(&mut self, other: &PruningStats) {
        self.candidates += other.candidates;
        self.kim += other.kim;
        self.keogh_query += other.keogh_query;
        self.keogh_data += other.keogh_data;
        self.dtw += other.dtw;
        self.abandoned += other.abandoned;
    }
}

/// The matches, best first, and how they were found.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchResult {
    pub matches: Vec<Match>,
    pub stats: PruningStats,
    /// The band's radius in samples.
    pub radius: usize,
    /// The exclusion zone used.
    pub exclusion: usize,
}

/// The `k` best non-overlapping matches of `query` (`m x dims`, one row a
/// sample) in `series` (a [`SeriesSource`]: an in-memory array or slice, or
/// a file read chunk by chunk), on every core.
///
/// Errors: `m < 2`, a query longer than the series, dimensions that differ,
/// `k = 0`, a band fraction outside [0, 1], a NaN or infinity in the query
/// or the series (naming its position; the series is checked as it is
/// read), `Device::Gpu` without a usable GPU, the GPU's errors.
pub fn subsequences<S: SeriesSource + ?Sized>(
    query: ndarray::ArrayView2<f64>,
    series: &S,
    options: &SearchOptions,
) -> Result<SearchResult> {
    let plan = plan(query, series.len(), series.dims(), options)?;
    match options.device {
        Device::Cpu => scan::search(&plan, series),
        Device::Gpu => gpu::search(&plan, series, Gpu::get()?),
        Device::Auto => match auto_gpu(series.len()) {
            Some(found) => gpu::search(&plan, series, found),
            None => scan::search(&plan, series),
        },
    }
}

/// The GPU `Device::Auto` searches a series of `samples` samples on: the
/// first, when it is usable and the series has at least
/// [`auto_gpu_samples`] samples.
fn auto_gpu(samples: usize) -> Option<&'static Gpu> {
    if !crate::gpu::search_auto_on_gpu(samples, rayon::current_num_threads()) {
        return None;
    }
    Gpu::get().ok()
}

/// `Device::Auto` searches on the GPU from this many samples of the series
/// on, when a GPU is usable; below it, on the CPU: 2^21 samples for each
/// thread the CPU search would have (rayon's), where the GPU finishes
/// first (docs/benchmarks.md, "Subsequence search on the GPU").
pub fn auto_gpu_samples() -> usize {
    crate::gpu::search_auto_min_samples(rayon::current_num_threads())
}

/// What a search needs to know before it reads the series.
pub(crate) struct Plan {
    /// The query, z-normalised when asked, `m x dims` row-major.
    pub query: Vec<f64>,
    pub m: usize,
    pub dims: usize,
    pub radius: usize,
    pub exclusion: usize,
    pub k: usize,
    pub znorm: bool,
    pub chunk: usize,
    pub starts: usize,
}

fn plan(
    query: ndarray::ArrayView2<f64>,
    n: usize,
    dims: usize,
    options: &SearchOptions,
) -> Result<Plan> {
    let (m, query_dims) = query.dim();
    if m < 2 {
        return Err(Error::InvalidInput(format!(
            "the query has {m} sample(s): search needs at least 2"
        )));
    }
    if query_dims != dims {
        return Err(Error::DimensionMismatch {
            first: query_dims,
            second: dims,
        });
    }
    if m > n {
        return Err(Error::InvalidInput(format!(
            "the query ({m} samples) is longer than the series ({n} samples)"
        )));
    }
    if options.k == 0 {
        return Err(Error::InvalidParameter {
            name: "k",
            value: 0.0,
            requirement: "at least one match must be asked for",
        });
    }
    if options.chunk == 0 {
        return Err(Error::InvalidParameter {
            name: "chunk",
            value: 0.0,
            requirement: "a unit of work holds at least one start",
        });
    }
    if let Some((i, k)) = query
        .indexed_iter()
        .find(|(_, v)| !v.is_finite())
        .map(|(at, _)| at)
    {
        return Err(Error::InvalidInput(format!(
            "the query has a non-finite value ({}) at sample {i}, dimension {k}",
            query[[i, k]]
        )));
    }
    let radius = options.band.radius(m)?;
    let rows: Vec<f64> = query.iter().copied().collect();
    let query = if options.znorm {
        stats::znormalised(&rows, m, dims)
    } else {
        rows
    };
    Ok(Plan {
        query,
        m,
        dims,
        radius,
        exclusion: options.exclusion.unwrap_or(m / 2),
        k: options.k,
        znorm: options.znorm,
        chunk: options.chunk,
        starts: n - m + 1,
    })
}
