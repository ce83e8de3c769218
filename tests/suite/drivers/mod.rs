//! The kernels crate's drivers run on the host against the oracle: the same
//! code the GPU runs, on emulated warps, thread blocks and grids
//! (`crate::common::hardware`, `crate::common::grid`), so their logic is checked where
//! there is no GPU.

mod antidiagonal;
mod columns;
mod gradient;
mod rows;
mod stencil;

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
