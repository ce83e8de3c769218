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
