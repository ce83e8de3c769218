//! The CPU backend's lockstep driver (`timewarp::internals::lockstep`): the
//! lanes' exponential and logarithm against std's; Soft-DTW of several
//! pairs in lockstep against the same pairs one at a time and the oracle;
//! DTW and TWED in lockstep bit for bit equal to one pair at a time, and
//! Soft-DTW values the same bits in any batch.
//!
//! Accuracy of `exp_lanes` and `ln_lanes`, in ulps of the correctly
//! rounded result (std's, itself within an ulp): measured over a dense
//! sweep and random arguments of the whole range, and of the ranges
//! Soft-DTW's soft minimum uses, `exp` on `(-inf, 0]` and `ln` on `[1, 3]`;
//! the bounds asserted are those measured (f64: exp 1 ulp, ln 1 ulp; f32:
//! exp 1 ulp, ln 1 ulp) with room to 2, where std's `exp` is normal;
//! below that `exp_lanes` gives exactly 0, compared with the exponential
//! as it was before it flushed those results (`unflushed_exp`): the same
//! bits wherever that one was normal, and the same soft-minimum sum
//! `1 + t + exp` where it was not.

use crate::common::*;
use rand::Rng;
use timewarp::internals::lockstep::{lockstep_buffer_len, lockstep_values, Lockstep, SingleThread};
use timewarp::internals::{exp_lanes, ln_lanes, LaneReal, Lanes};
use timewarp::{
    oracle, soft_dtw_pairs, soft_dtw_pairs_gradient, ComputeOptions, Device, Float, SeriesSet,
    SoftDtw,
};
use timewarp_kernels::{Series, SoftDtwParams};

/// Allowed error of the lanes' functions, in ulps.
const ULPS: f64 = 2.0;

trait Bits: LaneReal + Float {
    /// The smallest positive normal value.
    const MIN_POSITIVE: Self;
    /// Distance in ulps between two finite values of one sign (or zero),
    /// counted in representable numbers.
    fn ulps(self, other: Self) -> f64;
    fn std_exp(self) -> Self;
    fn std_ln(self) -> Self;
    fn is_nan(self) -> bool;
    fn random(rng: &mut rand::rngs::StdRng, low: f64, high: f64) -> Self;
}

