//! Banded DTW of one query against several series of its length at once,
//! each lane a series, computing only the cells that can still lead to a
//! cost at most a cutoff and giving up when a row has none (pruned and
//! early-abandoned DTW: Silva and Batista, "Speeding up all-pairwise
//! dynamic time warping matrix calculation", SDM 2016; Herrmann and Webb,
//! "Early abandoning and pruning for elastic distances including dynamic
//! time warping", DMKD 2021).
//!
//! A cell is dead when its cost plus a lower bound of what any path from
//! it must still add passes its lane's cutoff: every path from cell `(i,
//! j)` (1-based) matches each later row `i+1..=m` and each later column
//! `j+1..=m` in cells of its own, so it adds at least the larger of the
//! rows' and the columns' LB_Keogh terms from there on. A dead cell counts
//! as infinite for its neighbours: a path through it costs more than the
//! cutoff anyway, and a path of cost at most the cutoff meets only live
//! cells, so its cost is the plain recurrence's. Each row runs from the
//! first column the row before left live in some lane, and stops once past
//! the row before's last live column with every lane dead on its left.
//!
//! One lane's cell update waits on the cell to its left; the lanes' do
//! not wait on each other, so the lanes of a row run side by side (and
//! vectorise) where one pair's cells would wait in turn.

use super::dtw::Dims;

/// Series computed together.
pub(crate) const LANES: usize = 8;

/// One value per lane.
pub(crate) type Lane = [f64; LANES];

const DEAD: Lane = [f64::INFINITY; LANES];

/// Up to [`LANES`] series of one length `m` (of `dims` values a sample) to
/// compare with a query, and what their samples and the query's add at
/// least (LB_Keogh's terms).
#[derive(Default)]
pub(crate) struct Batch {
    /// The series' database indices, one a lane.
    pub index: Vec<usize>,
    /// `values[t * dims + k][lane]`.
    pub values: Vec<Lane>,
    /// Each query sample's term, each series sample's term.
    pub query_terms: Vec<Lane>,
    pub series_terms: Vec<Lane>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn clear(&mut self) {
        self.index.clear();
    }

    /// Adds series `index` (`values`, `m x dims`) with its LB_Keogh terms
    /// (`m` each).
    pub fn push<T: crate::Float>(
        &mut self,
        index: usize,
        values: &[T],
        (query_terms, series_terms): (&[f64], &[f64]),
    ) {
        let lane = self.index.len();
        if lane == 0 {
            // Lanes left unused keep older values: they are dead anyway.
            self.values.resize(values.len(), [0.0; LANES]);
            self.query_terms.resize(query_terms.len(), [0.0; LANES]);
            self.series_terms.resize(series_terms.len(), [0.0; LANES]);
        }
        self.index.push(index);
        for (to, v) in self.values.iter_mut().zip(values) {
            to[lane] = v.to_f64();
        }
        for (to, &t) in self.query_terms.iter_mut().zip(query_terms) {
            to[lane] = t;
        }
        for (to, &t) in self.series_terms.iter_mut().zip(series_terms) {
            to[lane] = t;
        }
    }
}

/// Buffers of [`dtw_pruned`], kept between calls.
#[derive(Default)]
pub(crate) struct Buffers {
    rows: [Vec<Lane>; 2],
    /// Per column and lane: the cutoff less what the later columns add.
    cuts: Vec<Lane>,
    /// Per row and lane: the cutoff less what the later rows add.
    row_cuts: Vec<Lane>,
}

/// The DTW costs of `query` (rows, `m x dims` row-major) and the batch's
/// series (columns), band `|i - j| <= r`, each where it is at most
/// `cutoff`, else `None`.
pub(crate) fn dtw_pruned<D: Dims>(
    query: &[f64],
    batch: &Batch,
    dims: D,
    r: usize,
    cutoff: f64,
    buffers: &mut Buffers,
) -> [Option<f64>; LANES] {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, detected above.
        return unsafe { dtw_pruned_avx2(query, batch, dims, r, cutoff, buffers) };
    }
    pruned_rows(query, batch, dims, r, cutoff, buffers)
}

/// [`pruned_rows`] compiled for AVX2: the lanes four to an instruction.
///
/// # Safety
/// The processor has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dtw_pruned_avx2<D: Dims>(
    query: &[f64],
    batch: &Batch,
    dims: D,
    r: usize,
    cutoff: f64,
    buffers: &mut Buffers,
) -> [Option<f64>; LANES] {
    pruned_rows(query, batch, dims, r, cutoff, buffers)
}

