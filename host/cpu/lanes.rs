//! Several pairs in lockstep: [`Lanes`], an array of `K` values that is
//! itself a [`Real`], so that a recurrence written once over `Real` runs `K`
//! pairs of the same shape at once, lane `l` of every cell being the cell
//! of pair `l` (the CPU backend's lockstep driver, `cpu::lockstep`, runs
//! the stencil driver over such pairs).
//!
//! This is the CPU backend's answer to Soft-DTW's latency: one pair's cells
//! wait on each other's exponentials and logarithm, `K` pairs' cells do
//! not, and their arithmetic is the same instructions on `K` values, which
//! LLVM vectorises. For that the lanes' `soft_pow` and `soft_log` (base
//! `e`, as the host's scalars) are not std's (a call per value, one value
//! at a time) but branch-free range reductions and polynomials
//! ([`exp_lanes`], [`ln_lanes`]) within an ulp of std's
//! (tests/suite/lockstep.rs measures them). Every other operation is the
//! scalar one on each lane.
//!
//! The polynomials use fused multiply-adds (`mul_add`): one instruction
//! where the code is compiled for a processor that has them (the CPU
//! backend compiles its lockstep driver for AVX2 and FMA and uses it only
//! where both are there), a call to libm's `fma` elsewhere, which is
//! correct but slow.
//!
//! Lanes follow the same path through a recurrence only if its branches
//! agree on every lane: the drivers branch on the shape and the band, the
//! same for pairs of one shape; comparisons of whole [`Lanes`] (`==`, `<`)
//! hold when they hold on every lane. Soft-DTW's cell has no branch: its
//! infinite results (three infinite neighbours, in some lanes only after
//! an overflow) come out of the arithmetic lane by lane, as in the scalar
//! cell.
//!
//! The GPU drivers move values as bits (warp shuffles), which lanes do not
//! have; [`Real::to_bits`] and [`Real::to_f64`] give lane 0's.

use std::ops::{Add, Div, Mul, Neg, Sub};
use timewarp_kernels::{Precision, Real};

/// `K` values of `T`, one per pair computed in lockstep.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Lanes<T, const K: usize>(pub [T; K]);

impl<T: Copy, const K: usize> Lanes<T, K> {
    /// Every lane `value`.
    #[inline(always)]
    pub fn splat(value: T) -> Self {
        Lanes([value; K])
    }
}

/// The scalar types that lanes are made of: `f32` and `f64`, with the
/// exponential and logarithm of one lane, written without branches.
///
/// [`exp_lanes`] and [`ln_lanes`] apply them in one loop over the lanes
/// whose body is the whole function: LLVM's loop vectoriser turns that into
/// vector code (a vector lane per lane), as long as the loop is too large
/// to be unrolled first, which it is from 8 lanes on. Unrolled (fewer
/// lanes), what remains is the SLP vectoriser's to pack, which packs these
/// chains badly: measured, lane-by-lane code at 4 `f64` lanes. Passed as a
/// closure, the body is not inlined at all.
pub trait LaneReal: Real {
    /// [`exp_lanes`] of one value.
    fn exp_lane(self) -> Self;
    /// [`ln_lanes`] of one value.
    fn ln_lane(self) -> Self;
    /// `self * a + b` rounded once (`mul_add`: see the module's notes).
    fn fma(self, a: Self, b: Self) -> Self;
}

/// `exp` of every lane, for vectorisation: `x = n ln 2 + r` with `n` an
/// integer and `|r| <= ln 2 / 2`, `exp(r)` by its Taylor polynomial (degree
/// 13 in `f64`, 7 in `f32`: truncation below 2^-56 and about 2^-27 of the
/// result) as `1 + (r + r^2 Q(r))`, `Q` by Estrin's scheme (a few dependent
/// steps instead of one per coefficient: the cell's latency is what limits
/// the lockstep driver), times `2^n` built in the exponent bits as two
/// factors (so that `2^n` itself need not be representable near the
/// overflow). Results that would be below the smallest normal are exactly
/// 0 (arguments below `ln(MIN_POSITIVE)`, about -708.4 in `f64` and -87.3
/// in `f32`; `-inf` and NaN too): subnormal arithmetic is many times slower
/// on x86, and the soft minimum adds these terms to 1, where they change
/// nothing. Arguments above 711 or 90 give infinity. Within 1 ulp of std's
/// `exp` wherever std's result is normal (tests/suite/lockstep.rs), without
/// changing the process's floating-point mode.
#[inline(always)]
pub fn exp_lanes<T: LaneReal, const K: usize>(x: Lanes<T, K>) -> Lanes<T, K> {
    let mut x = x.0;
    // One loop whose body is the whole function (see `LaneReal`).
    for value in x.iter_mut() {
        *value = value.exp_lane();
    }
    Lanes(x)
}

