//! [`SeriesSet`]: a batch of series, equal or unequal in length, univariate
//! or multivariate, validated once when it is built.

use crate::storage::{PageLocked, Storage};
use crate::{Error, Float, Result};
use ndarray::{Array1, ArrayView1, ArrayView2, ArrayView3, Axis};
use timewarp_kernels::SetRef;

/// A batch of series of `dims`-dimensional samples, stored flat: the layout
/// the CPU backend and the GPU kernels read directly.
///
/// Every series has at least one sample, every value is finite, and
/// timestamps (if given) are finite and non-decreasing within each series.
///
/// Its values and timestamps are in ordinary memory, or page-locked
/// ([`SeriesSet::into_page_locked`]), which the GPU reads straight from;
/// a clone is in ordinary memory, and equality compares the contents.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesSet<T> {
    values: Storage<T>,
    offsets: Vec<u64>,
    times: Option<Storage<T>>,
    dims: usize,
    /// The shortest and the longest series' lengths, kept: every
    /// computation's planning asks for them, and a scan of millions of
    /// offsets per question costs milliseconds.
    lengths: (usize, usize),
}

/// The shortest and the longest of the lengths that `offsets` delimit
/// (0 and 0 for none).
fn lengths_of(offsets: &[u64]) -> (usize, usize) {
    let lengths = offsets.windows(2).map(|w| (w[1] - w[0]) as usize);
    let shortest = lengths.clone().min().unwrap_or(0);
    (shortest, lengths.max().unwrap_or(0))
}

impl<T: Float> SeriesSet<T> {
    /// A batch of univariate series of equal length: `n_series x length`.
    pub fn from_univariate(batch: ArrayView2<T>) -> Result<Self> {
        Self::from_multivariate(batch.insert_axis(Axis(2)))
    }

    /// A batch of multivariate series of equal length: `n_series x length x dims`.
    pub fn from_multivariate(batch: ArrayView3<T>) -> Result<Self> {
        let (count, len, dims) = batch.dim();
        // A contiguous batch of valid shape in one copy; anything else (and
        // every error) through `from_series`.
        let valid_shape = count > 0 && len > 0 && dims > 0 && len <= u32::MAX as usize;
        match batch.as_slice() {
            Some(values) if valid_shape && crate::float::all_finite(values) => Ok(Self {
                values: Storage::Ordinary(values.to_vec()),
                offsets: (0..=count).map(|k| (k * len) as u64).collect(),
                times: None,
                dims,
                lengths: (len, len),
            }),
            _ => Self::from_series(batch.outer_iter()),
        }
    }

    /// A ragged batch: each item is one series, `length x dims`; lengths may
    /// differ, dimensions may not.
    pub fn from_series<'a, I>(series: I) -> Result<Self>
    where
        I: IntoIterator<Item = ArrayView2<'a, T>>,
    {
        let series = series.into_iter();
        let mut values = Vec::new();
        let mut offsets = Vec::with_capacity(series.size_hint().0 + 1);
        offsets.push(0u64);
        let mut dims = None;
        for (index, s) in series.into_iter().enumerate() {
            let (len, d) = s.dim();
            if len == 0 {
                return Err(Error::InvalidInput(format!("series {index} is empty")));
            }
            // The kernels index samples in 32 bits.
            if len > u32::MAX as usize {
                return Err(Error::InvalidInput(format!(
                    "series {index} has {len} samples; at most {} are supported",
                    u32::MAX
                )));
            }
            if d == 0 {
                return Err(Error::InvalidInput(format!(
                    "series {index} has samples of 0 dimensions"
                )));
            }
            match dims {
                None => dims = Some(d),
                Some(expected) if expected != d => {
                    return Err(Error::InvalidInput(format!(
                        "series {index} has {d} dimensions, series 0 has {expected}"
                    )))
                }
                _ => {}
            }
            // Copied whole (a contiguous series in one copy), then checked;
            // the position of a bad value is found only when there is one.
            let start = values.len();
            match s.as_slice() {
                Some(slice) => values.extend_from_slice(slice),
                None => values.extend(s.iter().copied()),
            }
            if let Some(at) = values[start..].iter().position(|v| !v.is_finite()) {
                let (t, k, v) = (at / d, at % d, values[start + at]);
                return Err(Error::InvalidInput(format!(
                    "series {index}, sample {t}, dimension {k} is {v} (values must be finite)"
                )));
            }
            offsets.push(offsets.last().unwrap() + len as u64);
        }
        let dims = dims.ok_or_else(|| Error::InvalidInput("the batch has no series".into()))?;
        Ok(Self {
            values: Storage::Ordinary(values),
            lengths: lengths_of(&offsets),
            offsets,
            times: None,
            dims,
        })
    }

