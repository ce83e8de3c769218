//! `timewarp align`: the alignment of two series, as CSV and as a plot.

use super::memory::check_fits;
use super::plot::{AlignmentFigure, HeatMap, PlotArgs};
use super::{
    check_output_path, counted, describe, options_for, print, ComputeArgs, Failure, Input,
    MetricArgs, Outputs,
};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use ndarray_npy::WritableElement;
use std::path::{Path, PathBuf};
use std::time::Instant;
use timewarp::{
    dtw_path, soft_dtw_alignment, twed_path, ComputeOptions, EditStep, Float, Metric, Precision,
};

pub const EXAMPLES: &str = "\
Examples:
  # DTW's warping path of test series 0 and training series 3 of GunPoint, CSV on stdout
  timewarp align tests/data/GunPoint_TEST.ts tests/data/GunPoint_TRAIN.ts --metric dtw --index 0 3

  # TWED's edit path of two one-series files, written to a file, with a plot
  timewarp align a.csv b.csv --metric twed --out steps.csv --plot alignment.png

  # The same with the samples' timestamps (one-series files of one value a sample)
  timewarp align a.csv b.csv --metric twed --times-a ta.csv --times-b tb.csv

  # Soft-DTW's expected alignment matrix within a band of 10 samples
  timewarp align a.npy b.npy --metric soft-dtw --gamma 0.1 --index-a 2 --index-b 2 --out e.npy

Output: DTW writes the path's cells, `i,j` (0-based sample indices, from 0,0 to
the last samples); TWED its steps, `step,i,j,cost` (match, delete-x or delete-y,
the cell the step reaches, its cost); Soft-DTW the n x m expected alignment.
The value is printed on stderr. With a GPU (--device gpu, or auto when there is
one), Soft-DTW's matrix is computed on it, and so are the passes of long TWED
and unbanded DTW paths, which take memory linear in the lengths; the rest runs
on the CPU. TWED's samples are at times 0, 1, 2, ... unless
--times-a/--times-b give their timestamps (finite, non-decreasing). Plots show
the first dimension of each series, up to 5000 samples (longer: no plot, and a
warning), and the matrix beside it up to 400 x 400 on a figure at least 580
pixels wide. --out and --plot are renamed into place only when both are
written.";

/// Samples of a series beyond which `--plot` is left out.
const MAX_PLOT_SAMPLES: usize = 5000;
/// The matrix is drawn beside the series when both sides are at most this.
const MAX_MATRIX_SIDE: usize = 400;

#[derive(clap::Args)]
pub struct Args {
    /// The file of the first series (.ts, .tsv, .txt, .csv or .npy)
    a: PathBuf,
    /// The file of the second series
    b: PathBuf,
    #[command(flatten)]
    metric: MetricArgs,
    #[command(flatten)]
    compute: ComputeArgs,
    /// The series of A and of B to align (0-based); needed for files of
    /// more than one series
    #[arg(long, num_args = 2, value_names = ["I", "J"], conflicts_with_all = ["index_a", "index_b"])]
    index: Option<Vec<usize>>,
    /// The series of A to align (0-based)
    #[arg(long, value_name = "I")]
    index_a: Option<usize>,
    /// The series of B to align (0-based)
    #[arg(long, value_name = "J")]
    index_b: Option<usize>,
    /// TWED: the timestamps of the series of A, a file of one univariate
    /// series (or one per series of A, picked like A's) [default: 0, 1, 2, ...]
    #[arg(long, value_name = "FILE")]
    times_a: Option<PathBuf>,
    /// TWED: the timestamps of the series of B [default: 0, 1, 2, ...]
    #[arg(long, value_name = "FILE")]
    times_b: Option<PathBuf>,
    /// Write the alignment to PATH (.csv; Soft-DTW also .npy) instead of stdout
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    #[command(flatten)]
    plot: PlotArgs,
}

