//! Kernel selection, apart from the kernels and from launching them: which
//! variant computes a batch by default, and which kernel of the catalogue
//! (driver, shape, univariate twin) a launch takes for its shapes. The
//! shapes on offer are read from the catalogue ([`timewarp_kernels::catalogue`]),
//! so nothing here lists kernels by hand. No CUDA here: the rules are
//! unit-tested on the CPU. Each rule says what it weighs; the timings it
//! was chosen from are in `docs/history/benchmarks-2026.md`.

use crate::{Error, Result, Variant};
use timewarp_kernels::catalogue::drivers;
use timewarp_kernels::hw::{Tagged, LANES};
use timewarp_kernels::launch::pairs::panel_workspace;
use timewarp_kernels::{Driver, KernelId, Measure, Precision, Real, Recurrence, Window};

/// At most this many pairs go to the tiled kernel by default: it computes
/// pairs one after the other, while the warp kernel runs them side by side.
const TILED_MAX_PAIRS: usize = 2;
/// Pairs shorter than this on one side fill too few panels to gain from
/// the tiled kernel.
const TILED_MIN_LENGTH: usize = 2048;
/// Series of up to this many samples (the columns) take a sub-warp, when the
/// measure has sub-warp kernels: its wavefront fills and drains in fewer
/// steps, and each lane holds more columns.
const SUB_WARP_MAX_COLUMNS: usize = 128;
/// Panels (warps) a long pair should give at least, about 4 on each SM of
/// an H100 or H200: narrower stripes for more panels would trail further
/// behind each other.
const TILED_MIN_PANELS: usize = 512;
/// At most this many threads per stencil block: an anti-diagonal longer
/// than that gives each thread several cells.
const MAX_BLOCK_THREADS: usize = 1024;

/// The most diagonals the measure's window takes in any pair of a series of
/// `a_lens` samples (shortest, longest) and one of `b_lens`, if it is a
/// band: `2 radius + 1`, widened by the pair's length difference.
pub(crate) fn band_width<T: Real, P: Recurrence<T>>(
    params: &P,
    a_lens: (usize, usize),
    b_lens: (usize, usize),
) -> Option<usize> {
    let window = params.window();
    [(a_lens.1, b_lens.0), (a_lens.0, b_lens.1)]
        .into_iter()
        .filter_map(|(n, m)| window.diagonals(n, m))
        .map(|(below, above)| below + above + 1)
        .max()
}

/// The default variant of a distance matrix of `pairs` pairs whose shorter
/// series has at least `shortest` samples, in a band of at most
/// `band_width` diagonals if any: the tiled kernel for a single long pair,
/// which it spreads over the whole GPU, else the warp kernel; also for a
/// long pair whose band is narrow enough for one warp, which then computes
/// the band alone.
pub(crate) fn matrix_variant(
    measure: Measure,
    pairs: usize,
    shortest: usize,
    band_width: Option<usize>,
) -> Variant {
    let widest = sheared_shapes(measure)
        .map(|(lanes, stripe)| lanes * stripe)
        .max()
        .unwrap_or(0);
    let narrow_band = band_width.is_some_and(|w| w <= widest);
    if pairs <= TILED_MAX_PAIRS && shortest >= TILED_MIN_LENGTH && !narrow_band {
        Variant::Tiled
    } else {
        Variant::Warp
    }
}

/// The variant against a resident set: the one asked for, if it is one of
/// the pipelined pair kernels that read one (naive, warp, local, shared),
/// else the warp kernel; an error for the others, which take host series
/// pair by pair or block by block.
pub(crate) fn resident_variant(asked: Option<Variant>) -> Result<Variant> {
    match asked {
        None => Ok(Variant::Warp),
        Some(variant @ (Variant::Naive | Variant::Warp | Variant::Local | Variant::Shared)) => {
            Ok(variant)
        }
        Some(variant) => Err(Error::InvalidInput(format!(
            "GPU variant {variant} reads its series from host memory; against a resident set \
             use naive, warp, local or shared (or distance_matrix)"
        ))),
    }
}

