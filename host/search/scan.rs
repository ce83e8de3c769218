//! The search on the CPU: the series in units of starts (each with the
//! `m - 1` samples after them), rayon over the units, and in each unit the
//! UCR Suite's cascade per start: LB_Kim, LB_Keogh on the query's envelope
//! (the query's samples in order of decreasing |z|, so that the sum grows
//! fastest), LB_Keogh on the data's envelope, then the banded DTW,
//! abandoned with the cumulative bound of the larger LB_Keogh.
//!
//! The bounds are computed from statistics by prefix sums, within 1e-9 of
//! the two-pass ones (`super::stats`); a candidate is pruned only when a
//! bound passes the threshold by more than that error could make
//! ([`Cutoff`]), and the DTW of a survivor runs on the two-pass
//! z-normalisation, so the costs that decide the result are exact.

use super::bounds::{outside, sliding_envelope};
use super::dtw::{dtw_abandoning, Dims, Many, One};
use super::select::{choose, sort, Keeper};
use super::stats::{normalise_exact, WindowStats};
use super::{Match, Plan, PruningStats, SearchResult, SeriesSource};
use crate::interrupt::{self, Running};
use crate::{Error, Result};
use rayon::prelude::*;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The relative error allowed for the bounds against exact statistics:
/// the statistics' 1e-9 (of a std), doubled for the square, with room.
const BOUND_SLACK: f64 = 2e-8;

/// The value a bound must pass to prune under threshold `t`. With
/// statistics off by a relative `e` of the std, each z-value is off by at
/// most `e (1 + |z|)`, so a bound `lb` of `m * dims` terms is off by at
/// most `4 e sqrt(lb m dims) <= 2 e (lb + m dims)` (`sum z^2 = m` per
/// dimension); `lb > (t + s m dims) / (1 - s)` implies `lb - s (lb + m
/// dims) > t`.
#[derive(Clone, Copy)]
pub(super) struct Cutoff {
    scale: f64,
}

impl Cutoff {
    pub(super) fn new(plan: &Plan) -> Self {
        // Unnormalised values come exact: only rounding of m terms remains.
        let terms = if plan.znorm {
            (plan.m * plan.dims) as f64
        } else {
            0.0
        };
        Cutoff {
            scale: BOUND_SLACK * terms,
        }
    }

    #[inline]
    pub(super) fn of(self, t: f64) -> f64 {
        (t + self.scale) / (1.0 - BOUND_SLACK)
    }
}

/// The query, normalised, with its envelope and the order of its samples.
struct Query {
    values: Vec<f64>,
    lower: Vec<f64>,
    upper: Vec<f64>,
    order: Vec<usize>,
}

impl Query {
    fn new(plan: &Plan) -> Self {
        let (mut lower, mut upper) = (Vec::new(), Vec::new());
        let q = &plan.query;
        let d = plan.dims;
        sliding_envelope(
            q,
            d,
            plan.radius,
            &mut lower,
            &mut upper,
            &mut VecDeque::new(),
        );
        let weight = |i: usize| -> f64 { q[i * d..(i + 1) * d].iter().map(|v| v.abs()).sum() };
        let mut order: Vec<usize> = (0..plan.m).collect();
        order.sort_by(|&a, &b| weight(b).total_cmp(&weight(a)));
        Query {
            values: q.clone(),
            lower,
            upper,
            order,
        }
    }
}

/// What every unit shares.
struct Shared<'a, S: ?Sized> {
    plan: &'a Plan,
    query: Query,
    series: &'a S,
    cutoff: Cutoff,
    /// The least witness threshold of all threads (bits of an `f64`).
    threshold: AtomicU64,
    /// The first non-finite value's flat index, or `usize::MAX`.
    first_bad: AtomicUsize,
}

/// One thread's buffers and results.
struct Worker {
    x: Vec<f64>,
    stats: WindowStats,
    lower: Vec<f64>,
    upper: Vec<f64>,
    deque: VecDeque<usize>,
    candidate: Vec<f64>,
    cb_query: Vec<f64>,
    cb_data: Vec<f64>,
    tail: Vec<f64>,
    rows: [Vec<f64>; 2],
    keeper: Keeper,
    counts: PruningStats,
    error: Option<Error>,
}

pub(crate) fn search<S: SeriesSource + ?Sized>(plan: &Plan, series: &S) -> Result<SearchResult> {
    let _running = Running::start();
    let shared = Shared {
        plan,
        query: Query::new(plan),
        series,
        cutoff: Cutoff::new(plan),
        threshold: AtomicU64::new(f64::INFINITY.to_bits()),
        first_bad: AtomicUsize::new(usize::MAX),
    };
    let units = plan.starts.div_ceil(plan.chunk);
    let workers: Vec<Worker> = (0..units)
        .into_par_iter()
        .fold(
            || Worker::new(plan),
            |mut worker, unit| {
                if worker.error.is_none() {
                    if let Err(e) = worker.unit(unit, &shared) {
                        worker.error = Some(e);
                    }
                }
                worker
            },
        )
        .collect();
    let bad = shared.first_bad.load(Ordering::Relaxed);
    if bad != usize::MAX {
        let (sample, k) = (bad / plan.dims, bad % plan.dims);
        let mut x = Vec::new();
        series.read(sample, 1, &mut x)?;
        let dimension = if plan.dims > 1 {
            format!(", dimension {k}")
        } else {
            String::new()
        };
        return Err(Error::InvalidInput(format!(
            "the series has a non-finite value ({}) at sample {sample}{dimension}",
            x[k]
        )));
    }
    let mut stats = PruningStats::default();
    let mut found = Vec::new();
    for mut worker in workers {
        if let Some(error) = worker.error.take() {
            return Err(error);
        }
        stats.add(&worker.counts);
        found.append(&mut worker.keeper.found);
    }
    interrupt::check()?;
    let t = f64::from_bits(shared.threshold.load(Ordering::Relaxed));
    found.retain(|f| f.0 <= t);
    sort(&mut found);
    let matches = choose(&found, plan.k, plan.exclusion)
        .into_iter()
        .map(|(cost, start)| Match {
            start,
            distance: cost.sqrt(),
        })
        .collect();
    Ok(SearchResult {
        matches,
        stats,
        radius: plan.radius,
        exclusion: plan.exclusion,
    })
}

