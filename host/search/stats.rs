//! The mean and standard deviation of every window of a unit of work, for
//! z-normalising candidates on the fly.
//!
//! Prefix sums make each window O(1), but plain running sums of `x` and
//! `x^2` over a long series lose the small variance of a window to
//! cancellation against the large sums (a random walk of 10^8 points
//! drifts to |x| ~ 10^4). Here each unit (at most [`super::DEFAULT_CHUNK`]
//! starts, usually) recentres its values on its first sample, and the
//! prefix sums are compensated (Knuth's two-sum: a high and a low part), so
//! a window's sums are accurate to a rounding of the window's own sums.
//! What is left is the cancellation in `E[y^2] - E[y]^2` when a window's
//! spread is tiny against its distance from the unit's first sample, or
//! its mean is huge against its spread: such windows (a factor over
//! [`CANCELLATION`]) are recomputed with two passes, so every window's
//! statistics are within 1e-9 (relative to its std) of the
//! two-pass values. The bounds allow for that (`super::scan::prunes`); the
//! DTWs that decide the result use the two-pass values themselves
//! ([`normalise_exact`]).

/// Above this ratio of `E[y^2]` (or `mean^2`) to the variance, a window's
/// statistics are recomputed with two passes: the cancellation would cost
/// more than 6 of the 16 digits.
const CANCELLATION: f64 = 1e6;

/// Knuth's two-sum: `a + b = s + e` exactly.
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Statistics of the windows of one unit, and the buffers they are
/// computed in (kept between units).
#[derive(Default)]
pub(crate) struct WindowStats {
    /// `mean[s * dims + k]`: window `s`, dimension `k`.
    pub mean: Vec<f64>,
    /// `1 / std`, or 0 for a constant window (whose values then all
    /// normalise to 0).
    pub inv_std: Vec<f64>,
    /// Whether window `s`'s dimension `k` has all its values equal.
    pub flat: Vec<bool>,
    sums: [Vec<f64>; 4],
    changes: Vec<u32>,
}

impl WindowStats {
    /// The statistics of windows `0..starts` of `x` (`rows x dims`,
    /// row-major, `rows >= starts + m - 1`). Without z-normalisation,
    /// mean 0 and `inv_std` 1, so that the normalised values are the
    /// values.
    pub fn compute(&mut self, x: &[f64], dims: usize, m: usize, starts: usize, znorm: bool) {
        let rows = starts + m - 1;
        let cells = starts * dims;
        self.mean.clear();
        self.inv_std.clear();
        self.flat.clear();
        if !znorm {
            self.mean.resize(cells, 0.0);
            self.inv_std.resize(cells, 1.0);
            self.flat.resize(cells, false);
            return;
        }
        self.mean.resize(cells, 0.0);
        self.inv_std.resize(cells, 0.0);
        self.flat.resize(cells, false);
        for sums in &mut self.sums {
            sums.clear();
            sums.resize(rows + 1, 0.0);
        }
        self.changes.clear();
        self.changes.resize(rows, 0);
        let mf = m as f64;
        for k in 0..dims {
            let reference = x[k];
            let [s1, l1, s2, l2] = &mut self.sums;
            let (mut h1, mut e1, mut h2, mut e2) = (0.0, 0.0, 0.0, 0.0);
            let mut changes = 0u32;
            for p in 0..rows {
                let v = x[p * dims + k];
                if p > 0 && v != x[(p - 1) * dims + k] {
                    changes += 1;
                }
                self.changes[p] = changes;
                let y = v - reference;
                let (h, e) = two_sum(h1, y);
                h1 = h;
                e1 += e;
                let (h, e) = two_sum(h2, y * y);
                h2 = h;
                e2 += e;
                s1[p + 1] = h1;
                l1[p + 1] = e1;
                s2[p + 1] = h2;
                l2[p + 1] = e2;
            }
            for s in 0..starts {
                let at = s * dims + k;
                let last = x[(s + m - 1) * dims + k];
                if self.changes[s + m - 1] == self.changes[s] {
                    self.flat[at] = true;
                    self.mean[at] = last;
                    self.inv_std[at] = 0.0;
                    continue;
                }
                let e = s + m;
                let sum = (s1[e] - s1[s]) + (l1[e] - l1[s]);
                let squares = (s2[e] - s2[s]) + (l2[e] - l2[s]);
                let shift = sum / mf;
                let var = squares / mf - shift * shift;
                let mean = reference + shift;
                let cancels = var <= 0.0
                    || squares / mf > CANCELLATION * var
                    || mean * mean > CANCELLATION * CANCELLATION * var;
                let (mean, std) = if cancels {
                    two_pass(x, dims, k, s, m)
                } else {
                    (mean, var.sqrt())
                };
                self.mean[at] = mean;
                self.inv_std[at] = if std > 0.0 { 1.0 / std } else { 0.0 };
            }
        }
    }
}

