//! The measures: each keeps only its parameters (as the kernels receive
//! them) and its cell update, as a [`crate::Recurrence`]. DTW and Soft-DTW
//! share the Sakoe-Chiba window ([`window`]).

pub mod dtw;
pub mod soft_dtw;
pub mod twed;
pub mod window;

use core::fmt;

/// The measures, as the kernel catalogue and its entry points name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    Dtw,
    SoftDtw,
    Twed,
}

impl Measure {
    pub const ALL: [Measure; 3] = [Measure::Dtw, Measure::SoftDtw, Measure::Twed];

    /// `"dtw"`, `"soft_dtw"` or `"twed"`: the first word of its kernels' names.
    pub const fn name(self) -> &'static str {
        match self {
            Measure::Dtw => "dtw",
            Measure::SoftDtw => "soft_dtw",
            Measure::Twed => "twed",
        }
    }
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A measure's parameters as its kernels receive them: which measure they
/// belong to, so that the host finds the measure's kernels from its
/// parameter type alone.
pub trait MeasureParams: Copy {
    const MEASURE: Measure;
}
