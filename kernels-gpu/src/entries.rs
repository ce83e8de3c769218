//! The kernel entry points (GPU build only), expanded from the catalogue's
//! one table ([`crate::catalogue::kernel_table!`]): each is a one-line
//! instantiation of a launch's driver for one measure, precision and shape,
//! exported under its [`crate::KernelId`]'s name. A warp or tiled kernel
//! also gets its univariate twin (`_1d`): the same launch reading its
//! series with `dims` the constant 1 (`series::specialised`), so the
//! multivariate paths fold away, and with them the registers they hold,
//! which otherwise set the whole kernel's register count (and so how many
//! warps fit an SM).

use crate::catalogue::kernel_table;
use crate::hw::nvptx::{
    block_index, global_thread, global_warp, GpuBlock, GpuGrid, GpuSubWarp, GpuWarp,
};
use crate::hw::{Grid, ThreadBlock};
use crate::launch::long_pair::{DiagonalLaunch, PanelLaunch, TileLaunch};
use crate::launch::neighbours::{GatherLaunch, KnnLaunch};
use crate::launch::pairs::{PairsLaunch, StencilLaunch};
use crate::launch::search::SearchLaunch;
use crate::launch::streamed::StreamedLaunch;
use crate::launch::subsequence::SubsequenceLaunch;
use crate::{DtwParams, SoftDtwParams, TwedParams};

/// A measure's parameter type in precision `$t`.
macro_rules! params {
    (dtw $t:ty) => {
        DtwParams
    };
    (soft_dtw $t:ty) => {
        SoftDtwParams<$t>
    };
    (twed $t:ty) => {
        TwedParams<$t>
    };
}

/// One entry point named `$name`, taking `$launch: $ty`.
macro_rules! entry {
    ($name:expr, $launch:ident: $ty:ty, $body:block) => {
        const _: () = {
            #[export_name = $name]
            unsafe extern "ptx-kernel" fn entry($launch: $ty) $body
        };
    };
}

/// An entry point `<$stem>_<$t>` and its univariate twin `<$stem>_1d_<$t>`:
/// `$body` with `$univariate` false and true.
macro_rules! entry_and_twin {
    ($stem:expr, $t:ident, $univariate:ident, $launch:ident: $ty:ty, $body:block) => {
        entry!(concat!($stem, "_", stringify!($t)), $launch: $ty, {
            const $univariate: bool = false;
            $body
        });
        entry!(concat!($stem, "_1d_", stringify!($t)), $launch: $ty, {
            const $univariate: bool = true;
            $body
        });
    };
}

