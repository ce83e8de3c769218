//! What `timewarp bench` reports: its rows, as a table or as JSON; each
//! GPU's share of a row; the one-time setup of the process.

use super::super::{three_significant_digits, MetricKind};
use std::collections::BTreeMap;
use std::time::Duration;
use timewarp::gpu::{self, SetupKind, SetupStep};

/// How long a case takes, and how many of its queries were timed.
pub struct Timing {
    pub seconds: f64,
    pub queries_timed: usize,
    /// The first call's time (the warm-up), on a GPU: it pays what later
    /// calls do not, such as loading the kernel.
    pub first_seconds: Option<f64>,
}

/// One GPU's part of a row's runs (warm-up and timed runs together).
pub struct GpuShare {
    /// `GPU 1 (NVIDIA H200)`.
    pub name: String,
    pub pairs: u64,
    /// The time its worker spent computing them.
    pub seconds: f64,
    /// The time it waited for the other GPUs at the end of the calls: the
    /// calls' time minus its own.
    pub idle_seconds: f64,
    /// Its rate over that time, at the case's mean cells a pair.
    pub gcups: f64,
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
    /// The batches were in page-locked memory (`--pinned-input`).
    pub pinned_input: bool,
    /// Each GPU's share of the work spread over GPUs; `None` on the CPU.
    pub gpu_shares: Option<Vec<GpuShare>>,
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

/// Each column's width, whether its text is left-aligned, and the space
/// before it.
const LAYOUT: [(usize, bool, &str); 12] = [
    (20, true, ""),
    (8, false, " "),
    (7, false, " "),
    (8, false, " "),
    (7, false, " "),
    (9, true, "  "),
    (15, true, "  "),
    (8, true, " "),
    (10, false, " "),
    (9, false, " "),
    (8, false, " "),
    (9, false, " "),
];
/// The speedup column's place.
const SPEEDUP: usize = 10;

/// One line of the table: its header, or a row; `speedup` includes the
/// speedup column (when the CPU and a GPU are both timed, else it
/// compares nothing).
pub fn table_line(row: Option<&Row>, speedup: bool) -> String {
    let cells: [String; 12] = match row {
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
            "first ms",
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
            row.timing
                .first_seconds
                .map_or("-".into(), |s| three_significant_digits(s * 1e3)),
        ],
    };
    let mut line = String::new();
    for (k, (cell, (width, left, space))) in cells.iter().zip(LAYOUT).enumerate() {
        if k == SPEEDUP && !speedup {
            continue;
        }
        line += space;
        line += &if left {
            format!("{cell:<width$}")
        } else {
            format!("{cell:>width$}")
        };
    }
    line + "\n"
}

/// Each GPU's share of a row, a line each, when several GPUs shared it.
pub fn share_lines(row: &Row) -> String {
    let Some(shares) = &row.gpu_shares else {
        return String::new();
    };
    let total: u64 = shares.iter().map(|s| s.pairs).sum();
    if shares.iter().filter(|s| s.pairs > 0).count() < 2 {
        return String::new();
    }
    shares
        .iter()
        .map(|share| {
            format!(
                "#   {}: {} pairs ({:.1}%), {} s computing them, {} s idle at the end, {} GCUPS\n",
                share.name,
                share.pairs,
                100.0 * share.pairs as f64 / total as f64,
                three_significant_digits(share.seconds),
                three_significant_digits(share.idle_seconds),
                three_significant_digits(share.gcups)
            )
        })
        .collect()
}

