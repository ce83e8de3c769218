//! The kernels crate's drivers run on the host against the oracle: the same
//! code the GPU runs, on emulated warps, thread blocks and grids
//! (`crate::common::hardware`, `crate::common::grid`), so their logic is checked where
//! there is no GPU.

mod antidiagonal;
mod columns;
mod gradient;
mod rows;
mod stencil;
