//! Launch parameters, shared by host and device: each kernel takes one of
//! these `#[repr(C)]` structs by value, which both sides compile from this
//! one definition, so the layouts cannot drift apart. The pair-kernel
//! launches number their pairs one way ([`Numbering`]). The subsequence
//! search's kernels share [`search::SearchLaunch`]; the open-ended
//! subsequence alignment's take [`subsequence::SubsequenceLaunch`].

pub mod long_pair;
pub mod neighbours;
pub mod pairs;
pub mod search;
pub mod streamed;
pub mod subsequence;

use crate::Real;

/// How a launch numbers its pairs `0 .. pair_count` (from `first_pair`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numbering {
    /// Every series of `a` against every series of `b`, row-major.
    Matrix = 0,
    /// `a` against itself (`b` is `a`): the upper triangle `i <= j` with
    /// its diagonal, row-major; both `(i, j)` and `(j, i)` are written.
    Triangle = 1,
    /// Series `k` of `a` against series `k` of `b` (same counts); the
    /// output holds one value a pair.
    Paired = 2,
}

/// Number of pairs in a tile: all `a_count * b_count`, or the upper triangle
/// with its diagonal when `a` and `b` are the same `a_count` series.
#[inline(always)]
pub fn tile_pairs(a_count: u64, b_count: u64, triangle: bool) -> u64 {
    if triangle {
        a_count * (a_count + 1) / 2
    } else {
        a_count * b_count
    }
}

/// First pair number of row `i` of the upper triangle of an `n x n` matrix.
#[inline(always)]
fn triangle_row_start(i: u64, n: u64) -> u64 {
    i * n - i * i.saturating_sub(1) / 2
}

/// The `(i, j)` with `i <= j < n` of pair number `k` of the upper triangle,
/// numbered row-major. A floating-point estimate of the row, then exact
/// integer correction.
#[inline(always)]
pub fn triangle_pair(k: u64, n: u64) -> (u64, u64) {
    // Row i starts at i*n - i*(i-1)/2; solve start(i) = k for i.
    let b = 2.0 * n as f64 + 1.0;
    let discriminant = b * b - 8.0 * k as f64;
    let estimate = (b - <f64 as Real>::sqrt(if discriminant > 0.0 {
        discriminant
    } else {
        0.0
    })) / 2.0;
    let mut i = if estimate > 0.0 { estimate as u64 } else { 0 };
    if i >= n {
        i = n - 1;
    }
    while i > 0 && triangle_row_start(i, n) > k {
        i -= 1;
    }
    while i + 1 < n && triangle_row_start(i + 1, n) <= k {
        i += 1;
    }
    (i, i + (k - triangle_row_start(i, n)))
}
