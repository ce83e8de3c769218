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
    let mut backends = Vec::new();
    if plan.cpu {
        backends.push(Backend::Cpu);
    }
    if plan.gpu.is_some() {
        match &plan.variants {
            Variants::Default => backends.push(Backend::Gpu(None)),
            Variants::Named(list) => backends.extend(list.iter().map(|&v| Backend::Gpu(Some(v)))),
            Variants::All => backends.extend(
                variants_for(case.mode, plan.resident)
                    .into_iter()
                    .map(|v| Backend::Gpu(Some(v))),
            ),
        }
    }
    let workload = format!(
        "{} length {}, {} x {}, {}",
        case.mode.label(context.metric),
        context.length,
        case.queries.len(),
        case.references
            .as_ref()
            .map_or(case.queries.len(), |r| r.len()),
        T::NAME
    );
    let mut rows = Vec::new();
    let mut cpu_seconds = None;
    for backend in backends {
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
        let all = plan.variants == Variants::All && backend != Backend::Cpu;
        let mode_name = match (backend, resident) {
            (Backend::Cpu, _) => None,
            (_, true) => Some("resident"),
            (_, false) => Some("streamed"),
        };
        let label = format!(
            "bench: {workload}, {name}{}{}",
            if all && is_default { " (default)" } else { "" },
            mode_name.map_or(String::new(), |m| format!(", {m}"))
        );
        // Named backends and the default run whatever they take.
        if !is_default && (all || backend == Backend::Cpu) {
            let runner = |probe: &Case| -> timewarp::Result<f64> {
                let batches = Batches::<T>::of(probe)?;
                let runner = Runner::new(&batches, context.measure, options, resident)?;
                let queries = &batches.queries;
                runner.run(queries)?;
                Ok(runner.run(queries)?.as_secs_f64())
            };
            // The CPU runs one query first (the warm-up), then a sample.
            let share = match (backend, &case.references) {
                (Backend::Cpu, Some(_)) => 1.0 / case.queries.len() as f64,
                _ => 1.0,
            };
            match estimate(case, share, plan.limit_seconds, runner) {
                Ok(Estimate::Over {
                    seconds,
                    probe_cells,
                    probe_seconds,
                }) => {
                    (context.say)(&format!(
                        "{label}: skipped: one run estimated at {} s (a probe of {:.3e} cells took {} ms, \
                         scaled by cells), over --limit-seconds {}",
                        three_significant_digits(seconds),
                        probe_cells,
                        three_significant_digits(probe_seconds * 1e3),
                        plan.limit_seconds
                    ));
                    continue;
                }
                Ok(_) => {}
                Err(Error::InvalidInput(reason)) if all => {
                    (context.say)(&format!("{label}: skipped: {reason}"));
                    continue;
                }
                Err(error) => return Err(error.into()),
            }
        }
        (context.say)(&format!("{label}: timing"));
        let before: Vec<GpuWork> = context.used.iter().map(|g| g.work()).collect();
        let runner = Runner::new(&batches, context.measure, options, resident);
        let timing = match runner.and_then(|r| time(&r, &batches, plan.repeats)) {
            Ok(timing) => timing,
            Err(Error::InvalidInput(reason)) if all => {
                (context.say)(&format!("{label}: skipped: {reason}"));
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        if backend == Backend::Cpu {
            cpu_seconds = Some(timing.seconds);
        }
        let gpu_shares = (backend != Backend::Cpu).then(|| {
            let cells_per_pair = case.cells() / case.pairs();
            context
                .used
                .iter()
                .zip(&before)
                .map(|(gpu, before)| {
                    let work = gpu.work().since(*before);
                    let seconds = work.time.as_secs_f64();
                    GpuShare {
                        name: gpu.name(),
                        pairs: work.pairs,
                        seconds,
                        gcups: work.pairs as f64 * cells_per_pair / seconds / 1e9,
                    }
                })
                .filter(|share| share.pairs > 0)
                .collect()
        });
        rows.push(Row {
            metric: context.metric,
            workload: case.mode,
            length: context.length,
            queries: case.queries.len(),
            count: case
                .references
                .as_ref()
                .map_or(case.queries.len(), |r| r.len()),
            cells: case.cells(),
            precision: T::NAME,
            backend: name,
            mode: mode_name,
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