/// `ln` of every lane, for vectorisation: `x = 2^k (1 + f)` with `1 + f`
/// in `[sqrt(2)/2, sqrt(2))`, `ln(1 + f) = 2 atanh(s)`, `s = f / (2 + f)`,
/// by the polynomial of fdlibm's `log` and `logf` (the same reduction and
/// coefficients, written without branches, with fused multiply-adds). Subnormal arguments are scaled
/// first; 0 gives `-inf`, infinity itself, negative numbers and NaN NaN.
/// Within 1 ulp of std's `ln` over every binade (tests/suite/lockstep.rs).
#[inline(always)]
pub fn ln_lanes<T: LaneReal, const K: usize>(x: Lanes<T, K>) -> Lanes<T, K> {
    let mut x = x.0;
    for value in x.iter_mut() {
        *value = value.ln_lane();
    }
    Lanes(x)
}

/// `sum q[k] x^k`, `k < 12`, by Estrin's scheme (pairs `q[2k] + q[2k+1] x`,
/// then pairs of those with `x^2`, and so on: 4 dependent steps rather than
/// Horner's 11), given `x^2`.
#[inline(always)]
fn estrin12<T: LaneReal>(q: &[T; 12], x: T, x2: T) -> T {
    let x4 = x2 * x2;
    let x8 = x4 * x4;
    let a: [T; 6] = [
        q[1].fma(x, q[0]),
        q[3].fma(x, q[2]),
        q[5].fma(x, q[4]),
        q[7].fma(x, q[6]),
        q[9].fma(x, q[8]),
        q[11].fma(x, q[10]),
    ];
    let b = [a[1].fma(x2, a[0]), a[3].fma(x2, a[2]), a[5].fma(x2, a[4])];
    b[2].fma(x8, b[1].fma(x4, b[0]))
}

/// The same for `k < 6`.
#[inline(always)]
fn estrin6<T: LaneReal>(q: &[T; 6], x: T, x2: T) -> T {
    let x4 = x2 * x2;
    let a = [q[1].fma(x, q[0]), q[3].fma(x, q[2]), q[5].fma(x, q[4])];
    a[2].fma(x4, a[1].fma(x2, a[0]))
}

/// `1 / k!`, `k = 0..=13`, for the Taylor polynomial of `exp`.
macro_rules! inverse_factorials {
    ($t:ty) => {
        [
            1.0 as $t,
            1.0 as $t,
            (1.0 / 2.0) as $t,
            (1.0 / 6.0) as $t,
            (1.0 / 24.0) as $t,
            (1.0 / 120.0) as $t,
            (1.0 / 720.0) as $t,
            (1.0 / 5040.0) as $t,
            (1.0 / 40320.0) as $t,
            (1.0 / 362880.0) as $t,
            (1.0 / 3628800.0) as $t,
            (1.0 / 39916800.0) as $t,
            (1.0 / 479001600.0) as $t,
            (1.0 / 6227020800.0) as $t,
        ]
    };
}

