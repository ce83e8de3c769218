//! `timewarp distance`: the distance matrix, as CSV on stdout or a file.

use super::{
    check_output_path, compute_matrix, print_csv, write_output, ComputeArgs, Failure, Input,
    MetricArgs, VariantArg,
};
use ndarray_npy::WritableElement;
use std::path::{Path, PathBuf};
use timewarp::{Backend, Float, Metric, Precision, Variant};

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
}

pub fn run(args: Args) -> Result<(), Failure> {
    let metric = args.metric.metric()?;
    let variant = args.variant.for_device(args.compute.device)?;
    if let Some(out) = &args.out {
        check_output_path(out)?;
    }
    let a = Input::load(&args.a)?;
    let b = args.b.as_deref().map(Input::load).transpose()?;
    if let Some(b) = &b {
        a.check_same_dims(b)?;
    }
    let backend = args.compute.backend()?;
    let out = args.out.as_deref();
    match args.compute.precision {
        Precision::F32 => emit::<f32>(&a, b.as_ref(), metric, backend, variant, out),
        Precision::F64 => emit::<f64>(&a, b.as_ref(), metric, backend, variant, out),
    }
}

/// Computes the whole matrix in precision `T`, then writes it.
fn emit<T: Float + WritableElement>(
    a: &Input,
    b: Option<&Input>,
    metric: Metric,
    backend: Backend,
    variant: Option<Variant>,
    out: Option<&Path>,
) -> Result<(), Failure> {
    let matrix = compute_matrix::<T>(a, b, metric, backend, variant)?;
    match out {
        Some(path) => write_output(path, matrix.view()),
        None => print_csv(matrix.view()),
    }
}