/// The variant of paired batches: the one asked for, if it computes paired
/// batches (stencil, warp, tiled), or by default the tiled kernel for one
/// or two long pairs, else the warp kernel (faster than the stencil at
/// every size measured: 2.7x at 1024 x 128, 1.25x at 64 x 1024).
pub(crate) fn paired_variant(
    asked: Option<Variant>,
    pairs: usize,
    shortest: usize,
) -> Result<Variant> {
    let variant = asked.unwrap_or(
        if pairs <= TILED_MAX_PAIRS && shortest >= TILED_MIN_LENGTH {
            Variant::Tiled
        } else {
            Variant::Warp
        },
    );
    match variant {
        Variant::Stencil | Variant::Warp | Variant::Tiled => Ok(variant),
        _ => Err(Error::InvalidInput(format!(
            "the {variant} GPU variant computes distance matrices only; paired batches take \
             the stencil, warp or tiled variant"
        ))),
    }
}

/// The (lanes, stripe) of the measure's warp kernels in the catalogue, in
/// its order.
fn warp_shapes(measure: Measure) -> impl Iterator<Item = (usize, usize)> {
    drivers(measure).filter_map(|driver| match driver {
        Driver::Warp { lanes, stripe } => Some((lanes as usize, stripe as usize)),
        _ => None,
    })
}

/// The (lanes, stripe) of the measure's sheared band kernels.
fn sheared_shapes(measure: Measure) -> impl Iterator<Item = (usize, usize)> {
    drivers(measure).filter_map(|driver| match driver {
        Driver::Sheared { lanes, stripe } => Some((lanes as usize, stripe as usize)),
        _ => None,
    })
}

/// The (groups, chain) of the measure's skewed column kernels.
fn skewed_shapes(measure: Measure) -> impl Iterator<Item = (usize, usize)> {
    drivers(measure).filter_map(|driver| match driver {
        Driver::Skewed { groups, chain } => Some((groups as usize, chain as usize)),
        _ => None,
    })
}

/// The skewed kernel's (groups, chain) for series of up to `columns`
/// samples as the columns, if the measure has skewed kernels: the
/// narrowest stripe whose lanes cover the columns (or the widest, in
/// panels), and of its shapes the one with the most groups (the most
/// independent chains a lane).
fn skewed_shape(measure: Measure, columns: usize) -> Option<(usize, usize)> {
    let shapes: Vec<(usize, usize)> = skewed_shapes(measure).collect();
    let widest = shapes.iter().map(|&(g, c)| g * c).max()?;
    let stripe = shapes
        .iter()
        .map(|&(g, c)| g * c)
        .filter(|&s| LANES * s >= columns)
        .min()
        .unwrap_or(widest);
    shapes
        .into_iter()
        .filter(|&(g, c)| g * c == stripe)
        .max_by_key(|&(g, _)| g)
}

/// The stripes of the measure's whole-warp kernels, narrowest first.
fn warp_stripes(measure: Measure) -> Vec<usize> {
    let mut stripes: Vec<usize> = warp_shapes(measure)
        .filter(|&(lanes, _)| lanes == LANES)
        .map(|(_, stripe)| stripe)
        .collect();
    stripes.sort_unstable();
    stripes
}

/// The narrowest whole-warp stripe whose lanes cover `columns` columns, or
/// the widest (the series then runs in panels).
pub(crate) fn warp_stripe(measure: Measure, columns: usize) -> usize {
    let stripes = warp_stripes(measure);
    stripes
        .iter()
        .copied()
        .find(|&s| LANES * s >= columns)
        .unwrap_or(stripes[stripes.len() - 1])
}

/// The first sub-warp shape (lanes, stripe) whose lanes cover `columns`,
/// among those for series of up to [`SUB_WARP_MAX_COLUMNS`] samples.
fn sub_warp_shape(measure: Measure, columns: usize) -> Option<(usize, usize)> {
    warp_shapes(measure).find(|&(lanes, stripe)| {
        lanes < LANES && lanes * stripe <= SUB_WARP_MAX_COLUMNS && lanes * stripe >= columns
    })
}

