//! What `timewarp bench` reports: its rows, as a table or as JSON.

use super::super::{three_significant_digits, MetricKind};
use timewarp::gpu;

/// How long a case takes, and how many of its queries were timed.
pub struct Timing {
    pub seconds: f64,
    pub queries_timed: usize,
}

/// What a case computes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every query against every reference (or a set against itself).
    Matrix,
    /// Query k against reference k.
    Paired,
    /// Query k against reference k, value and gradient.
    PairedGradient,
}

impl Mode {
    /// The measure's name with the mode: `soft-dtw`, `soft-dtw/paired`,
    /// `soft-dtw/paired+grad`.
    pub fn label(self, metric: MetricKind) -> String {
        match self {
            Mode::Matrix => metric.name().to_string(),
            Mode::Paired => format!("{}/paired", metric.name()),
            Mode::PairedGradient => format!("{}/paired+grad", metric.name()),
        }
    }
}

/// The measure's label with its band, if any: `dtw/band12`.
pub fn label(row: &Row) -> String {
    let label = row.workload.label(row.metric);
    match row.band {
        Some(radius) => format!("{label}/band{radius}"),
        None => label,
    }
}

/// One timed case.
pub struct Row {
    pub metric: MetricKind,
    pub workload: Mode,
    /// The series length, or the longest of a file's.
    pub length: usize,
    pub queries: usize,
    pub count: usize,
    /// Cells of all pairs: `n * m` for a pair of lengths `n` and `m`.
    pub cells: f64,
    pub precision: &'static str,
    pub backend: String,
    /// `streamed` or `resident` for a GPU, none for the CPU.
    pub mode: Option<&'static str>,
    /// The Sakoe-Chiba radius, if any.
    pub band: Option<usize>,
    pub timing: Timing,
    pub speedup_vs_cpu: Option<f64>,
}

impl Row {
    pub fn gcups(&self) -> f64 {
        self.cells / self.timing.seconds / 1e9
    }
}

pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// One line of the table: its header, or a row.
pub fn table_line(row: Option<&Row>) -> String {
    let cells: [String; 11] = match row {
        None => [
            "metric",
            "length",
            "queries",
            "count",
            "timed",
            "precision",
            "backend",
            "mode",
            "ms",
            "GCUPS",
            "speedup",
        ]
        .map(String::from),
        Some(row) => [
            label(row),
            row.length.to_string(),
            row.queries.to_string(),
            row.count.to_string(),
            row.timing.queries_timed.to_string(),
            row.precision.to_string(),
            row.backend.clone(),
            row.mode.unwrap_or("-").to_string(),
            three_significant_digits(row.timing.seconds * 1e3),
            three_significant_digits(row.gcups()),
            row.speedup_vs_cpu
                .map_or("-".into(), |s| format!("{s:.2}x")),
        ],
    };
    format!(
        "{:<20} {:>8} {:>7} {:>8} {:>7}  {:<9}  {:<15} {:<8} {:>10} {:>9} {:>8}\n",
        cells[0],
        cells[1],
        cells[2],
        cells[3],
        cells[4],
        cells[5],
        cells[6],
        cells[7],
        cells[8],
        cells[9],
        cells[10]
    )
}

/// The rows as a JSON array of objects; unmeasurable numbers are null. Each
/// names the build of the kernels (null fields in a CPU-only build).
pub fn json(rows: &[Row]) -> String {
    let number = |v: f64| {
        if v.is_finite() {
            v.to_string()
        } else {
            "null".into()
        }
    };
    // Debug quoting is JSON's for these strings (printable ASCII: rustc's
    // version line, a channel name, `sm_NN`, hex digits).
    let string = |v: Option<&str>| v.map_or("null".into(), |s| format!("{s:?}"));
    let build = format!(
        "\"ptx_rustc\": {}, \"ptx_toolchain\": {}, \"ptx_target\": {}, \"ptx_hash\": {}",
        string(gpu::ptx_rustc_version()),
        string(gpu::ptx_toolchain()),
        string(gpu::ptx().map(|_| gpu::ptx_target())),
        string(gpu::ptx_hash()),
    );
    let objects: Vec<String> = rows
        .iter()
        .map(|row| {
            format!(
                "  {{\"metric\": \"{}\", \"length\": {}, \"queries\": {}, \"count\": {}, \"cells\": {}, \
                 \"queries_timed\": {}, \"precision\": \"{}\", \"backend\": \"{}\", \"mode\": {}, \"seconds\": {}, \
                 \"gcups\": {}, \"speedup_vs_cpu\": {}, {build}}}",
                label(row),
                row.length,
                row.queries,
                row.count,
                number(row.cells),
                row.timing.queries_timed,
                row.precision,
                row.backend,
                row.mode.map_or("null".into(), |m| format!("\"{m}\"")),
                number(row.timing.seconds),
                number(row.gcups()),
                row.speedup_vs_cpu.map_or("null".into(), number),
            )
        })
        .collect();
    format!("[\n{}\n]\n", objects.join(",\n"))
}
