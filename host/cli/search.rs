//! `timewarp search`: the best places of a query in a long series.

use super::output::check_destination;
use super::plot::{PlotArgs, SearchFigure};
use super::{device_parser, print, Failure, Outputs};
use ndarray::Array2;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use timewarp::search::{
    read_text, subsequence_alignment, subsequences, Band, SearchOptions, SearchResult, SeriesFile,
    SeriesSource,
};
use timewarp::Device;

pub const EXAMPLES: &str = "\
Examples:
  # The best match of a query of 128 samples in a long recording, band 5%
  timewarp search query.txt ecg.f64 --band 0.05

  # The 5 best places at least 100 samples apart, as CSV, with a plot
  timewarp search query.npy series.npy --band 0.1 --k 5 --exclusion 100 --out matches.csv --plot matches.png

  # Without z-normalisation, Euclidean distance (band 0)
  timewarp search query.txt series.f32 --band 0 --no-znorm

  # The one best match of any length (DTW, free start and end) and its path
  timewarp search query.txt series.f64 --align --out path.csv

Files: .npy (1-D, or 2-D samples x dims, float64 or float32) and raw
little-endian .f64 / .f32 are read unit by unit as they are searched, never
whole; text files (.txt, .csv, ...: one sample a line, values separated by
spaces, tabs or commas, or all on one line) are read whole.

Output: one line a match, `start,distance`, best first (start 0-based;
distance the square root of the DTW cost, squared Euclidean local cost, as
the UCR Suite prints it), on stdout or in --out; the pruning statistics on
stderr. The search runs on the CPU (every core) or the GPU (--device gpu,
or auto from 2^21 samples a CPU thread when a GPU is usable): the same
matches and distances. The plot shows the series' first dimension with the
matches shaded and numbered, and the query over the best match.

--align: the query against its one best subsequence of any length, under
DTW with a free start and a free end in the series (tslearn's
dtw_subsequence_path; no band, no z-normalisation), on one core or the GPU
(--device gpu, or auto from 2^24 cells with a query of at least 8 samples
when a GPU is usable): the same match and path. Output: the
path's cells `i,j` (query sample i, series sample j), on stdout or in --out;
the match's start, end and cost (the square root of the accumulated squared
cost) on stderr.";

#[derive(clap::Args)]
pub struct Args {
    /// The query's file
    query: PathBuf,
    /// The long series' file
    series: PathBuf,
    /// The Sakoe-Chiba band, as the UCR Suite's R: up to 1, a fraction of
    /// the query's length; above 1, a radius in samples
    #[arg(long, default_value_t = 0.05, value_name = "R")]
    band: f64,
    /// How many matches
    #[arg(long, default_value_t = 1)]
    k: usize,
    /// Compare the values as they are (default: each subsequence and the
    /// query z-normalised)
    #[arg(long)]
    no_znorm: bool,
    /// Matches start at least M samples apart [default: half the query's length]
    #[arg(long, value_name = "M")]
    exclusion: Option<usize>,
    /// Where to compute: cpu, gpu, or auto (the GPU when one is usable and
    /// the work is large enough; see above)
    #[arg(long, default_value = "auto", value_parser = device_parser())]
    device: Device,
    /// Write the matches to PATH (.csv) instead of stdout
    #[arg(long, value_name = "PATH")]
    out: Option<PathBuf>,
    /// The one best match of any length and its path (DTW with a free
    /// start and end; no band, no z-normalisation)
    #[arg(long, conflicts_with_all = ["band", "k", "no_znorm", "exclusion", "plot"])]
    align: bool,
    #[command(flatten)]
    plot: PlotArgs,
}

/// A series from a file: binary ones read as searched, text read whole.
enum Loaded {
    File(SeriesFile),
    Memory(Array2<f64>),
}

