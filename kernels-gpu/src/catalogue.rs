//! The kernel catalogue: every entry point of the PTX, named by a typed
//! [`KernelId`] (measure, driver and its shape, univariate or not,
//! precision) whose `Display` is the entry point's name.
//!
//! The one table of kernels is [`kernel_table!`]: the entry points
//! (`entries.rs`, GPU build) and [`KernelId::all`] (every build) are both
//! expanded from it, so they cannot disagree; the host finds a kernel by
//! building its `KernelId`, and a test checks the catalogue against the
//! PTX's entry points in both directions.
//!
//! Naming rule: `<measure>_<driver>[_1d]_<precision>`, where `<driver>` is
//! `naive`, `local<capacity>`, `shared`, `warp<stripe>` (a whole warp),
//! `warp<lanes>x<stripe>` (a sub-warp), `sheared<stripe>` and
//! `sheared<lanes>x<stripe>` (the same shapes), `skewed<groups>x<chain>`,
//! `panels<warps>x<stripe>`, `streamed<stripe>`,
//! `tiled<stripe>`,
//! `tiled_launches<stripe>`, `diagonal`, `diagonal_step`, `stencil`,
//! `gradient`, `warp_gradient<stripe>`, `panels_gradient<warps>x<stripe>` or `alignment`, and `_1d` marks the univariate twin of a warp or tiled
//! kernel (the same driver with `dims` fixed to 1).
//!
//! The subsequence search's kernels ([`search_table!`], `launch::search`)
//! are DTW's and `f64` only: `dtw_search_envelope_f64`,
//! `dtw_search_bounds_f64` and `dtw_search_dtw_f64`. They are in
//! [`KernelId::all`] but not in [`drivers`], which lists the drivers that
//! compute pairs. So are the k-NN's bounds kernels ([`knn_table!`],
//! `launch::neighbours`), DTW's in both precisions: `dtw_knn_envelope_<t>`,
//! `dtw_knn_bounds_<t>` and `dtw_knn_gather_<t>`.
//!
//! The open-ended subsequence alignment's kernels ([`subsequence_table!`],
//! `launch::subsequence`) are DTW's and `f64` only too, a warp a segment
//! of the series with `rows` query rows a lane, each with its univariate
//! twin: `dtw_subsequence<rows>[_1d]_f64`. Also in [`KernelId::all`], not
//! in [`drivers`].

use crate::measures::Measure;
use crate::Precision;
use core::fmt;

/// Which driver a kernel runs, with the shape it was instantiated with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Driver {
    /// The row driver, a thread a pair, rows interleaved in global memory.
    Naive,
    /// The row driver, a thread a pair, rows in a local array for series
    /// `b` of up to `capacity` samples.
    Local { capacity: u32 },
    /// The row driver, a thread a pair, rows in the block's shared memory.
    Shared,
    /// A pair per warp of `lanes` lanes (32: a whole warp; 8 or 16: a part
    /// of one), `stripe` columns a lane: the column driver.
    Warp { lanes: u32, stripe: u32 },
    /// A pair per warp of `lanes` lanes, `stripe` cells a lane: the sheared
    /// band driver, for pairs whose Sakoe-Chiba band fits the warp.
    Sheared { lanes: u32, stripe: u32 },
    /// A pair per warp, each lane's stripe of `groups * chain` columns cut
    /// into `groups` groups a row apart: the skewed column driver, for
    /// latency-bound cells.
    Skewed { groups: u32, chain: u32 },
    /// A pair per block of `warps` warps, each taking the pair's next
    /// panel of `32 * stripe` columns and running right behind the panel
    /// to its left: the long-pair pipeline, a pair a block.
    Panels { warps: u32, stripe: u32 },
    /// A pair per warp as `Warp { lanes: 32, stripe }`, its series read from
    /// host memory as the host writes them (`launch::streamed`).
    Streamed { stripe: u32 },
    /// One long pair, pipelined panels in one launch, `stripe` columns a lane.
    Tiled { stripe: u32 },
    /// One long pair in tiles, a launch per anti-diagonal of tiles.
    TiledLaunches { stripe: u32 },
    /// One pair, a thread per cell of an anti-diagonal, one persistent
    /// kernel with a grid barrier.
    Diagonal,
    /// The same, one launch per anti-diagonal.
    DiagonalStep,
    /// The stencil driver, a block a pair.
    Stencil,
    /// The stencil driver's forward and backward passes: value and gradient.
    Gradient,
    /// A pair per warp, `stripe` columns a lane: the column driver's
    /// forward pass storing every cell, then its backward pass, for pairs
    /// whose `b` fits the warp's stripes: value and gradient.
    WarpGradient { stripe: u32 },
    /// A pair per block of `warps` warps, each a panel of `32 * stripe`
    /// columns, running behind its neighbour in each pass: the column
    /// driver's passes for pairs whose `b` fits the block's panels.
    PanelsGradient { warps: u32, stripe: u32 },
    /// The stencil driver's passes: value and the derivative with respect to every
    /// cell (Soft-DTW's expected alignment) as a matrix.
    Alignment,
    /// The subsequence search: the data's envelope, a thread a sample.
    SearchEnvelope,
    /// The subsequence search: the lower bounds, a thread a start.
    SearchBounds,
    /// The subsequence search: the banded DTW of a candidate, a thread a
    /// candidate, early abandoned.
    SearchDtw,
    /// The k-NN's bounds: the database's envelopes, a thread a value.
    KnnEnvelope,
    /// The k-NN's bounds: LB_Kim and LB_Keogh both ways, a thread a pair.
    KnnBounds,
    /// The k-NN's survivors gathered into batches, a thread a sample.
    KnnGather,
    /// The open-ended subsequence alignment: a segment of the series per
    /// warp, `rows` query rows a lane.
    Subsequence { rows: u32 },
}

