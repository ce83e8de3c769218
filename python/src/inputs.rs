//! What the Python layer passes, as the crate takes it: batches of either
//! precision, the device, the measure and its parameters; and the one
//! f32/f64 dispatch, [`dispatch!`], that every entry point goes through.

use crate::errors::{invalid, py_error};
use numpy::{PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;
use pyo3::types::PyList;
use timewarp::{ComputeOptions, Device, Dtw, Float, GpuSet, Metric, SeriesSet, SoftDtw, Twed};

/// A value in one of the two precisions: a batch, a resident set, or
/// (`PerPrecision<(), ()>`) a precision alone.
pub enum PerPrecision<A, B> {
    F32(A),
    F64(B),
}

impl<A, B> PerPrecision<A, B> {
    /// `"float32"` or `"float64"`, as numpy names them.
    pub fn precision(&self) -> &'static str {
        match self {
            PerPrecision::F32(_) => "float32",
            PerPrecision::F64(_) => "float64",
        }
    }
}

/// A batch of series in one of the two precisions.
pub type Batch = PerPrecision<SeriesSet<f32>, SeriesSet<f64>>;

/// The f32/f64 dispatch: `$body` compiled for each precision, with `T` the
/// float type. `dispatch!(value, |x| body)` binds `x` to the value inside
/// a [`PerPrecision`]; `dispatch!(first, second, |x, y| body, |a, b|
/// mixed)` binds both where their precisions agree, else evaluates `mixed`
/// with the two values as they came.
macro_rules! dispatch {
    ($value:expr, |$x:pat_param| $body:expr) => {
        match $value {
            $crate::inputs::PerPrecision::F32($x) => {
                #[allow(dead_code)]
                type T = f32;
                $body
            }
            $crate::inputs::PerPrecision::F64($x) => {
                #[allow(dead_code)]
                type T = f64;
                $body
            }
        }
    };
    ($first:expr, $second:expr, |$x:pat_param, $y:pat_param| $body:expr, |$a:pat_param, $b:pat_param| $mixed:expr) => {
        match ($first, $second) {
            ($crate::inputs::PerPrecision::F32($x), $crate::inputs::PerPrecision::F32($y)) => {
                #[allow(dead_code)]
                type T = f32;
                $body
            }
            ($crate::inputs::PerPrecision::F64($x), $crate::inputs::PerPrecision::F64($y)) => {
                #[allow(dead_code)]
                type T = f64;
                $body
            }
            ($a, $b) => $mixed,
        }
    };
}
pub(crate) use dispatch;

/// `"float32"` or `"float64"`: the precision alone, for [`dispatch!`].
pub fn precision(name: &str) -> PyResult<PerPrecision<(), ()>> {
    match name {
        "float32" => Ok(PerPrecision::F32(())),
        "float64" => Ok(PerPrecision::F64(())),
        other => Err(invalid(format!(
            "precision {other:?}: expected float32 or float64"
        ))),
    }
}

/// Two values the Python layer should have given one precision.
pub fn mixed_precisions<A, B, C, D>(
    first: (&str, &PerPrecision<A, B>),
    second: (&str, &PerPrecision<C, D>),
) -> PyErr {
    invalid(format!(
        "{} ({}) and {} ({}) differ in precision: give both the same one",
        first.0,
        first.1.precision(),
        second.0,
        second.1.precision()
    ))
}

/// `SeriesSet` from a normalised batch: a 3-D array or a list of 2-D
/// arrays, float32 or float64.
pub fn batch(object: &Bound<'_, PyAny>) -> PyResult<Batch> {
    if let Ok(array) = object.extract::<PyReadonlyArray3<'_, f32>>() {
        return SeriesSet::from_multivariate(array.as_array())
            .map(Batch::F32)
            .map_err(py_error);
    }
    if let Ok(array) = object.extract::<PyReadonlyArray3<'_, f64>>() {
        return SeriesSet::from_multivariate(array.as_array())
            .map(Batch::F64)
            .map_err(py_error);
    }
    let list = object
        .cast::<PyList>()
        .map_err(|_| invalid("expected a 3-D float32/float64 array or a list of 2-D arrays"))?;
    if list.is_empty() {
        return Err(invalid("the batch has no series"));
    }
    let first = list.get_item(0)?;
    if first.extract::<PyReadonlyArray2<'_, f32>>().is_ok() {
        series_list::<f32>(list).map(Batch::F32)
    } else {
        series_list::<f64>(list).map(Batch::F64)
    }
}

