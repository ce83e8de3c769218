//! The kernel launches that more than one operation makes: the stencil
//! launch (distance matrices, paired values, gradients, the expected
//! alignment) and the pipelined launch of one long pair (the tiled matrix
//! variants, paired values of long pairs, the alignment paths' last
//! columns). Kept apart so that `matrix`, `paired` and `paths` depend on
//! none of each other. It depends on `runtime` and `plan`.
//!
//! ```text
//! stencil         the stencil launch's arguments and shared memory (no CUDA)
//! pair_kernel     a pair kernel as the matrices choose it, and its launches
//!                 over pairs on the device
//! pipelined_pair  one long pair already on the device: its value, or its
//!                 matrix's last row
//! ```

pub(super) mod pair_kernel;
pub(super) mod pipelined_pair;
pub(super) mod stencil;