/// The entry points of one measure, driver and precision.
macro_rules! kernel {
    ($m:ident $t:ident naive) => {
        entry!(concat!(stringify!($m), "_naive_", stringify!($t)),
            launch: PairsLaunch<$t, params!($m $t)>, {
            let index = global_thread();
            if index < launch.pair_count {
                launch.run_pair_with_workspace(index);
            }
        });
    };
    ($m:ident $t:ident local $capacity:literal) => {
        entry!(concat!(stringify!($m), "_local", stringify!($capacity), "_", stringify!($t)),
            launch: PairsLaunch<$t, params!($m $t)>, {
            let index = global_thread();
            if index < launch.pair_count {
                launch.run_pair_in_local::<{ $capacity + 1 }>(index);
            }
        });
    };
    ($m:ident $t:ident shared) => {
        entry!(concat!(stringify!($m), "_shared_", stringify!($t)),
            launch: PairsLaunch<$t, params!($m $t)>, {
            let index = global_thread();
            if index < launch.pair_count {
                let block = GpuBlock;
                launch.run_pair_in_block_rows(index, block.shared::<$t>(), block.thread(), block.threads());
            }
        });
    };
    ($m:ident $t:ident warp 32 $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_warp", stringify!($stripe)), $t, UNIVARIATE,
            launch: PairsLaunch<$t, params!($m $t)>, {
            launch.run_pair_in_warp::<GpuWarp, $stripe, UNIVARIATE>(&GpuWarp::whole(), global_warp());
        });
    };
    ($m:ident $t:ident warp $lanes:literal $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_warp", stringify!($lanes), "x", stringify!($stripe)), $t, UNIVARIATE,
            launch: PairsLaunch<$t, params!($m $t)>, {
            let sub_warp = global_thread() / $lanes;
            let warp = GpuSubWarp::<$lanes>::of(sub_warp);
            launch.run_pair_in_warp::<_, $stripe, UNIVARIATE>(&warp, sub_warp);
        });
    };
    ($m:ident $t:ident sheared 32 $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_sheared", stringify!($stripe)), $t, UNIVARIATE,
            launch: PairsLaunch<$t, params!($m $t)>, {
            launch.run_band_in_warp::<GpuWarp, $stripe, UNIVARIATE>(&GpuWarp::whole(), global_warp());
        });
    };
    ($m:ident $t:ident sheared $lanes:literal $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_sheared", stringify!($lanes), "x", stringify!($stripe)), $t, UNIVARIATE,
            launch: PairsLaunch<$t, params!($m $t)>, {
            let sub_warp = global_thread() / $lanes;
            let warp = GpuSubWarp::<$lanes>::of(sub_warp);
            launch.run_band_in_warp::<_, $stripe, UNIVARIATE>(&warp, sub_warp);
        });
    };
    ($m:ident $t:ident skewed $groups:literal $chain:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_skewed", stringify!($groups), "x", stringify!($chain)), $t, UNIVARIATE,
            launch: PairsLaunch<$t, params!($m $t)>, {
            launch.run_pair_in_skewed_warp::<GpuWarp, $groups, $chain, UNIVARIATE>(&GpuWarp::whole(), global_warp());
        });
    };
    ($m:ident $t:ident panels $warps:literal $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_panels", stringify!($warps), "x", stringify!($stripe)), $t, UNIVARIATE,
            launch: PairsLaunch<$t, params!($m $t)>, {
            launch.run_pair_in_panels::<GpuWarp, $stripe, UNIVARIATE>(&GpuWarp::whole(), block_index());
        });
    };
    ($m:ident $t:ident streamed $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_streamed", stringify!($stripe)), $t, UNIVARIATE,
            launch: StreamedLaunch<$t, params!($m $t)>, {
            let block = GpuBlock;
            let room = block.shared::<$t>().add(block.thread() / 32 * launch.warp_values as usize);
            launch.run_pair_in_warp::<GpuWarp, $stripe, UNIVARIATE>(&GpuWarp::whole(), global_warp(), room);
        });
    };
    ($m:ident $t:ident tiled $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_tiled", stringify!($stripe)), $t, UNIVARIATE,
            launch: PanelLaunch<$t, params!($m $t)>, {
            launch.run::<GpuWarp, $stripe, UNIVARIATE>(&GpuWarp::whole());
        });
    };
    ($m:ident $t:ident tiled_launches $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_tiled_launches", stringify!($stripe)), $t, UNIVARIATE,
            launch: TileLaunch<$t, params!($m $t)>, {
            launch.run_tile::<GpuWarp, $stripe, UNIVARIATE>(&GpuWarp::whole(), global_warp());
        });
    };
    ($m:ident $t:ident diagonal) => {
        entry!(concat!(stringify!($m), "_diagonal_", stringify!($t)),
            launch: DiagonalLaunch<$t, params!($m $t)>, {
            launch.run_pair(&GpuGrid::new(launch.barrier));
        });
    };
    ($m:ident $t:ident diagonal_step) => {
        entry!(concat!(stringify!($m), "_diagonal_step_", stringify!($t)),
            launch: DiagonalLaunch<$t, params!($m $t)>, {
            let grid = GpuGrid::new(launch.barrier);
            launch.run_diagonal(grid.thread(), grid.threads());
        });
    };
    ($m:ident $t:ident stencil) => {
        entry!(concat!(stringify!($m), "_stencil_", stringify!($t)),
            launch: StencilLaunch<$t, params!($m $t)>, {
            launch.run_pair_in_block(&GpuBlock, block_index());
        });
    };
    ($m:ident $t:ident gradient) => {
        entry!(concat!(stringify!($m), "_gradient_", stringify!($t)),
            launch: StencilLaunch<$t, params!($m $t)>, {
            launch.run_gradient_in_block(&GpuBlock, block_index());
        });
    };
    ($m:ident $t:ident warp_gradient $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_warp_gradient", stringify!($stripe)), $t, UNIVARIATE,
            launch: StencilLaunch<$t, params!($m $t)>, {
            launch.run_gradient_in_panels::<GpuWarp, $stripe, 1, UNIVARIATE>(&GpuWarp::whole(), global_warp());
        });
    };
    ($m:ident $t:ident panels_gradient $warps:literal $stripe:literal) => {
        entry_and_twin!(concat!(stringify!($m), "_panels_gradient", stringify!($warps), "x", stringify!($stripe)), $t, UNIVARIATE,
            launch: StencilLaunch<$t, params!($m $t)>, {
            launch.run_gradient_in_panels::<GpuWarp, $stripe, $warps, UNIVARIATE>(&GpuWarp::whole(), global_warp());
        });
    };
    ($m:ident $t:ident alignment) => {
        entry!(concat!(stringify!($m), "_alignment_", stringify!($t)),
            launch: StencilLaunch<$t, params!($m $t)>, {
            launch.run_alignment_in_block(&GpuBlock, block_index());
        });
    };
}

