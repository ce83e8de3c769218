//! The GPU's special-function unit in `f32`: `ex2.approx.ftz.f32` and
//! `lg2.approx.ftz.f32`, one instruction each (the `libm` versions take
//! dozens; without `.ftz` each needs three more for subnormals). Their
//! error bounds (PTX ISA): `ex2.approx.f32` has a maximum relative error of
//! 2^-22 (2 ulp) over the whole range, and `.ftz` flushes results below
//! the smallest normal (2^-126) to 0; `lg2.approx.f32` a maximum absolute
//! error of 2^-22 for arguments in `[0.5, 2]`, and the same on the mantissa
//! otherwise (its arguments here are sums of at least 1, never
//! subnormal). `docs/algorithms.md` derives what this costs Soft-DTW.
extern "C" {
    #[link_name = "llvm.nvvm.ex2.approx.ftz.f"]
    fn ex2_approx(x: f32) -> f32;
    #[link_name = "llvm.nvvm.lg2.approx.ftz.f"]
    fn lg2_approx(x: f32) -> f32;
}

#[inline(always)]
pub fn ex2_f32(x: f32) -> f32 {
    // SAFETY: a pure instruction, defined for every input.
    unsafe { ex2_approx(x) }
}

#[inline(always)]
pub fn lg2_f32(x: f32) -> f32 {
    // SAFETY: as above.
    unsafe { lg2_approx(x) }
}