/// The lanes' `exp` and `ln` for one float type: its bits type, the
/// exponent's width and bias, and fdlibm's constants (by their bits).
macro_rules! lane_real {
    (
        $t:ident, $bits:ty, mantissa: $mantissa:expr, bias: $bias:expr,
        exp: (low: $low:expr, high: $high:expr, degree: $degree:expr, estrin: $estrin:ident,
              ln2_hi: $e_hi:expr, ln2_lo: $e_lo:expr),
        ln: (ln2_hi: $l_hi:expr, ln2_lo: $l_lo:expr, sqrt_half: $sqrt_half:expr,
             subnormal_scale: $sub:expr, odd: [$($odd:expr),*], even: [$($even:expr),*])
    ) => {
        impl LaneReal for $t {
            #[inline(always)]
            fn fma(self, a: $t, b: $t) -> $t {
                self.mul_add(a, b)
            }
            #[inline(always)]
            fn exp_lane(self) -> $t {
                let x = self;
                const MANTISSA: u32 = $mantissa;
                const BIAS: $bits = $bias;
                // Adding 1.5 * 2^MANTISSA rounds to an integer, which
                // the low bits then hold.
                const SHIFTER: $t = 1.5 * (1u64 << MANTISSA) as $t;
                // ln 2 in two parts, the first with enough trailing
                // zeros that n * LN2_HI is exact for every n here.
                const LN2_HI: $t = $t::from_bits($e_hi);
                const LN2_LO: $t = $t::from_bits($e_lo);
                const C: [$t; 14] = inverse_factorials!($t);
                // Results below the smallest normal are 0: arithmetic on
                // subnormals is slow on x86, and the soft minimum adds
                // these terms to 1, where they vanish anyway. The
                // argument is clamped where its exponential is normal, so
                // no step computes a subnormal; NaN fails the comparison
                // and gives 0 too.
                let normal = x >= $low;
                let x = if x > $low { x } else { $low };
                let x = if x < $high { x } else { $high };
                let shifted = x * core::$t::consts::LOG2_E + SHIFTER;
                let n = shifted - SHIFTER;
                let r = (-n).fma(LN2_LO, (-n).fma(LN2_HI, x));
                // exp(r) = 1 + (r + r^2 Q(r)), Q by Estrin's scheme
                // (a few dependent steps rather than Horner's one per
                // coefficient), the leading terms added last.
                const Q: [$t; $degree - 1] = {
                    let mut q = [0.0; $degree - 1];
                    let mut k = 0;
                    while k < $degree - 1 {
                        q[k] = C[k + 2];
                        k += 1;
                    }
                    q
                };
                let r2 = r * r;
                let p = 1.0 + r2.fma($estrin(&Q, r, r2), r);
                // n + 2 BIAS >= 0 as an integer; 2^n = 2^n1 2^n2 with
                // the biased exponents e1 = floor(n / 2) + BIAS and
                // e2 = n - floor(n / 2) + BIAS.
                let biased = shifted
                    .to_bits()
                    .wrapping_sub(SHIFTER.to_bits())
                    .wrapping_add(2 * BIAS);
                let e1 = biased >> 1;
                let e2 = biased - e1;
                let value = p * $t::from_bits(e1 << MANTISSA) * $t::from_bits(e2 << MANTISSA);
                if normal {
                    value
                } else {
                    0.0
                }
            }

            #[inline(always)]
            fn ln_lane(self) -> $t {
                let x = self;
                const MANTISSA: u32 = $mantissa;
                const BIAS: $bits = $bias;
                const LN2_HI: $t = $t::from_bits($l_hi);
                const LN2_LO: $t = $t::from_bits($l_lo);
                const SQRT_HALF: $bits = $sqrt_half;
                const ONE: $bits = (1.0 as $t).to_bits();
                const INFINITY: $bits = $t::INFINITY.to_bits();
                // 2^MANTISSA as a float's bits, and 2^MANTISSA + BIAS:
                // the exponent e as the float 2^MANTISSA + e, less
                // this, is k.
                const TWO_MANTISSA: $bits = ((1u64 << MANTISSA) as $t).to_bits();
                const OFFSET: $t = ((1u64 << MANTISSA) + BIAS as u64) as $t;
                const MASK: $bits = (1 << MANTISSA) - 1;
                const SUBNORMAL_SHIFT: u32 = $sub;
                const ODD: &[$t] = &[$($t::from_bits($odd)),*];
                const EVEN: &[$t] = &[$($t::from_bits($even)),*];
                let subnormal = x < $t::MIN_POSITIVE;
                let scaled = if subnormal {
                    x * (1u64 << SUBNORMAL_SHIFT) as $t
                } else {
                    x
                };
                // Moving the mantissa's range [sqrt(2)/2, sqrt(2)) onto
                // the exponent's step: k is the exponent of
                // x / (sqrt(2)/2), rounded down, and the mantissa bits
                // plus those of sqrt(2)/2 are x / 2^k.
                let bits = scaled.to_bits().wrapping_add(ONE - SQRT_HALF);
                let k = $t::from_bits((bits >> MANTISSA) | TWO_MANTISSA) - OFFSET;
                let k = if subnormal {
                    k - SUBNORMAL_SHIFT as $t
                } else {
                    k
                };
                let f = $t::from_bits((bits & MASK) + SQRT_HALF) - 1.0;
                let s = f / (2.0 + f);
                let z = s * s;
                let w = z * z;
                // R(z) = z (LG1 + w (LG3 + ...)) + w (LG2 + w (LG4 + ...)).
                let mut odd = ODD[ODD.len() - 1];
                for c in ODD[..ODD.len() - 1].iter().rev() {
                    odd = odd.fma(w, *c);
                }
                let mut even = EVEN[EVEN.len() - 1];
                for c in EVEN[..EVEN.len() - 1].iter().rev() {
                    even = even.fma(w, *c);
                }
                let r = z.fma(odd, w * even);
                let hfsq = 0.5 * f * f;
                let value = s * (hfsq + r) + k * LN2_LO - hfsq + f + k * LN2_HI;
                // 0: -inf; infinity: itself; negative or NaN: NaN. As
                // selects of computed values: around a branch, LLVM
                // moves the polynomial into it, out of the vector code.
                // Positive and finite by the bits, for the same reason
                // (as float comparisons, LLVM makes it a class test,
                // which it computes lane by lane).
                let regular = x.to_bits().wrapping_sub(1) < INFINITY - 1;
                let infinite = if x == $t::INFINITY { x } else { $t::NAN };
                let special = if x == 0.0 {
                    $t::NEG_INFINITY
                } else {
                    infinite
                };
                if regular {
                    value
                } else {
                    special
                }
            }
        }
    };
}

