//! Plain CPU oracle: the project's reference values for TWED, DTW and
//! Soft-DTW.
//!
//! Every function fills the full dynamic-programming matrix, row by row, in
//! `f64`, straight from the published recurrence. Nothing here is optimised
//! and nothing depends on the rest of the crate: the GPU kernels and the fast
//! CPU backend are checked against these functions, so they must stay simple
//! enough to be checked by reading.
//!
//! Series are `n x d` arrays (one row per sample). Matrices are indexed from
//! 1 for samples, like the papers: sample `a_i` is row `i - 1` of `a`, and
//! row / column 0 of each matrix is the boundary.
//!
//! Inputs are assumed valid (non-empty, finite, equal dimensions, valid
//! parameters); violated preconditions panic with a message, since this is a
//! test tool.
//!
//! References:
//! * P.-F. Marteau, "Time Warp Edit Distance with Stiffness Adjustment for
//!   Time Series Matching", IEEE TPAMI 31(2):306-318, 2009.
//! * H. Sakoe and S. Chiba, "Dynamic programming algorithm optimization for
//!   spoken word recognition", IEEE Trans. ASSP 26(1):43-49, 1978.
//! * M. Cuturi and M. Blondel, "Soft-DTW: a Differentiable Loss Function for
//!   Time-Series", ICML 2017 (PMLR 70:894-903).

use ndarray::{s, Array2, ArrayView1, ArrayView2};

mod paths;
pub use paths::{dtw_path, soft_dtw_alignment, twed_path, TwedStep};

const INF: f64 = f64::INFINITY;

/// TWED (Marteau 2009), as in Marteau's reference C code, generalised to
/// `d`-dimensional samples with the Lp norm. `a`: `n x d` samples, `ta`: their
/// `n` timestamps; `b`: `m x d`, `tb`: `m` timestamps.
///
/// A virtual sample of value 0 at time 0 precedes each series
/// (`a_0 = 0`, `ta_0 = 0`, likewise `b_0`, `tb_0`). With
/// `dist(u, v) = (sum_k |u_k - v_k|^p)^(1/p)`, `p = degree`, the matrix `D`
/// is `(n+1) x (m+1)` with `D[0][0] = 0`, `D[i][0] = D[0][j] = +inf` for
/// `i, j >= 1`, and for `i, j >= 1`
///
/// ```text
/// match    = D[i-1][j-1] + dist(a_i, b_j) + dist(a_{i-1}, b_{j-1})
///                        + nu * (|ta_i - tb_j| + |ta_{i-1} - tb_{j-1}|)
/// delete_a = D[i-1][j]   + dist(a_i, a_{i-1}) + nu * (ta_i - ta_{i-1}) + lambda
/// delete_b = D[i][j-1]   + dist(b_j, b_{j-1}) + nu * (tb_j - tb_{j-1}) + lambda
/// D[i][j]  = min(match, delete_a, delete_b)
/// ```
///
/// and the value is `D[n][m]`. For `nu >= 0`, `lambda >= 0`, `p >= 1` and
/// increasing timestamps TWED is a metric (Marteau 2009); with `nu = 0` the
/// timestamps are ignored and series equal up to timing are at distance 0.
///
/// Marteau's C code takes the root-free `|x - y|^degree` of univariate
/// samples; here, as in cuTWED and aeon, `dist` is the Lp norm (with the
/// root), which agrees with it for `degree = 1`. Timestamps are expected to
/// increase, starting at or after 0 (the virtual sample's time).
pub fn twed(
    a: ArrayView2<f64>,
    ta: ArrayView1<f64>,
    b: ArrayView2<f64>,
    tb: ArrayView1<f64>,
    nu: f64,
    lambda: f64,
    degree: f64,
) -> f64 {
    check_pair(&a, &b);
    assert_eq!(
        ta.len(),
        a.nrows(),
        "oracle::twed: ta needs one timestamp per sample of a"
    );
    assert_eq!(
        tb.len(),
        b.nrows(),
        "oracle::twed: tb needs one timestamp per sample of b"
    );
    assert!(
        nu >= 0.0 && nu.is_finite(),
        "oracle::twed: nu must be finite and >= 0, got {nu}"
    );
    assert!(
        lambda >= 0.0 && lambda.is_finite(),
        "oracle::twed: lambda must be finite and >= 0, got {lambda}"
    );
    assert!(
        degree >= 1.0 && degree.is_finite(),
        "oracle::twed: degree must be finite and >= 1, got {degree}"
    );
    let (n, m) = (a.nrows(), b.nrows());
    // Index 0 is the virtual sample, index i >= 1 is a_i.
    let (a, ta) = with_virtual_origin(a, ta);
    let (b, tb) = with_virtual_origin(b, tb);
    let dist = |u: ArrayView1<f64>, v: ArrayView1<f64>| lp_distance(u, v, degree);

    // Marteau's C code leaves out the "previous sample" terms of a match
    // when i == 1 or j == 1. Here they are kept: at (1, 1) they are
    // dist(0, 0) = 0 and |0 - 0| = 0, and for i == 1, j > 1 (or the reverse)
    // the match reads D[0][j-1] (or D[i-1][0]) = +inf, so the values agree.
    // (Its deletions of a_1 / b_1 are charged against 0 at time 0, as here.)
    let mut d = Array2::from_elem((n + 1, m + 1), INF);
    d[[0, 0]] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            let matched = d[[i - 1, j - 1]]
                + dist(a.row(i), b.row(j))
                + dist(a.row(i - 1), b.row(j - 1))
                + nu * ((ta[i] - tb[j]).abs() + (ta[i - 1] - tb[j - 1]).abs());
            let delete_a =
                d[[i - 1, j]] + dist(a.row(i), a.row(i - 1)) + nu * (ta[i] - ta[i - 1]) + lambda;
            let delete_b =
                d[[i, j - 1]] + dist(b.row(j), b.row(j - 1)) + nu * (tb[j] - tb[j - 1]) + lambda;
            d[[i, j]] = matched.min(delete_a).min(delete_b);
        }
    }
    d[[n, m]]
}