/// Whether an `n x m` pair in a band of `width` diagonals should take the
/// sheared band driver in a warp of `lanes` lanes of `stripe` cells: the
/// band fits the warp (`sheared_band::fits`), and takes at most 2/3 of the
/// lane-steps of the column driver (`lanes * stripe` cells a step either
/// way), whose steps are cheaper (no shift of the column data, one
/// shuffle).
pub(crate) fn band_pays(width: usize, n: usize, m: usize, lanes: usize, stripe: usize) -> bool {
    if !timewarp_kernels::drivers::sheared_band::fits(width, lanes, stripe) {
        return false;
    }
    let band_steps = n + width.div_ceil(stripe) - 1;
    let column_steps = m.div_ceil(lanes * stripe) * (n + lanes - 1);
    3 * band_steps <= 2 * column_steps
}

/// The (lanes, stripe) of the warp kernel for pairs of up to `rows x
/// columns` cells in a band of up to `width` diagonals, if the sheared band
/// driver pays ([`band_pays`]) for one: of those, the one that spends the
/// fewest lane-steps a pair, `lanes * stripe * (rows + lanes used - 1)`
/// (a step's time grows with the stripe; a sub-warp's unused lanes idle).
fn band_shape(
    measure: Measure,
    width: usize,
    rows: usize,
    columns: usize,
) -> Option<(usize, usize)> {
    warp_shapes(measure)
        .filter(|&(lanes, stripe)| band_pays(width, rows, columns, lanes, stripe))
        .min_by_key(|&(lanes, stripe)| lanes * stripe * (rows + width.div_ceil(stripe) - 1))
}

/// A warp kernel for a launch, and how to launch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WarpKernel {
    pub id: KernelId,
    pub lanes: usize,
    /// Workspace values a pair (its border column between panels), or 0.
    pub workspace_per_pair: usize,
}

/// The warp kernel for `pairs` pairs of series up to `a_len` (rows) and
/// `b_len` (columns) samples of `dims` values in precision `precision`, in
/// a band of up to `band_width` diagonals if any, on a GPU of `schedulers`
/// warp schedulers: the sheared band kernel where it pays (every pair's
/// band then fits it); else, where the measure has skewed kernels (cells
/// that are long dependent chains), the pairs give fewer warps than there
/// are schedulers and the series need more than one panel of the widest
/// warp stripe, the skewed kernel: its independent chains in each lane hide
/// the latency that too few warps cannot, where the column driver's lanes
/// would each run a chain of a stripe's cells a step through every panel
/// (within one panel its longer fill and drain cost more: 255 steps
/// against the column driver's 159 at 128 columns);
/// else a sub-warp
/// for short series, else the narrowest whole-warp stripe that covers the
/// columns (wider series in panels).
pub(crate) fn warp_kernel(
    measure: Measure,
    precision: Precision,
    (a_len, b_len): (usize, usize),
    dims: usize,
    band_width: Option<usize>,
    (pairs, schedulers): (usize, usize),
) -> WarpKernel {
    let row_len = a_len.max(b_len) + 1;
    let band = band_width.and_then(|width| band_shape(measure, width, a_len, b_len));
    let panels = b_len > LANES * warp_stripes(measure).last().copied().unwrap_or(1);
    // The skewed driver computes every row: banded pairs take the others.
    let skewed = skewed_shape(measure, b_len)
        .filter(|_| pairs < schedulers && panels && band_width.is_none());
    let driver = match (band, skewed) {
        (Some((lanes, stripe)), _) => Driver::Sheared {
            lanes: lanes as u32,
            stripe: stripe as u32,
        },
        (None, Some((groups, chain))) => Driver::Skewed {
            groups: groups as u32,
            chain: chain as u32,
        },
        (None, None) => {
            let (lanes, stripe) = sub_warp_shape(measure, b_len)
                .unwrap_or_else(|| (LANES, warp_stripe(measure, b_len)));
            Driver::Warp {
                lanes: lanes as u32,
                stripe: stripe as u32,
            }
        }
    };
    let driver = forced_driver(measure, band_width).unwrap_or(driver);
    let (lanes, columns) = match driver {
        Driver::Sheared { lanes, .. } => (lanes as usize, usize::MAX),
        Driver::Skewed { groups, chain } => (LANES, LANES * (groups * chain) as usize),
        Driver::Warp { lanes, stripe } => (lanes as usize, (lanes * stripe) as usize),
        _ => unreachable!("warp kernels only"),
    };
    // Series wider than the warp's columns run in panels, which need their
    // border column.
    let workspace_per_pair = if columns < b_len { row_len } else { 0 };
    WarpKernel {
        id: KernelId::new(measure, driver, dims == 1, precision),
        lanes,
        workspace_per_pair,
    }
}