impl Driver {
    /// Whether the driver's kernels come with a univariate twin.
    pub const fn has_univariate_twin(self) -> bool {
        matches!(
            self,
            Driver::Warp { .. }
                | Driver::Sheared { .. }
                | Driver::Skewed { .. }
                | Driver::Panels { .. }
                | Driver::Streamed { .. }
                | Driver::Tiled { .. }
                | Driver::TiledLaunches { .. }
                | Driver::WarpGradient { .. }
                | Driver::PanelsGradient { .. }
                | Driver::Subsequence { .. }
        )
    }

    /// Whether the driver is one of the subsequence search's kernels
    /// (DTW's, in `f64` only).
    pub const fn is_search(self) -> bool {
        matches!(
            self,
            Driver::SearchEnvelope | Driver::SearchBounds | Driver::SearchDtw
        )
    }

    /// Whether the driver is one of the k-NN's bounds kernels (DTW's, in
    /// both precisions).
    pub const fn is_knn(self) -> bool {
        matches!(
            self,
            Driver::KnnEnvelope | Driver::KnnBounds | Driver::KnnGather
        )
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Driver::Naive => f.write_str("naive"),
            Driver::Local { capacity } => write!(f, "local{capacity}"),
            Driver::Shared => f.write_str("shared"),
            Driver::Warp { lanes: 32, stripe } => write!(f, "warp{stripe}"),
            Driver::Warp { lanes, stripe } => write!(f, "warp{lanes}x{stripe}"),
            Driver::Sheared { lanes: 32, stripe } => write!(f, "sheared{stripe}"),
            Driver::Sheared { lanes, stripe } => write!(f, "sheared{lanes}x{stripe}"),
            Driver::Skewed { groups, chain } => write!(f, "skewed{groups}x{chain}"),
            Driver::Panels { warps, stripe } => write!(f, "panels{warps}x{stripe}"),
            Driver::Streamed { stripe } => write!(f, "streamed{stripe}"),
            Driver::Tiled { stripe } => write!(f, "tiled{stripe}"),
            Driver::TiledLaunches { stripe } => write!(f, "tiled_launches{stripe}"),
            Driver::Diagonal => f.write_str("diagonal"),
            Driver::DiagonalStep => f.write_str("diagonal_step"),
            Driver::Stencil => f.write_str("stencil"),
            Driver::Gradient => f.write_str("gradient"),
            Driver::WarpGradient { stripe } => write!(f, "warp_gradient{stripe}"),
            Driver::PanelsGradient { warps, stripe } => {
                write!(f, "panels_gradient{warps}x{stripe}")
            }
            Driver::Alignment => f.write_str("alignment"),
            Driver::SearchEnvelope => f.write_str("search_envelope"),
            Driver::SearchBounds => f.write_str("search_bounds"),
            Driver::SearchDtw => f.write_str("search_dtw"),
            Driver::KnnEnvelope => f.write_str("knn_envelope"),
            Driver::KnnBounds => f.write_str("knn_bounds"),
            Driver::KnnGather => f.write_str("knn_gather"),
            Driver::Subsequence { rows } => write!(f, "subsequence{rows}"),
        }
    }
}

/// One kernel entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelId {
    pub measure: Measure,
    pub driver: Driver,
    /// The univariate twin (`dims` fixed to 1).
    pub univariate: bool,
    pub precision: Precision,
}

impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let twin = if self.univariate { "_1d" } else { "" };
        write!(
            f,
            "{}_{}{twin}_{}",
            self.measure, self.driver, self.precision
        )
    }
}

impl KernelId {
    /// The kernel of `measure`, `driver` and `precision`, its univariate
    /// twin if `univariate` and the driver has one.
    pub fn new(measure: Measure, driver: Driver, univariate: bool, precision: Precision) -> Self {
        KernelId {
            measure,
            driver,
            univariate: univariate && driver.has_univariate_twin(),
            precision,
        }
    }

    /// The subsequence search's kernel of `driver` (one of
    /// [`Driver::is_search`]).
    pub const fn search(driver: Driver) -> Self {
        KernelId {
            measure: Measure::Dtw,
            driver,
            univariate: false,
            precision: Precision::F64,
        }
    }

    /// The k-NN's bounds kernel of `driver` (one of [`Driver::is_knn`])
    /// in `precision`.
    pub const fn knn(driver: Driver, precision: Precision) -> Self {
        KernelId {
            measure: Measure::Dtw,
            driver,
            univariate: false,
            precision,
        }
    }

    /// The open-ended subsequence alignment's kernel of `rows` query rows
    /// a lane, the univariate twin if `univariate`.
    pub const fn subsequence(rows: u32, univariate: bool) -> Self {
        KernelId {
            measure: Measure::Dtw,
            driver: Driver::Subsequence { rows },
            univariate,
            precision: Precision::F64,
        }
    }

    /// Every kernel of the catalogue.
    pub fn all() -> impl Iterator<Item = KernelId> {
        let search = SEARCH_DRIVERS
            .iter()
            .map(|&driver| KernelId::search(driver));
        let knn = Precision::ALL.into_iter().flat_map(|precision| {
            KNN_DRIVERS
                .iter()
                .map(move |&driver| KernelId::knn(driver, precision))
        });
        let subsequence = SUBSEQUENCE_ROWS.iter().flat_map(|&rows| {
            [false, true]
                .into_iter()
                .map(move |univariate| KernelId::subsequence(rows, univariate))
        });
        FAMILIES
            .iter()
            .flat_map(|&(measure, driver)| {
                let twins: &[bool] = if driver.has_univariate_twin() {
                    &[false, true]
                } else {
                    &[false]
                };
                Precision::ALL.into_iter().flat_map(move |precision| {
                    twins.iter().map(move |&univariate| KernelId {
                        measure,
                        driver,
                        univariate,
                        precision,
                    })
                })
            })
            .chain(search)
            .chain(knn)
            .chain(subsequence)
    }

    /// Whether the catalogue has this kernel.
    pub fn exists(&self) -> bool {
        KernelId::all().any(|id| id == *self)
    }
}

/// The drivers the catalogue has for `measure` (the same in both
/// precisions), in the table's order.
pub fn drivers(measure: Measure) -> impl Iterator<Item = Driver> {
    FAMILIES
        .iter()
        .filter(move |(m, _)| *m == measure)
        .map(|&(_, driver)| driver)
}

/// The one table of kernels: every measure with its drivers, each in both
/// precisions (and with a univariate twin where the driver has one).
/// Expands `$then! { ... }` with the table, for the catalogue and for the
/// entry points.
macro_rules! kernel_table {
    ($then:ident) => {
        $then! {
            dtw: naive, local(256), local(1024), shared,
                warp(32, 4), warp(32, 16), warp(8, 8), warp(8, 16), warp(16, 16),
                sheared(32, 4), sheared(32, 16), sheared(8, 8), sheared(8, 16), sheared(16, 16),
                tiled(4), tiled(16), tiled_launches(4), tiled_launches(16),
                diagonal, diagonal_step, stencil;
            soft_dtw: naive, local(256), local(1024), shared,
                warp(32, 1), warp(32, 4), sheared(32, 4),
                skewed(16, 1), panels(4, 4), streamed(4),
                tiled(4), tiled_launches(4),
                diagonal, diagonal_step, stencil, gradient,
                warp_gradient(4), warp_gradient(8), warp_gradient(16),
                panels_gradient(4, 4), panels_gradient(4, 8), alignment;
            twed: naive, local(256), local(1024), shared,
                warp(32, 1), warp(32, 4), warp(32, 8),
                tiled(4), tiled(8), tiled_launches(4), tiled_launches(8),
                diagonal, diagonal_step, stencil;
        }
    };
}
#[cfg(target_arch = "nvptx64")]
pub(crate) use kernel_table;

