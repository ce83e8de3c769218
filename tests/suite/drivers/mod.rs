//! The kernels crate's drivers run on the host against the oracle: the same
//! code the GPU runs, on emulated warps, thread blocks and grids
//! (`crate::common::hardware`, `crate::common::grid`), so their logic is checked where
//! there is no GPU.

mod antidiagonal;
mod columns;
mod gradient;
mod rows;
mod stencil;
mod streamed;
mod subsequence;

/// The GPU's three-way minimum of DTW's costs (`f32`: the integer minimum
/// of the bits) is the float minimum for every triple of zero, subnormal,
/// normal, huge and infinite values, in every order: the order of the
/// bits is the order of the values.
#[test]
fn the_minimum_of_bits_is_the_float_minimum() {
    use timewarp_kernels::min3_of_bits;
    let mut values = vec![
        0.0f32,
        f32::from_bits(1),
        f32::MIN_POSITIVE,
        1e-30,
        0.5,
        1.0,
        f32::from_bits(1.0f32.to_bits() + 1),
        3.25,
        1e30,
        f32::MAX,
        f32::INFINITY,
    ];
    // Every 2^23rd bit pattern of the non-negative finite floats besides.
    values.extend((0..0x7f80_0000u32).step_by(1 << 23).map(f32::from_bits));
    for &a in &values {
        for &b in &values {
            for &c in &values {
                let expected = a.min(b).min(c);
                let got = min3_of_bits(a, b, c);
                assert_eq!(
                    got.to_bits(),
                    expected.to_bits(),
                    "min of {a:e}, {b:e}, {c:e}"
                );
            }
        }
    }
    // A negative zero ties with zero and is never above a positive value.
    assert_eq!(min3_of_bits(-0.0, 0.0, 1.0), 0.0);
    assert_eq!(min3_of_bits(2.0, -0.0, f32::INFINITY), 0.0);
}

/// Soft-DTW's soft minimum, which has no test for infinity: the same bits
/// for its three arguments in every order (a pair and its transpose have
/// one value); infinite arguments are terms of 0, and all three infinite
/// give infinity; finite ones match `m - gamma ln(sum exp((m - x) / gamma))`
/// in `f64` (`m` the smallest) to a few roundings of the result's scale;
/// and a tiny `gamma` gives a unique minimum itself, bit for bit.
#[test]
fn the_soft_minimum_is_symmetric_and_infinite_only_for_three_infinities() {
    use timewarp_kernels::measures::soft_dtw::soft_min_plus;
    fn check<T: timewarp_kernels::Real + std::fmt::Debug>(values: &[f64], epsilon: f64) {
        let bits = |x: T| x.to_bits();
        for gamma in [1e-30, 0.01, 1.0, 10.0] {
            let g = T::from_f64(gamma);
            for &a in values {
                for &b in values {
                    for &c in values {
                        let [x, y, z] = [a, b, c].map(T::from_f64);
                        let got = soft_min_plus(g, x, y, z, |m| m);
                        for [p, q, r] in [[x, z, y], [y, x, z], [y, z, x], [z, x, y], [z, y, x]] {
                            let other = soft_min_plus(g, p, q, r, |m| m);
                            assert_eq!(bits(other), bits(got), "order of {a}, {b}, {c}");
                        }
                        let [a, b, c] = [x, y, z].map(T::to_f64);
                        let m = a.min(b).min(c);
                        let got = got.to_f64();
                        if m == f64::INFINITY {
                            assert_eq!(got, f64::INFINITY, "three infinities, gamma {gamma}");
                            continue;
                        }
                        let sum: f64 = [a, b, c].iter().map(|&x| ((m - x) / gamma).exp()).sum();
                        let expected = m - gamma * sum.ln();
                        let ties = [a, b, c].iter().filter(|&&x| x == m).count();
                        if gamma == 1e-30 && ties == 1 {
                            assert_eq!(got, m, "the minimum of {a}, {b}, {c}");
                        }
                        let scale = m.abs() + gamma;
                        assert!(
                            (got - expected).abs() <= epsilon * scale,
                            "soft-min of {a}, {b}, {c}, gamma {gamma}: {got}, expected {expected}"
                        );
                    }
                }
            }
        }
    }
    let values = [
        -3.5,
        -0.0,
        0.0,
        0.1,
        0.1001,
        1.0,
        2.0,
        40.0,
        1e30,
        f64::INFINITY,
    ];
    check::<f64>(&values, 1e-14);
    check::<f32>(&values, 1e-6);
    check::<f64>(&[1.0, f64::MAX, f64::INFINITY], 1e-14);
    check::<f32>(&[1.0, f32::MAX as f64, f64::INFINITY], 1e-6);
}