/// The mean and population standard deviation of dimension `k` of window
/// `s..s+m` of `x`, in two passes summed in order: the definition the
/// search's results are exact to.
pub(crate) fn two_pass(x: &[f64], dims: usize, k: usize, s: usize, m: usize) -> (f64, f64) {
    let mut sum = 0.0;
    for p in s..s + m {
        sum += x[p * dims + k];
    }
    let mean = sum / m as f64;
    let mut squares = 0.0;
    for p in s..s + m {
        let d = x[p * dims + k] - mean;
        squares += d * d;
    }
    (mean, (squares / m as f64).sqrt())
}

/// Writes window `s..s+m` of `x` z-normalised into `out` (`m x dims`):
/// `(x - mean) / std` with [`two_pass`]'s statistics, or zeros for a
/// dimension whose values are all equal (`flat`) or whose std is 0.
pub(crate) fn normalise_exact(
    x: &[f64],
    dims: usize,
    s: usize,
    m: usize,
    flat: impl Fn(usize) -> bool,
    out: &mut [f64],
) {
    for k in 0..dims {
        let (mean, std) = if flat(k) {
            (0.0, 0.0)
        } else {
            two_pass(x, dims, k, s, m)
        };
        for i in 0..m {
            out[i * dims + k] = if std > 0.0 {
                (x[(s + i) * dims + k] - mean) / std
            } else {
                0.0
            };
        }
    }
}

/// The query (`m x dims`, row-major) z-normalised as every window is.
pub(crate) fn znormalised(rows: &[f64], m: usize, dims: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * dims];
    let flat = |k: usize| (1..m).all(|i| rows[i * dims + k] == rows[k]);
    normalise_exact(rows, dims, 0, m, flat, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A random walk far from 0, long enough to drift: the prefix-sum
    /// statistics agree with two passes to 1e-9 of the std.
    #[test]
    fn prefix_statistics_match_two_passes() {
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut x = vec![1e6];
        for _ in 1..200_000 {
            let last = *x.last().unwrap();
            x.push(last + next());
        }
        let m = 128;
        let starts = x.len() - m + 1;
        let mut stats = WindowStats::default();
        stats.compute(&x, 1, m, starts, true);
        for s in (0..starts).step_by(97) {
            let (mean, std) = two_pass(&x, 1, 0, s, m);
            assert!(
                (stats.mean[s] - mean).abs() <= 1e-9 * std,
                "mean at {s}: {} {mean} {std}",
                stats.mean[s]
            );
            assert!(
                (1.0 / stats.inv_std[s] - std).abs() <= 1e-9 * std,
                "std at {s}"
            );
        }
    }

    #[test]
    fn constant_windows_are_flat() {
        let x = [3.0, 1.0, 1.0, 1.0, 2.0];
        let mut stats = WindowStats::default();
        stats.compute(&x, 1, 3, 3, true);
        assert_eq!(stats.flat, vec![false, true, false]);
        assert_eq!(stats.inv_std[1], 0.0);
    }
}
