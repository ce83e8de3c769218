//! Bad parameters and bad input give typed errors, never panics or silent
//! wrong answers.

use ndarray::{array, Array1, Array2, Array3};
use timewarp::{
    distance, distance_matrix, gpu, soft_dtw_gradient, ComputeOptions, Device, Dtw, Error,
    SeriesSet, SoftDtw, Twed,
};

fn invalid_parameter(result: Result<impl std::fmt::Debug, Error>, expected_name: &str) {
    match result {
        Err(Error::InvalidParameter { name, .. }) => assert_eq!(name, expected_name),
        other => panic!("expected InvalidParameter({expected_name}), got {other:?}"),
    }
}

fn invalid_input(result: Result<impl std::fmt::Debug, Error>, fragment: &str) {
    match result {
        Err(Error::InvalidInput(message)) => {
            assert!(message.contains(fragment), "{message:?} lacks {fragment:?}")
        }
        other => panic!("expected InvalidInput containing {fragment:?}, got {other:?}"),
    }
}

#[test]
fn parameters_outside_their_domain() {
    for gamma in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        invalid_parameter(SoftDtw::new(gamma), "gamma");
    }
    invalid_parameter(Twed::new(-0.1, 1.0, 2.0), "nu");
    invalid_parameter(Twed::new(f64::NAN, 1.0, 2.0), "nu");
    invalid_parameter(Twed::new(0.1, -1.0, 2.0), "lambda");
    invalid_parameter(Twed::new(0.1, f64::INFINITY, 2.0), "lambda");
    invalid_parameter(Twed::new(0.1, 1.0, 0.5), "degree");
    invalid_parameter(Twed::new(0.1, 1.0, f64::NAN), "degree");
    assert!(SoftDtw::new(1e-300).is_ok());
    assert!(Twed::new(0.0, 0.0, 1.0).is_ok());
}

#[test]
fn empty_batches_and_series() {
    invalid_input(
        SeriesSet::<f64>::from_univariate(Array2::zeros((0, 5)).view()),
        "no series",
    );
    invalid_input(
        SeriesSet::<f64>::from_univariate(Array2::zeros((3, 0)).view()),
        "series 0 is empty",
    );
    invalid_input(
        SeriesSet::<f64>::from_multivariate(Array3::zeros((2, 4, 0)).view()),
        "0 dimensions",
    );
    let empty = Array2::<f64>::zeros((0, 1));
    let one = Array2::<f64>::zeros((4, 1));
    invalid_input(
        SeriesSet::from_series([one.view(), empty.view()]),
        "series 1 is empty",
    );
    invalid_input(
        distance(one.view(), empty.view(), Dtw::new().into()),
        "empty",
    );
}

#[test]
fn non_finite_values() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let batch = array![[0.0, 1.0], [2.0, bad]];
        invalid_input(
            SeriesSet::from_univariate(batch.view()),
            "series 1, sample 1",
        );
    }
    let f32_batch = array![[0.0f32, f32::NAN]];
    invalid_input(
        SeriesSet::from_univariate(f32_batch.view()),
        "must be finite",
    );
}

#[test]
fn values_that_do_not_fit_the_precision() {
    let set = SeriesSet::from_univariate(array![[1e300, 0.0]].view()).unwrap();
    invalid_input(set.cast::<f32>(), "does not fit in f32");
}

#[test]
fn mismatched_dimensions() {
    let three = SeriesSet::from_multivariate(Array3::<f64>::ones((2, 5, 3)).view()).unwrap();
    let two = SeriesSet::from_multivariate(Array3::<f64>::ones((2, 5, 2)).view()).unwrap();
    let result = distance_matrix(
        &three,
        Some(&two),
        Dtw::new().into(),
        &ComputeOptions::on(Device::Cpu),
    );
    assert!(
        matches!(
            result,
            Err(Error::DimensionMismatch {
                first: 3,
                second: 2
            })
        ),
        "{result:?}"
    );
    let ragged_dims = [Array2::<f64>::ones((3, 2)), Array2::<f64>::ones((3, 1))];
    invalid_input(
        SeriesSet::from_series(ragged_dims.iter().map(|s| s.view())),
        "series 1 has 1 dimensions",
    );
    let x = Array2::<f64>::ones((3, 2));
    let y = Array2::<f64>::ones((3, 1));
    assert!(matches!(
        soft_dtw_gradient(x.view(), y.view(), SoftDtw::new(1.0).unwrap()),
        Err(Error::DimensionMismatch { .. })
    ));
}

