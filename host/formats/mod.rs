//! Data files: reading time-series data sets (`.ts`, `.tsv` / `.txt`, `.csv`,
//! `.npy`) and writing matrices (`.csv`, `.npy`).
//!
//! The formats, chosen by extension (case-insensitive):
//!
//! - `.ts`: the sktime / aeon format of the UCR and UEA archives. Header
//!   lines start with `@` (keys case-insensitive), comment lines with `#`;
//!   after `@data` each line is one series, its dimensions (channels)
//!   separated by `:`, the values of a dimension by `,`, and the class label
//!   last when `@classLabel true` declares labels. Timestamps, regression
//!   targets and missing values are not supported (clear errors).
//! - `.tsv` / `.txt`: the UCR archive format, one univariate series per line,
//!   the class label first; fields separated by commas when the line has
//!   any, otherwise by runs of whitespace (tabs or spaces). Labels are kept
//!   verbatim (trimmed).
//! - `.csv`: one univariate series per line, values only, separated by
//!   commas. Lines starting with `#` are comments.
//! - `.npy`: a 2-D (`series x time`) or 3-D (`series x time x dims`) array of
//!   `float64` or `float32`. Headers longer than numpy's limit of 10,000
//!   bytes, or nesting brackets more than 4 deep, are refused.
//!
//! Text formats skip blank lines and need equal lengths except `.ts` with
//! `@equalLength false` (or no length header). Values must be finite: `?`,
//! `NaN` and infinities are errors, since no measure handles missing values.
//! Every content problem is an [`Error::Parse`] naming the line (1-based)
//! where there is one; no input makes these functions panic (the loaders are
//! fuzzed: docs/fuzzing.md).

mod csv;
mod npy;
mod text;
mod ts;
mod ucr;
mod write;

pub(crate) use npy::check_header as check_npy_header;

pub use write::{write_csv, write_matrix};

use crate::{Error, Float, Result, SeriesSet};
use ndarray::Array2;
use std::path::Path;
use text::{parse_error, shorten};

/// A data set read from a file: series (each `length x dims`, f64) and
/// optional class labels (one per series).
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    pub series: Vec<Array2<f64>>,
    pub labels: Option<Vec<String>>,
}