impl Bits for f64 {
    const MIN_POSITIVE: f64 = f64::MIN_POSITIVE;
    fn ulps(self, other: f64) -> f64 {
        (self.to_bits() as i64 - other.to_bits() as i64).unsigned_abs() as f64
    }
    fn std_exp(self) -> f64 {
        self.exp()
    }
    fn std_ln(self) -> f64 {
        self.ln()
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn random(rng: &mut rand::rngs::StdRng, low: f64, high: f64) -> f64 {
        rng.random_range(low..=high)
    }
}

impl Bits for f32 {
    const MIN_POSITIVE: f32 = f32::MIN_POSITIVE;
    fn ulps(self, other: f32) -> f64 {
        (self.to_bits() as i64 - other.to_bits() as i64).unsigned_abs() as f64
    }
    fn std_exp(self) -> f32 {
        self.exp()
    }
    fn std_ln(self) -> f32 {
        self.ln()
    }
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn random(rng: &mut rand::rngs::StdRng, low: f64, high: f64) -> f32 {
        rng.random_range(low..=high) as f32
    }
}

/// The largest error, in ulps, of `fast` against `exact` over `xs`, eight
/// arguments at a time (the lanes of one call).
fn max_ulps<T: Bits>(
    xs: &[T],
    fast: impl Fn(Lanes<T, 8>) -> Lanes<T, 8>,
    exact: impl Fn(T) -> T,
) -> (f64, T) {
    let mut worst = (0.0, T::ZERO);
    for chunk in xs.chunks(8) {
        let mut lanes = [chunk[0]; 8];
        lanes[..chunk.len()].copy_from_slice(chunk);
        let got = fast(Lanes(lanes)).0;
        for (&x, &value) in chunk.iter().zip(&got) {
            let want = exact(x);
            let error = if want.is_nan() {
                assert!(value.is_nan(), "{x:e}: got {value:e}, std NaN");
                0.0
            } else {
                value.ulps(want)
            };
            if error > worst.0 {
                worst = (error, x);
            }
        }
    }
    worst
}

/// Arguments evenly spaced over `[low, high]` and as many random ones.
fn sweep<T: Bits>(seed: u64, low: f64, high: f64, count: usize) -> Vec<T> {
    let mut rng = rng(seed);
    let step = (high - low) / (count - 1) as f64;
    (0..count)
        .map(|k| T::from_f64(low + step * k as f64))
        .chain((0..count).map(|_| T::random(&mut rng, low, high)))
        .collect()
}

fn check_exp<T: Bits>(low_limit: f64, high_limit: f64) -> f64 {
    let mut worst = 0.0f64;
    for (seed, low, high) in [
        // The soft minimum's range, where the results are not negligible.
        (1, -40.0, 0.0),
        (2, -1.0, 0.0),
        (3, -1e-6, 0.0),
        // The whole range: from where results vanish to where they overflow.
        (4, low_limit, high_limit),
        (5, -1.0, 1.0),
    ] {
        let xs: Vec<T> = sweep(seed, low, high, 200_000);
        let (error, at) = max_ulps(&xs, exp_lanes, T::std_exp);
        println!("exp {}: [{low}, {high}]: {error} ulp (at {at:e})", T::NAME);
        worst = worst.max(error);
    }
    worst
}

fn check_ln<T: Bits>(max_exponent: i32) -> f64 {
    let mut worst = 0.0f64;
    // The soft minimum's sums.
    let xs: Vec<T> = sweep(6, 1.0, 3.0, 400_000);
    let (error, at) = max_ulps(&xs, ln_lanes, T::std_ln);
    println!("ln {}: [1, 3]: {error} ulp (at {at:e})", T::NAME);
    worst = worst.max(error);
    // Every binade, by exponent: 2^e * [1, 2), subnormal ones included.
    let mut rng = rng(7);
    let xs: Vec<T> = (-max_exponent - 30..max_exponent)
        .flat_map(|e| (0..2000).map(move |k| (e, k)))
        .map(|(e, _)| T::from_f64(2f64.powi(e) * rng.random_range(1.0..2.0)))
        .filter(|x| *x > T::ZERO && x.to_f64().is_finite())
        .collect();
    let (error, at) = max_ulps(&xs, ln_lanes, T::std_ln);
    println!("ln {}: every binade: {error} ulp (at {at:e})", T::NAME);
    worst.max(error)
}

#[test]
fn exp_lanes_is_within_an_ulp_or_two_of_std_f64() {
    let worst = check_exp::<f64>(-708.396_418_532_264_1, 709.7);
    assert!(worst <= ULPS, "exp f64: {worst} ulp");
}

#[test]
fn exp_lanes_is_within_an_ulp_or_two_of_std_f32() {
    let worst = check_exp::<f32>(-87.336_54, 88.7);
    assert!(worst <= ULPS, "exp f32: {worst} ulp");
}

#[test]
fn ln_lanes_is_within_an_ulp_or_two_of_std_f64() {
    let worst = check_ln::<f64>(1023);
    assert!(worst <= ULPS, "ln f64: {worst} ulp");
}

#[test]
fn ln_lanes_is_within_an_ulp_or_two_of_std_f32() {
    let worst = check_ln::<f32>(127);
    assert!(worst <= ULPS, "ln f32: {worst} ulp");
}

fn special_cases<T: Bits>() {
    let exp = |x: T| exp_lanes(Lanes::<T, 8>::splat(x)).0[0];
    let ln = |x: T| ln_lanes(Lanes::<T, 8>::splat(x)).0[0];
    let inf = T::INFINITY;
    let nan = T::from_f64(f64::NAN);
    assert_eq!(exp(T::ZERO), T::ONE);
    assert_eq!(exp(-inf), T::ZERO);
    assert_eq!(exp(inf), inf);
    assert_eq!(exp(T::from_f64(1e4)), inf);
    assert_eq!(exp(T::from_f64(-1e4)), T::ZERO);
    // The soft minimum's inf - inf (NaN) of lanes that overflowed.
    assert_eq!(exp(nan), T::ZERO);
    assert_eq!(ln(T::ONE), T::ZERO);
    assert_eq!(ln(T::ZERO), -inf);
    assert_eq!(ln(inf), inf);
    assert!(ln(-T::ONE).is_nan());
    assert!(ln(nan).is_nan());
}

/// `exp_lanes` as it was before results below the smallest normal were
/// flushed to 0 (its arguments clamped at -750 or -105 instead, its
/// subnormal results rounded once): the reference for the flush.
macro_rules! unflushed_exp {
    ($name:ident, $t:ident, $bits:ty, $mantissa:expr, $bias:expr, $low:expr, $high:expr,
     $degree:expr, $ln2_hi:expr, $ln2_lo:expr) => {
        fn $name(x: $t) -> $t {
            const SHIFTER: $t = 1.5 * (1u64 << $mantissa) as $t;
            let (ln2_hi, ln2_lo) = ($t::from_bits($ln2_hi), $t::from_bits($ln2_lo));
            let x = if x > $low { x } else { $low };
            let x = if x < $high { x } else { $high };
            let shifted = x * std::$t::consts::LOG2_E + SHIFTER;
            let n = shifted - SHIFTER;
            let r = (-n).mul_add(ln2_lo, (-n).mul_add(ln2_hi, x));
            let r2 = r * r;
            let inverse = |k: u64| (1.0 / (1..=k).map(|f| f as f64).product::<f64>()) as $t;
            let x4 = r2 * r2;
            let x8 = x4 * x4;
            let qs: Vec<$t> = (2..=$degree).map(inverse).collect();
            let estrin = if $degree == 13 {
                let a: Vec<$t> = (0..6)
                    .map(|k| qs[2 * k + 1].mul_add(r, qs[2 * k]))
                    .collect();
                let b = [
                    a[1].mul_add(r2, a[0]),
                    a[3].mul_add(r2, a[2]),
                    a[5].mul_add(r2, a[4]),
                ];
                b[2].mul_add(x8, b[1].mul_add(x4, b[0]))
            } else {
                let a: Vec<$t> = (0..3)
                    .map(|k| qs[2 * k + 1].mul_add(r, qs[2 * k]))
                    .collect();
                a[2].mul_add(x4, a[1].mul_add(r2, a[0]))
            };
            let p = 1.0 + r2.mul_add(estrin, r);
            let biased = shifted
                .to_bits()
                .wrapping_sub(SHIFTER.to_bits())
                .wrapping_add(2 * $bias);
            let e1: $bits = biased >> 1;
            let e2 = biased - e1;
            p * $t::from_bits(e1 << $mantissa) * $t::from_bits(e2 << $mantissa)
        }
    };
}

unflushed_exp!(
    unflushed_exp_f64,
    f64,
    u64,
    52,
    1023,
    -750.0,
    711.0,
    13,
    0x3fe6_2e42_fee0_0000,
    0x3dea_39ef_3579_3c76
);
unflushed_exp!(
    unflushed_exp_f32,
    f32,
    u32,
    23,
    127,
    -105.0,
    90.0,
    7,
    0x3f31_7200,
    0x35bf_be8e
);

/// The flush against the unflushed exponential, over arguments from where
/// both vanish to 0: the same bits wherever the unflushed result is normal;
/// elsewhere 0, and `(1 + t) + exp` the same for the soft minimum's other
/// term `t` in `[0, 1]` (a subnormal is far below half an ulp of 1).
fn check_flush<T: Bits>(unflushed: fn(T) -> T, low: f64, high: f64) {
    let mut rng = rng(31);
    let xs: Vec<T> = sweep(32, low, high, 100_000);
    let mut flushed = 0;
    for chunk in xs.chunks(8) {
        let mut lanes = [chunk[0]; 8];
        lanes[..chunk.len()].copy_from_slice(chunk);
        let got = exp_lanes(Lanes(lanes)).0;
        for (&x, &value) in chunk.iter().zip(&got) {
            let old = unflushed(x);
            if old >= T::MIN_POSITIVE {
                assert_eq!(value.to_bits(), old.to_bits(), "exp({x:e})");
            } else {
                flushed += 1;
                assert_eq!(value, T::ZERO, "exp({x:e}): {value:e}, unflushed {old:e}");
                let t = T::random(&mut rng, 0.0, 1.0);
                let sum = |e: T| (T::ONE + t) + e;
                assert_eq!(
                    sum(value).to_bits(),
                    sum(old).to_bits(),
                    "exp({x:e}), t = {t:e}"
                );
            }
        }
    }
    // Half the arguments of the lower ranges, none of the soft minimum's.
    assert_eq!(
        flushed > 1000,
        low < -100.0,
        "[{low}, {high}]: {flushed} flushed"
    );
}

#[test]
fn exp_lanes_flushes_only_subnormal_results() {
    check_flush::<f64>(unflushed_exp_f64, -760.0, -700.0);
    check_flush::<f64>(unflushed_exp_f64, -40.0, 0.0);
    check_flush::<f32>(unflushed_exp_f32, -110.0, -80.0);
    check_flush::<f32>(unflushed_exp_f32, -20.0, 0.0);
}

#[test]
fn exp_lanes_results_are_zero_or_normal() {
    fn check<T: Bits>(low: f64, high: f64) {
        for x in sweep::<T>(33, low, high, 100_000) {
            let value = exp_lanes(Lanes::<T, 8>::splat(x)).0[0];
            assert!(
                value == T::ZERO || value >= T::MIN_POSITIVE,
                "exp({x:e}) = {value:e} is subnormal"
            );
            // std's exponential agrees on which side of the smallest
            // normal the result is (to the ulp at the threshold).
            assert_eq!(
                value == T::ZERO,
                x.std_exp() < T::MIN_POSITIVE,
                "exp({x:e})"
            );
        }
    }
    check::<f64>(-710.0, -706.0);
    check::<f32>(-89.0, -86.0);
}

#[test]
fn exp_and_ln_lanes_special_values() {
    special_cases::<f64>();
    special_cases::<f32>();
}

// ---- The lockstep driver ----

/// One pair's series, as the kernels see them, over their own storage.
struct Pair<T> {
    a: Vec<T>,
    b: Vec<T>,
    shape: (usize, usize, usize),
}

impl<T: Bits> Pair<T> {
    /// A random pair of `n x m` samples of `dims` values, N(0, scale^2).
    fn random(
        rng: &mut rand::rngs::StdRng,
        (n, m, dims): (usize, usize, usize),
        scale: f64,
    ) -> Self {
        let a = random_series(rng, n, dims, scale);
        let b = random_series(rng, m, dims, scale);
        Pair {
            a: a.iter().map(|&v| T::from_f64(v)).collect(),
            b: b.iter().map(|&v| T::from_f64(v)).collect(),
            shape: (n, m, dims),
        }
    }

