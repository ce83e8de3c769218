//! What the k-NN with lower bounds (`super::whole`) keeps: each task's
//! `k` best pairs of each query, ranked by distance then index, with the
//! threshold they give; and how far a bound must pass that threshold to
//! skip a pair.

use crate::Float;
use std::cmp::Ordering as Order;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};

/// How much a bound computed in `f64` may exceed the exact bound, and the
/// DTW computed in the set's precision fall short of the exact DTW.
///
/// A cell of the CPU's DTW is `fl(cost + min of three)`, its cost a
/// rounded sum of rounded squares of rounded differences: along the path
/// its minima follow (a warping path, so of exact cost at least the exact
/// DTW `D`), each of at most `steps` roundings of a non-negative sum loses
/// at most a relative `u`, and each square that underflows at most the
/// smallest subnormal. So the computed DTW is at least `D (1 - steps u) -
/// steps dims eta`. Likewise a bound summed in `f64` over `terms` terms is
/// at most the exact one times `1 + 2 terms u64`, plus as many `eta64`.
/// A pair is skipped when its bound `x` passes [`Slack::cutoff`]: then
/// `x (1 - rel) - abs > t`, and the computed DTW is above `t`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slack {
    rel: f64,
    abs: f64,
}

impl Slack {
    /// For queries up to `q_len` samples and database series up to
    /// `c_len`, of `dims` values a sample, computed in `T`; `None` where
    /// the series are so long that the allowance would swamp the bounds.
    pub fn new<T: Float>(q_len: usize, c_len: usize, dims: usize) -> Option<Self> {
        let steps = (q_len + c_len + dims + 2) as f64;
        let terms = (q_len.max(c_len) * dims + 2 * dims) as f64 + steps;
        let u64_roundoff = f64::EPSILON / 2.0;
        let slack = Slack {
            // Room for the roundings of the cutoff itself.
            rel: 2.0 * steps * T::UNIT_ROUNDOFF + 4.0 * (steps + terms + 8.0) * u64_roundoff,
            abs: (steps * dims as f64 + terms + 8.0)
                * (T::SMALLEST_SUBNORMAL + f64::MIN_POSITIVE * f64::EPSILON),
        };
        (slack.rel <= 0.25).then_some(slack)
    }

    /// The bound above which a pair's distance is surely above `t`.
    #[inline]
    pub fn cutoff(self, t: f64) -> f64 {
        (t + self.abs) / (1.0 - self.rel)
    }
}

/// A database series' distance to a query, ordered by distance, then
/// index.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ranked<T> {
    pub distance: T,
    pub index: usize,
}

impl<T: Float> Ord for Ranked<T> {
    fn cmp(&self, other: &Self) -> Order {
        let (a, b) = (self.distance.to_f64(), other.distance.to_f64());
        a.total_cmp(&b).then(self.index.cmp(&other.index))
    }
}

impl<T: Float> PartialOrd for Ranked<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Order> {
        Some(self.cmp(other))
    }
}

impl<T: Float> PartialEq for Ranked<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Order::Equal
    }
}

impl<T: Float> Eq for Ranked<T> {}

/// One task's `k` best of each of its queries, within its chunk.
pub(super) struct Keeper<T> {
    best: BinaryHeap<Ranked<T>>,
    /// The `k`-th best's distance (infinite until there are `k`).
    bound: f64,
}

impl<T: Float> Keeper<T> {
    pub fn new() -> Self {
        Keeper {
            best: BinaryHeap::new(),
            bound: f64::INFINITY,
        }
    }

    /// The threshold now: this task's `k`-th best, or a lower one another
    /// task found for the query. Every pair of distance at most the
    /// query's final `k`-th best is at most it.
    #[inline]
    pub fn threshold(&self, shared: &AtomicU64) -> f64 {
        self.bound
            .min(f64::from_bits(shared.load(Ordering::Relaxed)))
    }

    /// Keeps `ranked` if it is among the `k` best seen, and publishes the
    /// `k`-th best.
    pub fn offer(&mut self, ranked: Ranked<T>, k: usize, shared: &AtomicU64) {
        if self.best.len() == k {
            if ranked >= *self.best.peek().expect("k >= 1 kept") {
                return;
            }
            self.best.pop();
        }
        self.best.push(ranked);
        if self.best.len() == k {
            let worst = self.best.peek().expect("k >= 1 kept");
            self.bound = worst.distance.to_f64();
            shared.fetch_min(self.bound.to_bits(), Ordering::Relaxed);
        }
    }

    /// The `k` best kept, in no order.
    pub fn into_kept(self) -> Vec<Ranked<T>> {
        self.best.into_vec()
    }
}