/// The series `index` of `input` (the only one when `index` is `None`).
fn pick(input: &Input, index: Option<usize>, flag: &str) -> Result<Array2<f64>, Failure> {
    let count = input.data.series.len();
    let index = match index {
        Some(k) if k < count => k,
        Some(k) => {
            return Err(Failure::usage(format!(
                "{flag} {k}: {} has {}",
                input.path.display(),
                counted(count, "series", "series")
            )))
        }
        None if count == 1 => 0,
        None => {
            return Err(Failure::usage(format!(
                "{} has {count} series; pick one with --index I J or {flag}",
                input.path.display()
            )))
        }
    };
    Ok(input.data.series[index].clone())
}

pub fn run(mut args: Args) -> Result<(), Failure> {
    let metric = args.metric.metric()?;
    if let Some(out) = &args.out {
        check_output_path(out)?;
        let npy = out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
        if npy && !matches!(metric, Metric::SoftDtw(_)) {
            return Err(Failure::usage(format!(
                "{}: a path is written as .csv (only Soft-DTW's matrix also as .npy)",
                out.display()
            )));
        }
    }
    args.plot.check()?;
    let (a, b) = (Input::load(&args.a)?, Input::load(&args.b)?);
    a.check_same_dims(&b)?;
    let (index_a, index_b) = match &args.index {
        Some(both) => (Some(both[0]), Some(both[1])),
        None => (args.index_a, args.index_b),
    };
    let x = pick(&a, index_a, "--index-a")?;
    let y = pick(&b, index_b, "--index-b")?;
    let times = (
        timestamps(&args.times_a, index_a, x.nrows(), metric, "--times-a")?,
        timestamps(&args.times_b, index_b, y.nrows(), metric, "--times-b")?,
    );
    args.plot
        .leave_out_over("the first series", x.nrows(), MAX_PLOT_SAMPLES);
    args.plot
        .leave_out_over("the second series", y.nrows(), MAX_PLOT_SAMPLES);
    if matches!(metric, Metric::SoftDtw(_)) {
        let (n, m) = (x.nrows(), y.nrows());
        check_fits(
            &format!(
                "Soft-DTW's {n} x {m} expected alignment in {}",
                args.compute.precision_name()
            ),
            n.checked_mul(m)
                .and_then(|cells| cells.checked_mul(args.compute.precision_bytes())),
            "align shorter series, or use --metric dtw or twed",
        )?;
    }
    let options = options_for(args.compute.backend()?);
    let names = (name(&args.a, index_a), name(&args.b, index_b));
    match args.compute.precision {
        Precision::F32 => emit::<f32>(&args, metric, (x, y), times, names, &options),
        Precision::F64 => emit::<f64>(&args, metric, (x, y), times, names, &options),
    }
}

/// The timestamps of a series of `len` samples from `file` (`flag`'s), if
/// given: TWED's only, one univariate series, one value a sample.
fn timestamps(
    file: &Option<PathBuf>,
    index: Option<usize>,
    len: usize,
    metric: Metric,
    flag: &str,
) -> Result<Option<Array1<f64>>, Failure> {
    let Some(file) = file else {
        return Ok(None);
    };
    if !matches!(metric, Metric::Twed(_)) {
        return Err(Failure::usage(format!(
            "{flag} applies only to --metric twed, not {}",
            metric.name()
        )));
    }
    let times = pick(&Input::load(file)?, index, flag)?;
    if times.ncols() != 1 || times.nrows() != len {
        return Err(Failure::usage(format!(
            "{flag} {}: {} x {} values, expected one timestamp for each of the {len} samples",
            file.display(),
            times.nrows(),
            times.ncols()
        )));
    }
    Ok(Some(times.column(0).to_owned()))
}

/// `file.csv` or `file.ts [3]`, for the plot's legend.
fn name(path: &Path, index: Option<usize>) -> String {
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    index.map_or(file.to_string(), |k| format!("{file} [{k}]"))
}