/// The one-time work of the process, as `#` lines: the driver's start,
/// then for each GPU its context, its kernels' module texts and loads
/// (each kernel's load named), its streams and its pinned buffers.
pub fn setup_lines(steps: &[SetupStep]) -> String {
    if steps.is_empty() {
        return String::new();
    }
    let ms = |time: Duration| three_significant_digits(time.as_secs_f64() * 1e3);
    let mut lines =
        "# one-time setup in this process (first calls pay it, later ones do not):\n".to_string();
    let mut by_gpu: BTreeMap<Option<usize>, BTreeMap<SetupKind, Vec<&SetupStep>>> = BTreeMap::new();
    for step in steps {
        by_gpu
            .entry(step.gpu)
            .or_default()
            .entry(step.kind)
            .or_default()
            .push(step);
    }
    for (gpu, kinds) in by_gpu {
        let parts: Vec<String> = kinds
            .into_iter()
            .map(|(kind, steps)| {
                let total: Duration = steps.iter().map(|s| s.time).sum();
                let count = if steps.len() > 1 {
                    format!(" in {}", steps.len())
                } else {
                    String::new()
                };
                let named = if kind == SetupKind::ModuleLoad {
                    let each: Vec<String> = steps
                        .iter()
                        .map(|s| format!("{} {} ms", s.detail, ms(s.time)))
                        .collect();
                    format!(" ({})", each.join(", "))
                } else {
                    String::new()
                };
                format!("{} {} ms{count}{named}", kind.name(), ms(total))
            })
            .collect();
        let whose = gpu.map_or("process".to_string(), |k| format!("GPU {k}"));
        lines += &format!("#   {whose}: {}\n", parts.join("; "));
    }
    lines
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
            let shares = row.gpu_shares.as_ref().map_or("null".into(), |shares| {
                let each: Vec<String> = shares
                    .iter()
                    .map(|s| {
                        format!(
                            "{{\"gpu\": {:?}, \"pairs\": {}, \"seconds\": {}, \"idle_seconds\": {}, \
                             \"gcups\": {}}}",
                            s.name,
                            s.pairs,
                            number(s.seconds),
                            number(s.idle_seconds),
                            number(s.gcups)
                        )
                    })
                    .collect();
                format!("[{}]", each.join(", "))
            });
            format!(
                "  {{\"metric\": \"{}\", \"length\": {}, \"queries\": {}, \"count\": {}, \"cells\": {}, \
                 \"queries_timed\": {}, \"precision\": \"{}\", \"backend\": \"{}\", \"mode\": {}, \"seconds\": {}, \
                 \"gcups\": {}, \"speedup_vs_cpu\": {}, \"first_call_seconds\": {}, \"pinned_input\": {}, \
                 \"gpu_shares\": {shares}, {build}}}",
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
                row.timing.first_seconds.map_or("null".into(), number),
                row.pinned_input,
            )
        })
        .collect();
    format!("[\n{}\n]\n", objects.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(kind: SetupKind, gpu: Option<usize>, detail: &str, micros: u64) -> SetupStep {
        SetupStep {
            kind,
            gpu,
            detail: detail.into(),
            time: Duration::from_micros(micros),
        }
    }

    #[test]
    fn setup_lines_group_by_gpu_and_name_each_module_load() {
        assert_eq!(setup_lines(&[]), "");
        let steps = [
            step(SetupKind::Driver, None, "", 52_100),
            step(SetupKind::Context, Some(0), "", 120_000),
            step(SetupKind::ModuleText, Some(0), "twed_tiled4_f64", 20),
            step(SetupKind::ModuleLoad, Some(0), "twed_tiled4_f64", 30_200),
            step(SetupKind::ModuleLoad, Some(0), "dtw_warp16_1d_f32", 7_900),
            step(SetupKind::Context, Some(1), "", 110_000),
        ];
        let lines = setup_lines(&steps);
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].starts_with("# one-time setup"));
        assert_eq!(lines[1], "#   process: driver start 52.1 ms");
        assert_eq!(
            lines[2],
            "#   GPU 0: context 120 ms; module text 0.0200 ms; module load 38.1 ms in 2 \
             (twed_tiled4_f64 30.2 ms, dtw_warp16_1d_f32 7.90 ms)"
        );
        assert_eq!(lines[3], "#   GPU 1: context 110 ms");
    }

    fn share(name: &str, pairs: u64, seconds: f64) -> GpuShare {
        GpuShare {
            name: name.into(),
            pairs,
            seconds,
            idle_seconds: 0.0005,
            gcups: pairs as f64 * 64.0 / seconds / 1e9,
        }
    }

    fn row(gpu_shares: Option<Vec<GpuShare>>) -> Row {
        Row {
            metric: MetricKind::Dtw,
            workload: Mode::Matrix,
            length: 8,
            queries: 20,
            count: 20,
            cells: 400.0 * 64.0,
            precision: "f32",
            backend: "gpu:warp".into(),
            mode: Some("streamed"),
            band: None,
            timing: Timing {
                seconds: 0.001,
                queries_timed: 20,
                first_seconds: Some(0.0125),
            },
            speedup_vs_cpu: None,
            pinned_input: true,
            gpu_shares,
        }
    }

    #[test]
    fn rows_give_their_first_call_and_each_gpu_s_share() {
        let two = row(Some(vec![
            share("GPU 0 (A)", 600, 0.002),
            share("GPU 1 (B)", 200, 0.002),
        ]));
        let lines = share_lines(&two);
        assert_eq!(lines.lines().count(), 2, "{lines}");
        assert!(
            lines.contains(
                "#   GPU 0 (A): 600 pairs (75.0%), 0.00200 s computing them, 0.000500 s idle at the end"
            ),
            "{lines}"
        );
        assert!(lines.contains("GPU 1 (B): 200 pairs (25.0%)"), "{lines}");
        // One GPU, or none (the CPU): no share lines.
        assert_eq!(
            share_lines(&row(Some(vec![share("GPU 0 (A)", 800, 0.002)]))),
            ""
        );
        assert_eq!(share_lines(&row(None)), "");
        assert!(table_line(Some(&two), true).trim_end().ends_with(" 12.5"));
        assert!(table_line(None, true).trim_end().ends_with("first ms"));
        let json = json(&[two]);
        for needle in [
            "\"first_call_seconds\": 0.0125",
            "\"pinned_input\": true",
            "\"gpu_shares\": [{\"gpu\": \"GPU 0 (A)\", \"pairs\": 600, \"seconds\": 0.002, \
             \"idle_seconds\": 0.0005",
        ] {
            assert!(json.contains(needle), "{json}");
        }
        assert!(super::json(&[row(None)]).contains("\"gpu_shares\": null"));
    }
}