impl Dataset {
    /// Number of series.
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether there are no series (never the case for a data set read from
    /// a file).
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Dimensions of each sample (the same for all series; 0 when empty).
    pub fn dims(&self) -> usize {
        self.series.first().map_or(0, |s| s.ncols())
    }

    /// The series as a [`SeriesSet`] in precision `T`. Values are rounded to
    /// nearest; a finite value that overflows `T` (beyond `f32::MAX` in
    /// magnitude) is an [`Error::InvalidInput`].
    pub fn to_series_set<T: Float>(&self) -> Result<SeriesSet<T>> {
        let cast = self
            .series
            .iter()
            .enumerate()
            .map(|(index, s)| {
                let mut values = Vec::with_capacity(s.len());
                for ((t, k), &v) in s.indexed_iter() {
                    let x = T::from_f64(v);
                    if v.is_finite() && !x.is_finite() {
                        return Err(Error::InvalidInput(format!(
                            "series {index}, sample {t}, dimension {k} is {v:e}, which overflows {}",
                            T::NAME
                        )));
                    }
                    values.push(x);
                }
                Array2::from_shape_vec(s.dim(), values)
                    .map_err(|e| Error::InvalidInput(format!("series {index}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        SeriesSet::from_series(cast.iter().map(|s| s.view()))
    }
}

/// Read a data set, format by extension: `.ts`, `.tsv` / `.txt`, `.csv`,
/// `.npy` (case-insensitive).
pub fn read_dataset(path: &Path) -> Result<Dataset> {
    let format = Format::for_reading(path)?;
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, format, &bytes)
}

/// Parse a data set already in memory: [`read_dataset`] without the file.
/// The format is chosen by the extension of `path` exactly as there, and
/// `path` names the data in errors; nothing is read from it.
pub fn parse_bytes(path: &Path, bytes: &[u8]) -> Result<Dataset> {
    parse(path, Format::for_reading(path)?, bytes)
}

/// The file formats [`read_dataset`] knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Ts,
    Ucr,
    Csv,
    Npy,
}

impl Format {
    fn for_reading(path: &Path) -> Result<Self> {
        match extension(path).as_deref() {
            Some("ts") => Ok(Self::Ts),
            Some("tsv" | "txt") => Ok(Self::Ucr),
            Some("csv") => Ok(Self::Csv),
            Some("npy") => Ok(Self::Npy),
            other => Err(parse_error(
                path,
                None,
                unknown_extension(other, ".ts, .tsv, .txt, .csv or .npy"),
            )),
        }
    }
}

/// Parse the contents of a file (`path` only names it in errors).
fn parse(path: &Path, format: Format, bytes: &[u8]) -> Result<Dataset> {
    match format {
        Format::Ts => ts::parse(path, text::utf8(path, bytes)?),
        Format::Ucr => ucr::parse(path, text::utf8(path, bytes)?),
        Format::Csv => csv::parse(path, text::utf8(path, bytes)?),
        Format::Npy => npy::parse(path, bytes),
    }
}

/// The lower-case extension of `path`, if any.
fn extension(path: &Path) -> Option<String> {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
}

fn unknown_extension(extension: Option<&str>, expected: &str) -> String {
    match extension {
        Some(e) => format!("unknown extension .{}: expected {expected}", shorten(e)),
        None => format!("no file extension: expected {expected}"),
    }
}

/// Helpers the format modules' tests share.
#[cfg(test)]
mod testing {
    use super::{read_dataset, Dataset};
    use crate::{Error, Result};
    use std::path::PathBuf;

    /// Write `contents` to a file called `name` in a fresh directory.
    pub(super) fn file(name: &str, contents: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        (dir, path)
    }

    pub(super) fn read(name: &str, contents: &str) -> Result<Dataset> {
        let (_dir, path) = file(name, contents.as_bytes());
        read_dataset(&path)
    }

    /// Assert that reading gives a parse error at `line` containing `needle`.
    #[track_caller]
    pub(super) fn assert_parse_error(result: Result<Dataset>, line: Option<usize>, needle: &str) {
        match result {
            Err(Error::Parse {
                line: got, message, ..
            }) => {
                assert_eq!(got, line, "wrong line for {message:?}");
                assert!(
                    message.contains(needle),
                    "{message:?} does not contain {needle:?}"
                );
            }
            other => panic!("expected a parse error containing {needle:?}, got {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{assert_parse_error, file};
    use super::*;
    use ndarray::array;

    #[test]
    fn parse_bytes_is_read_dataset_without_the_file() {
        let cases: &[(&str, &[u8])] = &[
            ("a.ts", b"@classLabel true x\n@data\n1,2:x\n"),
            ("a.TSV", b"x\t1\t2\n"),
            ("a.txt", b"x 1 2\n"),
            ("a.csv", b"1,2\n3,4\n"),
            ("a.csv", b"1,2\n3\n"),
            ("a.npy", b"not npy"),
            ("a.foo", b"1,2\n"),
            ("noext", b"1,2\n"),
        ];
        for &(name, bytes) in cases {
            let (_dir, path) = file(name, bytes);
            let parsed = parse_bytes(&path, bytes);
            match (read_dataset(&path), &parsed) {
                (Ok(read), Ok(parsed)) => assert_eq!(&read, parsed, "{name}"),
                (Err(read), Err(parsed)) => assert_eq!(read.to_string(), parsed.to_string()),
                (read, _) => panic!("{name}: read_dataset gave {read:?}, parse_bytes {parsed:?}"),
            }
        }
        // Nothing is read from the path.
        let d = parse_bytes(Path::new("/nonexistent/dir/a.csv"), b"1,2\n").unwrap();
        assert_eq!(d.series, [array![[1.0], [2.0]]]);
    }

    /// The fuzz targets' seeds (tests/fuzz/corpus, docs/fuzzing.md) are
    /// valid files, so fuzzing starts from inputs that parse. Files without
    /// an extension are skipped: libFuzzer names the inputs it saves by
    /// their SHA-1, should a run be pointed at these folders.
    #[test]
    fn fuzz_seeds_parse() {
        let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus");
        let mut seeds = 0;
        for target in ["fuzz_ts", "fuzz_ucr", "fuzz_csv", "fuzz_npy"] {
            for entry in std::fs::read_dir(corpus.join(target)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none() {
                    continue;
                }
                let d = read_dataset(&path).unwrap_or_else(|e| panic!("{e}"));
                d.to_series_set::<f64>().unwrap();
                seeds += 1;
            }
        }
        assert!(seeds >= 12, "{seeds} seeds");
    }

    #[test]
    fn read_unknown_extension_and_missing_file() {
        let (_dir, path) = file("a.foo", b"1,2\n");
        assert_parse_error(
            read_dataset(&path),
            None,
            "unknown extension .foo: expected .ts, .tsv, .txt, .csv or .npy",
        );
        let (_dir, path) = file("noext", b"1,2\n");
        assert_parse_error(read_dataset(&path), None, "no file extension");
        let e = read_dataset(Path::new("/nonexistent/dir/a.csv")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }

    #[test]
    fn to_series_set_overflow_and_empty() {
        let d = Dataset {
            series: vec![array![[1.0, 2.0]], array![[3.0, 1e300], [5.0, 6.0]]],
            labels: None,
        };
        assert_eq!(d.dims(), 2);
        let set = d.to_series_set::<f64>().unwrap();
        assert_eq!((set.len(), set.dims(), set.total_samples()), (2, 2, 3));
        match d.to_series_set::<f32>() {
            Err(Error::InvalidInput(m)) => {
                assert!(m.contains("series 1, sample 0, dimension 1"), "{m}");
                assert!(m.contains("overflows f32"), "{m}");
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
        let empty = Dataset {
            series: vec![],
            labels: None,
        };
        assert!(empty.is_empty());
        assert_eq!(empty.dims(), 0);
        assert!(empty.to_series_set::<f64>().is_err());
    }

    proptest::proptest! {
        /// No input makes the parsers panic.
        #[test]
        fn never_panics(text in "[0-9a-z@#:,.?\\t \\n-]{0,120}", prefix in 0usize..4) {
            let prefix = ["", "@data\n", "@classLabel true a b\n@data\n",
                          "@dimensions 2\n@equalLength true\n@data\n"][prefix];
            let path = Path::new("x");
            let text = format!("{prefix}{text}");
            for format in [Format::Ts, Format::Ucr, Format::Csv, Format::Npy] {
                let _ = parse(path, format, text.as_bytes());
            }
            let mut npy = b"\x93NUMPY\x01\x00".to_vec();
            npy.extend_from_slice(&(text.len() as u16).to_le_bytes());
            npy.extend_from_slice(text.as_bytes());
            let _ = parse(path, Format::Npy, &npy);
        }
    }
}
