//! What the tests of the device crate's drivers (run on emulated warps and
//! grids) share: a measure both as the oracle's `Metric` and as the
//! kernels' parameters, and a random pair with timestamps, its series as
//! the kernels see them and its oracle value with the allowed error.

use super::{error_scale, oracle_pair, rng, tolerance};
use ndarray::{Array1, Array2};
use rand::Rng;
use timewarp::{Dtw, Metric, SoftDtw, Twed};
use timewarp_kernels::Series;

#[derive(Clone, Copy, Debug)]
pub enum Measure {
    Dtw(Option<usize>),
    SoftDtw(f64),
    /// Soft-DTW with gamma and a Sakoe-Chiba radius.
    SoftDtwBand(f64, usize),
    Twed(f64, f64, f64),
}

impl Measure {
    pub fn metric(self) -> Metric {
        match self {
            Measure::Dtw(None) => Dtw::new().into(),
            Measure::Dtw(Some(r)) => Dtw::with_band(r).into(),
            Measure::SoftDtw(gamma) => SoftDtw::new(gamma).unwrap().into(),
            Measure::SoftDtwBand(gamma, r) => SoftDtw::new(gamma).unwrap().with_band(r).into(),
            Measure::Twed(nu, lambda, degree) => Twed::new(nu, lambda, degree).unwrap().into(),
        }
    }
}

/// Evaluates `$body` with `$p` bound to the kernels' parameters of
/// `$measure` (f64), whose type differs between the measures.
#[allow(unused_macros)] // only the driver tests use it
macro_rules! with_params {
    ($measure:expr, |$p:ident| $body:expr) => {
        match $measure {
            crate::common::driver::Measure::Dtw(band) => {
                let $p = timewarp_kernels::DtwParams::new(band);
                $body
            }
            crate::common::driver::Measure::SoftDtw(gamma) => {
                let $p = timewarp_kernels::SoftDtwParams::new(gamma);
                $body
            }
            crate::common::driver::Measure::SoftDtwBand(gamma, radius) => {
                let $p = timewarp_kernels::SoftDtwParams::new(gamma).with_band(Some(radius));
                $body
            }
            crate::common::driver::Measure::Twed(nu, lambda, degree) => {
                let $p = timewarp_kernels::TwedParams::new(nu, lambda, degree);
                $body
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use with_params;

/// Two random series (N(0, 1) values) with random increasing timestamps.
pub struct Pair {
    pub a: Array2<f64>,
    pub b: Array2<f64>,
    pub ta: Array1<f64>,
    pub tb: Array1<f64>,
}

impl Pair {
    pub fn random(seed: u64, n: usize, m: usize, dims: usize) -> Pair {
        let mut rng = rng(seed);
        let mut times = |len: usize| {
            let mut t = 0.0;
            Array1::from_iter((0..len).map(|_| {
                t += rng.random_range(0.2..2.0);
                t
            }))
        };
        let (ta, tb) = (times(n), times(m));
        let mut rng = super::rng(seed + 1000);
        let a = super::random_series(&mut rng, n, dims, 1.0);
        let b = super::random_series(&mut rng, m, dims, 1.0);
        Pair { a, b, ta, tb }
    }

    /// The two series as the kernels see them.
    pub fn series(&self) -> (Series<f64>, Series<f64>) {
        let view = |x: &Array2<f64>, t: &Array1<f64>| Series {
            values: x.as_ptr(),
            times: t.as_ptr(),
            len: x.nrows(),
            dims: x.ncols(),
        };
        (view(&self.a, &self.ta), view(&self.b, &self.tb))
    }

    /// The oracle's value and the allowed error (`tolerance`, f64).
    pub fn oracle(&self, measure: Measure) -> (f64, f64) {
        let metric = measure.metric();
        let value = oracle_pair(self.a.view(), &self.ta, self.b.view(), &self.tb, metric);
        let bound = tolerance::<f64>(self.a.nrows(), self.b.nrows(), self.a.ncols())
            * error_scale(self.a.view(), self.b.view(), value, metric);
        (value, bound)
    }
}

pub fn assert_close(context: &str, got: f64, (expected, bound): (f64, f64)) {
    assert!(
        (got - expected).abs() <= bound,
        "{context}: got {got:e}, oracle {expected:e}, |diff| {:e} > {bound:e}",
        (got - expected).abs()
    );
}
