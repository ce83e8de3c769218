//! Timing one case on one backend: its batches in the precision of the
//! run ([`Batches`]), what is uploaded before the timed runs ([`Runner`]),
//! and the runs themselves ([`time`]).

use super::report::{median, Mode, Timing};
use super::{Case, CPU_RUN_TARGET, REPEAT_BUDGET};
use std::borrow::Cow;
use std::time::{Duration, Instant};
use timewarp::{
    distance_matrix, distance_matrix_resident, soft_dtw_pairs, soft_dtw_pairs_gradient,
    soft_dtw_pairs_gradient_resident, soft_dtw_pairs_resident, upload, ComputeOptions, Device,
    Float, Metric, ResidentSet, Result, SeriesSet,
};

/// A case's batches in precision `T`.
pub struct Batches<T> {
    pub queries: SeriesSet<T>,
    pub references: Option<SeriesSet<T>>,
    pub mode: Mode,
}

impl<T: Float> Batches<T> {
    pub fn of(case: &Case) -> Result<Self> {
        Ok(Batches {
            queries: case.queries.cast()?,
            references: case.references.as_ref().map(|r| r.cast()).transpose()?,
            mode: case.mode,
        })
    }

    /// The same in page-locked memory (`--pinned-input`).
    pub fn into_page_locked(self) -> Result<Self> {
        Ok(Batches {
            queries: self.queries.into_page_locked()?,
            references: self
                .references
                .map(SeriesSet::into_page_locked)
                .transpose()?,
            mode: self.mode,
        })
    }
}

/// One case on one backend, ready to run: with `resident`, the references
/// uploaded (and for paired batches the queries too: a GPU times every
/// query).
pub struct Runner<'a, T> {
    metric: Metric,
    options: ComputeOptions,
    mode: Mode,
    references: Option<&'a SeriesSet<T>>,
    resident: Option<ResidentSet<T>>,
    resident_pairs: Option<(ResidentSet<T>, ResidentSet<T>)>,
}

impl<'a, T: Float> Runner<'a, T> {
    pub fn new(
        batches: &'a Batches<T>,
        metric: Metric,
        options: ComputeOptions,
        resident: bool,
    ) -> Result<Self> {
        let references = batches.references.as_ref();
        let (mut uploaded, mut uploaded_pairs) = (None, None);
        if let (Some(references), true) = (references, resident) {
            if batches.mode == Mode::Matrix {
                uploaded = Some(upload(references, &options)?);
            } else {
                uploaded_pairs = Some((
                    upload(&batches.queries, &options)?,
                    upload(references, &options)?,
                ));
            }
        }
        Ok(Runner {
            metric,
            options,
            mode: batches.mode,
            references,
            resident: uploaded,
            resident_pairs: uploaded_pairs,
        })
    }

    /// One run with `queries` (all of the case's, or its first ones), timed
    /// until the call returns (its results are freed after).
    pub fn run(&self, queries: &SeriesSet<T>) -> Result<Duration> {
        let (metric, options) = (self.metric, &self.options);
        let start = Instant::now();
        match (self.mode, metric, self.references) {
            (Mode::Matrix, ..) => match &self.resident {
                Some(database) => returned(
                    start,
                    distance_matrix_resident(queries, database, metric, options),
                ),
                None => returned(
                    start,
                    distance_matrix(queries, self.references, metric, options),
                ),
            },
            (mode, Metric::SoftDtw(soft), Some(references)) => match &self.resident_pairs {
                Some((x, y)) => {
                    assert_eq!(x.len(), queries.len(), "a GPU times every query");
                    if mode == Mode::Paired {
                        returned(start, soft_dtw_pairs_resident(x, y, soft, options))
                    } else {
                        let gradients =
                            soft_dtw_pairs_gradient_resident(x, y, soft, options, false);
                        returned(start, gradients)
                    }
                }
                None => {
                    // Query k against reference k: as many references.
                    let paired = if references.len() == queries.len() {
                        Cow::Borrowed(references)
                    } else {
                        Cow::Owned(references.slice(0..queries.len()))
                    };
                    if mode == Mode::Paired {
                        returned(start, soft_dtw_pairs(queries, &paired, soft, options))
                    } else {
                        let gradients =
                            soft_dtw_pairs_gradient(queries, &paired, soft, options, false);
                        returned(start, gradients)
                    }
                }
            },
            _ => unreachable!("bench allows --paired only for Soft-DTW on generated data"),
        }
    }

    fn on_cpu(&self) -> bool {
        self.options.device == Device::Cpu
    }
}

/// The time from `start` to the return of the call that gave `result`;
/// the results are freed after it is taken (as a caller keeps them).
fn returned<R>(start: Instant, result: Result<R>) -> Result<Duration> {
    let kept = result?;
    let elapsed = start.elapsed();
    drop(kept);
    Ok(elapsed)
}

/// A case's time for all of its pairs: the median of up to `repeats` timed
/// runs after a warm-up. The CPU, often a hundred times slower, times only
/// as many queries as take about a second and scales that up: its time is
/// proportional to the pairs (all queries meet all references). A GPU
/// times every query, from the batch itself (so page-locked batches stay
/// page-locked), and its warm-up is the first call.
pub fn time<T: Float>(runner: &Runner<T>, batches: &Batches<T>, repeats: usize) -> Result<Timing> {
    let queries = &batches.queries;
    let count = queries.len();
    // A set against itself is timed whole: its pairs are not proportional
    // to a slice of it.
    let (timed, first_seconds) = if runner.on_cpu() && batches.references.is_some() {
        // The warm-up: one query, to size the sample.
        let one = runner.run(&queries.slice(0..1))?.as_secs_f64();
        let timed = ((CPU_RUN_TARGET.as_secs_f64() / one) as usize).clamp(1, count);
        (timed, None)
    } else {
        let first = runner.run(queries)?.as_secs_f64();
        (count, (!runner.on_cpu()).then_some(first))
    };
    let sample = if timed == count {
        Cow::Borrowed(queries)
    } else {
        Cow::Owned(queries.slice(0..timed))
    };
    let mut seconds = Vec::with_capacity(repeats);
    let start = Instant::now();
    while seconds.len() < repeats && (seconds.is_empty() || start.elapsed() < REPEAT_BUDGET) {
        seconds.push(runner.run(&sample)?.as_secs_f64());
    }
    Ok(Timing {
        seconds: median(&mut seconds) * count as f64 / timed as f64,
        queries_timed: timed,
        first_seconds,
    })
}
