//! Alignments: the path behind a distance. DTW's warping path, TWED's
//! edit path and Soft-DTW's expected alignment of one pair, with the value.
//!
//! DTW and TWED keep one byte a cell for the steps (of the Sakoe-Chiba
//! band only, when there is one) and two rows of costs; an unbanded pair
//! whose steps exceed [`PATH_WORKSPACE_BYTES`] is solved in memory linear
//! in its lengths by Hirschberg's divide and conquer ([`hirschberg`]),
//! one recursion for both measures: the measure's pair ([`DtwPair`],
//! [`TwedPair`]: [`PathPair`]) says how a part splits and how its halves
//! meet, a [`LastColumn`] provider computes the passes, on the CPU
//! ([`CpuLastColumn`]) or the GPU ([`GpuLastColumn`]); with a GPU,
//! unbanded pairs of many cells take that route within the workspace too,
//! their passes on the GPU. Soft-DTW's alignment runs on the GPU whenever
//! the device resolves to one. Ties between equally cheap steps follow one
//! rule (docs/algorithms.md, "Paths"): the diagonal, then the step from
//! the row above, then the one from the left.

mod dtw;
mod hirschberg;
pub(crate) mod on_gpu;
mod soft;
mod twed;
mod types;

pub use dtw::DtwPair;
pub use hirschberg::{
    hirschberg, CpuLastColumn, LastColumn, Pass, PassSeries, PathPair, SubPair,
    HIRSCHBERG_LEAF_CELLS,
};
pub use on_gpu::{GpuLastColumn, GPU_LAST_COLUMN_MIN_CELLS};
pub use twed::TwedPair;
pub use types::{Alignment, Edit, EditPath, EditStep};

use super::soft_dtw::params as soft_dtw_params;
use crate::finite::check_finite;
use crate::{Backend, ComputeOptions, Dtw, Error, Float, Result, SeriesSet, SoftDtw, Twed};
use ndarray::{Array2, ArrayView1, ArrayView2};
use types::Samples;

/// The memory the whole-matrix computations may take: DTW's and TWED's
/// steps (one byte a cell) and Soft-DTW's two padded matrices (on the GPU
/// its two unpadded ones, the stored costs and the alignment, are held to
/// the same limit).
pub const PATH_WORKSPACE_BYTES: usize = 1 << 30;

/// Checks a pair as `distance` does (non-empty, finite, equal dimensions).
fn check_pair<T: Float>(x: ArrayView2<T>, y: ArrayView2<T>) -> Result<()> {
    SeriesSet::from_series([x])?;
    SeriesSet::from_series([y])?;
    if x.ncols() != y.ncols() {
        return Err(Error::DimensionMismatch {
            first: x.ncols(),
            second: y.ncols(),
        });
    }
    Ok(())
}

/// Checks the timestamps of a series of `len` samples, `name` in the
/// messages: one a sample, finite, non-decreasing.
fn check_times<T: Float>(times: Option<ArrayView1<T>>, len: usize, name: &str) -> Result<()> {
    let Some(times) = times else {
        return Ok(());
    };
    if times.len() != len {
        return Err(Error::InvalidInput(format!(
            "the timestamps of {name}: {} values for a series of {len} samples",
            times.len()
        )));
    }
    let mut previous = None;
    for (k, &t) in times.iter().enumerate() {
        if !t.is_finite() || previous.is_some_and(|p| t < p) {
            return Err(Error::InvalidInput(format!(
                "timestamp {k} of {name} is {t}: timestamps must be finite and non-decreasing"
            )));
        }
        previous = Some(t);
    }
    Ok(())
}

/// An error naming what a pair needs beyond [`PATH_WORKSPACE_BYTES`].
fn too_large(what: &str, (n, m): (usize, usize), bytes: u128, remedy: &str) -> Error {
    Error::InvalidInput(format!(
        "{what} of a {n} x {m} pair needs {} MiB, more than the {} MiB the path \
         functions may take{remedy}",
        bytes.div_ceil(1 << 20),
        PATH_WORKSPACE_BYTES >> 20
    ))
}