/// What a metric's alignment gives: the CSV text or the matrix, and the
/// figure's pieces.
struct Computed<T> {
    text: Option<String>,
    matrix: Option<Array2<T>>,
    value: T,
    steps: String,
    links: Vec<(usize, usize, f64)>,
    deleted: (Vec<usize>, Vec<usize>),
    path: Vec<(usize, usize)>,
    on_gpu: bool,
}

fn compute<T: Float>(
    metric: Metric,
    (x, y): (ArrayView2<T>, ArrayView2<T>),
    (x_times, y_times): (Option<ArrayView1<T>>, Option<ArrayView1<T>>),
    options: &ComputeOptions,
) -> Result<Computed<T>, Failure> {
    Ok(match metric {
        Metric::Dtw(dtw) => {
            let alignment = dtw_path(x, y, dtw, options)?;
            let mut text = String::from("i,j\n");
            for &(i, j) in &alignment.path {
                text += &format!("{i},{j}\n");
            }
            Computed {
                text: Some(text),
                matrix: None,
                value: alignment.value,
                steps: counted(alignment.path.len(), "cell", "cells"),
                links: alignment.path.iter().map(|&(i, j)| (i, j, 1.0)).collect(),
                deleted: (Vec::new(), Vec::new()),
                path: alignment.path,
                on_gpu: alignment.on_gpu,
            }
        }
        Metric::Twed(twed) => {
            let edits = twed_path(x, y, x_times, y_times, twed, options)?;
            let mut text = String::from("step,i,j,cost\n");
            let mut computed = Computed {
                text: None,
                matrix: None,
                value: edits.value,
                steps: counted(edits.edits.len(), "step", "steps"),
                links: Vec::new(),
                deleted: (Vec::new(), Vec::new()),
                path: Vec::new(),
                on_gpu: edits.on_gpu,
            };
            for edit in &edits.edits {
                text += &format!("{},{},{},{}\n", edit.step.name(), edit.i, edit.j, edit.cost);
                computed.path.push((edit.i, edit.j));
                match edit.step {
                    EditStep::Match => computed.links.push((edit.i, edit.j, 1.0)),
                    EditStep::DeleteX => computed.deleted.0.push(edit.i),
                    EditStep::DeleteY => computed.deleted.1.push(edit.j),
                }
            }
            computed.text = Some(text);
            computed
        }
        Metric::SoftDtw(soft) => {
            let (matrix, value) = soft_dtw_alignment(x, y, soft, options)?;
            // It runs where the device resolves.
            let on_gpu = timewarp::Backend::resolve_on(options.device, options.gpus)?.is_gpu();
            // Cells that carry a visible share of the alignments.
            let links = matrix
                .indexed_iter()
                .filter(|(_, w)| w.to_f64() >= 0.05)
                .map(|((i, j), w)| (i, j, w.to_f64()))
                .collect();
            Computed {
                text: None,
                steps: format!("{} x {} matrix", matrix.nrows(), matrix.ncols()),
                matrix: Some(matrix),
                value,
                links,
                deleted: (Vec::new(), Vec::new()),
                path: Vec::new(),
                on_gpu,
            }
        }
    })
}