/// The rows of [`dtw_pruned`].
#[inline(always)]
fn pruned_rows<D: Dims>(
    query: &[f64],
    batch: &Batch,
    dims: D,
    r: usize,
    cutoff: f64,
    buffers: &mut Buffers,
) -> [Option<f64>; LANES] {
    let d = dims.get();
    let m = query.len() / d;
    let count = batch.len();
    // Unused lanes are dead from the start.
    let cutoffs: Lane = std::array::from_fn(|l| if l < count { cutoff } else { -1.0 });
    let Buffers {
        rows,
        cuts,
        row_cuts,
    } = buffers;
    less_suffix_sums(&batch.series_terms, cutoffs, cuts);
    less_suffix_sums(&batch.query_terms, cutoffs, row_cuts);
    let [prev, cur] = rows;
    prev.clear();
    prev.resize(m + 1, DEAD);
    cur.clear();
    cur.resize(m + 1, DEAD);
    // Row 0: only the corner C[0][0] = 0 is live. Columns are 1-based here.
    prev[0] = [0.0; LANES];
    let (mut live_from, mut live_to) = (0, 0);
    for i in 1..=m {
        let read = |prev: &[Lane], j: usize| {
            if (live_from..=live_to).contains(&j) {
                prev[j]
            } else {
                DEAD
            }
        };
        let a = &query[(i - 1) * d..i * d];
        let hi = (i + r).min(m);
        let mut j = i.saturating_sub(r).max(1).max(live_from);
        let mut left = DEAD;
        let (mut first, mut last) = (usize::MAX, 0);
        while j <= hi {
            if j > live_to + 1 && left == DEAD {
                break; // only dead cells from here on
            }
            let (diag, up) = (read(prev, j - 1), read(prev, j));
            let b = &batch.values[(j - 1) * d..j * d];
            let (cut, row_cut) = (&cuts[j], &row_cuts[i]);
            let mut any = false;
            for l in 0..LANES {
                let mut cost = 0.0;
                for k in 0..d {
                    let t = a[k] - b[k][l];
                    cost += t * t;
                }
                let value = cost + least(least(diag[l], up[l]), left[l]);
                let live = value <= least(cut[l], row_cut[l]);
                left[l] = if live { value } else { f64::INFINITY };
                any |= live;
            }
            if any {
                first = first.min(j);
                last = j;
            }
            cur[j] = left;
            j += 1;
        }
        if first == usize::MAX {
            return [None; LANES];
        }
        (live_from, live_to) = (first, last);
        std::mem::swap(prev, cur);
    }
    std::array::from_fn(|l| {
        let value = prev[m][l];
        (live_to == m && l < count && value.is_finite()).then_some(value)
    })
}

/// The lesser of two numbers (none is NaN here): one instruction, where
/// `f64::min`'s care for NaN costs several.
#[inline(always)]
fn least(a: f64, b: f64) -> f64 {
    if b < a {
        b
    } else {
        a
    }
}

/// `out[p] = cutoff - sum(terms[p..])`, `out[m] = cutoff`, per lane: 1-based
/// cell `p`'s cut, what the samples after it add taken off.
fn less_suffix_sums(terms: &[Lane], cutoffs: Lane, out: &mut Vec<Lane>) {
    let m = terms.len();
    out.clear();
    out.resize(m + 1, cutoffs);
    let mut sum = [0.0; LANES];
    for p in (0..m).rev() {
        for l in 0..LANES {
            sum[l] += terms[p][l];
            out[p][l] = cutoffs[l] - sum[l];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::dtw::Many;
    use ndarray::ArrayView2;

    fn series(seed: usize, len: usize) -> Vec<f64> {
        (0..len)
            .map(|i| ((i * 7 + seed * 3) % 11) as f64 * 0.37 - (i % (seed + 2)) as f64 * 0.2)
            .collect()
    }

    fn view(x: &[f64], m: usize, dims: usize) -> ArrayView2<'_, f64> {
        ArrayView2::from_shape((m, dims), &x[..m * dims]).unwrap()
    }

    /// With no bound to help: each lane the oracle's value, bit for bit,
    /// when it is at most the cutoff, `None` when it is above; lanes left
    /// unused are `None`.
    #[test]
    fn at_most_the_cutoff_the_oracles_value_else_none() {
        let query = series(0, 36);
        let others: Vec<Vec<f64>> = (1..=LANES).map(|s| series(s, 36)).collect();
        for dims in [1, 2, 3] {
            let m = 36 / dims;
            let zeros = vec![0.0; m];
            let mut buffers = Buffers::default();
            for r in 0..m {
                let exact: Vec<f64> = others
                    .iter()
                    .map(|b| crate::oracle::dtw(view(&query, m, dims), view(b, m, dims), Some(r)))
                    .collect();
                for count in [1, 5, LANES] {
                    let mut batch = Batch::default();
                    for b in &others[..count] {
                        batch.push(0, &b[..m * dims], (&zeros, &zeros));
                    }
                    let mut sorted = exact[..count].to_vec();
                    sorted.sort_by(f64::total_cmp);
                    for cutoff in [f64::INFINITY, sorted[count / 2], sorted[0] * 0.999, 0.0] {
                        let got = dtw_pruned(
                            &query[..m * dims],
                            &batch,
                            Many(dims),
                            r,
                            cutoff,
                            &mut buffers,
                        );
                        for (l, got) in got.iter().enumerate() {
                            let expected = exact.get(l).filter(|&&e| l < count && e <= cutoff);
                            assert_eq!(
                                got.as_ref(),
                                expected,
                                "dims {dims} r {r} lane {l} cutoff {cutoff}"
                            );
                        }
                    }
                }
            }
        }
    }
}