/// The optimal DTW warping path of `x` against `y` (`length x dims` each),
/// with `dtw`'s band, and its value, which is [`crate::distance`]'s.
///
/// Memory: one byte per cell of the pair (of the band, with one) up to
/// [`PATH_WORKSPACE_BYTES`]; beyond that, without a band, linear in the
/// lengths (`hirschberg`), which takes about twice the time. With a GPU
/// (`options.device`), an unbanded pair of many cells takes that route
/// too, its passes on the GPU; everything else is computed on the CPU.
///
/// Errors: an empty or non-finite series, samples of different
/// dimensions, a band too wide for the workspace, a value that overflowed
/// the precision.
pub fn dtw_path<T: Float>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    dtw: Dtw,
    options: &ComputeOptions,
) -> Result<Alignment<T>> {
    check_pair(x, y)?;
    // Reached by `crate::interrupt` until it returns (checked every row).
    let _running = crate::interrupt::Running::start();
    let (n, m) = (x.nrows(), y.nrows());
    let cells = dtw::cells(n, m, dtw.band());
    if dtw.band().is_none() && cells > GPU_PATH_MIN_CELLS as u128 {
        if let Backend::Gpu(gpu) = Backend::resolve_on(options.device, options.gpus)? {
            let pair = DtwPair::new(x, y)?;
            let alignment = hirschberg(&pair, &GpuLastColumn::new(gpu, &pair)?, GPU_LEAF_CELLS)?;
            return check_finite(&[alignment.value], false).map(|()| Alignment {
                on_gpu: true,
                ..alignment
            });
        }
    }
    if cells <= PATH_WORKSPACE_BYTES as u128 {
        return dtw::traceback(&Samples::new(x), &Samples::new(y), dtw.band());
    }
    if dtw.band().is_some() {
        // Sub-pairs of a band are not banded pairs: no divide and conquer.
        return Err(too_large(
            "the DTW path within this band",
            (n, m),
            cells,
            "; narrow the band or drop it",
        ));
    }
    let pair = DtwPair::new(x, y)?;
    let alignment = hirschberg(&pair, &CpuLastColumn::new(&pair), HIRSCHBERG_LEAF_CELLS)?;
    check_finite(&[alignment.value], false).map(|()| alignment)
}

/// An unbanded path of more cells than this, with a GPU, is computed by
/// divide and conquer over the GPU's last columns: the CPU's full-matrix
/// traceback of such a pair takes longer than the GPU's passes.
const GPU_PATH_MIN_CELLS: usize = 1 << 26;

/// The leaves of the divide and conquer over the GPU: the CPU solves them,
/// all cores at once, while the GPU computes the next columns.
const GPU_LEAF_CELLS: usize = 1 << 22;