impl Worker {
    fn new(plan: &Plan) -> Self {
        Worker {
            x: Vec::new(),
            stats: WindowStats::default(),
            lower: Vec::new(),
            upper: Vec::new(),
            deque: VecDeque::new(),
            candidate: vec![0.0; plan.m * plan.dims],
            cb_query: vec![0.0; plan.m],
            cb_data: vec![0.0; plan.m],
            tail: vec![0.0; plan.m + 1],
            rows: [Vec::new(), Vec::new()],
            keeper: Keeper::new(plan.k, plan.exclusion),
            counts: PruningStats::default(),
            error: None,
        }
    }

    /// Unit `unit`: reads it, checks it, and runs the cascade on its
    /// starts (unless a non-finite value was found, where only units that
    /// could hold an earlier one are still read).
    fn unit<S: SeriesSource + ?Sized>(&mut self, unit: usize, shared: &Shared<S>) -> Result<()> {
        interrupt::check()?;
        let plan = shared.plan;
        let (m, d) = (plan.m, plan.dims);
        let first = unit * plan.chunk;
        let starts = plan.chunk.min(plan.starts - first);
        if shared.first_bad.load(Ordering::Relaxed) < first * d {
            return Ok(());
        }
        shared.series.read(first, starts + m - 1, &mut self.x)?;
        if let Some(at) = self.x.iter().position(|v| !v.is_finite()) {
            shared
                .first_bad
                .fetch_min(first * d + at, Ordering::Relaxed);
            return Ok(());
        }
        if shared.first_bad.load(Ordering::Relaxed) != usize::MAX {
            return Ok(());
        }
        self.stats.compute(&self.x, d, m, starts, plan.znorm);
        sliding_envelope(
            &self.x,
            d,
            plan.radius,
            &mut self.lower,
            &mut self.upper,
            &mut self.deque,
        );
        if d == 1 {
            (0..starts).for_each(|s| self.candidate(s, first, One, shared));
        } else {
            (0..starts).for_each(|s| self.candidate(s, first, Many(d), shared));
        }
        Ok(())
    }

    /// The cascade for the window at `s` of this unit (start `first + s`).
    #[inline(always)]
    fn candidate<D: Dims, S: ?Sized>(
        &mut self,
        s: usize,
        first: usize,
        dims: D,
        shared: &Shared<S>,
    ) {
        let plan = shared.plan;
        let (m, r) = (plan.m, plan.radius);
        let d = dims.get();
        let q = &shared.query;
        let x = &self.x;
        let t = self.keeper.threshold(&shared.threshold);
        let cutoff = shared.cutoff.of(t);
        self.counts.candidates += 1;
        let mean = &self.stats.mean[s * d..(s + 1) * d];
        let inv = &self.stats.inv_std[s * d..(s + 1) * d];
        let z = |p: usize, k: usize| (x[p * d + k] - mean[k]) * inv[k];

        let mut kim = 0.0;
        for k in 0..d {
            let head = z(s, k) - q.values[k];
            let last = z(s + m - 1, k) - q.values[(m - 1) * d + k];
            kim += head * head + last * last;
        }
        if kim > cutoff {
            self.counts.kim += 1;
            return;
        }

        let mut lb_query = 0.0;
        for &i in &q.order {
            let mut term = 0.0;
            for k in 0..d {
                let at = i * d + k;
                term += outside(z(s + i, k), q.lower[at], q.upper[at]);
            }
            self.cb_query[i] = term;
            lb_query += term;
            if lb_query > cutoff {
                self.counts.keogh_query += 1;
                return;
            }
        }

        let mut lb_data = 0.0;
        for &i in &q.order {
            let mut term = 0.0;
            for k in 0..d {
                let at = (s + i) * d + k;
                let lo = (self.lower[at] - mean[k]) * inv[k];
                let up = (self.upper[at] - mean[k]) * inv[k];
                term += outside(q.values[i * d + k], lo, up);
            }
            self.cb_data[i] = term;
            lb_data += term;
            if lb_data > cutoff {
                self.counts.keogh_data += 1;
                return;
            }
        }

        let contributions = if lb_query > lb_data {
            &self.cb_query
        } else {
            &self.cb_data
        };
        self.tail[m] = 0.0;
        for i in (0..m).rev() {
            self.tail[i] = self.tail[i + 1] + contributions[i];
        }
        if plan.znorm {
            let flat = &self.stats.flat[s * d..(s + 1) * d];
            normalise_exact(x, d, s, m, |k| flat[k], &mut self.candidate);
        } else {
            self.candidate.copy_from_slice(&x[s * d..(s + m) * d]);
        }
        self.counts.dtw += 1;
        let cost = dtw_abandoning(
            &self.candidate,
            &q.values,
            dims,
            r,
            &self.tail,
            cutoff,
            &mut self.rows,
        );
        match cost {
            None => self.counts.abandoned += 1,
            Some(cost) => self.keeper.offer(first + s, cost, t, &shared.threshold),
        }
    }
}