    /// The same batch with explicit timestamps, one array per series (TWED
    /// uses them; the other measures ignore them). Without this, sample `t`
    /// is at time `t`.
    pub fn with_timestamps<'a, I>(mut self, times: I) -> Result<Self>
    where
        I: IntoIterator<Item = ArrayView1<'a, T>>,
    {
        let mut all = Vec::with_capacity(self.values.len() / self.dims);
        let mut count = 0;
        for (index, t) in times.into_iter().enumerate() {
            if index >= self.len() || t.len() != self.series_len(index) {
                return Err(Error::InvalidInput(format!(
                    "timestamps of series {index}: {} values for a series of {}",
                    t.len(),
                    if index < self.len() {
                        self.series_len(index)
                    } else {
                        0
                    }
                )));
            }
            let mut previous = None;
            for (k, &v) in t.iter().enumerate() {
                if !v.is_finite() || previous.is_some_and(|p| v < p) {
                    return Err(Error::InvalidInput(format!(
                        "timestamp {k} of series {index} is {v}: timestamps must be finite and non-decreasing"
                    )));
                }
                previous = Some(v);
                all.push(v);
            }
            count += 1;
        }
        if count != self.len() {
            return Err(Error::InvalidInput(format!(
                "{count} timestamp arrays for {} series",
                self.len()
            )));
        }
        self.times = Some(Storage::Ordinary(all));
        Ok(self)
    }

    /// Number of series.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Always false: a batch has at least one series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimensions of each sample.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Length of series `k`.
    pub fn series_len(&self, k: usize) -> usize {
        (self.offsets[k + 1] - self.offsets[k]) as usize
    }

    /// The longest series' length.
    pub fn max_len(&self) -> usize {
        self.lengths.1
    }

    /// The shortest series' length.
    pub fn min_len(&self) -> usize {
        self.lengths.0
    }

    /// The shortest and the longest series' lengths.
    pub fn lengths(&self) -> (usize, usize) {
        self.lengths
    }

    /// Total number of samples of all series.
    pub fn total_samples(&self) -> usize {
        *self.offsets.last().unwrap() as usize
    }

