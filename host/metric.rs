//! The measures and their validated parameters.

use crate::{Error, Result};

/// Dynamic Time Warping: squared Euclidean local cost, the value is the
/// accumulated sum (no square root), with an optional Sakoe-Chiba band.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Dtw {
    band: Option<usize>,
}

impl Dtw {
    /// DTW with no band.
    pub fn new() -> Self {
        Self { band: None }
    }

    /// DTW with a Sakoe-Chiba band of `radius` samples. For series of lengths
    /// `n` and `m`, sample `i` of the first may meet sample `j` of the second
    /// when `i - radius - max(0, n - m) <= j <= i + radius + max(0, m - n)`:
    /// the classic `|i - j| <= radius` for equal lengths, widened by the
    /// length difference otherwise so that a warping path always exists (the
    /// definition of tslearn's `sakoe_chiba_mask`). Radius 0 with equal
    /// lengths is the squared Euclidean distance.
    pub fn with_band(radius: usize) -> Self {
        Self { band: Some(radius) }
    }

    /// The band radius, if any.
    pub fn band(&self) -> Option<usize> {
        self.band
    }
}

/// Soft-DTW (Cuturi & Blondel 2017) with squared Euclidean cost, an
/// optional Sakoe-Chiba band, and optionally as the soft-DTW divergence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftDtw {
    gamma: f64,
    band: Option<usize>,
    divergence: bool,
}

impl SoftDtw {
    /// Soft-DTW with smoothing `gamma > 0` (finite), no band.
    pub fn new(gamma: f64) -> Result<Self> {
        if !(gamma > 0.0 && gamma.is_finite()) {
            return Err(Error::InvalidParameter {
                name: "gamma",
                value: gamma,
                requirement: "must be finite and > 0",
            });
        }
        Ok(Self {
            gamma,
            band: None,
            divergence: false,
        })
    }

    /// The same with a Sakoe-Chiba band of `radius` samples, defined as
    /// for DTW ([`Dtw::with_band`]): cells outside are excluded from every
    /// alignment, in the value and in the gradient.
    pub fn with_band(self, radius: usize) -> Self {
        Self {
            band: Some(radius),
            ..self
        }
    }

    /// The same as the soft-DTW divergence (Blondel, Mensch & Vert 2021):
    /// `D(x, y) = sdtw(x, y) - (sdtw(x, x) + sdtw(y, y)) / 2`, which is 0
    /// for `x = y` (Soft-DTW itself is not, and can be negative).
    pub fn divergence(self) -> Self {
        Self {
            divergence: true,
            ..self
        }
    }

    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The band radius, if any.
    pub fn band(&self) -> Option<usize> {
        self.band
    }

    /// Whether this is the divergence.
    pub fn is_divergence(&self) -> bool {
        self.divergence
    }
}

/// Time Warp Edit Distance (Marteau 2009).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Twed {
    nu: f64,
    lambda: f64,
    degree: f64,
}

impl Twed {
    /// TWED with stiffness `nu >= 0`, deletion penalty `lambda >= 0` and the
    /// Lp norm of `degree >= 1` between samples, all finite.
    pub fn new(nu: f64, lambda: f64, degree: f64) -> Result<Self> {
        let check = |name, value: f64, ok: bool, requirement| {
            if ok && value.is_finite() {
                Ok(())
            } else {
                Err(Error::InvalidParameter {
                    name,
                    value,
                    requirement,
                })
            }
        };
        check("nu", nu, nu >= 0.0, "must be finite and >= 0")?;
        check("lambda", lambda, lambda >= 0.0, "must be finite and >= 0")?;
        check("degree", degree, degree >= 1.0, "must be finite and >= 1")?;
        Ok(Self { nu, lambda, degree })
    }

    pub fn nu(&self) -> f64 {
        self.nu
    }
    pub fn lambda(&self) -> f64 {
        self.lambda
    }
    pub fn degree(&self) -> f64 {
        self.degree
    }
}

impl Default for Twed {
    /// `nu = 0.001`, `lambda = 1`, `degree = 2`: aeon's defaults for TWE.
    fn default() -> Self {
        Self {
            nu: 0.001,
            lambda: 1.0,
            degree: 2.0,
        }
    }
}

/// A measure with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Metric {
    Dtw(Dtw),
    SoftDtw(SoftDtw),
    Twed(Twed),
}

impl Metric {
    /// `"dtw"`, `"soft_dtw"` or `"twed"`: the prefix of its kernels' names.
    pub fn name(&self) -> &'static str {
        match self {
            Metric::Dtw(_) => "dtw",
            Metric::SoftDtw(_) => "soft_dtw",
            Metric::Twed(_) => "twed",
        }
    }

    /// Whether `d(x, y) = d(y, x)` for every pair, so a batch against itself
    /// needs only the upper triangle. True of all three measures.
    pub fn is_symmetric(&self) -> bool {
        true
    }
}

impl From<Dtw> for Metric {
    fn from(m: Dtw) -> Self {
        Metric::Dtw(m)
    }
}
impl From<SoftDtw> for Metric {
    fn from(m: SoftDtw) -> Self {
        Metric::SoftDtw(m)
    }
}
impl From<Twed> for Metric {
    fn from(m: Twed) -> Self {
        Metric::Twed(m)
    }
}