/// The (warps, stripe) of the measure's `panels` kernels.
fn panels_shapes(measure: Measure) -> impl Iterator<Item = (usize, usize)> {
    drivers(measure).filter_map(|driver| match driver {
        Driver::Panels { warps, stripe } => Some((warps as usize, stripe as usize)),
        _ => None,
    })
}

/// The `panels` kernel (a block of warps a pair, its panels pipelined) for
/// `pairs` paired pairs of up to `a_len x b_len` on a GPU of `schedulers`
/// warp schedulers, where the measure has one and it pays: no band, series
/// wider than one panel of the widest warp stripe, and pairs that give
/// fewer warps than the schedulers (the block's warps make up for them);
/// or where `TIMEWARP_WARP_KERNEL` names it. Its workspace is the pair's
/// panel counts and two border columns, to be zeroed before every launch.
pub(crate) fn panels_kernel(
    measure: Measure,
    precision: Precision,
    (a_len, b_len): (usize, usize),
    dims: usize,
    band_width: Option<usize>,
    (pairs, schedulers): (usize, usize),
) -> Option<WarpKernel> {
    let forced = forced_name().and_then(|name| {
        panels_shapes(measure).find(|&(warps, stripe)| {
            let driver = Driver::Panels {
                warps: warps as u32,
                stripe: stripe as u32,
            };
            driver.to_string() == name
        })
    });
    let widest_warp = LANES * warp_stripes(measure).last().copied().unwrap_or(1);
    let pays = band_width.is_none() && b_len > widest_warp && pairs < schedulers;
    let chosen = if pays && forced_name().is_none() {
        panels_shapes(measure).max_by_key(|&(warps, _)| warps)
    } else {
        None
    };
    let (warps, stripe) = forced.or(chosen)?;
    let workspace_per_pair = match precision {
        Precision::F32 => panel_workspace::<f32>(a_len),
        Precision::F64 => panel_workspace::<f64>(a_len),
    };
    let driver = Driver::Panels {
        warps: warps as u32,
        stripe: stripe as u32,
    };
    Some(WarpKernel {
        id: KernelId::new(measure, driver, dims == 1, precision),
        lanes: LANES * warps,
        workspace_per_pair,
    })
}

