//! The element types the library computes in.

use crate::cpu::lanes::LaneReal;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use std::fmt::{Debug, Display, LowerExp};
pub use timewarp_kernels::Precision;
use timewarp_kernels::Real;

/// `f32` or `f64`: the precision of a computation.
pub trait Float:
    Real + LaneReal + DeviceRepr + ValidAsZeroBits + Default + Send + Sync + Debug + Display + LowerExp
{
    /// `"f32"` or `"f64"`, as in kernel names and messages.
    const NAME: &'static str = Self::PRECISION.name();
    /// Unit roundoff (half the machine epsilon).
    const UNIT_ROUNDOFF: f64;
    /// The smallest positive (subnormal) value: the most a product that
    /// underflows loses.
    const SMALLEST_SUBNORMAL: f64;
    fn is_finite(self) -> bool;
}

impl Float for f32 {
    const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;
    const SMALLEST_SUBNORMAL: f64 = f32::MIN_POSITIVE as f64 * f32::EPSILON as f64;
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Float for f64 {
    const UNIT_ROUNDOFF: f64 = f64::EPSILON / 2.0;
    const SMALLEST_SUBNORMAL: f64 = f64::MIN_POSITIVE * f64::EPSILON;
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}

/// Whether every value is finite: a branch-free fold over pieces, which
/// vectorizes (a short-circuiting `all` does not).
pub(crate) fn all_finite<T: Float>(values: &[T]) -> bool {
    values
        .chunks(1024)
        .all(|chunk| chunk.iter().fold(true, |ok, v| ok & v.is_finite()))
}
