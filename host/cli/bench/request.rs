//! The arguments of `timewarp bench` checked before any work ([`request`]):
//! the measures, the workload and the [`Plan`]; then the cases' data
//! ([`cases`]), generated or read from `--file`.

use super::super::memory::check_fits;
use super::super::{check_variants_apply, counted, resolve, ComputeArgs, Failure, MetricKind};
use super::report::Mode;
use super::{variants_for, Args, Case, DataKind, Plan, VariantItem, Variants};
use std::path::Path;
use timewarp::data::{cbf, random_normal};
use timewarp::{formats, GpuSet};

/// What a run times, its arguments checked.
pub struct Request {
    pub metrics: Vec<MetricKind>,
    pub mode: Mode,
    /// References per generated case.
    pub count: usize,
    /// Queries per generated case.
    pub queries: usize,
    pub plan: Plan,
}

/// The arguments checked, each usage error before any work.
pub fn request(args: &Args) -> Result<Request, Failure> {
    check_numbers(args)?;
    let metrics = if args.metric.is_empty() {
        MetricKind::ALL.to_vec()
    } else {
        args.metric.clone()
    };
    check_variants_apply(!args.variant.is_empty(), args.compute.device)?;
    let mode = workload_mode(args, &metrics)?;
    let gpus = timed_gpus(args)?;
    let count = args.count.unwrap_or(if gpus.is_some() { 256 } else { 64 });
    let queries = if mode == Mode::Matrix {
        args.queries.unwrap_or(count)
    } else {
        count
    };
    if queries == 0 {
        return Err(Failure::usage("--queries must be at least 1"));
    }
    check_band(args.band, &metrics)?;
    Ok(Request {
        metrics,
        mode,
        count,
        queries,
        plan: Plan::of(args, gpus),
    })
}

/// The counts and the limit are positive.
fn check_numbers(args: &Args) -> Result<(), Failure> {
    if args.lengths.contains(&0) || args.count == Some(0) || args.repeats == 0 {
        return Err(Failure::usage(
            "--lengths, --count and --repeats must be at least 1",
        ));
    }
    if !(args.limit_seconds > 0.0 && args.limit_seconds.is_finite()) {
        return Err(Failure::usage(
            "--limit-seconds must be a finite number > 0",
        ));
    }
    Ok(())
}

/// The workload `--paired` and `--gradient` ask for, given the measures,
/// variants and data it can be timed with.
fn workload_mode(args: &Args, metrics: &[MetricKind]) -> Result<Mode, Failure> {
    let mode = match (args.paired, args.gradient) {
        (false, _) => Mode::Matrix,
        (true, false) => Mode::Paired,
        (true, true) => Mode::PairedGradient,
    };
    if mode != Mode::Matrix
        && (metrics.iter().any(|&m| m != MetricKind::SoftDtw) || args.file.is_some())
    {
        return Err(Failure::usage(
            "--paired times Soft-DTW on generated data: use --metric soft-dtw and no --file",
        ));
    }
    let gradient_variant = |item: &VariantItem| match item {
        VariantItem::One(variant) => variants_for(Mode::PairedGradient, false).contains(variant),
        VariantItem::All => true,
    };
    if mode == Mode::PairedGradient && !args.variant.iter().all(gradient_variant) {
        return Err(Failure::usage(
            "--gradient times the warp or stencil variant (or all of them)",
        ));
    }
    if args.resident && args.file.is_some() {
        return Err(Failure::usage(
            "--resident times queries against references; --file times a set against itself",
        ));
    }
    Ok(mode)
}

/// The GPUs timed (`None`: the CPU alone), as `timewarp distance` would
/// choose them; `--resident` and `--pinned-input` need them.
fn timed_gpus(args: &Args) -> Result<Option<GpuSet>, Failure> {
    let gpus = args.compute.gpus()?;
    let timing_gpu = resolve(args.compute.device, gpus)?.is_gpu();
    for (flag, given) in [
        ("--resident", args.resident),
        ("--pinned-input", args.pinned_input),
    ] {
        if given && !timing_gpu {
            return Err(Failure::usage(format!(
                "{flag} is about copies to a GPU: it needs --device gpu, or auto with a usable GPU"
            )));
        }
    }
    Ok(timing_gpu.then_some(gpus))
}

/// `--band` is a fraction, of a measure that has a band.
fn check_band(band: Option<f64>, metrics: &[MetricKind]) -> Result<(), Failure> {
    if let Some(fraction) = band {
        if !(fraction >= 0.0 && fraction.is_finite()) {
            return Err(Failure::usage("--band must be a finite fraction >= 0"));
        }
        if metrics.contains(&MetricKind::Twed) {
            return Err(Failure::usage(
                "--band applies to --metric dtw and soft-dtw (TWED has no band)",
            ));
        }
    }
    Ok(())
}

