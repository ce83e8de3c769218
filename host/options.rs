//! How a computation is asked for: where ([`Device`]), within what device
//! memory, and with which GPU kernel variant ([`Variant`]).

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// Where to compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Device {
    /// The GPU if one is usable, else the CPU.
    #[default]
    Auto,
    /// The CPU backend (all cores).
    Cpu,
    /// The GPU; an error if there is none.
    Gpu,
}

/// How to compute a distance matrix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ComputeOptions {
    pub device: Device,
    /// At most this many bytes of device memory (default: 3/4 of what is
    /// free). Larger problems are processed in tiles and chunks.
    pub gpu_memory_budget: Option<usize>,
    /// The GPU kernel variant (default: chosen from the shapes of the data).
    pub gpu_variant: Option<Variant>,
}

impl ComputeOptions {
    pub fn on(device: Device) -> Self {
        Self {
            device,
            ..Self::default()
        }
    }

    /// The same with GPU kernel variant `variant`.
    pub fn with_variant(self, variant: Variant) -> Self {
        Self {
            gpu_variant: Some(variant),
            ..self
        }
    }
}

/// The GPU kernel variants: how the GPU computes a batch of pairs. Every
/// measure has every variant; `docs/algorithms.md` describes the drivers
/// behind them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One thread per pair, two rolling rows in global memory.
    Naive,
    /// One warp (or part of a warp, for short series) per pair, each lane a
    /// stripe of columns in registers, rows passed between lanes by
    /// shuffles; wide series in panels of columns; a narrow Sakoe-Chiba band
    /// laid out along its diagonals.
    Warp,
    /// One long pair at a time over the whole GPU in one launch: panels of
    /// columns, each a warp's, every warp running right behind the panel to
    /// its left (readiness counts); memory linear in the lengths.
    Tiled,
    /// As `Tiled`, but square tiles, an anti-diagonal of tiles per launch.
    TiledLaunches,
    /// One pair at a time, a thread per cell of an anti-diagonal, three
    /// rolling anti-diagonals in global memory (Improved TWED / cuTWED's
    /// algorithm), all anti-diagonals in one persistent kernel with a
    /// grid-wide barrier between two.
    Diagonal,
    /// As `Diagonal`, one kernel launch per anti-diagonal (as cuTWED does).
    DiagonalLaunches,
    /// One thread per pair, two rolling rows in a fixed-size array in the
    /// thread's local memory; series `b` (the columns) of at most the
    /// largest `local` kernel's capacity.
    Local,
    /// One thread per pair, two rolling rows in the block's shared memory.
    Shared,
    /// One block per pair, threads over the cells of an anti-diagonal, the
    /// last three anti-diagonals in shared memory.
    Stencil,
}

impl Variant {
    pub const ALL: [Variant; 9] = [
        Variant::Naive,
        Variant::Warp,
        Variant::Tiled,
        Variant::TiledLaunches,
        Variant::Diagonal,
        Variant::DiagonalLaunches,
        Variant::Local,
        Variant::Shared,
        Variant::Stencil,
    ];

    /// The name users write: `naive`, `warp`, `tiled`, `tiled-launches`,
    /// `diagonal`, `diagonal-launches`, `local`, `shared`, `stencil`.
    pub const fn name(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Warp => "warp",
            Variant::Tiled => "tiled",
            Variant::TiledLaunches => "tiled-launches",
            Variant::Diagonal => "diagonal",
            Variant::DiagonalLaunches => "diagonal-launches",
            Variant::Local => "local",
            Variant::Shared => "shared",
            Variant::Stencil => "stencil",
        }
    }

    /// Whether it computes a batch one pair after the other over the whole
    /// GPU (the long-pair variants).
    pub const fn is_pair_by_pair(self) -> bool {
        matches!(
            self,
            Variant::Tiled | Variant::TiledLaunches | Variant::Diagonal | Variant::DiagonalLaunches
        )
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = Error;

    fn from_str(name: &str) -> Result<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == name)
            .ok_or_else(|| {
                let names: Vec<_> = Variant::ALL.iter().map(|v| v.name()).collect();
                Error::InvalidInput(format!(
                    "unknown GPU kernel variant {name:?}; expected one of {}",
                    names.join(", ")
                ))
            })
    }
}