#[test]
fn bad_timestamps() {
    let set =
        || SeriesSet::from_univariate(array![[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]].view()).unwrap();
    let good = Array1::from(vec![0.0, 1.0, 2.5]);
    let decreasing = Array1::from(vec![0.0, 2.0, 1.0]);
    let short = Array1::from(vec![0.0, 1.0]);
    let nan = Array1::from(vec![0.0, f64::NAN, 1.0]);
    invalid_input(
        set().with_timestamps([good.view(), decreasing.view()]),
        "non-decreasing",
    );
    invalid_input(
        set().with_timestamps([good.view(), nan.view()]),
        "non-decreasing",
    );
    invalid_input(
        set().with_timestamps([good.view(), short.view()]),
        "2 values for a series of 3",
    );
    invalid_input(
        set().with_timestamps([good.view()]),
        "1 timestamp arrays for 2 series",
    );
    invalid_input(
        set().with_timestamps([good.view(), good.view(), good.view()]),
        "timestamps of series 2",
    );
    assert!(set().with_timestamps([good.view(), good.view()]).is_ok());
}

/// f32 squares of 1e20 overflow: an error, not an infinite "distance".
#[test]
fn overflow_is_an_error() {
    let set = SeriesSet::from_univariate(array![[1e20f32, -1e20], [-1e20, 1e20]].view()).unwrap();
    let result = distance_matrix(
        &set,
        None,
        Dtw::new().into(),
        &ComputeOptions::on(Device::Cpu),
    );
    assert!(
        matches!(result, Err(Error::Overflow { precision: "f32" })),
        "{result:?}"
    );
    let message = result.unwrap_err().to_string();
    assert!(message.contains("use f64 or rescale the data"), "{message}");
    // In f64 the advice is to rescale only.
    let set64 =
        SeriesSet::from_univariate(array![[1e160, -1e160], [-1e160, 1e160]].view()).unwrap();
    let result = distance_matrix(
        &set64,
        None,
        Dtw::new().into(),
        &ComputeOptions::on(Device::Cpu),
    );
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("overflowed f64")
            && message.ends_with("rescale the data")
            && !message.contains("use f64"),
        "{message}"
    );
    if crate::common::gpu_available("overflow_is_an_error (GPU part)") {
        let result = distance_matrix(
            &set,
            None,
            Dtw::new().into(),
            &ComputeOptions::on(Device::Gpu),
        );
        assert!(
            matches!(result, Err(Error::Overflow { precision: "f32" })),
            "{result:?}"
        );
    }
}

/// Asking for the GPU where there is none is an error that says why; `Auto`
/// falls back to the CPU.
#[test]
fn gpu_requested_without_one() {
    if gpu::Gpu::get().is_ok() {
        crate::common::skip("gpu_requested_without_one", "a GPU is present");
        return;
    }
    let set = SeriesSet::from_univariate(array![[0.0, 1.0]].view()).unwrap();
    let result = distance_matrix(
        &set,
        None,
        Dtw::new().into(),
        &ComputeOptions::on(Device::Gpu),
    );
    match result {
        Err(Error::GpuUnavailable(reason)) => assert!(!reason.is_empty()),
        other => panic!("expected GpuUnavailable, got {other:?}"),
    }
    let auto = distance_matrix(
        &set,
        None,
        Dtw::new().into(),
        &ComputeOptions::on(Device::Auto),
    )
    .unwrap();
    assert_eq!(auto[[0, 0]], 0.0);
}

/// A GPU error keeps the driver's error as its source, for callers that
/// look at the driver's code.
#[test]
fn gpu_errors_keep_the_drivers_error() {
    use std::error::Error as _;
    use timewarp::DriverError;
    let code = cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    let error = Error::GpuOutOfMemory {
        what: "allocating device memory".into(),
        source: Some(DriverError(code)),
    };
    assert!(error.is_out_of_memory() && error.is_gpu_failure());
    let source = error.source().and_then(|s| s.downcast_ref::<DriverError>());
    assert_eq!(source, Some(&DriverError(code)));
    let host = Error::OutOfMemory {
        rows: 1 << 20,
        cols: 1 << 20,
        bytes: 1 << 43,
    };
    assert!(host.is_out_of_memory() && !host.is_gpu_failure());
    let wait = Error::DeviceWait {
        kernel: "k".into(),
        what: "w".into(),
    };
    assert!(!wait.is_gpu_failure() && !wait.is_out_of_memory());
}
