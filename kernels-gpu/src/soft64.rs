//! Soft-DTW's exponential and logarithm in `f64` on the GPU, without a
//! division: `libm`'s `exp` and `log` each divide once, and on a GPU an
//! `f64` division is a long sequence of dependent instructions, on the
//! critical path of every cell. Only the arguments soft-min gives are
//! served: `exp` of `x <= 0` (results in `[0, 1]`), `ln` of `y` in `[1, 3]`.
//! Plain Rust, so the host tests check them against `std`.

/// `a * b + c` with one rounding.
#[inline(always)]
fn fma(a: f64, b: f64, c: f64) -> f64 {
    #[cfg(target_arch = "nvptx64")]
    {
        // SAFETY: a pure operation, defined for every input.
        unsafe { core::intrinsics::fmaf64(a, b, c) }
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        a.mul_add(b, c)
    }
}

const LOG2_E: f64 = core::f64::consts::LOG2_E;
/// `ln 2` in two parts: the high one has 32 significant bits, so `k *
/// LN2_HI` is exact for the `|k| < 2^11` that occur.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// Rounds a value below 2^51 in magnitude to an integer when added and
/// subtracted.
const ROUNDER: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52

/// `e^x` for `x <= 0` (NaN gives NaN), within 2 ulp of the exact value;
/// 0 where the exact value is below the smallest normal number (as the
/// CPU backend's vectorised exponential), which a sum with a term of 1 or
/// more never sees.
#[inline(always)]
pub fn exp_nonpositive(x: f64) -> f64 {
    // Below this the result is subnormal or 0; also -inf.
    if x < -708.0 {
        return 0.0;
    }
    // x = k ln 2 + r, |r| <= ln 2 / 2 (and NaN stays NaN throughout).
    let k = (x * LOG2_E + ROUNDER) - ROUNDER;
    let r = fma(-k, LN2_LO, fma(-k, LN2_HI, x));
    // e^r by its Taylor polynomial of degree 13 (the remainder is below
    // 2^-57 of the result), in Horner's form.
    const INVERSE_FACTORIALS: [f64; 14] = [
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5_040.0,
        1.0 / 40_320.0,
        1.0 / 362_880.0,
        1.0 / 3_628_800.0,
        1.0 / 39_916_800.0,
        1.0 / 479_001_600.0,
        1.0 / 6_227_020_800.0,
    ];
    let mut p = INVERSE_FACTORIALS[13];
    let mut i = 13;
    while i > 0 {
        i -= 1;
        p = fma(p, r, INVERSE_FACTORIALS[i]);
    }
    // 2^k: k is an integer in [-1022, 0] here, e^r in [0.7, 1.42].
    let scale = f64::from_bits(((1023 + k as i64) as u64) << 52);
    p * scale
}

/// `ln y` for `y` in `[1, 3]`, within 2 ulp of the result's scale (1):
/// from an `f32` first guess `z` (a few units of 2^-22 off), the
/// correction `ln(y e^-z) = ln(1 + t)` for the tiny `t = y e^-z - 1`, by
/// three terms of its series.
#[inline(always)]
pub fn ln_one_to_three(y: f64) -> f64 {
    let z = ln_guess(y as f32) as f64;
    let t = fma(y, exp_nonpositive(-z), -1.0);
    // ln(1 + t) = t - t^2/2 + t^3/3 - ...: |t| < 2^-20, so t^4/4 < 2^-82.
    let correction = fma(t * t, fma(t, 1.0 / 3.0, -0.5), t);
    z + correction
}

/// `ln y` in `f32`, for `y` in `[1, 3]`: the GPU's `lg2.approx` (absolute
/// error below 2^-22) times `ln 2`; std's on the host.
#[inline(always)]
fn ln_guess(y: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::fast_math::lg2_f32(y) * core::f32::consts::LN_2
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        y.ln()
    }
}
