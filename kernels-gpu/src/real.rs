//! The float operations the recurrences need, for `f32` and `f64`, on the
//! host and on the GPU.
//!
//! `core` has `abs`, `min` and `max`. On the GPU, square roots use the
//! compiler intrinsic (one `sqrt.rn` instruction) and `exp`, `ln`, `powf` the
//! pure-Rust `libm` (there is no libdevice here; LTO inlines it into the PTX).
//! On the host the crate links `std`, whose versions (the platform's libm)
//! are several times faster than the pure-Rust ones.

use core::ops::{Add, Div, Mul, Neg, Sub};

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
    const ZERO: Self;
    const ONE: Self;
    const INFINITY: Self;
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
}

macro_rules! impl_real {
    ($t:ty, $sqrt_intrinsic:ident, $exp:path, $ln:path, $pow:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const INFINITY: Self = <$t>::INFINITY;
            #[inline(always)]
            fn from_f64(value: f64) -> Self {
                value as $t
            }
            #[inline(always)]
            fn from_index(index: usize) -> Self {
                index as $t
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
                <$t>::min(self, other)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
            #[cfg(target_arch = "nvptx64")]
            #[inline(always)]
            fn sqrt(self) -> Self {
                core::intrinsics::$sqrt_intrinsic(self)
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

impl_real!(f32, sqrtf32, libm::expf, libm::logf, libm::powf);
impl_real!(f64, sqrtf64, libm::exp, libm::log, libm::pow);