impl Plan {
    /// The plan of `args` on `gpus` (`None`: the CPU alone).
    fn of(args: &Args, gpus: Option<GpuSet>) -> Plan {
        let timing_gpu = gpus.is_some();
        Plan {
            cpu: !timing_gpu || args.with_cpu,
            cpu_is_extra: timing_gpu && args.with_cpu,
            gpu: gpus,
            variants: Variants::of(&args.variant),
            resident: args.resident,
            pinned_input: args.pinned_input,
            repeats: args.repeats,
            limit_seconds: args.limit_seconds,
            precision: args.compute.precision,
        }
    }
}

/// The cases to time, each with its series length: every pair of
/// `--file`'s series, or generated queries against references at each of
/// `--lengths`. Says on stderr what they are.
pub fn cases(args: &Args, request: &Request) -> Result<Vec<(usize, Case)>, Failure> {
    let runs = counted(args.repeats, "run", "runs");
    let cpu_note = if request.plan.cpu {
        "; the CPU times about a second's worth of queries and scales up"
    } else {
        ""
    };
    let timing = format!("median of up to {runs} after a warm-up{cpu_note}");
    match &args.file {
        Some(path) => file_case(path, request.mode, &args.compute, &timing),
        None => generated_cases(args, request, &timing),
    }
}

/// Every pair of the series of `path` once, as one case.
fn file_case(
    path: &Path,
    mode: Mode,
    compute: &ComputeArgs,
    timing: &str,
) -> Result<Vec<(usize, Case)>, Failure> {
    let precision = compute.precision_name();
    let set = formats::read_dataset(path)?.to_series_set::<f64>()?;
    let n = set.len();
    check_fits(
        &format!("the {n} x {n} matrix of {} in {precision}", path.display()),
        n.checked_mul(n)
            .and_then(|cells| cells.checked_mul(compute.precision_bytes())),
        "use a file of fewer series",
    )?;
    eprintln!(
        "bench: every pair of the {} series of {} once, {precision}, {timing}",
        set.len(),
        path.display(),
    );
    let case = Case {
        queries: set,
        references: None,
        mode,
    };
    Ok(vec![(case.queries.max_len(), case)])
}

/// Seeded queries against references of each of `--lengths`, all made up
/// front once they are known to fit memory.
fn generated_cases(
    args: &Args,
    request: &Request,
    timing: &str,
) -> Result<Vec<(usize, Case)>, Failure> {
    let (queries, count) = (request.queries, request.count);
    let precision = args.compute.precision_name();
    check_fits(
        &format!(
            "the generated series and results ({} x {}, length up to {}, {precision})",
            counted(queries, "query", "queries"),
            counted(count, "reference", "references"),
            args.lengths.iter().max().unwrap_or(&0)
        ),
        generated_bytes(
            &args.lengths,
            queries,
            count,
            request.mode,
            args.compute.precision_bytes(),
        ),
        "use fewer --queries or --count, or shorter --lengths",
    )?;
    eprintln!(
        "bench: {} data, {} x {} per case, {precision}, {timing}",
        if args.data == DataKind::Cbf {
            "CBF"
        } else {
            "normal"
        },
        counted(queries, "query", "queries"),
        counted(count, "reference", "references"),
    );
    let case = |length: usize| {
        let (q, r) = match args.data {
            DataKind::Cbf => (cbf(queries, length, 1).0, cbf(count, length, 2).0),
            DataKind::Normal => (
                random_normal(queries, length, 1, 1),
                random_normal(count, length, 1, 2),
            ),
        };
        Case {
            queries: q,
            references: Some(r),
            mode: request.mode,
        }
    };
    Ok(args.lengths.iter().map(|&l| (l, case(l))).collect())
}

/// Bytes the generated cases take at once: every case's series in f64
/// (all made up front), and the largest case's copy in the precision of
/// the run (`precision` bytes a value) with its results; `None` past
/// `usize`.
fn generated_bytes(
    lengths: &[usize],
    queries: usize,
    count: usize,
    mode: Mode,
    precision: usize,
) -> Option<usize> {
    let (mut all, mut largest) = (0usize, 0usize);
    for &length in lengths {
        let samples = queries.checked_add(count)?.checked_mul(length)?;
        all = all.checked_add(samples.checked_mul(size_of::<f64>())?)?;
        let results = match mode {
            Mode::Matrix => queries.checked_mul(count)?,
            Mode::Paired => queries,
            Mode::PairedGradient => queries.checked_mul(length)?.checked_add(queries)?,
        };
        let case = samples.checked_add(results)?.checked_mul(precision)?;
        largest = largest.max(case);
    }
    all.checked_add(largest)
}