fn series_list<T: Float + numpy::Element>(list: &Bound<'_, PyList>) -> PyResult<SeriesSet<T>> {
    let arrays = list
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.extract::<PyReadonlyArray2<'_, T>>().map_err(|_| {
                invalid(format!(
                    "series {index} is not a 2-D {} array like the first",
                    T::NAME
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    SeriesSet::from_series(arrays.iter().map(|a| a.as_array())).map_err(py_error)
}

/// `"auto"`, `"cpu"`, `"gpu"` or `"gpu:N"` (`"cuda"` alike): the device,
/// and the GPUs (every usable one, or GPU `N`).
pub fn device(name: &str) -> PyResult<(Device, GpuSet)> {
    match name {
        "auto" => return Ok((Device::Auto, GpuSet::all())),
        "cpu" => return Ok((Device::Cpu, GpuSet::all())),
        "gpu" | "cuda" => return Ok((Device::Gpu, GpuSet::all())),
        _ => {}
    }
    let ordinal = name
        .strip_prefix("gpu:")
        .or_else(|| name.strip_prefix("cuda:"))
        .and_then(|n| n.parse::<usize>().ok());
    match ordinal {
        Some(ordinal) => Ok((Device::Gpu, GpuSet::one(ordinal).map_err(py_error)?)),
        None => Err(invalid(format!(
            "device {name:?}: expected \"auto\", \"cpu\", \"gpu\" or \"gpu:N\""
        ))),
    }
}

pub fn options(device_name: &str) -> PyResult<ComputeOptions> {
    let (device, gpus) = device(device_name)?;
    Ok(ComputeOptions::on(device).with_gpus(gpus))
}

/// The measure from its name and parameters, as the Python API names them.
#[allow(clippy::too_many_arguments)]
pub fn metric(
    name: &str,
    gamma: f64,
    band: Option<i64>,
    nu: f64,
    lmbda: f64,
    degree: f64,
    divergence: bool,
) -> PyResult<Metric> {
    let band = match band {
        None => None,
        Some(radius) if radius >= 0 => Some(radius as usize),
        Some(radius) => {
            return Err(invalid(format!(
                "band = {radius}: the Sakoe-Chiba radius must be >= 0"
            )))
        }
    };
    let metric = match name {
        "dtw" => Metric::Dtw(band.map_or_else(Dtw::new, Dtw::with_band)),
        "soft_dtw" | "softdtw" | "soft-dtw" => {
            let soft = SoftDtw::new(gamma).map_err(py_error)?;
            let soft = match band {
                Some(radius) => soft.with_band(radius),
                None => soft,
            };
            Metric::SoftDtw(if divergence { soft.divergence() } else { soft })
        }
        "twed" => {
            if band.is_some() {
                return Err(invalid(
                    "band applies to dtw and soft_dtw; TWED has no Sakoe-Chiba band",
                ));
            }
            Metric::Twed(Twed::new(nu, lmbda, degree).map_err(py_error)?)
        }
        other => {
            return Err(invalid(format!(
                "metric {other:?}: expected \"dtw\", \"twed\" or \"soft_dtw\""
            )))
        }
    };
    if divergence && !matches!(metric, Metric::SoftDtw(_)) {
        return Err(invalid(
            "normalize=True is the soft-DTW divergence: metric must be soft_dtw",
        ));
    }
    Ok(metric)
}

/// Soft-DTW with `gamma`, `band` and (with `divergence`) the divergence.
pub fn soft_dtw(gamma: f64, band: Option<i64>, divergence: bool) -> PyResult<SoftDtw> {
    match metric("soft_dtw", gamma, band, 0.0, 0.0, 1.0, divergence)? {
        Metric::SoftDtw(soft) => Ok(soft),
        _ => unreachable!("soft_dtw names Soft-DTW"),
    }
}