/// The optimal TWED edit path of `x` against `y` (`length x dims` each,
/// at `x_times` and `y_times`, or, where `None`, sample `k` at time `k`, as
/// [`SeriesSet`] has them), and its value, which is [`crate::distance`]'s
/// (of the same timestamps): each step with the cell it reaches and its
/// cost, the costs adding up to the value.
///
/// Memory: one byte per cell up to [`PATH_WORKSPACE_BYTES`], beyond that
/// linear in the lengths (`hirschberg` over [`TwedPair`]), which takes
/// about twice the time. With a GPU (`options.device`), a pair of many
/// cells takes that route too, its passes on the GPU; everything else is
/// computed on the CPU.
///
/// Errors: as [`dtw_path`]'s, and timestamps that are not one a sample,
/// finite and non-decreasing.
pub fn twed_path<T: Float>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    x_times: Option<ArrayView1<T>>,
    y_times: Option<ArrayView1<T>>,
    twed: Twed,
    options: &ComputeOptions,
) -> Result<EditPath<T>> {
    check_pair(x, y)?;
    check_times(x_times, x.nrows(), "x")?;
    check_times(y_times, y.nrows(), "y")?;
    let _running = crate::interrupt::Running::start();
    let cells = x.nrows() as u128 * y.nrows() as u128;
    if cells > GPU_PATH_MIN_CELLS as u128 {
        if let Backend::Gpu(gpu) = Backend::resolve_on(options.device, options.gpus)? {
            let pair = TwedPair::new((x, x_times), (y, y_times), twed)?;
            let path = hirschberg(&pair, &GpuLastColumn::new(gpu, &pair)?, GPU_LEAF_CELLS)?;
            return check_finite(&[path.value], false).map(|()| EditPath {
                on_gpu: true,
                ..path
            });
        }
    }
    if cells <= PATH_WORKSPACE_BYTES as u128 {
        let costs = twed::Costs::new((x, x_times), (y, y_times), twed);
        let whole = SubPair {
            rows: 0..x.nrows() + 1,
            cols: 0..y.nrows() + 1,
        };
        let (edits, value) = twed::traceback(&costs, &whole)?;
        return Ok(EditPath {
            edits,
            value,
            on_gpu: false,
        });
    }
    let pair = TwedPair::new((x, x_times), (y, y_times), twed)?;
    let path = hirschberg(&pair, &CpuLastColumn::new(&pair), HIRSCHBERG_LEAF_CELLS)?;
    check_finite(&[path.value], false).map(|()| path)
}

/// Soft-DTW's expected alignment of `x` against `y` (`n x m`: entry
/// `(i, j)` is the derivative of the value with respect to the cost
/// `||x_i - y_j||^2`, the weight of that cell over all alignments, 0
/// outside the band) and the value, which is [`crate::distance`]'s.
///
/// Computed where `options.device` resolves (`Backend::resolve_on` with
/// `options.gpus`): on its first GPU, by the alignment kernel (the
/// gradient kernel's forward and backward passes, one block, writing every
/// cell's derivative; device memory `2 n m` values plus the series, within
/// `options.gpu_memory_budget`), else on the CPU, on one thread: where it
/// ran follows from `options` alone.
///
/// Errors: as [`dtw_path`]'s, the divergence (whose alignment is not one
/// matrix), gamma not representable in `T`, a pair whose workspace (two
/// padded `n x m` matrices, on either device) exceeds
/// [`PATH_WORKSPACE_BYTES`], refused before anything is allocated, and on
/// the GPU a pair that does not fit the device memory budget.
pub fn soft_dtw_alignment<T: Float>(
    x: ArrayView2<T>,
    y: ArrayView2<T>,
    soft: SoftDtw,
    options: &ComputeOptions,
) -> Result<(Array2<T>, T)> {
    check_pair(x, y)?;
    if soft.is_divergence() {
        return Err(Error::InvalidInput(
            "the alignment is of Soft-DTW itself, not of the divergence".into(),
        ));
    }
    let params = soft_dtw_params::<T>(&soft)?;
    let (n, m) = (x.nrows(), y.nrows());
    let bytes = soft::workspace_values(n, m) * std::mem::size_of::<T>() as u128;
    if bytes > PATH_WORKSPACE_BYTES as u128 {
        return Err(too_large(
            "Soft-DTW's expected alignment",
            (n, m),
            bytes,
            "",
        ));
    }
    let (alignment, value, on_gpu) = match Backend::resolve_on(options.device, options.gpus)? {
        Backend::Gpu(gpu) => {
            let pair = (&SeriesSet::from_series([x])?, &SeriesSet::from_series([y])?);
            let budget = options.gpu_memory_budget;
            let (alignment, value) = crate::gpu::pair_alignment(gpu, params, pair, budget)?;
            (alignment, value, true)
        }
        Backend::Cpu => {
            let _running = crate::interrupt::Running::start();
            let (alignment, value) = soft::alignment(&Samples::new(x), &Samples::new(y), soft)?;
            (alignment, value, false)
        }
    };
    check_finite(&[value], on_gpu)?;
    check_finite(alignment.as_slice().unwrap_or(&[]), false)?;
    Ok((alignment, value))
}