    /// Series `k` as `length x dims`.
    pub fn series(&self, k: usize) -> ArrayView2<'_, T> {
        let (start, end) = (self.offsets[k] as usize, self.offsets[k + 1] as usize);
        ArrayView2::from_shape(
            (end - start, self.dims),
            &self.values[start * self.dims..end * self.dims],
        )
        .expect("offsets describe the values")
    }

    /// Timestamps of series `k`: the given ones, or `0, 1, 2, ...`.
    pub fn timestamps(&self, k: usize) -> Array1<T> {
        let (start, end) = (self.offsets[k] as usize, self.offsets[k + 1] as usize);
        match &self.times {
            Some(times) => Array1::from(times[start..end].to_vec()),
            None => (0..end - start).map(T::from_index).collect(),
        }
    }

    /// Whether explicit timestamps were given.
    pub fn has_timestamps(&self) -> bool {
        self.times.is_some()
    }

    /// The same batch in another precision (values rounded to nearest); an
    /// error if a value or timestamp does not fit (e.g. 1e100 in f32).
    pub fn cast<U: Float>(&self) -> Result<SeriesSet<U>> {
        let convert = |v: &[T], what: &str| {
            v.iter()
                .map(|x| {
                    let y = U::from_f64(x.to_f64());
                    if y.is_finite() {
                        Ok(y)
                    } else {
                        Err(Error::InvalidInput(format!(
                            "{what} {x} does not fit in {}",
                            U::NAME
                        )))
                    }
                })
                .collect::<Result<Vec<U>>>()
        };
        Ok(SeriesSet {
            values: Storage::Ordinary(convert(&self.values, "value")?),
            offsets: self.offsets.clone(),
            times: self
                .times
                .as_deref()
                .map(|t| convert(t, "timestamp").map(Storage::Ordinary))
                .transpose()?,
            dims: self.dims,
            lengths: self.lengths,
        })
    }

    /// Series `range` as its own batch (for processing in chunks), in
    /// ordinary memory.
    pub fn slice(&self, range: std::ops::Range<usize>) -> SeriesSet<T> {
        let (start, end) = (
            self.offsets[range.start] as usize,
            self.offsets[range.end] as usize,
        );
        let offsets: Vec<u64> = self.offsets[range.start..=range.end]
            .iter()
            .map(|o| o - start as u64)
            .collect();
        SeriesSet {
            values: Storage::Ordinary(self.values[start * self.dims..end * self.dims].to_vec()),
            lengths: lengths_of(&offsets),
            offsets,
            times: self
                .times
                .as_ref()
                .map(|t| Storage::Ordinary(t[start..end].to_vec())),
            dims: self.dims,
        }
    }

    /// Whether its values and timestamps (if any) are in page-locked memory
    /// ([`SeriesSet::into_page_locked`]). Timestamps added afterwards
    /// ([`SeriesSet::with_timestamps`]) are in ordinary memory, and the
    /// batch then is not page-locked until it is made so again.
    pub fn is_page_locked(&self) -> bool {
        self.values.is_page_locked() && self.times.as_ref().is_none_or(Storage::is_page_locked)
    }

    /// The same batch with its values and timestamps moved by `page_lock`
    /// (a copy into page-locked memory), those already page-locked kept.
    pub(crate) fn with_page_locked<E>(
        self,
        page_lock: impl Fn(&[T]) -> std::result::Result<PageLocked<T>, E>,
    ) -> std::result::Result<Self, E> {
        let lock = |storage: Storage<T>| match storage {
            Storage::Ordinary(values) => page_lock(&values).map(Storage::PageLocked),
            locked => Ok(locked),
        };
        Ok(SeriesSet {
            values: lock(self.values)?,
            times: self.times.map(lock).transpose()?,
            ..self
        })
    }

    /// The flat arrays: values (sample-major), offsets, timestamps.
    pub(crate) fn parts(&self) -> (&[T], &[u64], Option<&[T]>) {
        (&self.values, &self.offsets, self.times.as_deref())
    }

    /// A view the kernels' code reads, over host memory. Valid while `self` is.
    pub(crate) fn host_ref(&self) -> SetRef<T> {
        SetRef {
            values: self.values.as_ptr(),
            offsets: self.offsets.as_ptr(),
            times: self
                .times
                .as_deref()
                .map_or(std::ptr::null(), |t| t.as_ptr()),
            count: self.len() as u64,
            dims: self.dims as u64,
            uniform_len: 0,
            uniform_first: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    /// The kept lengths equal a scan of the series, for every way a set is
    /// made: ragged, equal, a slice (an empty one too), a cast.
    #[test]
    fn kept_lengths_are_the_series_lengths() {
        let scan = |set: &SeriesSet<f64>| {
            let lengths: Vec<usize> = (0..set.len()).map(|k| set.series_len(k)).collect();
            let min = lengths.iter().copied().min().unwrap_or(0);
            (min, lengths.iter().copied().max().unwrap_or(0))
        };
        let ragged: Vec<Array2<f64>> = [5, 2, 9, 2, 7]
            .iter()
            .map(|&n| Array2::from_elem((n, 2), 1.0))
            .collect();
        let set = SeriesSet::from_series(ragged.iter().map(|s| s.view())).unwrap();
        assert_eq!(set.lengths(), (2, 9));
        assert_eq!((set.min_len(), set.max_len()), scan(&set));
        for range in [0..5, 1..3, 2..3, 3..5, 4..4] {
            let part = set.slice(range.clone());
            assert_eq!(part.lengths(), scan(&part), "{range:?}");
        }
        assert_eq!(set.slice(4..4).lengths(), (0, 0));
        let equal = SeriesSet::from_univariate(Array2::<f64>::zeros((4, 6)).view()).unwrap();
        assert_eq!(equal.lengths(), (6, 6));
        assert_eq!(set.cast::<f32>().unwrap().lengths(), (2, 9));
    }
}