    fn series(&self) -> (Series<T>, Series<T>) {
        let (n, m, dims) = self.shape;
        let series = |values: &Vec<T>, len| Series {
            values: values.as_ptr(),
            times: std::ptr::null(),
            len,
            dims,
        };
        (series(&self.a, n), series(&self.b, m))
    }

    /// The pair as f64 arrays, for the oracle's DTW (the error scale).
    fn arrays(&self) -> (ndarray::Array2<f64>, ndarray::Array2<f64>) {
        let (n, m, dims) = self.shape;
        let array = |values: &Vec<T>, len| {
            ndarray::Array2::from_shape_vec(
                (len, dims),
                values.iter().map(|v| v.to_f64()).collect(),
            )
            .unwrap()
        };
        (array(&self.a, n), array(&self.b, m))
    }
}

/// The one-at-a-time CPU value: the block driver on one thread with std's
/// exp and ln (what the backend runs for a pair that shares its shape with
/// too few others).
fn alone<T: Bits>(params: &SoftDtwParams<T>, pair: &Pair<T>) -> T {
    use timewarp_kernels::drivers::stencil::{ring_len, stencil_value, VALUE_RINGS};
    let (a, b) = pair.series();
    let ring = ring_len(a.len, b.len);
    let mut buffer = vec![T::ZERO; VALUE_RINGS * ring];
    let block = SingleThread {
        memory: buffer.as_mut_ptr() as *mut u8,
    };
    // SAFETY: the buffer holds the three anti-diagonals; the series are valid.
    unsafe {
        stencil_value(
            &block,
            params,
            &a,
            &b,
            buffer.as_mut_ptr(),
            ring,
            std::ptr::null_mut(),
        )
    }
}

/// The same pairs in lockstep, `K` of them (all of one shape).
fn in_lockstep<T: Bits, const K: usize>(params: &SoftDtwParams<T>, pairs: &[Pair<T>]) -> [T; K]
where
    SoftDtwParams<T>: Lockstep<T, K>,
{
    let (n, m, dims) = pairs[0].shape;
    let series: Vec<_> = pairs.iter().map(Pair::series).collect();
    let a: [Series<T>; K] = std::array::from_fn(|l| series[l].0);
    let b: [Series<T>; K] = std::array::from_fn(|l| series[l].1);
    let len = lockstep_buffer_len(n, m, dims);
    let mut buffer = vec![Lanes([T::ZERO; K]); len];
    let lanes = Lockstep::<T, K>::lanes(params);
    // SAFETY: the pairs share a shape; the buffer has the length asked for.
    unsafe { lockstep_values(&lanes, &a, &b, buffer.as_mut_ptr(), false) }
}

/// Allowed difference between a lane and the pair alone: both are the
/// same recurrence with exp and ln within an ulp of each other, so the
/// tests' usual bound against the oracle ([`tolerance`] of [`error_scale`])
/// holds with room.
fn bound<T: Bits>(pair: &Pair<T>, gamma: f64, band: Option<usize>, value: f64) -> f64 {
    let (a, b) = pair.arrays();
    let (n, m, dims) = pair.shape;
    let soft = SoftDtw::new(gamma).unwrap();
    let soft = band.map_or(soft, |r| soft.with_band(r));
    tolerance::<T>(n, m, dims) * error_scale(a.view(), b.view(), value, soft.into())
}

fn lockstep_equals_alone<T: Bits, const K: usize>()
where
    SoftDtwParams<T>: Lockstep<T, K>,
{
    let mut rng = rng(20);
    let shapes = [
        (1, 1, 1),
        (1, 2, 1),
        (2, 1, 1),
        (2, 2, 1),
        (33, 33, 1),
        (33, 17, 1),
        (5, 33, 1),
        (2, 2, 3),
        (33, 33, 3),
        (17, 33, 3),
    ];
    for shape in shapes {
        let pairs: Vec<Pair<T>> = (0..K).map(|_| Pair::random(&mut rng, shape, 1.0)).collect();
        for gamma in [1e-3, 0.1, 1.0, 10.0] {
            for band in [None, Some(0), Some(5)] {
                let params = SoftDtwParams::new(T::from_f64(gamma)).with_band(band);
                let lanes = in_lockstep::<T, K>(&params, &pairs);
                for (l, pair) in pairs.iter().enumerate() {
                    let want = alone(&params, pair).to_f64();
                    let got = lanes[l].to_f64();
                    let allowed = bound(pair, gamma, band, want);
                    assert!(
                        (got - want).abs() <= allowed,
                        "{} {shape:?} gamma {gamma} band {band:?} lane {l}: lockstep {got:e}, alone {want:e}, |diff| {:e} > {allowed:e}",
                        T::NAME,
                        (got - want).abs()
                    );
                }
            }
        }
    }
}

#[test]
fn lockstep_lanes_equal_the_pairs_alone_f64() {
    lockstep_equals_alone::<f64, 8>();
    // Other lane counts run the same code.
    lockstep_equals_alone::<f64, 3>();
}

#[test]
fn lockstep_lanes_equal_the_pairs_alone_f32() {
    lockstep_equals_alone::<f32, 16>();
}

/// Costs of 1e4 with gamma 1e-3: the soft minimum's exponentials take
/// arguments of -1e7, which must give 0, not overflow or NaN.
#[test]
fn lockstep_large_costs_small_gamma() {
    fn check<T: Bits, const K: usize>()
    where
        SoftDtwParams<T>: Lockstep<T, K>,
    {
        let mut rng = rng(21);
        let pairs: Vec<Pair<T>> = (0..K)
            .map(|_| Pair::random(&mut rng, (40, 30, 2), 70.0))
            .collect();
        let params = SoftDtwParams::new(T::from_f64(1e-3));
        let lanes = in_lockstep::<T, K>(&params, &pairs);
        for (l, pair) in pairs.iter().enumerate() {
            let (a, b) = pair.arrays();
            let dtw = oracle::dtw(a.view(), b.view(), None);
            let got = lanes[l].to_f64();
            let want = alone(&params, pair).to_f64();
            assert!(
                got.is_finite() && dtw > 1e4,
                "lane {l}: {got:e}, DTW {dtw:e}"
            );
            let allowed = bound(pair, 1e-3, None, want);
            assert!(
                (got - want).abs() <= allowed,
                "lane {l}: {got:e} vs {want:e}"
            );
            let slack = 1e-3 * 70.0 * 3f64.ln() + allowed;
            assert!(
                got <= dtw + allowed && got >= dtw - slack,
                "lane {l}: {got:e} vs DTW {dtw:e}"
            );
        }
    }
    check::<f64, 8>();
    check::<f32, 16>();
}

/// A lane that overflows to infinity (f32 costs of 1e40) gives infinity,
/// as the pair alone does, and leaves the other lanes alone.
#[test]
fn lockstep_overflow_in_one_lane() {
    let mut rng = rng(22);
    let mut pairs: Vec<Pair<f32>> = (0..16)
        .map(|_| Pair::random(&mut rng, (20, 25, 1), 1.0))
        .collect();
    pairs[5].a[7] = 1e20;
    let params = SoftDtwParams::new(0.5f32);
    let lanes = in_lockstep::<f32, 16>(&params, &pairs);
    for (l, pair) in pairs.iter().enumerate() {
        let want = alone(&params, pair);
        if l == 5 {
            assert_eq!(want, f32::INFINITY);
            assert_eq!(lanes[l], f32::INFINITY);
        } else {
            let allowed = bound(pair, 0.5, None, want as f64);
            assert!(
                ((lanes[l] - want) as f64).abs() <= allowed,
                "lane {l}: {} vs {want}",
                lanes[l]
            );
        }
    }
}

// ---- The CPU backend: units of one shape, fallback, order ----

fn cpu() -> ComputeOptions {
    ComputeOptions::on(Device::Cpu)
}

/// A batch of pairs of many shapes, shuffled: full units of 8 and 16
/// lanes, units padded with repeated pairs, shapes too rare for lockstep
/// (one at a time), lengths 1, 2 and 33.
fn mixed_batch(seed: u64, dims: usize, scale: f64) -> (SeriesSet<f64>, SeriesSet<f64>) {
    let mut shapes = Vec::new();
    for (shape, count) in [
        ((33, 33), 21),
        ((33, 17), 3),
        ((2, 2), 5),
        ((1, 1), 9),
        ((5, 33), 1),
        ((1, 2), 4),
        ((40, 40), 17),
    ] {
        shapes.extend(std::iter::repeat_n(shape, count));
    }
    let mut rng = rng(seed);
    for k in (1..shapes.len()).rev() {
        shapes.swap(k, rng.random_range(0..=k));
    }
    let xs: Vec<usize> = shapes.iter().map(|s| s.0).collect();
    let ys: Vec<usize> = shapes.iter().map(|s| s.1).collect();
    (
        random_set(&mut rng, &xs, dims, scale),
        random_set(&mut rng, &ys, dims, scale),
    )
}

/// Every pair of the batch against the oracle, and against the same pair
/// computed alone (a batch of one pair runs one at a time).
fn check_batch<T: Float>(x: &SeriesSet<f64>, y: &SeriesSet<f64>, soft: SoftDtw) {
    let (xt, yt) = (x.cast::<T>().unwrap(), y.cast::<T>().unwrap());
    let got = soft_dtw_pairs(&xt, &yt, soft, &cpu()).unwrap();
    let (xr, yr) = (xt.cast::<f64>().unwrap(), yt.cast::<f64>().unwrap());
    for k in 0..x.len() {
        let (a, b) = (xr.series(k), yr.series(k));
        let expected = oracle::soft_dtw_banded(a, b, soft.gamma(), soft.band());
        let (n, m) = (a.nrows(), b.nrows());
        let allowed = tolerance::<T>(n, m, a.ncols()) * error_scale(a, b, expected, soft.into());
        let actual = got[k].to_f64();
        assert!(
            (actual - expected).abs() <= allowed,
            "{soft:?} {} pair {k} ({n} x {m}): got {actual:e}, oracle {expected:e}",
            T::NAME
        );
        let alone = soft_dtw_pairs(&xt.slice(k..k + 1), &yt.slice(k..k + 1), soft, &cpu()).unwrap();
        let alone = alone[0].to_f64();
        assert!(
            (actual - alone).abs() <= allowed,
            "{soft:?} {} pair {k} ({n} x {m}): in the batch {actual:e}, alone {alone:e}",
            T::NAME
        );
    }
}

#[test]
fn cpu_batches_of_mixed_shapes_match_the_oracle() {
    for dims in [1, 3] {
        let (x, y) = mixed_batch(30 + dims as u64, dims, 1.0);
        for gamma in [1e-3, 1.0, 10.0] {
            for band in [None, Some(0), Some(5)] {
                let soft = SoftDtw::new(gamma).unwrap();
                let soft = band.map_or(soft, |r| soft.with_band(r));
                check_batch::<f64>(&x, &y, soft);
                check_batch::<f32>(&x, &y, soft);
            }
        }
    }
}

#[test]
fn cpu_batches_large_costs_small_gamma() {
    let (x, y) = mixed_batch(40, 2, 70.0);
    let soft = SoftDtw::new(1e-3).unwrap();
    check_batch::<f64>(&x, &y, soft);
    check_batch::<f32>(&x, &y, soft);
}

/// The matrix (all pairs, and the upper triangle of a set against itself)
/// groups pairs of one shape the same way.
#[test]
fn cpu_matrix_of_mixed_lengths_matches_the_oracle() {
    let mut rng = rng(50);
    let lengths: Vec<usize> = (0..23).map(|k| [1, 2, 33, 17][k % 4]).collect();
    let a = random_set(&mut rng, &lengths, 2, 1.0);
    let b = random_set(&mut rng, &lengths[..9], 2, 1.0);
    for soft in [
        SoftDtw::new(0.1).unwrap(),
        SoftDtw::new(1.0).unwrap().with_band(3),
    ] {
        let metric = soft.into();
        let got = timewarp::distance_matrix(&a, Some(&b), metric, &cpu()).unwrap();
        assert_matches_oracle(&got, &a, &b, metric, "a x b");
        let got = timewarp::distance_matrix(&a, None, metric, &cpu()).unwrap();
        assert_matches_oracle(&got, &a, &a, metric, "a x a");
        let a32 = a.cast::<f32>().unwrap();
        let got = timewarp::distance_matrix(&a32, None, metric, &cpu()).unwrap();
        assert_matches_oracle(&got, &a32, &a32, metric, "a x a, f32");
    }
}

/// DTW and TWED in lockstep are the same operations on the same values as
/// one pair at a time: bit for bit the same values (a single pair runs
/// alone).
fn lockstep_bits<T: Float>(a: &SeriesSet<f64>, b: &SeriesSet<f64>, metric: timewarp::Metric) {
    let (a, b) = (a.cast::<T>().unwrap(), b.cast::<T>().unwrap());
    let batch = timewarp::distance_matrix(&a, Some(&b), metric, &cpu()).unwrap();
    let triangle = timewarp::distance_matrix(&a, None, metric, &cpu()).unwrap();
    // One pair, timestamps and all, is too few for a lockstep run.
    let alone = |x: &SeriesSet<T>, i: usize, y: &SeriesSet<T>, j: usize| {
        let (x, y) = (x.slice(i..i + 1), y.slice(j..j + 1));
        timewarp::distance_matrix(&x, Some(&y), metric, &cpu()).unwrap()[[0, 0]]
    };
    for i in 0..a.len() {
        for j in 0..b.len() {
            let alone = alone(&a, i, &b, j);
            assert_eq!(
                batch[[i, j]].to_bits(),
                alone.to_bits(),
                "{} {metric:?} ({i}, {j}): {} in the batch, {alone} alone",
                T::NAME,
                batch[[i, j]]
            );
        }
        for j in 0..a.len() {
            let alone = alone(&a, i, &a, j);
            assert_eq!(
                triangle[[i, j]].to_bits(),
                alone.to_bits(),
                "{} {metric:?} triangle ({i}, {j})",
                T::NAME
            );
        }
    }
}

#[test]
fn cpu_dtw_in_lockstep_is_bit_identical() {
    let mut rng = rng(60);
    for dims in [1, 3] {
        let lengths: Vec<usize> = (0..26).map(|k| [1, 2, 33, 40, 17][k % 5]).collect();
        let a = random_set(&mut rng, &lengths, dims, 1.0);
        let b = random_set(&mut rng, &lengths[..18], dims, 1.0);
        for band in [None, Some(0), Some(4)] {
            let dtw = band.map_or(timewarp::Dtw::new(), timewarp::Dtw::with_band);
            lockstep_bits::<f64>(&a, &b, dtw.into());
            lockstep_bits::<f32>(&a, &b, dtw.into());
        }
    }
}

/// TWED's lockstep runs (its rows and columns computed first) on timed
/// series of mixed lengths, every kind of degree.
#[test]
fn cpu_twed_in_lockstep_is_bit_identical() {
    let mut rng = rng(61);
    for dims in [1, 3] {
        let lengths: Vec<usize> = (0..26).map(|k| [1, 2, 33, 40, 17][k % 5]).collect();
        let a = random_timed_set(&mut rng, &lengths, dims, 1.0);
        let b = random_timed_set(&mut rng, &lengths[..18], dims, 1.0);
        for degree in [1.0, 2.0, 3.0] {
            let twed = timewarp::Twed::new(0.01, 0.5, degree).unwrap();
            lockstep_bits::<f64>(&a, &b, twed.into());
            lockstep_bits::<f32>(&a, &b, twed.into());
        }
        let untimed = random_set(&mut rng, &lengths, dims, 1.0);
        lockstep_bits::<f64>(&untimed, &untimed, timewarp::Twed::default().into());
    }
}

/// Soft-DTW's lanes have an exponential and a logarithm of their own, so a
/// pair without others of its shape runs in a single lane: its value is
/// the same bits in any batch, tile or alone (what a matrix cut into tiles,
/// by Dask or the pipeline, relies on).
#[test]
fn cpu_soft_dtw_values_do_not_depend_on_the_batch() {
    let mut rng = rng(62);
    for dims in [1, 3] {
        let lengths: Vec<usize> = (0..26).map(|k| [1, 2, 33, 40, 17][k % 5]).collect();
        let a = random_set(&mut rng, &lengths, dims, 1.0);
        let b = random_set(&mut rng, &lengths[..18], dims, 1.0);
        for (gamma, band) in [(0.1, None), (1.0, Some(4)), (1.0, Some(0))] {
            let soft = SoftDtw::new(gamma).unwrap();
            let soft = band.map_or(soft, |r| soft.with_band(r));
            lockstep_bits::<f64>(&a, &b, soft.into());
            lockstep_bits::<f32>(&a, &b, soft.divergence().into());
        }
    }
}

/// The CPU's Soft-DTW gradients run pairs of one shape in lockstep, and a
/// pair that shares its shape with too few others in a single lane: a
/// pair's value and gradients are the same bits alone as in a batch of its
/// shape, in either precision, and its value the same bits as
/// `soft_dtw_pairs`' (which runs the same lanes).
#[test]
fn lockstep_gradients_are_the_same_bits_in_any_batch() {
    fn check<T: Bits>() {
        let mut rng = rng(41);
        let (n, m, dims) = (23, 17, 2);
        let xs: Vec<_> = (0..9)
            .map(|_| random_series(&mut rng, n, dims, 1.0))
            .collect();
        let ys: Vec<_> = (0..9)
            .map(|_| random_series(&mut rng, m, dims, 1.0))
            .collect();
        let set = |series: &[ndarray::Array2<f64>]| {
            SeriesSet::from_series(series.iter().map(|s| s.view()))
                .unwrap()
                .cast::<T>()
                .unwrap()
        };
        let (x, y) = (set(&xs), set(&ys));
        let cpu = ComputeOptions::on(Device::Cpu);
        for gamma in [1.0, 0.01] {
            let soft = SoftDtw::new(gamma).unwrap();
            let batch = soft_dtw_pairs_gradient(&x, &y, soft, &cpu, true).unwrap();
            let values = soft_dtw_pairs(&x, &y, soft, &cpu).unwrap();
            let batch_y = batch.grad_y.as_ref().unwrap();
            for k in 0..xs.len() {
                let (xk, yk) = (set(&xs[k..=k]), set(&ys[k..=k]));
                let alone = soft_dtw_pairs_gradient(&xk, &yk, soft, &cpu, true).unwrap();
                let here = format!("{} gamma {gamma} pair {k}", T::NAME);
                assert_eq!(
                    alone.values[0].to_bits(),
                    batch.values[k].to_bits(),
                    "{here}"
                );
                assert_eq!(values[k].to_bits(), batch.values[k].to_bits(), "{here}");
                assert_eq!(alone.grad_x.series(0), batch.grad_x.series(k), "{here}");
                let alone_y = alone.grad_y.as_ref().unwrap();
                assert_eq!(alone_y.series(0), batch_y.series(k), "{here}");
            }
        }
    }
    check::<f64>();
    check::<f32>();
}
