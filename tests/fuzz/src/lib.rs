//! What every fuzz target checks: parsing `bytes` as a file called `name`
//! (the extension picks the loader) returns, never panics, and a data set it
//! returns is well-formed and converts to a `SeriesSet` in both precisions.

use std::path::Path;
use timewarp::formats::parse_bytes;
use timewarp::Error;

/// Parse `bytes` as the file `name`; on success, check the data set and
/// convert it to `f64` and `f32`. Errors are fine; a panic (including a
/// failed check here) is a bug.
pub fn check(name: &str, bytes: &[u8]) {
    let Ok(data) = parse_bytes(Path::new(name), bytes) else {
        return;
    };

    // What the loaders promise: at least one series, all with the same
    // (non-zero) dimensions, none empty, all values finite, and one label a
    // series when there are labels.
    assert!(!data.is_empty(), "a parsed data set has no series");
    let dims = data.dims();
    assert!(dims > 0, "series of 0 dimensions");
    for (i, s) in data.series.iter().enumerate() {
        assert_eq!(s.ncols(), dims, "series {i}: dimensions differ");
        assert!(s.nrows() > 0, "series {i} is empty");
        assert!(
            s.iter().all(|v| v.is_finite()),
            "series {i}: a value is not finite"
        );
    }
    if let Some(labels) = &data.labels {
        assert_eq!(labels.len(), data.len(), "one label a series");
    }

    // Every parsed data set is a valid f64 batch, with the same values.
    let set = data
        .to_series_set::<f64>()
        .unwrap_or_else(|e| panic!("to_series_set::<f64> failed: {e}"));
    assert_eq!((set.len(), set.dims()), (data.len(), dims));
    for (i, s) in data.series.iter().enumerate() {
        assert_eq!(set.series(i), s.view(), "series {i} changed");
    }

    // In f32 it fails exactly when a value overflows f32.
    let overflows = data
        .series
        .iter()
        .any(|s| s.iter().any(|&v| (v as f32).is_infinite()));
    match data.to_series_set::<f32>() {
        Ok(set) => {
            assert!(!overflows, "an f32 overflow was not reported");
            assert_eq!((set.len(), set.dims()), (data.len(), dims));
        }
        Err(Error::InvalidInput(message)) if overflows => {
            assert!(message.contains("overflows f32"), "{message}");
        }
        Err(e) => panic!("to_series_set::<f32> failed: {e}"),
    }
}
