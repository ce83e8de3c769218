//! Banded DTW of two series of one length, abandoned as soon as its
//! partial cost and a bound on what remains pass a cutoff (the UCR Suite's
//! early abandoning, with the cumulative LB_Keogh tail).
//!
//! The cells are those of [`crate::oracle::dtw`] (squared Euclidean cost
//! summed over the dimensions in order, plus the least of the three
//! neighbours), so a DTW that finishes has the oracle's value bit for bit;
//! it is symmetric, so rows may be either series.

/// Samples have one value (`One`, so the loops over dimensions fold away),
/// or several.
pub(crate) trait Dims: Copy {
    fn get(self) -> usize;
}

#[derive(Clone, Copy)]
pub(crate) struct One;

impl Dims for One {
    #[inline(always)]
    fn get(self) -> usize {
        1
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Many(pub usize);

impl Dims for Many {
    #[inline(always)]
    fn get(self) -> usize {
        self.0
    }
}

/// `||a_i - b_j||^2`, summed in the oracle's order.
#[inline(always)]
pub(crate) fn cost<D: Dims>(a: &[f64], i: usize, b: &[f64], j: usize, dims: D) -> f64 {
    let d = dims.get();
    let t = a[i * d] - b[j * d];
    let mut sum = t * t;
    for k in 1..d {
        let t = a[i * d + k] - b[j * d + k];
        sum += t * t;
    }
    sum
}

/// The DTW cost of `a` (rows) and `b` (columns), both `m x dims` (row-major), with the
/// band `|i - j| <= r`; `None` once, after a row, the row's least
/// cumulative cost plus `tail[min(row + r + 1, m)]` (a lower bound of what
/// the cells of later rows and columns must add: `tail[p]` is the sum of
/// bound contributions of positions `p..m`) is above `cutoff`. `rows` are
/// two buffers of `m + 1`, reused between calls.
pub(crate) fn dtw_abandoning<D: Dims>(
    a: &[f64],
    b: &[f64],
    dims: D,
    r: usize,
    tail: &[f64],
    cutoff: f64,
    rows: &mut [Vec<f64>; 2],
) -> Option<f64> {
    let m = a.len() / dims.get();
    let [prev, cur] = rows;
    prev.clear();
    prev.resize(m + 1, f64::INFINITY);
    cur.clear();
    cur.resize(m + 1, f64::INFINITY);
    // Row 0 of the matrix: C[0][0] = 0, the rest infinite. Columns are
    // 1-based here; column 0 is the infinite boundary.
    prev[0] = 0.0;
    let d = dims.get();
    for i in 1..=m {
        let lo = i.saturating_sub(r).max(1);
        let hi = (i + r).min(m);
        // The cell left of the band is outside it; the cell above its right
        // end was never written (the band moves right a column a row).
        cur[lo - 1] = f64::INFINITY;
        let mut least = f64::INFINITY;
        let mut left = f64::INFINITY;
        // The row's cells as slices zipped together, so that the loop has
        // no bounds checks: column j reads prev[j - 1] and prev[j] (a
        // window of two), writes cur[j], and reads b's sample j - 1.
        let above = prev[lo - 1..=hi].windows(2);
        let samples = b[(lo - 1) * d..hi * d].chunks_exact(d);
        let a_i = &a[(i - 1) * d..i * d];
        for ((cell, above), b_j) in cur[lo..=hi].iter_mut().zip(above).zip(samples) {
            let best = above[0].min(above[1]).min(left);
            let value = cost(a_i, 0, b_j, 0, dims) + best;
            *cell = value;
            left = value;
            least = least.min(value);
        }
        if i < m && least + tail[(i + r).min(m)] > cutoff {
            return None;
        }
        std::mem::swap(prev, cur);
    }
    Some(prev[m])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::ArrayView2;

    #[test]
    fn finished_dtws_are_the_oracles_bit_for_bit() {
        let a: Vec<f64> = (0..40)
            .map(|i| ((i * 7 % 11) as f64 * 0.37).sin())
            .collect();
        let b: Vec<f64> = (0..40)
            .map(|i| ((i * 5 % 13) as f64 * 0.21).cos())
            .collect();
        for dims in [1, 2, 4] {
            let m = 40 / dims;
            let tail = vec![0.0; m + 1];
            let mut rows = [Vec::new(), Vec::new()];
            for r in 0..m {
                let got = dtw_abandoning(
                    &a[..m * dims],
                    &b[..m * dims],
                    Many(dims),
                    r,
                    &tail,
                    f64::INFINITY,
                    &mut rows,
                )
                .unwrap();
                let av = ArrayView2::from_shape((m, dims), &a).unwrap();
                let bv = ArrayView2::from_shape((m, dims), &b).unwrap();
                assert_eq!(
                    got,
                    crate::oracle::dtw(av, bv, Some(r)),
                    "dims {dims} r {r}"
                );
            }
        }
    }
}
