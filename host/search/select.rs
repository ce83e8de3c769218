//! Choosing the `k` matches, and the threshold that lets the search skip
//! candidates without changing that choice.
//!
//! The matches are chosen greedily over every start's cost: the lowest
//! (ties: the smaller start), then the lowest at least `exclusion` from it,
//! and so on. A candidate costlier than the `k`-th match never changes the
//! choice (the greedy has stopped before reaching it), so a search may skip
//! any candidate whose lower bound is above some `T >= d_k`, the `k`-th
//! match's cost, if it keeps every candidate it computes up to `T`.
//!
//! The `k`-th best cost seen so far is not such a `T` when the zone is
//! wider than a start: a better candidate found later can exclude two of
//! those seen, and push `d_k` up. What is sound is a witness: `k`
//! candidates pairwise at least `2 * exclusion - 1` apart, of costs up to
//! `T`. Each greedy pick excludes `2 * exclusion - 1` consecutive starts,
//! which hold at most one witness, so after `j < k` picks a witness is
//! still free and the next pick costs at most `T`: `d_k <= T`. Each thread
//! finds its witnesses by the same greedy with the doubled zone over what
//! it has computed; the least of the threads' `T`s (an atomic `fetch_min`
//! on the bits of a non-negative `f64`, which order as the values) is the
//! shared threshold.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

/// A computed candidate: (cost, start).
pub(crate) type Found = (f64, usize);

/// The greedy choice over `found`, sorted by (cost, start): up to `k`
/// picks, each at least `zone` from those before (`zone <= 1`: any
/// distinct starts).
pub(crate) fn choose(found: &[Found], k: usize, zone: usize) -> Vec<Found> {
    let mut picks = Vec::with_capacity(k);
    let mut taken = BTreeSet::new();
    for &(cost, start) in found {
        if picks.len() == k {
            break;
        }
        let near = start.saturating_sub(zone.saturating_sub(1))..start + zone.max(1);
        if zone > 1 && taken.range(near).next().is_some() {
            continue;
        }
        taken.insert(start);
        picks.push((cost, start));
    }
    picks
}

/// Sorts by cost, then start.
pub(crate) fn sort(found: &mut [Found]) {
    found.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
}

/// One thread's computed candidates up to its threshold, and its witness
/// threshold.
pub(crate) struct Keeper {
    k: usize,
    witness_zone: usize,
    pub found: Vec<Found>,
    /// This thread's `T` (infinite until it has `k` witnesses).
    bound: f64,
}

impl Keeper {
    pub fn new(k: usize, exclusion: usize) -> Self {
        Keeper {
            k,
            witness_zone: (2 * exclusion).saturating_sub(1),
            found: Vec::new(),
            bound: f64::INFINITY,
        }
    }

    /// The threshold now: this thread's, or a lower one another published.
    #[inline]
    pub fn threshold(&self, shared: &AtomicU64) -> f64 {
        self.bound
            .min(f64::from_bits(shared.load(Ordering::Relaxed)))
    }

    /// Records candidate `start` of exact `cost`, computed under threshold
    /// `t`; tightens and publishes the threshold when it can.
    pub fn offer(&mut self, start: usize, cost: f64, t: f64, shared: &AtomicU64) {
        if cost > t {
            return;
        }
        self.found.push((cost, start));
        if cost >= self.bound || self.found.len() < self.k {
            return;
        }
        sort(&mut self.found);
        let witnesses = choose(&self.found, self.k, self.witness_zone);
        if witnesses.len() == self.k {
            self.bound = witnesses[self.k - 1].0;
            shared.fetch_min(self.bound.to_bits(), Ordering::Relaxed);
        }
        let keep = self.threshold(shared);
        let end = self.found.partition_point(|f| f.0 <= keep);
        self.found.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_greedy_skips_starts_inside_a_zone() {
        let mut found = vec![(3.0, 10), (1.0, 14), (2.0, 20), (0.5, 100), (2.0, 5)];
        sort(&mut found);
        // 100 first, then 14 (excludes 10 and 20 with zone 7), then 5 (9 from 14).
        assert_eq!(choose(&found, 3, 7), vec![(0.5, 100), (1.0, 14), (2.0, 5)]);
        assert_eq!(choose(&found, 9, 1).len(), 5);
    }

    /// Two candidates 10 apart at cost 1 (zone 10): the 2nd best seen is 1,
    /// but a later candidate at 5 of cost 0.5 excludes both, and the 2nd
    /// match may cost anything. Their witness zone is 19: no threshold yet.
    #[test]
    fn the_threshold_needs_witnesses_twice_the_zone_apart() {
        let shared = AtomicU64::new(f64::INFINITY.to_bits());
        let mut keeper = Keeper::new(2, 10);
        keeper.offer(0, 1.0, f64::INFINITY, &shared);
        keeper.offer(10, 1.0, f64::INFINITY, &shared);
        assert_eq!(keeper.threshold(&shared), f64::INFINITY);
        let mut all = vec![(1.0, 0), (1.0, 10), (0.5, 5), (100.0, 40)];
        sort(&mut all);
        assert_eq!(choose(&all, 2, 10), vec![(0.5, 5), (100.0, 40)]);
        keeper.offer(19, 2.0, f64::INFINITY, &shared);
        assert_eq!(keeper.threshold(&shared), 2.0);
        assert_eq!(f64::from_bits(shared.load(Ordering::Relaxed)), 2.0);
    }

    #[test]
    fn bits_of_non_negative_floats_order_as_the_floats() {
        let values = [0.0, 1e-300, 0.5, 1.0, 2.0, 1e300, f64::INFINITY];
        for w in values.windows(2) {
            assert!(w[0].to_bits() < w[1].to_bits());
        }
    }
}