/// The shape `(warps, stripe)` of the column driver's gradient kernel a
/// paired gradient takes (`warp_gradient<stripe>` for one warp a pair,
/// `panels_gradient<warps>x<stripe>` for more), or none for the stencil
/// driver's `gradient` kernel: as `asked` (`warp`, an error if the longest
/// series `b` has more samples, `columns`, than the widest shape covers;
/// `stencil`), or by default the column driver's wherever `b` fits; or
/// the one `TIMEWARP_WARP_KERNEL` names, if it covers `b`.
///
/// One warp a pair takes the narrowest stripe that covers `b`. Panels
/// (the narrowest stripe, then the fewest warps, that cover `b`) take the
/// pairs that only the widest one-warp stripe covers (the most registers
/// and the longest chain a lane), and those no warp covers, while the GPU
/// has warp slots to spare: where one warp a pair covers `b` too, panels
/// are taken only if `in_half_a_wave(shape)` says that all their warps
/// fill at most half the warps the GPU holds at once.
pub(crate) fn gradient_shape(
    measure: Measure,
    asked: Option<Variant>,
    columns: usize,
    in_half_a_wave: impl FnOnce((usize, usize)) -> Result<bool>,
) -> Result<Option<(usize, usize)>> {
    let mut shapes: Vec<(usize, usize)> = drivers(measure)
        .filter_map(|driver| match driver {
            Driver::WarpGradient { stripe } => Some((1, stripe as usize)),
            Driver::PanelsGradient { warps, stripe } => Some((warps as usize, stripe as usize)),
            _ => None,
        })
        .collect();
    shapes.sort_unstable_by_key(|&(warps, stripe)| (stripe, warps));
    match asked {
        None | Some(Variant::Warp) => {}
        Some(Variant::Stencil) => return Ok(None),
        Some(variant) => {
            return Err(Error::InvalidInput(format!(
                "the {variant} GPU variant computes no gradient; the Soft-DTW gradient takes \
                 the warp or stencil variant"
            )))
        }
    }
    let covers = |&(warps, stripe): &(usize, usize)| warps * LANES * stripe >= columns;
    let forced = forced_name().and_then(|name| {
        shapes
            .iter()
            .copied()
            .filter(covers)
            .find(|&shape| gradient_driver(shape).to_string() == name)
    });
    let one_warp = shapes.iter().copied().find(|s| s.0 == 1 && covers(s));
    let widest_one_warp = shapes.iter().filter(|s| s.0 == 1).map(|s| s.1).max();
    let panels = shapes.iter().copied().find(|s| s.0 > 1 && covers(s));
    let fitting = match (forced, one_warp, panels) {
        (Some(shape), _, _) => Some(shape),
        (None, Some(one), _) if Some(one.1) != widest_one_warp => Some(one),
        (None, Some(one), Some(panels)) => {
            if in_half_a_wave(panels)? {
                Some(panels)
            } else {
                Some(one)
            }
        }
        (None, one, panels) => one.or(panels),
    };
    if fitting.is_none() && asked == Some(Variant::Warp) {
        let widest = shapes
            .iter()
            .map(|&(w, s)| w * LANES * s)
            .max()
            .unwrap_or(0);
        return Err(Error::InvalidInput(format!(
            "the warp variant's gradient takes series y of up to {widest} samples, this batch \
             has one of {columns}: ask for the stencil variant, or none"
        )));
    }
    Ok(fitting)
}

/// The column driver's gradient kernel of shape `(warps, stripe)`.
pub(crate) fn gradient_driver((warps, stripe): (usize, usize)) -> Driver {
    if warps == 1 {
        Driver::WarpGradient {
            stripe: stripe as u32,
        }
    } else {
        Driver::PanelsGradient {
            warps: warps as u32,
            stripe: stripe as u32,
        }
    }
}

/// One size (`size` of each driver that has it) of the measure's kernels
/// in the catalogue, smallest first.
fn sizes_of(measure: Measure, size: impl Fn(Driver) -> Option<usize>) -> Vec<usize> {
    let mut sizes: Vec<usize> = drivers(measure).filter_map(size).collect();
    sizes.sort_unstable();
    sizes
}

/// The capacities of the measure's `local` kernels, smallest first.
fn local_capacities(measure: Measure) -> Vec<usize> {
    sizes_of(measure, |driver| match driver {
        Driver::Local { capacity } => Some(capacity as usize),
        _ => None,
    })
}

/// The longest series `b` (the columns) the `local` variant takes: its
/// largest kernel's capacity (the same for every measure).
pub fn local_max_len() -> usize {
    local_capacities(Measure::Dtw).last().copied().unwrap_or(0)
}

/// The `local` kernel for series `b` of up to `b_len` samples: the one with
/// the smallest capacity that holds them, or an error past the largest.
pub(crate) fn local_kernel(
    measure: Measure,
    precision: Precision,
    b_len: usize,
) -> Result<KernelId> {
    let capacities = local_capacities(measure);
    let capacity = capacities
        .iter()
        .copied()
        .find(|&c| c >= b_len)
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "the local GPU variant keeps its rows in a fixed array for series of up to {} \
             samples as the columns (the second batch, or the batch itself), and one has \
             {b_len}; use the shared, warp, naive or tiled variant",
                local_max_len()
            ))
        })?;
    let driver = Driver::Local {
        capacity: capacity as u32,
    };
    Ok(KernelId::new(measure, driver, false, precision))
}