lane_real!(
    f64, u64, mantissa: 52, bias: 1023,
    exp: (low: -708.396_418_532_264_1, high: 711.0, degree: 13, estrin: estrin12,
          ln2_hi: 0x3fe6_2e42_fee0_0000, ln2_lo: 0x3dea_39ef_3579_3c76),
    ln: (ln2_hi: 0x3fe6_2e42_fee0_0000, ln2_lo: 0x3dea_39ef_3579_3c76,
         sqrt_half: 0x3fe6_a09e_667f_3bcd, subnormal_scale: 54,
         odd: [0x3fe5_5555_5555_5593, 0x3fd2_4924_9422_9359,
               0x3fc7_4664_96cb_03de, 0x3fc2_f112_df3e_5244],
         even: [0x3fd9_9999_9997_fa04, 0x3fcc_71c5_1d8e_78af, 0x3fc3_9a09_d078_c69f])
);

lane_real!(
    f32, u32, mantissa: 23, bias: 127,
    exp: (low: -87.336_54, high: 90.0, degree: 7, estrin: estrin6,
          ln2_hi: 0x3f31_7200, ln2_lo: 0x35bf_be8e),
    ln: (ln2_hi: 0x3f31_7180, ln2_lo: 0x3717_f7d1,
         sqrt_half: 0x3f35_04f3, subnormal_scale: 25,
         odd: [0x3f2a_aaaa, 0x3e91_e9ee],
         even: [0x3ecc_ce13, 0x3e78_9e26])
);

macro_rules! lane_op {
    ($trait:ident, $method:ident, $op:tt) => {
        impl<T: Real, const K: usize> $trait for Lanes<T, K> {
            type Output = Self;
            #[inline(always)]
            fn $method(self, other: Self) -> Self {
                let mut out = self.0;
                for (value, o) in out.iter_mut().zip(other.0) {
                    *value = *value $op o;
                }
                Lanes(out)
            }
        }
    };
}

