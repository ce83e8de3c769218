//! The float operations the recurrences need, for `f32` and `f64`, on the
//! host and on the GPU.
//!
//! `core` has `abs`, `min` and `max`. On the GPU, square roots use the
//! compiler intrinsic (one `sqrt.rn` instruction) and `exp`, `ln`, `powf` the
//! pure-Rust `libm` (there is no libdevice here; LTO inlines it into the PTX).
//! On the host the crate links `std`, whose versions (the platform's libm)
//! are several times faster than the pure-Rust ones.

use core::fmt;
use core::ops::{Add, Div, Mul, Neg, Sub};

/// The precision of a computation: which [`Real`] its kernels compute in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Precision {
    F32,
    #[default]
    F64,
}

impl Precision {
    pub const ALL: [Precision; 2] = [Precision::F32, Precision::F64];

    /// `"f32"` or `"f64"`, as in kernel names and messages.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A floating-point element type of the kernels: `f32` or `f64`.
pub trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + 'static
{
    /// Which precision this is; lanes of values (the CPU backend's
    /// lockstep) have that of their elements.
    const PRECISION: Precision;
    const ZERO: Self;
    const ONE: Self;
    const INFINITY: Self;
    /// Not a number: what a wait that gave up hands on.
    const NAN: Self;
    /// The largest finite value.
    const MAX: Self;
    fn from_f64(value: f64) -> Self;
    fn from_index(index: usize) -> Self;
    fn to_f64(self) -> f64;
    /// The value's bits, zero-extended (warp shuffles move them in 32-bit words).
    fn to_bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
    fn abs(self) -> Self;
    fn min(self, other: Self) -> Self;
    fn max(self, other: Self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn powf(self, exponent: Self) -> Self;
    /// `self * factor + addend`: one fused multiply-add (a single rounding)
    /// on the GPU, where it is one instruction in place of two; a product
    /// and a sum on the host, where a fused one may be a slow library call.
    fn mul_add_fast(self, factor: Self, addend: Self) -> Self;
    /// The natural logarithm of the base of [`Real::soft_pow`] and
    /// [`Real::soft_log`]: `ln 2` where they are the GPU's base-2
    /// instructions (`f32` on the GPU), else 1 (base `e`). Soft-min folds
    /// it into its loop-invariant scales, so that a base-2 exponential
    /// costs no multiplication of its own: `e^x = soft_pow(x /
    /// SOFT_LN_BASE)` and `ln x = SOFT_LN_BASE * soft_log(x)`.
    const SOFT_LN_BASE: Self;
    /// The base's power, as soft-min and its derivative use it (results in
    /// `[0, 1]`): in `f32` on the GPU the hardware `ex2.approx.ftz.f32`
    /// (relative error below 2^-22), in `f64` there `soft64`'s exponential
    /// without a division, elsewhere [`Real::exp`].
    fn soft_pow(self) -> Self;
    /// The base's logarithm, as soft-min uses it (`x` in `[1, 3]`): in
    /// `f32` on the GPU the hardware `lg2.approx.ftz.f32` (absolute error
    /// below 2^-22), in `f64` there `soft64`'s logarithm without a
    /// division, elsewhere [`Real::ln`].
    fn soft_log(self) -> Self;
    /// The smallest of `self`, `b` and `c`, each of them zero, positive or
    /// `+inf` (never negative, never NaN), as DTW's accumulated costs are.
    /// For such values the order of their bits as integers is the
    /// order of the values, so in `f32` on the GPU this is the integer
    /// minimum of the bits, two `min.s32` that sm_90 and up compile to one
    /// three-input `VIMNMX3` (where two float minimums stay two `FMNMX`);
    /// elsewhere two [`Real::min`]s. Other arguments give an unspecified
    /// one of them.
    #[inline(always)]
    fn min3_nonnegative(self, b: Self, c: Self) -> Self {
        self.min(b).min(c)
    }
}

macro_rules! impl_real {
    ($t:ty, $precision:ident, $sqrt_intrinsic:ident, $fma_intrinsic:ident, $exp:path, $ln:path, $pow:path, $soft_ln_base:expr, $soft_pow:path, $soft_log:path, $min3_nonnegative:path) => {
        impl Real for $t {
            const PRECISION: Precision = Precision::$precision;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const INFINITY: Self = <$t>::INFINITY;
            const NAN: Self = <$t>::NAN;
            const MAX: Self = <$t>::MAX;
            #[inline(always)]
            fn from_f64(value: f64) -> Self {
                value as $t
            }
            #[inline(always)]
            fn from_index(index: usize) -> Self {
                // Series are shorter than 2^32 samples (`SeriesSet` checks),
                // and a 32-bit conversion is cheaper on the GPU.
                index as u32 as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_bits(self) -> u64 {
                <$t>::to_bits(self) as u64
            }
            #[inline(always)]
            fn from_bits(bits: u64) -> Self {
                <$t>::from_bits(bits as _)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                if select_min_max::<$t>() {
                    if other < self {
                        other
                    } else {
                        self
                    }
                } else {
                    <$t>::min(self, other)
                }
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                if select_min_max::<$t>() {
                    if other > self {
                        other
                    } else {
                        self
                    }
                } else {
                    <$t>::max(self, other)
                }
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn sqrt(self) -> Self {
                core::intrinsics::$sqrt_intrinsic(self)
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn mul_add_fast(self, factor: Self, addend: Self) -> Self {
                // SAFETY: a pure operation, defined for every input.
                unsafe { core::intrinsics::$fma_intrinsic(self, factor, addend) }
            }
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn mul_add_fast(self, factor: Self, addend: Self) -> Self {
                self * factor + addend
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn ln(self) -> Self {
                $ln(self)
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn powf(self, exponent: Self) -> Self {
                $pow(self, exponent)
            }
            #[cfg(target_arch = "nvptx64")]
            const SOFT_LN_BASE: Self = $soft_ln_base;
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn soft_pow(self) -> Self {
                $soft_pow(self)
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn soft_log(self) -> Self {
                $soft_log(self)
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn min3_nonnegative(self, b: Self, c: Self) -> Self {
                $min3_nonnegative(self, b, c)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            const SOFT_LN_BASE: Self = 1.0;
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn soft_pow(self) -> Self {
                <$t>::exp(self)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn soft_log(self) -> Self {
                <$t>::ln(self)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[cfg(not(target_arch = "nvptx64"))]
            #[inline(always)]
            fn powf(self, exponent: Self) -> Self {
                <$t>::powf(self, exponent)
            }
        }
    };
}

/// Whether `min`/`max` are a compare and a select rather than `min.f64`:
/// the GPU has no f64 minimum instruction, and `min.f64`'s NaN rules make
/// it five or six instructions (a compare, two selects, a NaN fix-up and
/// moves) where a compare and two selects do. The kernels never see NaN
/// (inputs are checked finite), and for other values both agree. `f32` has
/// a one-instruction minimum, and the CPU keeps `std`'s.
#[inline(always)]
const fn select_min_max<T>() -> bool {
    cfg!(target_arch = "nvptx64") && core::mem::size_of::<T>() == 8
}

impl_real!(
    f32,
    F32,
    sqrtf32,
    fmaf32,
    libm::expf,
    libm::logf,
    libm::powf,
    core::f32::consts::LN_2,
    crate::fast_math::ex2_f32,
    crate::fast_math::lg2_f32,
    min3_of_bits
);
impl_real!(
    f64,
    F64,
    sqrtf64,
    fmaf64,
    libm::exp,
    libm::log,
    libm::pow,
    1.0,
    crate::soft64::exp_nonpositive,
    crate::soft64::ln_one_to_three,
    min3_by_min
);

/// The smallest of three `f32`s that are each zero, positive or `+inf`, as
/// the integer minimum of their bits: [`Real::min3_nonnegative`] in `f32`
/// on the GPU (two `min.s32`, one `VIMNMX3` on sm_90), on every target so
/// that the host's tests check it. Signed, so that a negative zero, tied
/// with zero for the smallest value, also has the smallest bits.
#[inline(always)]
pub fn min3_of_bits(a: f32, b: f32, c: f32) -> f32 {
    let bits = |x: f32| x.to_bits() as i32;
    f32::from_bits(bits(a).min(bits(b)).min(bits(c)) as u32)
}

/// [`Real::min3_nonnegative`] in `f64` on the GPU: there is no 64-bit
/// three-input minimum, so two [`Real::min`]s (a compare and a select each).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn min3_by_min(a: f64, b: f64, c: f64) -> f64 {
    Real::min(Real::min(a, b), c)
}
