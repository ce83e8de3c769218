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