/// The subsequence search's kernels (DTW's, `f64` only), for the
/// catalogue and the entry points alike.
macro_rules! search_table {
    ($then:ident) => {
        $then! { search_envelope, search_bounds, search_dtw }
    };
}
#[cfg(target_arch = "nvptx64")]
pub(crate) use search_table;

/// The k-NN's bounds kernels (DTW's, both precisions), for the catalogue
/// and the entry points alike.
macro_rules! knn_table {
    ($then:ident) => {
        $then! { knn_envelope, knn_bounds, knn_gather }
    };
}
#[cfg(target_arch = "nvptx64")]
pub(crate) use knn_table;

/// The open-ended subsequence alignment's kernels (DTW's, `f64` only, each
/// with its univariate twin): the query rows a lane of each.
macro_rules! subsequence_table {
    ($then:ident) => {
        $then! { 1, 4 }
    };
}
#[cfg(target_arch = "nvptx64")]
pub(crate) use subsequence_table;

macro_rules! measure_of {
    (dtw) => {
        Measure::Dtw
    };
    (soft_dtw) => {
        Measure::SoftDtw
    };
    (twed) => {
        Measure::Twed
    };
}

macro_rules! driver_of {
    (naive) => {
        Driver::Naive
    };
    (local $capacity:literal) => {
        Driver::Local {
            capacity: $capacity,
        }
    };
    (shared) => {
        Driver::Shared
    };
    (warp $lanes:literal $stripe:literal) => {
        Driver::Warp {
            lanes: $lanes,
            stripe: $stripe,
        }
    };
    (sheared $lanes:literal $stripe:literal) => {
        Driver::Sheared {
            lanes: $lanes,
            stripe: $stripe,
        }
    };
    (skewed $groups:literal $chain:literal) => {
        Driver::Skewed {
            groups: $groups,
            chain: $chain,
        }
    };
    (panels $warps:literal $stripe:literal) => {
        Driver::Panels {
            warps: $warps,
            stripe: $stripe,
        }
    };
    (streamed $stripe:literal) => {
        Driver::Streamed { stripe: $stripe }
    };
    (tiled $stripe:literal) => {
        Driver::Tiled { stripe: $stripe }
    };
    (tiled_launches $stripe:literal) => {
        Driver::TiledLaunches { stripe: $stripe }
    };
    (diagonal) => {
        Driver::Diagonal
    };
    (diagonal_step) => {
        Driver::DiagonalStep
    };
    (stencil) => {
        Driver::Stencil
    };
    (gradient) => {
        Driver::Gradient
    };
    (warp_gradient $stripe:literal) => {
        Driver::WarpGradient { stripe: $stripe }
    };
    (panels_gradient $warps:literal $stripe:literal) => {
        Driver::PanelsGradient {
            warps: $warps,
            stripe: $stripe,
        }
    };
    (alignment) => {
        Driver::Alignment
    };
    (search_envelope) => {
        Driver::SearchEnvelope
    };
    (search_bounds) => {
        Driver::SearchBounds
    };
    (search_dtw) => {
        Driver::SearchDtw
    };
    (knn_envelope) => {
        Driver::KnnEnvelope
    };
    (knn_bounds) => {
        Driver::KnnBounds
    };
    (knn_gather) => {
        Driver::KnnGather
    };
}

macro_rules! families {
    ($( $measure:ident : $( $driver:ident $( ( $( $arg:tt ),* ) )? ),* ; )*) => {
        /// Every (measure, driver) of [`kernel_table!`], in its order.
        const FAMILIES: &[(Measure, Driver)] = &[
            $( $( (measure_of!($measure), driver_of!($driver $( $( $arg )* )?)), )* )*
        ];
    };
}

kernel_table!(families);

macro_rules! search_drivers {
    ($( $driver:ident ),*) => {
        /// The drivers of [`search_table!`], in its order.
        const SEARCH_DRIVERS: &[Driver] = &[ $( driver_of!($driver), )* ];
    };
}

search_table!(search_drivers);

macro_rules! knn_drivers {
    ($( $driver:ident ),*) => {
        /// The drivers of [`knn_table!`], in its order.
        const KNN_DRIVERS: &[Driver] = &[ $( driver_of!($driver), )* ];
    };
}

knn_table!(knn_drivers);

macro_rules! subsequence_rows {
    ($( $rows:literal ),*) => {
        /// The query rows a lane of [`subsequence_table!`]'s kernels.
        pub const SUBSEQUENCE_ROWS: &[u32] = &[ $( $rows, )* ];
    };
}

subsequence_table!(subsequence_rows);
