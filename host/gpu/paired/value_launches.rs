//! Paired value launches planned apart from the batches they read
//! ([`ValuePlan`]): from the pairs' lengths alone, the chunks, each
//! launch's kernel and grid, the outputs (a kept mapped buffer, or device
//! memory) and the warp kernel's borders; then run over device batches of
//! those lengths. A call that uploads its batches plans while the upload
//! gets under way ([`super::values`]).

use crate::error::DriverCall;
use crate::gpu::launch::stencil::{shared_bytes, stencil_launch};
use crate::gpu::plan::paired_shapes::{operands, Shapes};
use crate::gpu::plan::select::{band_width, block_threads, panels_kernel, warp_kernel, WarpKernel};
use crate::gpu::plan::{chunks, MAX_BLOCKS};
use crate::gpu::runtime::context::{poison_bytes, Gpu, KernelParams};
use crate::gpu::runtime::pinned::{outputs_to_host, MappedOutputs};
use crate::gpu::runtime::wait::wait_stream;
use crate::gpu::transfer::uploads::DeviceBatch;
use crate::{Float, Result, Variant};
use cudarc::driver::{result as driver, CudaFunction, CudaSlice, DevicePtr};
use std::mem::size_of;
use std::ops::Range;
use timewarp_kernels::drivers::stencil::VALUE_RINGS;
use timewarp_kernels::hw::Tagged;
use timewarp_kernels::launch::pairs::PairsLaunch;
use timewarp_kernels::launch::Numbering;
use timewarp_kernels::{Driver, KernelId, SetRef};

/// Threads per block of the paired warp kernels (4 warps).
pub(super) const THREADS_PER_BLOCK: usize = 128;

/// The (shortest, longest) series of each batch, a launch each: what the
/// warp kernel's choice reads of the pairs, scanned once a call.
pub(super) type LaunchLengths = ((usize, usize), (usize, usize));

pub(super) fn launch_lengths(shapes: &Shapes) -> Vec<LaunchLengths> {
    (0..shapes.launches())
        .map(|l| shapes.lengths_range(l))
        .collect()
}

/// The warp kernel of a launch of `pairs` pairs of series of `lengths`
/// (samples of `dims` values) on a GPU of `schedulers` warp schedulers.
pub(super) fn paired_warp<T: Float, P: KernelParams<T>>(
    params: &P,
    lengths: LaunchLengths,
    dims: usize,
    occupancy: (usize, usize),
) -> WarpKernel {
    let longest = (lengths.0 .1, lengths.1 .1);
    let band = band_width(params, lengths.0, lengths.1);
    let (measure, precision) = (P::MEASURE, T::PRECISION);
    panels_kernel(measure, precision, longest, dims, band, occupancy)
        .unwrap_or_else(|| warp_kernel(measure, precision, longest, dims, band, occupancy))
}

/// The border per pair of every launch (0 but for the warp kernel), whole
/// 16-byte words: the `panels` kernels' borders hold tagged values, loaded
/// 16 bytes at a time.
pub(super) fn value_border<T: Float, P: KernelParams<T>>(
    params: &P,
    variant: Variant,
    launches: &[LaunchLengths],
    dims: usize,
) -> usize {
    if variant != Variant::Warp {
        return 0;
    }
    // Whichever kernel the chunks take: few pairs or many.
    launches
        .iter()
        .flat_map(|&l| [(0, 1), (1, 0)].map(|o| paired_warp::<T, P>(params, l, dims, o)))
        .map(|warp| warp.workspace_per_pair)
        .max()
        .unwrap_or(0)
        .next_multiple_of(size_of::<Tagged>() / size_of::<T>())
}

/// Device memory a value computation over device batches of `shapes`
/// allocates with `variant` ([`super::values::values_on`]): only the
/// outputs and the warp kernel's borders (unbounded for the tiled kernel,
/// which plans its own).
pub(crate) fn value_call_bytes<T: Float, P: KernelParams<T>>(
    params: &P,
    variant: Variant,
    shapes: &Shapes,
    dims: usize,
) -> usize {
    if variant == Variant::Tiled {
        return usize::MAX;
    }
    let launches = launch_lengths(shapes);
    let border = value_border::<T, P>(params, variant, &launches, dims);
    shapes.pairs() * value_bytes::<T>(launches.len(), border)
}

