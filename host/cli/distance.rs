//! `timewarp distance`: the distance matrix, as CSV on stdout or a file.

use super::plot::{self, HeatMap, PlotArgs, MAX_HEATMAP_SIDE};
use super::Target;
use super::{
    check_output_path, compute_matrix, print_csv, write_output, ComputeArgs, Failure, Input,
    MetricArgs, VariantArg,
};
use ndarray::Array2;
use ndarray_npy::WritableElement;
use std::path::{Path, PathBuf};
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
DTW and Soft-DTW use the squared Euclidean local cost with no square root.";

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

pub fn run(args: Args) -> Result<(), Failure> {
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
    if args.plot.plot.is_some() {
        plot::check_plot_limit("A (rows)", a.data.series.len(), MAX_HEATMAP_SIDE)?;
        let columns = b.as_ref().unwrap_or(&a).data.series.len();
        plot::check_plot_limit("B (columns)", columns, MAX_HEATMAP_SIDE)?;
    }
    let backend = args.compute.backend()?;
    let out = args.out.as_deref();
    let matrix = match args.compute.precision {
        Precision::F32 => emit::<f32>(&a, b.as_ref(), metric, backend, variant, out)?,
        Precision::F64 => emit::<f64>(&a, b.as_ref(), metric, backend, variant, out)?,
    };
    args.plot
        .save_with(|| heat_map(matrix, &a, b.as_ref(), metric))
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

/// Computes the whole matrix in precision `T`, writes it, and returns it
/// (in f64, for the plot).
fn emit<T: Float + WritableElement>(
    a: &Input,
    b: Option<&Input>,
    metric: Metric,
    backend: Target,
    variant: Option<Variant>,
    out: Option<&Path>,
) -> Result<Array2<f64>, Failure> {
    let matrix = compute_matrix::<T>(a, b, metric, backend, variant)?;
    match out {
        Some(path) => write_output(path, matrix.view())?,
        None => print_csv(matrix.view())?,
    }
    Ok(matrix.mapv(|v| v.to_f64()))
}
