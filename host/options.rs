//! How a computation is asked for: where ([`Device`]), on which GPUs
//! ([`GpuSet`]), within what device memory, with which GPU kernel variant
//! ([`Variant`]), and how a resident set is kept on several GPUs
//! ([`Placement`]).

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
    /// The GPUs a computation spreads over (default: every usable one).
    pub gpus: GpuSet,
    /// How [`crate::upload`] keeps a set on several GPUs.
    pub placement: Placement,
    /// [`crate::nearest_neighbours`] computes every distance, without
    /// lower bounds (the same results; for benchmarks and checks).
    pub brute_force: bool,
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

    /// The same on the GPUs of `gpus` only.
    pub fn with_gpus(self, gpus: GpuSet) -> Self {
        Self { gpus, ..self }
    }
}

/// Which GPUs a computation uses: every usable one (the default), or the
/// ordinals listed (as the driver numbers them, after
/// `CUDA_VISIBLE_DEVICES`). Parsed from and printed as the CLI's `--gpus`:
/// `all`, or ordinals separated by commas (`0,1`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuSet {
    /// Bit `k`: ordinal `k`; 0 for every usable GPU.
    mask: u64,
}

impl GpuSet {
    /// Ordinals are bits of a `u64`.
    pub const MAX_ORDINAL: usize = 63;

    /// Every usable GPU.
    pub const fn all() -> Self {
        GpuSet { mask: 0 }
    }

    /// GPU `ordinal` alone.
    pub fn one(ordinal: usize) -> Result<Self> {
        Self::of(&[ordinal])
    }

    /// The GPUs `ordinals` (at least one; duplicates count once).
    pub fn of(ordinals: &[usize]) -> Result<Self> {
        if ordinals.is_empty() {
            return Err(Error::InvalidInput("an empty list of GPUs".into()));
        }
        let mut mask = 0u64;
        for &k in ordinals {
            if k > Self::MAX_ORDINAL {
                return Err(Error::InvalidInput(format!(
                    "GPU ordinal {k} is over the largest supported, {}",
                    Self::MAX_ORDINAL
                )));
            }
            mask |= 1 << k;
        }
        Ok(GpuSet { mask })
    }

    /// Whether it means every usable GPU.
    pub const fn is_all(self) -> bool {
        self.mask == 0
    }

    /// The ordinals listed, ascending; `None` for every usable GPU.
    pub fn ordinals(self) -> Option<Vec<usize>> {
        if self.is_all() {
            return None;
        }
        Some(
            (0..=Self::MAX_ORDINAL)
                .filter(|k| self.mask & (1 << k) != 0)
                .collect(),
        )
    }
}

impl fmt::Display for GpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ordinals() {
            None => f.write_str("all"),
            Some(list) => {
                let names: Vec<String> = list.iter().map(usize::to_string).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

impl FromStr for GpuSet {
    type Err = Error;

    /// `all`, or ordinals separated by commas (`0,1`).
    fn from_str(text: &str) -> Result<GpuSet> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all") {
            return Ok(GpuSet::all());
        }
        let ordinals = text
            .split(',')
            .map(|part| {
                part.trim().parse::<usize>().map_err(|_| {
                    Error::InvalidInput(format!(
                        "GPUs {text:?}: expected `all` or ordinals separated by commas, e.g. 0,1"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        GpuSet::of(&ordinals)
    }
}

/// How [`crate::upload`] keeps a set on several GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Replicate when a copy fits every GPU's budget, else shard.
    #[default]
    Auto,
    /// A whole copy on every GPU: the queries are shared out between them
    /// (many queries against a set that fits one GPU).
    Replicate,
    /// A contiguous slice of the set on each GPU, in proportion to their
    /// budgets: every query runs against every slice and the columns are
    /// put together (a set larger than one GPU).
    Shard,
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

impl Variant {
    /// Whether a distance matrix with it spreads over several GPUs: the
    /// pair kernels of the streamed pipeline (naive, warp, local, shared)
    /// and the stencil kernel; the tiled and anti-diagonal variants, which
    /// compute one long pair after the other, run on the first GPU alone.
    pub const fn spreads_over_gpus(self) -> bool {
        matches!(
            self,
            Variant::Naive | Variant::Warp | Variant::Local | Variant::Shared | Variant::Stencil
        )
    }

    /// Whether it reads a resident set ([`crate::distance_matrix_resident`]):
    /// the pair kernels of the pipeline (naive, warp, local, shared).
    pub const fn reads_resident_sets(self) -> bool {
        matches!(
            self,
            Variant::Naive | Variant::Warp | Variant::Local | Variant::Shared
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_sets_parse_and_print() {
        assert_eq!("all".parse::<GpuSet>().unwrap(), GpuSet::all());
        let two: GpuSet = " 1, 0,1".parse().unwrap();
        assert_eq!(two.ordinals(), Some(vec![0, 1]));
        assert_eq!(two.to_string(), "0,1");
        assert_eq!(GpuSet::all().to_string(), "all");
        assert_eq!(GpuSet::all().ordinals(), None);
        for bad in ["", "0,", "x", "-1", "64"] {
            assert!(bad.parse::<GpuSet>().is_err(), "{bad:?}");
        }
        assert!(GpuSet::of(&[]).is_err());
    }
}