/// DTW (Sakoe & Chiba 1978) with squared Euclidean local cost; the value is
/// the accumulated sum (no square root).
///
/// `C` is `(n+1) x (m+1)` with `C[0][0] = 0`, `C[i][0] = C[0][j] = +inf`, and
/// `C[i][j] = ||a_i - b_j||^2 + min(C[i-1][j-1], C[i-1][j], C[i][j-1])`; the
/// value is `C[n][m]`.
///
/// With `band = Some(r)` (Sakoe-Chiba radius), the 0-based samples `i` of `a`
/// and `j` of `b` may be matched iff
/// `i - r - max(0, n - m) <= j <= i + r + max(0, m - n)` (tslearn's
/// `sakoe_chiba_mask`; `|i - j| <= r` for equal lengths). Other cells are
/// `+inf`. The band always contains both corners, so the value is finite.
pub fn dtw(a: ArrayView2<f64>, b: ArrayView2<f64>, band: Option<usize>) -> f64 {
    check_pair(&a, &b);
    let (n, m) = (a.nrows(), b.nrows());
    let mut c = Array2::from_elem((n + 1, m + 1), INF);
    c[[0, 0]] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            if band.is_some_and(|r| !in_sakoe_chiba_band(i - 1, j - 1, n, m, r)) {
                continue; // stays +inf
            }
            let best = c[[i - 1, j - 1]].min(c[[i - 1, j]]).min(c[[i, j - 1]]);
            c[[i, j]] = sq_euclidean(a.row(i - 1), b.row(j - 1)) + best;
        }
    }
    c[[n, m]]
}

/// Soft-DTW value `R[n][m]` (Cuturi & Blondel 2017, Algorithm 1) with squared
/// Euclidean cost.
///
/// `delta(i, j) = ||a_i - b_j||^2`; `R[0][0] = 0`, `R[i][0] = R[0][j] = +inf`;
/// `R[i][j] = delta(i, j) + softmin_gamma(R[i-1][j-1], R[i-1][j], R[i][j-1])`
/// where `softmin_gamma(x) = -gamma * ln(sum_k exp(-x_k / gamma))`.
pub fn soft_dtw(a: ArrayView2<f64>, b: ArrayView2<f64>, gamma: f64) -> f64 {
    soft_dtw_banded(a, b, gamma, None)
}