/// Device memory a paired value computation allocates per pair: its
/// outputs, one a launch, and the warp kernel's border of `border` values
/// (shared by the launches, which run one after the other).
pub(super) fn value_bytes<T: Float>(launches: usize, border: usize) -> usize {
    (launches + border) * size_of::<T>()
}

/// One launch of a chunk as planned: the kernel, its grid and shared
/// memory, and what the launch's argument needs besides the batches.
struct PlannedLaunch {
    function: CudaFunction,
    /// Blocks, and threads a block.
    geometry: (u32, u32),
    shared: usize,
    kind: LaunchKind,
}

enum LaunchKind {
    /// The warp driver (`panels`: the pipelined one, whose counts in the
    /// border start at zero).
    Warp { panels: bool },
    /// The stencil driver, with rings of `ring` values.
    Stencil { ring: usize },
}

/// A value computation ([`super::values::values_on`], but for the tiled
/// kernel) planned from the pairs' lengths alone: the chunks, each
/// launch's kernel, the outputs and the device buffer, all settled without
/// the batches, so that a call that uploads them plans while the upload
/// gets under way and launches once its copies are queued
/// ([`super::values::paired_values`]).
pub(crate) struct ValuePlan<'g, T, P> {
    gpu: &'g Gpu,
    params: P,
    pairs: usize,
    launches: usize,
    /// The warp kernel's border a pair (0 for none).
    border: usize,
    /// The chunks of pairs, each with its launches in order.
    chunks: Vec<(Range<usize>, Vec<PlannedLaunch>)>,
    /// A kept pinned buffer that the kernels write the values into.
    mapped: Option<MappedOutputs<'g>>,
    /// One device buffer for every chunk in turn: the chunk's outputs
    /// unless mapped, launch after launch, then the warp kernel's borders
    /// from `borders_at` (values) on.
    buffer: Option<CudaSlice<T>>,
    borders_at: usize,
    device_out: Option<u64>,
    /// The batches' series of the plan's first pair ([`ValuePlan::starting_at_pair`]).
    first: usize,
}