/// A set of series of one length read without offsets (`offsets` null,
/// `uniform_len`, `uniform_first` for a view that starts inside the
/// memory) gives the kernels the same series, and the same sample
/// positions, as with its offsets.
#[test]
fn a_set_of_one_length_needs_no_offsets() {
    use timewarp_kernels::SetRef;
    let (count, len, dims) = (5usize, 3usize, 2usize);
    let values: Vec<f64> = (0..count * len * dims).map(|v| v as f64).collect();
    let times: Vec<f64> = (0..count * len).map(|t| 0.5 * t as f64).collect();
    let offsets: Vec<u64> = (0..=count).map(|k| (k * len) as u64).collect();
    for first in 0..count {
        let with_offsets = SetRef {
            values: values.as_ptr(),
            offsets: offsets[first..].as_ptr(),
            times: times.as_ptr(),
            count: (count - first) as u64,
            dims: dims as u64,
            uniform_len: 0,
            uniform_first: 0,
        };
        let without = SetRef {
            offsets: std::ptr::null(),
            uniform_len: len as u64,
            uniform_first: first as u64,
            ..with_offsets
        };
        for k in 0..count - first {
            // SAFETY: `k < count`; both describe the vectors above.
            let (a, b) = unsafe { (with_offsets.series(k), without.series(k)) };
            assert_eq!(
                (a.values, a.times, a.len, a.dims),
                (b.values, b.times, b.len, b.dims)
            );
            assert_eq!(a.len, len);
            // SAFETY: as above; `k + 1 <= count`.
            unsafe {
                assert_eq!(without.start(k), (first + k) * len);
                assert_eq!(with_offsets.start(k + 1), without.start(k + 1));
            }
        }
    }
}

/// The GPU's f64 exponential and logarithm of Soft-DTW's soft minimum
/// (`soft64`, without a division) against std's: `exp` of `x <= 0` within
/// 2 ulp, exactly 0 where std's is subnormal, NaN for NaN; `ln` of `y` in
/// `[1, 3]` within 2 ulp of 1 (the scale soft-min adds it to), exactly 0
/// at 1. The host's f32 first guess (`logf`) stands for the GPU's
/// `lg2.approx`, both within a few units of 2^-22.
#[test]
fn the_gpu_f64_soft_exp_and_ln_match_std() {
    use rand::Rng;
    use timewarp_kernels::soft64::{exp_nonpositive, ln_one_to_three};
    let ulp = |x: f64| f64::from_bits(x.to_bits() + 1) - x;
    let mut rng = crate::common::rng(64);
    let mut xs: Vec<f64> = (0..200_000)
        .map(|_| -rng.random_range(0.0..708.0))
        .collect();
    xs.extend((0..100_000).map(|_| -rng.random_range(0.0..1.0f64).powi(8)));
    xs.extend([
        0.0,
        -0.0,
        -1e-300,
        -0.5 * std::f64::consts::LN_2,
        -708.0,
        -707.999,
    ]);
    for x in xs {
        let (got, expected) = (exp_nonpositive(x), x.exp());
        assert!(
            (got - expected).abs() <= 2.0 * ulp(expected),
            "exp({x:e}) = {got:e}, std {expected:e}"
        );
    }
    for x in [-708.5, -745.0, -1e10, f64::NEG_INFINITY] {
        assert_eq!(exp_nonpositive(x), 0.0, "exp({x:e})");
    }
    assert!(exp_nonpositive(f64::NAN).is_nan());
    let mut ys: Vec<f64> = (0..300_000).map(|_| rng.random_range(1.0..3.0)).collect();
    ys.extend((0..100_000).map(|_| 1.0 + rng.random_range(0.0..1.0f64).powi(12)));
    ys.extend([
        1.0,
        f64::from_bits(1.0f64.to_bits() + 1),
        2.0,
        3.0,
        std::f64::consts::E,
    ]);
    for y in ys {
        let (got, expected) = (ln_one_to_three(y), y.ln());
        assert!(
            (got - expected).abs() <= 2.0 * ulp(1.0),
            "ln({y:e}) = {got:e}, std {expected:e}"
        );
    }
    assert_eq!(ln_one_to_three(1.0), 0.0);
}