fn emit<T: Float + WritableElement>(
    args: &Args,
    metric: Metric,
    (x, y): (Array2<f64>, Array2<f64>),
    times: (Option<Array1<f64>>, Option<Array1<f64>>),
    names: (String, String),
    options: &ComputeOptions,
) -> Result<(), Failure> {
    let (xt, yt) = (x.mapv(T::from_f64), y.mapv(T::from_f64));
    let in_precision = |t: &Option<Array1<f64>>| t.as_ref().map(|t| t.mapv(T::from_f64));
    let (x_times, y_times) = (in_precision(&times.0), in_precision(&times.1));
    let start = Instant::now();
    let computed = compute(
        metric,
        (xt.view(), yt.view()),
        (
            x_times.as_ref().map(|t| t.view()),
            y_times.as_ref().map(|t| t.view()),
        ),
        options,
    )?;
    eprintln!(
        "{}: {} ({}) in {} ms on {} ({})",
        metric.name(),
        computed.value,
        computed.steps,
        super::three_significant_digits(start.elapsed().as_secs_f64() * 1e3),
        describe(if computed.on_gpu {
            // The path's passes run on the first of the GPUs.
            let backend = timewarp::Backend::resolve_on(options.device, options.gpus)?;
            let gpus = match backend {
                timewarp::Backend::Gpu(gpu) => timewarp::GpuSet::one(gpu.info().ordinal)?,
                timewarp::Backend::Cpu => options.gpus,
            };
            super::Target { backend, gpus }
        } else {
            super::Target::CPU
        }),
        T::NAME
    );
    let mut outputs = Outputs::default();
    match (&computed.text, &computed.matrix, &args.out) {
        (Some(text), _, Some(out)) => outputs.write_bytes(out, text.as_bytes())?,
        (None, Some(matrix), Some(out)) => outputs.write_matrix(out, matrix.view())?,
        _ => {}
    }
    args.plot
        .write_with(&mut outputs, || figure(metric, &x, &y, names, &computed))?;
    match (&args.out, &computed.text, &computed.matrix) {
        (None, Some(text), _) => print(text)?,
        (None, None, Some(matrix)) => super::print_csv(matrix.view())?,
        _ => {}
    }
    outputs.commit()
}

fn figure<T: Float>(
    metric: Metric,
    x: &Array2<f64>,
    y: &Array2<f64>,
    (x_name, y_name): (String, String),
    computed: &Computed<T>,
) -> AlignmentFigure {
    let (n, m) = (x.nrows(), y.nrows());
    let dims = if x.ncols() > 1 {
        format!(", dimension 1 of {}", x.ncols())
    } else {
        String::new()
    };
    let value = format_value(computed.value.to_f64());
    let (title, matrix_title, matrix) = match metric {
        Metric::SoftDtw(_) => (
            format!("Soft-DTW expected alignment, value {value}{dims}"),
            "expected alignment E",
            computed.matrix.as_ref().map(|e| e.mapv(|v| v.to_f64())),
        ),
        Metric::Twed(twed) => (
            format!("TWED edit path, value {value}{dims}"),
            "Lp distance of the samples",
            Some(Array2::from_shape_fn((n, m), |(i, j)| {
                let p = twed.degree();
                let sum: f64 = x
                    .row(i)
                    .iter()
                    .zip(y.row(j))
                    .map(|(u, v)| (u - v).abs().powf(p))
                    .sum();
                sum.powf(1.0 / p)
            })),
        ),
        Metric::Dtw(_) => (
            format!("DTW warping path, value {value}{dims}"),
            "squared Euclidean cost",
            Some(Array2::from_shape_fn((n, m), |(i, j)| {
                x.row(i)
                    .iter()
                    .zip(y.row(j))
                    .map(|(u, v)| (u - v) * (u - v))
                    .sum()
            })),
        ),
    };
    let matrix = matrix.filter(|_| n <= MAX_MATRIX_SIDE && m <= MAX_MATRIX_SIDE);
    AlignmentFigure {
        title,
        x: x.column(0).to_vec(),
        y: y.column(0).to_vec(),
        x_name,
        y_name,
        links: computed.links.clone(),
        deleted_x: computed.deleted.0.clone(),
        deleted_y: computed.deleted.1.clone(),
        matrix: matrix.map(|values| HeatMap {
            values,
            title: matrix_title.into(),
            x_label: "second series, sample j".into(),
            y_label: "first series, sample i".into(),
            row_groups: None,
            column_groups: None,
            annotate: false,
            path: computed.path.clone(),
        }),
    }
}

/// A value with four significant digits for a title.
fn format_value(value: f64) -> String {
    if value != 0.0 && !(1e-3..1e6).contains(&value.abs()) {
        format!("{value:.3e}")
    } else {
        format!("{:.4}", value)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}