macro_rules! entry_points {
    ($( $measure:ident : $( $driver:ident $( ( $( $arg:tt ),* ) )? ),* ; )*) => {
        $( $(
            kernel!($measure f32 $driver $( $( $arg )* )?);
            kernel!($measure f64 $driver $( $( $arg )* )?);
        )* )*
    };
}

kernel_table!(entry_points);

/// The subsequence search's entry points, `dtw_<driver>_f64`: a thread an
/// item of the launch (each method checks its index against its count).
macro_rules! search_entry_points {
    ($( $driver:ident ),*) => {
        $(
            entry!(concat!("dtw_", stringify!($driver), "_f64"), launch: SearchLaunch, {
                launch.$driver(global_thread());
            });
        )*
    };
}

crate::catalogue::search_table!(search_entry_points);

/// The launch type of a k-NN bounds kernel.
macro_rules! knn_launch {
    (knn_gather $t:ty) => {
        GatherLaunch<$t>
    };
    ($driver:ident $t:ty) => {
        KnnLaunch<$t>
    };
}

/// The k-NN's bounds entry points, `dtw_<driver>_<t>`: a thread an item
/// of the launch (each method checks its index against its count).
macro_rules! knn_entry_points {
    ($( $driver:ident ),*) => {
        $(
            entry!(concat!("dtw_", stringify!($driver), "_f32"), launch: knn_launch!($driver f32), {
                launch.$driver(global_thread());
            });
            entry!(concat!("dtw_", stringify!($driver), "_f64"), launch: knn_launch!($driver f64), {
                launch.$driver(global_thread());
            });
        )*
    };
}

/// The open-ended subsequence alignment's entry points,
/// `dtw_subsequence<rows>[_1d]_f64`: a warp a segment of the chunk (the
/// method checks its index against the count).
macro_rules! subsequence_entry_points {
    ($( $rows:literal ),*) => {
        $(
            entry_and_twin!(concat!("dtw_subsequence", stringify!($rows)), f64, UNIVARIATE,
                launch: SubsequenceLaunch, {
                launch.run_segment::<GpuWarp, $rows, UNIVARIATE>(&GpuWarp::whole(), global_warp());
            });
        )*
    };
}

crate::catalogue::knn_table!(knn_entry_points);

crate::catalogue::subsequence_table!(subsequence_entry_points);

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: trap ends the kernel with an error the host sees at its next sync.
    unsafe { core::arch::nvptx::trap() }
}
