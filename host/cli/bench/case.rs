//! One case of `timewarp bench` on each backend of the run: which
//! backends, the probes that skip those estimated over the limit, the
//! timing, and the rows.

use super::super::three_significant_digits;
use super::probe::{estimate, Estimate};
use super::report::{GpuShare, Row};
use super::timing::{time, Batches, Runner};
use super::{variants_for, Case, Failure, MetricKind, Mode, Plan, Variants};
use timewarp::gpu::{Gpu, GpuWork};
use timewarp::{
    matrix_variant, resident_matrix_variant, soft_dtw_pairs_gradient_variant,
    soft_dtw_pairs_variant, ComputeOptions, Device, Error, Float, Metric, Variant,
};

/// One case and measure, and what its rows report.
pub struct CaseContext<'a> {
    pub case: &'a Case,
    pub metric: MetricKind,
    pub measure: Metric,
    pub length: usize,
    pub band: Option<usize>,
    /// The GPUs a GPU row computes on.
    pub used: &'a [&'static Gpu],
    /// Writes a progress line on stderr.
    pub say: &'a dyn Fn(&str),
    /// Shows a row as soon as it is measured (the table grows a row at a
    /// time, so a long run shows what it has).
    pub show: &'a dyn Fn(&Row) -> Result<(), Failure>,
}

/// A backend a case is timed on: the CPU, or the GPUs with a variant
/// (`None`: the library's choice).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Cpu,
    Gpu(Option<Variant>),
}