/// [`soft_dtw`] with an optional Sakoe-Chiba band of radius `band`, the
/// same band as [`dtw`]'s (tested cell by cell): cells outside it are
/// `+inf`, so no alignment passes through them.
pub fn soft_dtw_banded(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    gamma: f64,
    band: Option<usize>,
) -> f64 {
    let (_, r) = soft_dtw_forward(a, b, gamma, band);
    r[[a.nrows(), b.nrows()]]
}

/// The soft-DTW divergence (Blondel, Mensch & Vert, AISTATS 2021):
/// `sdtw(a, b) - (sdtw(a, a) + sdtw(b, b)) / 2`, each term with the band.
pub fn soft_dtw_divergence(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    gamma: f64,
    band: Option<usize>,
) -> f64 {
    soft_dtw_banded(a, b, gamma, band)
        - (soft_dtw_banded(a, a, gamma, band) + soft_dtw_banded(b, b, gamma, band)) / 2.0
}

/// Soft-DTW value and its gradient with respect to `a` (`n x d`), via the
/// expected-alignment matrix `E` (Cuturi & Blondel 2017, Algorithm 2).
///
/// `R` (from the forward pass) and `delta` are extended to `(n+2) x (m+2)`:
/// `R[i][m+1] = R[n+1][j] = -inf` for `i <= n`, `j <= m`,
/// `R[n+1][m+1] = R[n][m]`, `delta` is 0 outside `1..=n x 1..=m`;
/// `E[n+1][m+1] = 1`, `E[i][m+1] = E[n+1][j] = 0`. For `i = n..1`,
/// `j = m..1`:
///
/// ```text
/// wa = exp((R[i+1][j]   - R[i][j] - delta[i+1][j])   / gamma)
/// wb = exp((R[i][j+1]   - R[i][j] - delta[i][j+1])   / gamma)
/// wc = exp((R[i+1][j+1] - R[i][j] - delta[i+1][j+1]) / gamma)
/// E[i][j] = E[i+1][j] * wa + E[i][j+1] * wb + E[i+1][j+1] * wc
/// ```
///
/// `E[i][j] = dR[n][m] / d delta(i, j)`, so by the chain rule
/// `d R[n][m] / d a_i = sum_j E[i][j] * 2 * (a_i - b_j)`.
pub fn soft_dtw_with_gradient(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    gamma: f64,
) -> (f64, Array2<f64>) {
    soft_dtw_with_gradient_banded(a, b, gamma, None)
}

/// [`soft_dtw_with_gradient`] with an optional Sakoe-Chiba band: cells
/// outside it are `-inf` in the extended `R` (like the border, so steps into
/// them weigh 0) and their `E` is 0. The gradient with respect to `b` is
/// that of `soft_dtw_with_gradient_banded(b, a, ..)` (the band is symmetric).
pub fn soft_dtw_with_gradient_banded(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    gamma: f64,
    band: Option<usize>,
) -> (f64, Array2<f64>) {
    let (e, value) = soft_dtw_alignment(a, b, gamma, band);
    let (n, m) = (a.nrows(), b.nrows());
    let mut grad = Array2::<f64>::zeros(a.raw_dim());
    for i in 0..n {
        for j in 0..m {
            let w = e[[i, j]];
            for k in 0..a.ncols() {
                grad[[i, k]] += w * 2.0 * (a[[i, k]] - b[[j, k]]);
            }
        }
    }
    (value, grad)
}