impl<'g, T: Float, P: KernelParams<T>> ValuePlan<'g, T, P> {
    /// The plan of the pairs of `shapes` (samples of `dims` values) with
    /// `variant`, the stencil or the warp kernel: what the launches
    /// allocate fits `budget`, in chunks.
    pub(crate) fn new(
        gpu: &'g Gpu,
        variant: Variant,
        params: P,
        shapes: &Shapes,
        dims: usize,
        budget: usize,
        device_out: Option<u64>,
    ) -> Result<Self> {
        debug_assert_ne!(
            variant,
            Variant::Tiled,
            "the tiled kernel plans a pair at a time"
        );
        let (pairs, launches) = (shapes.pairs(), shapes.launches());
        let lengths = launch_lengths(shapes);
        let border = value_border::<T, P>(&params, variant, &lengths, dims);
        let per_pair = value_bytes::<T>(launches, border);
        let ranges = if pairs * per_pair <= budget && pairs as u64 <= MAX_BLOCKS {
            std::iter::once(0..pairs).collect()
        } else {
            chunks(pairs, budget, 0, |_| per_pair, "its value")?
        };
        let mut planned = Vec::with_capacity(ranges.len());
        for range in ranges {
            let len = range.len();
            let mut chunk = Vec::with_capacity(launches);
            for (l, &launch_lengths) in lengths.iter().enumerate() {
                chunk.push(if variant == Variant::Warp {
                    // The whole batch's lengths: a chunk's lie within them.
                    let occupancy = (len, gpu.schedulers()?);
                    let warp = paired_warp::<T, P>(&params, launch_lengths, dims, occupancy);
                    let pairs_per_block = THREADS_PER_BLOCK / warp.lanes;
                    PlannedLaunch {
                        function: gpu.function(warp.id)?,
                        geometry: (
                            len.div_ceil(pairs_per_block) as u32,
                            THREADS_PER_BLOCK as u32,
                        ),
                        shared: 0,
                        kind: LaunchKind::Warp {
                            panels: matches!(warp.id.driver, Driver::Panels { .. }),
                        },
                    }
                } else {
                    let ring = shapes.range(&range).ring_len(l);
                    let shared = shared_bytes::<T>(VALUE_RINGS, ring);
                    let id = KernelId::new(P::MEASURE, Driver::Stencil, false, T::PRECISION);
                    let (function, limit) = gpu.function_with_shared(id, shared)?;
                    PlannedLaunch {
                        function,
                        geometry: (len as u32, block_threads(ring, limit)),
                        shared,
                        kind: LaunchKind::Stencil { ring },
                    }
                });
            }
            planned.push((range, chunk));
        }
        let longest_chunk = planned.iter().map(|(r, _)| r.len()).max().unwrap_or(0);
        let stream = &gpu.stream;
        // The values go straight to the host when a kept pinned buffer holds
        // them all (poisoned there); else they are copied back from the device.
        let mapped = match device_out {
            None => MappedOutputs::take::<T>((stream, &gpu.pool), launches * pairs)?,
            Some(_) => None,
        };
        // The borders are zeroed once: each panel writes the border rows
        // the next one reads. Without borders nothing needs zeroing: one
        // memset less a call; with mapped outputs too, no buffer at all.
        let outputs = if mapped.is_some() {
            0
        } else {
            launches * longest_chunk
        };
        // The borders hold tagged values, loaded 16 bytes at a time.
        let borders_at = outputs.next_multiple_of(size_of::<Tagged>() / size_of::<T>());
        let len = borders_at + border * longest_chunk;
        let buffer = match (len, border) {
            (0, _) => None,
            // SAFETY: every value is poisoned before the launches, which
            // write them before the copy back reads them.
            (_, 0) => Some(unsafe { stream.alloc::<T>(len) }),
            _ => Some(stream.alloc_zeros::<T>(len)),
        }
        .transpose()
        .call("allocating device memory")?;
        Ok(ValuePlan {
            gpu,
            params,
            pairs,
            launches,
            border,
            chunks: planned,
            mapped,
            buffer,
            borders_at,
            device_out,
            first: 0,
        })
    }

    /// The plan for the pairs `first..` of the batches it runs over: its
    /// `shapes` were those pairs' (a block of a call spread over several
    /// GPUs, of sets that each GPU holds whole).
    pub(crate) fn starting_at_pair(self, first: usize) -> Self {
        ValuePlan { first, ..self }
    }

