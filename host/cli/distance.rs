//! `timewarp distance`: the distance matrix, as CSV on stdout or a file.

use super::memory::check_fits;
use super::plot::{self, HeatMap, PlotArgs, MAX_HEATMAP_SIDE};
use super::Target;
use super::{
    check_output_path, compute_matrix, print_csv, ComputeArgs, Failure, Input, MetricArgs, Outputs,
    VariantArg,
};
use ndarray::Array2;
use ndarray_npy::WritableElement;
use std::path::PathBuf;
use timewarp::{Float, Metric, Precision, Variant};

pub const EXAMPLES: &str = "\
Examples:
  # GunPoint's test series (rows) against its training series (columns), CSV on stdout
  timewarp distance tests/data/GunPoint_TEST.ts tests/data/GunPoint_TRAIN.ts --metric dtw

  # A set against itself (each pair computed once), TWED, written as .npy
  timewarp distance series.csv --metric twed --nu 0.01 --out twed.npy

  # Soft-DTW in single precision on the GPU
  timewarp distance a.npy b.npy --metric soft-dtw --gamma 0.1 --precision f32 --device gpu --out d.csv

  # DTW within a Sakoe-Chiba band of 10 samples
  timewarp distance a.ts b.ts --metric dtw --band 10

  # DTW of GunPoint's test set against itself as a heat map, grouped by class
  timewarp distance tests/data/GunPoint_TEST.ts --metric dtw --out d.npy --plot matrix.png

  # On GPUs 0 and 1 only (default: every usable GPU)
  timewarp distance A.ts --metric dtw --gpus 0,1 --out d.npy

  # One long pair with TWED, a GPU thread per cell of each anti-diagonal
  timewarp distance long_a.npy long_b.npy --metric twed --device gpu --variant diagonal

CSV values are printed in the shortest form that parses back to the same bits.
DTW and Soft-DTW use the squared Euclidean local cost with no square root.

A matrix that cannot fit this machine's memory (rows x columns x 4 or 8 bytes)
is refused before any work. --out and --plot are renamed into place only when
both are written: if the plot cannot be written, neither is left. A matrix of
more than 500 rows or columns is not plotted (a warning says so); --out is
still written.";

#[derive(clap::Args)]
pub struct Args {
    /// The series of the rows (.ts, .tsv, .txt, .csv or .npy)
    a: PathBuf,
    /// The series of the columns; omitted, A against itself
    b: Option<PathBuf>,
    #[command(flatten)]
    metric: MetricArgs,
    #[command(flatten)]
    compute: ComputeArgs,
    #[command(flatten)]
    variant: VariantArg,
    /// Write the matrix to PATH (.csv or .npy) instead of CSV on stdout
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// --plot: the matrix as a heat map, rows and columns grouped by class
    /// when the files have labels
    #[command(flatten)]
    plot: PlotArgs,
}

pub fn run(mut args: Args) -> Result<(), Failure> {
    let metric = args.metric.metric()?;
    let variant = args.variant.for_device(args.compute.device)?;
    if let Some(out) = &args.out {
        check_output_path(out)?;
    }
    args.plot.check()?;
    let a = Input::load(&args.a)?;
    let b = args.b.as_deref().map(Input::load).transpose()?;
    if let Some(b) = &b {
        a.check_same_dims(b)?;
    }
    let (rows, columns) = (a.data.len(), b.as_ref().unwrap_or(&a).data.len());
    args.plot.leave_out_over("A (rows)", rows, MAX_HEATMAP_SIDE);
    args.plot
        .leave_out_over("B (columns)", columns, MAX_HEATMAP_SIDE);
    let precision = args.compute.precision_name();
    check_fits(
        &format!("the {rows} x {columns} distance matrix in {precision}"),
        rows.checked_mul(columns)
            .and_then(|cells| cells.checked_mul(args.compute.precision_bytes())),
        "split A (or B) and compute the matrix in parts",
    )?;
    let target = args.compute.backend()?;
    let mut outputs = Outputs::default();
    let inputs = (&a, b.as_ref());
    match args.compute.precision {
        Precision::F32 => emit::<f32>(&args, inputs, metric, target, variant, &mut outputs)?,
        Precision::F64 => emit::<f64>(&args, inputs, metric, target, variant, &mut outputs)?,
    }
    outputs.commit()
}

/// The matrix with its rows and columns in class order, when both files
/// have labels.
fn heat_map(matrix: Array2<f64>, a: &Input, b: Option<&Input>, metric: Metric) -> HeatMap {
    let b = b.unwrap_or(a);
    let name = |input: &Input| {
        let file = input.path.file_name().unwrap_or_default();
        file.to_string_lossy().into_owned()
    };
    let mut map = HeatMap {
        title: format!(
            "{} distances",
            metric.name().replace('_', "-").to_uppercase()
        ),
        x_label: format!("{} (columns)", name(b)),
        y_label: format!("{} (rows)", name(a)),
        values: matrix,
        row_groups: None,
        column_groups: None,
        annotate: false,
        path: Vec::new(),
    };
    if let (Some(rows), Some(columns)) = (&a.data.labels, &b.data.labels) {
        let (row_order, row_groups) = plot::class_order(rows);
        let (column_order, column_groups) = plot::class_order(columns);
        let values = &map.values;
        map.values = Array2::from_shape_fn(values.dim(), |(i, j)| {
            values[[row_order[i], column_order[j]]]
        });
        map.x_label += ", by class";
        map.y_label += ", by class";
        map.row_groups = Some(row_groups);
        map.column_groups = Some(column_groups);
    }
    map
}

/// Computes the whole matrix in precision `T` and writes it (and its
/// plot) among `outputs`, or prints it.
fn emit<T: Float + WritableElement>(
    args: &Args,
    (a, b): (&Input, Option<&Input>),
    metric: Metric,
    target: Target,
    variant: Option<Variant>,
    outputs: &mut Outputs,
) -> Result<(), Failure> {
    let matrix = compute_matrix::<T>(a, b, metric, target, variant)?;
    if let Some(path) = &args.out {
        outputs.write_matrix(path, matrix.view())?;
    }
    args.plot.write_with(outputs, || {
        heat_map(matrix.mapv(|v| v.to_f64()), a, b, metric)
    })?;
    if args.out.is_none() {
        print_csv(matrix.view())?;
    }
    Ok(())
}
