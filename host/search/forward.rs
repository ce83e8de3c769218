//! What the open-ended subsequence alignment's forward pass gives, on the
//! CPU (`super::subsequence`) or on a device (`super::subsequence_gpu`):
//! where the best match ends and starts; and the check of the series'
//! values as the pass reads them, the same error on both.

use crate::{Error, Result};

/// Where the best match ends and starts, and its accumulated cost
/// (infinite where every cell overflowed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BestEnd {
    pub start: usize,
    pub end: usize,
    pub cost: f64,
}

/// An error naming the first non-finite value of a block of samples that
/// starts at sample `first`.
pub(crate) fn check_finite(block: &[f64], first: usize, dims: usize) -> Result<()> {
    match block.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(at) => {
            let dimension = match dims {
                1 => String::new(),
                _ => format!(", dimension {}", at % dims),
            };
            Err(Error::InvalidInput(format!(
                "the series has a non-finite value ({}) at sample {}{dimension}",
                block[at],
                first + at / dims
            )))
        }
    }
}