impl Loaded {
    fn open(path: &Path) -> Result<Self, Failure> {
        let binary = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| ["npy", "f32", "f64"].contains(&e));
        Ok(match binary {
            true => Loaded::File(SeriesFile::open(path)?),
            false => Loaded::Memory(read_text(path)?),
        })
    }

    /// Runs `f` on the series as a [`SeriesSource`].
    fn with<R>(&self, f: impl FnOnce(&dyn SeriesSource) -> R) -> R {
        match self {
            Loaded::File(file) => f(file),
            Loaded::Memory(array) => f(&array.view()),
        }
    }

    /// Samples `start..start + count`, `count x dims`.
    fn rows(&self, start: usize, count: usize) -> Result<Array2<f64>, Failure> {
        self.with(|source| {
            let mut values = Vec::new();
            source.read(start, count, &mut values)?;
            Ok(Array2::from_shape_vec((count, source.dims()), values).expect("whole samples"))
        })
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    if let Some(out) = &args.out {
        check_destination(out, &["csv"], "the matches")?;
    }
    args.plot.check()?;
    if args.align {
        return align(&args);
    }
    if !(args.band >= 0.0 && args.band.is_finite()) {
        return Err(Failure::usage(format!(
            "--band {}: a fraction in [0, 1] of the query's length, or a radius above 1",
            args.band
        )));
    }
    let band = match args.band <= 1.0 {
        true => Band::Fraction(args.band),
        false => Band::Count(args.band.floor() as usize),
    };
    let query = Loaded::open(&args.query)?;
    let m = query.with(|q| q.len());
    let query = query.rows(0, m)?;
    let series = Loaded::open(&args.series)?;
    let mut options = SearchOptions::default()
        .with_band(band)
        .with_k(args.k)
        .with_znorm(!args.no_znorm)
        .on(args.device);
    options.exclusion = args.exclusion;
    let started = Instant::now();
    let found = series.with(|source| subsequences(query.view(), source, &options))?;
    let seconds = started.elapsed().as_secs_f64();
    let n = series.with(|s| s.len());
    report(&found, n, m, seconds);

    let mut csv = String::from("start,distance\n");
    for hit in &found.matches {
        let _ = writeln!(csv, "{},{}", hit.start, hit.distance);
    }
    let mut outputs = Outputs::default();
    match &args.out {
        Some(path) => outputs.write_bytes(path, csv.as_bytes())?,
        None => print(&csv)?,
    }
    if args.plot.plot.is_some() {
        let figure = figure(
            &series,
            &query,
            &found,
            n,
            !args.no_znorm,
            args.plot.plot_size.0,
        )?;
        args.plot.write_with(&mut outputs, || figure)?;
    }
    outputs.commit()
}

/// `--align`: the path on stdout or in `--out`, the match on stderr.
fn align(args: &Args) -> Result<(), Failure> {
    let query = Loaded::open(&args.query)?;
    let query = query.rows(0, query.with(|q| q.len()))?;
    let series = Loaded::open(&args.series)?;
    let started = Instant::now();
    let found = series.with(|source| subsequence_alignment(query.view(), source, args.device))?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "match: start {}, end {}, cost {} (series {}, query {}); time: {seconds:.3} s",
        found.start,
        found.end,
        found.cost,
        series.with(|s| s.len()),
        query.nrows()
    );
    let mut csv = String::from("i,j\n");
    for (i, j) in &found.path {
        let _ = writeln!(csv, "{i},{j}");
    }
    let mut outputs = Outputs::default();
    match &args.out {
        Some(path) => outputs.write_bytes(path, csv.as_bytes())?,
        None => print(&csv)?,
    }
    outputs.commit()
}

/// The pruning statistics and the time, on stderr.
fn report(found: &SearchResult, n: usize, m: usize, seconds: f64) {
    let s = &found.stats;
    let share = |count: u64| 100.0 * count as f64 / s.candidates.max(1) as f64;
    eprintln!(
        "search: {} candidates (series {n}, query {m}), band radius {}, exclusion {}",
        s.candidates, found.radius, found.exclusion
    );
    eprintln!(
        "pruned by LB_Kim {:.2}%, LB_Keogh (query envelope) {:.2}%, LB_Keogh (data envelope) {:.2}%; \
         DTW computed {:.2}% (abandoned early {:.2}%)",
        share(s.kim),
        share(s.keogh_query),
        share(s.keogh_data),
        share(s.dtw),
        share(s.abandoned)
    );
    eprintln!(
        "time: {seconds:.3} s ({:.3e} points a second)",
        n as f64 / seconds.max(1e-9)
    );
}

/// The plot: the series' first dimension in buckets (read again, unit by
/// unit), the matches, the query over the best match.
fn figure(
    series: &Loaded,
    query: &Array2<f64>,
    found: &SearchResult,
    n: usize,
    znorm: bool,
    width: u32,
) -> Result<SearchFigure, Failure> {
    let m = query.nrows();
    let per = n.div_ceil(width.max(1) as usize * 2).max(1);
    let mut buckets = Vec::new();
    let mut at = 0;
    while at < n {
        let count = (per * 4096).min(n - at);
        let rows = series.rows(at, count)?;
        for (k, chunk) in rows.column(0).to_vec().chunks(per).enumerate() {
            let lo = chunk.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = chunk.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            buckets.push((at + k * per, lo, hi));
        }
        at += count;
    }
    let prepare = |x: Vec<f64>| if znorm { znormalised(&x) } else { x };
    let (query, best) = match found.matches.first() {
        Some(best) => (
            prepare(query.column(0).to_vec()),
            prepare(series.rows(best.start, m)?.column(0).to_vec()),
        ),
        None => (Vec::new(), Vec::new()),
    };
    Ok(SearchFigure {
        title: format!(
            "{} best match(es) of the query ({m} samples)",
            found.matches.len()
        ),
        buckets,
        length: n,
        m,
        starts: found.matches.iter().map(|hit| hit.start).collect(),
        query,
        best,
    })
}

/// For the plot only: `(x - mean) / std`, zeros for a constant series.
fn znormalised(x: &[f64]) -> Vec<f64> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let std = (x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt();
    x.iter()
        .map(|v| if std > 0.0 { (v - mean) / std } else { 0.0 })
        .collect()
}