/// Threads per block of the `shared` kernel for `bytes_per_thread` of rows,
/// and whether the block needs more than the default shared memory
/// (`default_bytes`): 128, 64 or 32 threads if their rows fit the default;
/// else as many threads (up to 32) as fit `opt_in_bytes`, the most a block
/// may ask for; `None` if not even one thread's rows fit.
pub(crate) fn shared_threads(
    bytes_per_thread: usize,
    default_bytes: usize,
    opt_in_bytes: usize,
) -> Option<(u32, bool)> {
    for threads in [128u32, 64, 32] {
        if threads as usize * bytes_per_thread <= default_bytes {
            return Some((threads, false));
        }
    }
    match (opt_in_bytes / bytes_per_thread).min(32) {
        0 => None,
        threads => Some((threads as u32, true)),
    }
}

/// The stripes of the measure's tiled kernels, narrowest first.
fn tiled_stripes(measure: Measure) -> Vec<usize> {
    let mut stripes: Vec<usize> = drivers(measure)
        .filter_map(|driver| match driver {
            Driver::Tiled { stripe } => Some(stripe as usize),
            _ => None,
        })
        .collect();
    stripes.sort_unstable();
    stripes
}

/// The tiled kernels' stripe for `columns` columns. Among the stripes that
/// give at least [`TILED_MIN_PANELS`] panels (else the narrowest), the one
/// with the most `warps * sqrt(stripe)`, `warps` being how many warps of
/// that stripe's kernel an SM holds (`resident_warps`, asked only when
/// there is a choice: the kernels' registers decide it, known once the
/// driver has compiled them). A lane's stripe is one dependent chain a
/// step, so a wider stripe hides less latency than as many more warps
/// would; ties go to the narrower. The square root is what ranked the
/// stripes as the timings did (TWED f64 of 2^20: stripe 4 with 16 warps,
/// 1.95 s, over stripe 8 with 8, 2.08 s); weighing the full stripe would
/// tie them.
pub(crate) fn tiled_stripe(
    measure: Measure,
    columns: usize,
    mut resident_warps: impl FnMut(usize) -> Result<usize>,
) -> Result<usize> {
    let stripes = tiled_stripes(measure);
    let candidates: Vec<usize> = stripes
        .iter()
        .copied()
        .filter(|&s| columns / (LANES * s) >= TILED_MIN_PANELS)
        .collect();
    if candidates.len() < 2 {
        return Ok(candidates.first().copied().unwrap_or(stripes[0]));
    }
    let mut best = (0, 0);
    for stripe in candidates {
        // warps^2 * stripe orders as warps * sqrt(stripe), in integers.
        let warps = resident_warps(stripe)?;
        let score = warps * warps * stripe;
        if score > best.1 {
            best = (stripe, score);
        }
    }
    Ok(best.0)
}

/// Rows of a tile of the per-anti-diagonal kernel with `stripe` columns per
/// lane: square tiles, at least 256 rows so that the wavefront's fill and
/// drain (31 steps) stay small.
pub(crate) fn tile_rows(stripe: usize) -> usize {
    (LANES * stripe).max(256)
}

/// The workspace of the pipelined tiled kernel for a pair of `n` rows, in
/// bytes: two border columns of `n + 1` tagged values, and the count of
/// panels taken.
pub(crate) fn pipelined_workspace(n: usize) -> usize {
    2 * (n + 1) * size_of::<Tagged>() + size_of::<u32>()
}

/// Threads of a stencil block for pairs whose anti-diagonals have up to
/// `ring_len - 1` interior cells: one per cell, whole warps, at most
/// `limit` (the boundary cell of the longest anti-diagonal goes to thread
/// 0 as a second cell, rather than to a warp of its own).
pub(crate) fn block_threads(ring_len: usize, limit: usize) -> u32 {
    let limit = (limit.min(MAX_BLOCK_THREADS) / LANES).max(1) * LANES;
    let cells = ring_len.saturating_sub(1).max(1);
    (cells.div_ceil(LANES) * LANES).min(limit) as u32
}

mod forced;
#[cfg(test)]
mod tests;

pub use forced::force_kernel_shape;
use forced::forced_driver;
pub(crate) use forced::forced_name;