/// Forward pass of Soft-DTW: `delta` (`n x m`, 0-based) and `R`
/// (`(n+1) x (m+1)`, with its +inf boundary, +inf outside the band).
fn soft_dtw_forward(
    a: ArrayView2<f64>,
    b: ArrayView2<f64>,
    gamma: f64,
    band: Option<usize>,
) -> (Array2<f64>, Array2<f64>) {
    check_pair(&a, &b);
    assert!(
        gamma > 0.0 && gamma.is_finite(),
        "oracle::soft_dtw: gamma must be finite and > 0, got {gamma}"
    );
    let (n, m) = (a.nrows(), b.nrows());
    let delta = Array2::from_shape_fn((n, m), |(i, j)| sq_euclidean(a.row(i), b.row(j)));
    let mut r = Array2::from_elem((n + 1, m + 1), INF);
    r[[0, 0]] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            if band.is_some_and(|w| !in_sakoe_chiba_band(i - 1, j - 1, n, m, w)) {
                continue; // stays +inf
            }
            let soft = softmin3(r[[i - 1, j - 1]], r[[i - 1, j]], r[[i, j - 1]], gamma);
            r[[i, j]] = delta[[i - 1, j - 1]] + soft;
        }
    }
    (delta, r)
}

/// `-gamma * ln(exp(-x/gamma) + exp(-y/gamma) + exp(-z/gamma))`, computed as
/// `min - gamma * ln(sum_k exp(-(x_k - min) / gamma))` so that no exponential
/// overflows; `+inf` when all three are `+inf`. Never above the minimum
/// (the sum is >= 1), and at least `min - gamma * ln 3`.
fn softmin3(x: f64, y: f64, z: f64, gamma: f64) -> f64 {
    let min = x.min(y).min(z);
    if min == INF {
        return INF;
    }
    let sum: f64 = [x, y, z].iter().map(|v| (-(v - min) / gamma).exp()).sum();
    min - gamma * sum.ln()
}

/// Whether 0-based samples `i` (of `n`) and `j` (of `m`) are within the
/// Sakoe-Chiba band of radius `r`:
/// `i - r - max(0, n - m) <= j <= i + r + max(0, m - n)`.
fn in_sakoe_chiba_band(i: usize, j: usize, n: usize, m: usize, r: usize) -> bool {
    let lower_ok = i <= j.saturating_add(r).saturating_add(n.saturating_sub(m));
    let upper_ok = j <= i.saturating_add(r).saturating_add(m.saturating_sub(n));
    lower_ok && upper_ok
}

/// `sum_k (u_k - v_k)^2`.
fn sq_euclidean(u: ArrayView1<f64>, v: ArrayView1<f64>) -> f64 {
    u.iter().zip(v).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// `(sum_k |u_k - v_k|^p)^(1/p)`; the degrees 1 and 2 without `powf`,
/// which takes most of a test's time in many dimensions.
fn lp_distance(u: ArrayView1<f64>, v: ArrayView1<f64>, p: f64) -> f64 {
    let differences = u.iter().zip(v).map(|(x, y)| (x - y).abs());
    if p == 1.0 {
        differences.sum()
    } else if p == 2.0 {
        differences.map(|d| d * d).sum::<f64>().sqrt()
    } else {
        differences.map(|d| d.powf(p)).sum::<f64>().powf(1.0 / p)
    }
}

/// The series with the virtual sample (value 0, time 0) put in front.
fn with_virtual_origin(x: ArrayView2<f64>, t: ArrayView1<f64>) -> (Array2<f64>, Vec<f64>) {
    let mut padded = Array2::zeros((x.nrows() + 1, x.ncols()));
    padded.slice_mut(s![1.., ..]).assign(&x);
    let times = std::iter::once(0.0).chain(t.iter().copied()).collect();
    (padded, times)
}

fn check_pair(a: &ArrayView2<f64>, b: &ArrayView2<f64>) {
    assert!(
        a.nrows() > 0 && b.nrows() > 0,
        "oracle: series must be non-empty (got {} and {} samples)",
        a.nrows(),
        b.nrows()
    );
    assert!(
        a.ncols() > 0 && a.ncols() == b.ncols(),
        "oracle: series must have the same positive dimension (got {} and {})",
        a.ncols(),
        b.ncols()
    );
}

#[cfg(test)]
mod tests;