/// The rows of one case in precision `T`: each backend of `plan` timed,
/// or skipped with the reason on stderr.
pub fn bench_case<T: Float>(plan: &Plan, context: &CaseContext) -> Result<Vec<Row>, Failure> {
    let case = context.case;
    let mut batches = Batches::<T>::of(case)?;
    if plan.pinned_input {
        batches = batches.into_page_locked()?;
    }
    let gpu_options = plan
        .gpu
        .map(|gpus| ComputeOptions::on(Device::Gpu).with_gpus(gpus));
    let default = match &gpu_options {
        Some(options) => default_variant(&batches, context.measure, options, plan.resident)?,
        None => None,
    };
    let workload = format!(
        "{} length {}, {} x {}, {}",
        case.mode.label(context.metric),
        context.length,
        case.queries.len(),
        reference_count(case),
        T::NAME
    );
    let mut rows = Vec::new();
    let mut cpu_seconds = None;
    for backend in backends(plan, case.mode) {
        let setting = Setting::new(backend, plan, gpu_options, default, &workload);
        // Named backends and the default run whatever they take.
        if !setting.is_default && (setting.of_all || backend == Backend::Cpu) {
            if let Some(reason) = skip_reason::<T>(&setting, plan, context)? {
                (context.say)(&format!("{}: skipped: {reason}", setting.label));
                continue;
            }
        }
        (context.say)(&format!("{}: timing", setting.label));
        let before: Vec<GpuWork> = context.used.iter().map(|g| g.work()).collect();
        let runner = Runner::new(&batches, context.measure, setting.options, setting.resident);
        let timing = match runner.and_then(|r| time(&r, &batches, plan.repeats)) {
            Ok(timing) => timing,
            Err(Error::InvalidInput(reason)) if setting.of_all => {
                (context.say)(&format!("{}: skipped: {reason}", setting.label));
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        if backend == Backend::Cpu {
            cpu_seconds = Some(timing.seconds);
        }
        let gpu_shares = (backend != Backend::Cpu).then(|| gpu_shares(case, context.used, &before));
        rows.push(Row {
            metric: context.metric,
            workload: case.mode,
            length: context.length,
            queries: case.queries.len(),
            count: reference_count(case),
            cells: case.cells(),
            precision: T::NAME,
            backend: setting.name,
            mode: setting.mode_name,
            band: context.band,
            speedup_vs_cpu: cpu_seconds
                .filter(|_| plan.compares())
                .map(|cpu| cpu / timing.seconds),
            timing,
            pinned_input: plan.pinned_input,
            gpu_shares,
        });
        (context.show)(rows.last().expect("just pushed"))?;
    }
    Ok(rows)
}

/// The backends `plan` times a case of `mode` on, the CPU first.
fn backends(plan: &Plan, mode: Mode) -> Vec<Backend> {
    let mut backends = Vec::new();
    if plan.cpu {
        backends.push(Backend::Cpu);
    }
    if plan.gpu.is_some() {
        match &plan.variants {
            Variants::Default => backends.push(Backend::Gpu(None)),
            Variants::Named(list) => backends.extend(list.iter().map(|&v| Backend::Gpu(Some(v)))),
            Variants::All => backends.extend(
                variants_for(mode, plan.resident)
                    .into_iter()
                    .map(|v| Backend::Gpu(Some(v))),
            ),
        }
    }
    backends
}

/// References of a case (a set against itself: its series).
fn reference_count(case: &Case) -> usize {
    case.references
        .as_ref()
        .map_or(case.queries.len(), |r| r.len())
}

/// How a case is timed on one backend, and how its row and lines name it.
struct Setting {
    backend: Backend,
    /// The row's backend: `cpu`, `gpu:<variant>`, or `gpu` where the
    /// library chooses none.
    name: String,
    options: ComputeOptions,
    resident: bool,
    /// What `timewarp distance` would compute on: timed whatever it takes.
    is_default: bool,
    /// A GPU variant of `--variant all`: skipped when it cannot take the case.
    of_all: bool,
    /// The row's mode: streamed or resident; none for the CPU.
    mode_name: Option<&'static str>,
    /// The start of its lines on stderr.
    label: String,
}

impl Setting {
    /// `backend` for the case `workload` names; `default` is the variant
    /// the library chooses on `gpu_options`' GPUs.
    fn new(
        backend: Backend,
        plan: &Plan,
        gpu_options: Option<ComputeOptions>,
        default: Option<Variant>,
        workload: &str,
    ) -> Setting {
        let (name, options, resident) = match backend {
            Backend::Cpu => ("cpu".to_string(), ComputeOptions::on(Device::Cpu), false),
            Backend::Gpu(variant) => {
                let options = ComputeOptions {
                    gpu_variant: variant,
                    ..gpu_options.expect("a GPU backend has GPUs")
                };
                let chosen = variant.or(default);
                let name = chosen.map_or("gpu".to_string(), |v| format!("gpu:{v}"));
                (name, options, plan.resident)
            }
        };
        let is_default = match backend {
            Backend::Cpu => !plan.cpu_is_extra,
            Backend::Gpu(variant) => variant.is_none() || variant == default,
        };
        let of_all = plan.variants == Variants::All && backend != Backend::Cpu;
        let mode_name = match (backend, resident) {
            (Backend::Cpu, _) => None,
            (_, true) => Some("resident"),
            (_, false) => Some("streamed"),
        };
        let label = format!(
            "bench: {workload}, {name}{}{}",
            if of_all && is_default {
                " (default)"
            } else {
                ""
            },
            mode_name.map_or(String::new(), |m| format!(", {m}"))
        );
        Setting {
            backend,
            name,
            options,
            resident,
            is_default,
            of_all,
            mode_name,
            label,
        }
    }
}

/// Why the case is not timed on `setting`'s backend, if it is not: one
/// run estimated (by timed probes) over `--limit-seconds`, or, for a
/// variant of `--variant all`, a case it cannot take.
fn skip_reason<T: Float>(
    setting: &Setting,
    plan: &Plan,
    context: &CaseContext,
) -> Result<Option<String>, Failure> {
    let case = context.case;
    let runner = |probe: &Case| -> timewarp::Result<f64> {
        let batches = Batches::<T>::of(probe)?;
        let runner = Runner::new(&batches, context.measure, setting.options, setting.resident)?;
        let queries = &batches.queries;
        runner.run(queries)?;
        Ok(runner.run(queries)?.as_secs_f64())
    };
    // The CPU runs one query first (the warm-up), then a sample.
    let share = match (setting.backend, &case.references) {
        (Backend::Cpu, Some(_)) => 1.0 / case.queries.len() as f64,
        _ => 1.0,
    };
    match estimate(case, share, plan.limit_seconds, runner) {
        Ok(Estimate::Over {
            seconds,
            probe_cells,
            probe_seconds,
        }) => Ok(Some(format!(
            "one run estimated at {} s (a probe of {:.3e} cells took {} ms, scaled by cells), \
             over --limit-seconds {}",
            three_significant_digits(seconds),
            probe_cells,
            three_significant_digits(probe_seconds * 1e3),
            plan.limit_seconds
        ))),
        Ok(_) => Ok(None),
        Err(Error::InvalidInput(reason)) if setting.of_all => Ok(Some(reason)),
        Err(error) => Err(error.into()),
    }
}

/// Each GPU's share of the work done since `before` (its counters then,
/// in `used`'s order): those that computed pairs, with their busy time and
/// the time they waited for the others at the end of the calls.
fn gpu_shares(case: &Case, used: &[&'static Gpu], before: &[GpuWork]) -> Vec<GpuShare> {
    let cells_per_pair = case.cells() / case.pairs();
    used.iter()
        .zip(before)
        .map(|(gpu, before)| {
            let work = gpu.work().since(*before);
            let seconds = work.time.as_secs_f64();
            GpuShare {
                name: gpu.name(),
                pairs: work.pairs,
                seconds,
                idle_seconds: work.call.saturating_sub(work.time).as_secs_f64(),
                gcups: work.pairs as f64 * cells_per_pair / seconds / 1e9,
            }
        })
        .filter(|share| share.pairs > 0)
        .collect()
}

/// The variant the library chooses for the case on a GPU, as
/// `timewarp distance` would compute it.
fn default_variant<T: Float>(
    batches: &Batches<T>,
    metric: Metric,
    options: &ComputeOptions,
    resident: bool,
) -> Result<Option<Variant>, Failure> {
    let (queries, references) = (&batches.queries, batches.references.as_ref());
    Ok(match (batches.mode, metric, references) {
        (Mode::Matrix, _, _) if resident => Some(resident_matrix_variant(options)?),
        (Mode::Matrix, _, _) => Some(matrix_variant(queries, references, metric, options)),
        (Mode::Paired, Metric::SoftDtw(soft), Some(references)) => {
            Some(soft_dtw_pairs_variant(queries, references, soft, options)?)
        }
        (Mode::PairedGradient, Metric::SoftDtw(soft), Some(references)) => Some(
            soft_dtw_pairs_gradient_variant(queries, references, soft, options)?,
        ),
        _ => None,
    })
}