lane_op!(Add, add, +);
lane_op!(Sub, sub, -);
lane_op!(Mul, mul, *);
lane_op!(Div, div, /);

impl<T: Real, const K: usize> Neg for Lanes<T, K> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        self.map(|value| -value)
    }
}

/// Equal when every lane is (without stopping at the first lane that is
/// not, so that the comparison vectorises).
impl<T: Real, const K: usize> PartialEq for Lanes<T, K> {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        self.0
            .iter()
            .zip(&other.0)
            .fold(true, |all, (a, b)| all & (a == b))
    }
}

impl<T: Real, const K: usize> PartialOrd for Lanes<T, K> {
    /// The order that every lane agrees on, if any.
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        let mut lanes = self.0.iter().zip(&other.0);
        let (first, first_other) = lanes.next()?;
        let order = first.partial_cmp(first_other)?;
        lanes
            .all(|(a, b)| a.partial_cmp(b) == Some(order))
            .then_some(order)
    }
}

impl<T: Copy, const K: usize> Lanes<T, K> {
    #[inline(always)]
    fn map(self, f: impl Fn(T) -> T) -> Self {
        let mut out = self.0;
        for value in out.iter_mut() {
            *value = f(*value);
        }
        Lanes(out)
    }

    #[inline(always)]
    fn zip_map(self, other: Self, f: impl Fn(T, T) -> T) -> Self {
        let mut out = self.0;
        for (value, o) in out.iter_mut().zip(other.0) {
            *value = f(*value, o);
        }
        Lanes(out)
    }
}

/// Lane-wise [`Real`]: lane `l` of a result is the scalar operation on lane
/// `l` of the arguments, with the fast [`exp_lanes`] and [`ln_lanes`] as
/// `soft_pow` and `soft_log`. `min` and `max` are comparisons (`a < b ? a :
/// b`, one instruction each): equal to `T::min` and `T::max` on numbers,
/// not on NaN, which the recurrences do not pass them.
impl<T: LaneReal, const K: usize> Real for Lanes<T, K> {
    const PRECISION: Precision = T::PRECISION;
    const ZERO: Self = Lanes([T::ZERO; K]);
    const ONE: Self = Lanes([T::ONE; K]);
    const INFINITY: Self = Lanes([T::INFINITY; K]);
    const NAN: Self = Lanes([T::NAN; K]);
    const MAX: Self = Lanes([T::MAX; K]);
    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        Self::splat(T::from_f64(value))
    }
    #[inline(always)]
    fn from_index(index: usize) -> Self {
        Self::splat(T::from_index(index))
    }
    /// Lane 0.
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self.0[0].to_f64()
    }
    /// Lane 0's bits.
    #[inline(always)]
    fn to_bits(self) -> u64 {
        self.0[0].to_bits()
    }
    /// The value of `bits` in every lane.
    #[inline(always)]
    fn from_bits(bits: u64) -> Self {
        Self::splat(T::from_bits(bits))
    }
    #[inline(always)]
    fn abs(self) -> Self {
        self.map(T::abs)
    }
    #[inline(always)]
    fn min(self, other: Self) -> Self {
        self.zip_map(other, |a, b| if a < b { a } else { b })
    }
    #[inline(always)]
    fn max(self, other: Self) -> Self {
        self.zip_map(other, |a, b| if a > b { a } else { b })
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        self.map(T::sqrt)
    }
    /// Unfused, as the host's scalars.
    #[inline(always)]
    fn mul_add_fast(self, factor: Self, addend: Self) -> Self {
        self * factor + addend
    }
    #[inline(always)]
    fn exp(self) -> Self {
        self.map(T::exp)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        self.map(T::ln)
    }
    #[inline(always)]
    fn powf(self, exponent: Self) -> Self {
        self.zip_map(exponent, T::powf)
    }
    /// Base `e`, as the host's scalars.
    const SOFT_LN_BASE: Self = Lanes([T::ONE; K]);
    #[inline(always)]
    fn soft_pow(self) -> Self {
        exp_lanes(self)
    }
    #[inline(always)]
    fn soft_log(self) -> Self {
        ln_lanes(self)
    }
}