    /// Runs the plan over device batches `x` and `y` of the planned shapes.
    /// Returns once the values are where they go: the batches may be freed
    /// then.
    pub(crate) fn run(self, (x, y): (&DeviceBatch<T>, &DeviceBatch<T>)) -> Result<Vec<T>> {
        debug_assert!(x.paired_shapes(y, false).pairs() >= self.first + self.pairs);
        let (gpu, stream) = (self.gpu, &self.gpu.stream);
        let (pairs, launches, border) = (self.pairs, self.launches, self.border);
        let base = self.buffer.as_ref().map_or(0, |b| b.device_ptr(stream).0);
        let at = |values: usize| base + (values * size_of::<T>()) as u64;
        let workspace = if border == 0 {
            std::ptr::null_mut()
        } else {
            at(self.borders_at) as *mut T
        };
        // Filled chunk by chunk from device outputs; mapped ones need none.
        let mut values = match (&self.mapped, self.device_out) {
            (None, None) => vec![T::ZERO; launches * pairs],
            _ => Vec::new(),
        };
        for (range, planned) in &self.chunks {
            let len = range.len();
            if self.mapped.is_none() {
                // SAFETY: the buffer holds at least `launches * len` values.
                unsafe { poison_bytes(stream, base, launches * len * size_of::<T>()) }?;
            }
            for (l, launch) in planned.iter().enumerate() {
                let (a, b) = operands(l, x, y);
                let series = self.first + range.start..self.first + range.end;
                let refs = (a.view(series.clone()), b.view(series));
                let out = match &self.mapped {
                    Some(values) => values.address::<T>(l * pairs + range.start),
                    None => at(l * len),
                } as *mut T;
                match launch.kind {
                    LaunchKind::Warp { panels } => {
                        self.launch_warp(launch, refs, (out, workspace), (len, panels))?;
                    }
                    LaunchKind::Stencil { ring } => {
                        let mut argument =
                            stencil_launch(refs, self.params, Numbering::Paired, len as u64, ring);
                        argument.pairs.out = out;
                        // SAFETY: the batches are on the device and outlive
                        // the launch (the copy below waits for it); `out`
                        // holds one value per pair; the kernel was allowed
                        // `shared` bytes for rings of `ring` values.
                        unsafe {
                            gpu.launch_blocks(
                                &launch.function,
                                launch.geometry,
                                launch.shared,
                                argument,
                            )
                        }?;
                    }
                }
            }
            if let Some(out) = self.device_out {
                for l in 0..launches {
                    let to = out + ((l * pairs + range.start) * size_of::<T>()) as u64;
                    // SAFETY: `out` holds `launches * pairs` values, the
                    // buffer the chunk's `launches * len`; the copy runs
                    // after the launches on the same stream, and before the
                    // next chunk's.
                    unsafe {
                        driver::memcpy_dtod_async(
                            to,
                            at(l * len),
                            len * size_of::<T>(),
                            stream.cu_stream(),
                        )
                    }
                    .call("copying on the device")?;
                }
                continue;
            }
            let (Some(buffer), None) = (&self.buffer, &self.mapped) else {
                continue; // mapped: the launches write the values in place
            };
            // Returns once the copy (and so the launches) is done.
            let parts: Vec<(usize, usize)> = (0..launches).map(|l| (l * len, len)).collect();
            let back = outputs_to_host((stream, &gpu.pool), buffer, &parts)?;
            for (l, back) in back.iter().enumerate() {
                values[l * pairs + range.start..l * pairs + range.end].copy_from_slice(back);
            }
        }
        if self.device_out.is_some() {
            wait_stream(stream, "the paired values")?;
            return Ok(Vec::new());
        }
        match self.mapped {
            // Returns once the launches are done.
            Some(values) => values.read::<T>(),
            None => Ok(values),
        }
    }

    /// One launch of the warp kernel over a chunk of `len` pairs; with
    /// panels, their borders (the pipeline's counts) zeroed first: they
    /// start at zero launch after launch and chunk after chunk.
    fn launch_warp(
        &self,
        launch: &PlannedLaunch,
        (a, b): (SetRef<T>, SetRef<T>),
        (out, workspace): (*mut T, *mut T),
        (len, panels): (usize, bool),
    ) -> Result<()> {
        let (gpu, stream, border) = (self.gpu, &self.gpu.stream, self.border);
        if panels {
            let bytes = border * len * size_of::<T>();
            // SAFETY: the workspace holds `border` values a pair.
            unsafe { driver::memset_d8_async(workspace as u64, 0, bytes, stream.cu_stream()) }
                .call("filling device memory")?;
        }
        let argument = PairsLaunch {
            a,
            b,
            params: self.params,
            out,
            workspace,
            row_len: border.max(1) as u64,
            first_pair: 0,
            pair_count: len as u64,
            numbering: Numbering::Paired,
        };
        // SAFETY: as for the stencil launch in `run`; the workspace holds
        // `border` values per pair, at least the longest series of the
        // launch plus one, or none is needed (one panel).
        unsafe { gpu.launch_blocks(&launch.function, launch.geometry, 0, argument) }
    }
}
