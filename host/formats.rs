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
//!   `float64` or `float32`.
//!
//! Text formats skip blank lines and need equal lengths except `.ts` with
//! `@equalLength false` (or no length header). Values must be finite: `?`,
//! `NaN` and infinities are errors, since no measure handles missing values.
//! Every content problem is an [`Error::Parse`] naming the line (1-based)
//! where there is one; no input makes these functions panic.

use crate::{Error, Float, Result, SeriesSet};
use ndarray::{Array1, Array2, ArrayD, ArrayView2, Axis, Ix2, Ix3};
use ndarray_npy::npy::header::Header;
use ndarray_npy::{ReadNpyExt, WritableElement, WriteNpyError, WriteNpyExt};
use std::fmt::Display;
use std::io::{BufWriter, Write};
use std::path::Path;

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

/// Write a matrix, format by the extension of `path` (case-insensitive):
/// `.csv` (see [`write_csv`]) or `.npy`. An unknown extension is an error
/// before anything is written.
pub fn write_matrix<T: Float + WritableElement>(path: &Path, matrix: ArrayView2<T>) -> Result<()> {
    let npy = match extension(path).as_deref() {
        Some("csv") => false,
        Some("npy") => true,
        other => {
            return Err(parse_error(
                path,
                None,
                unknown_extension(other, ".csv or .npy"),
            ))
        }
    };
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    if npy {
        let mut out = BufWriter::new(file);
        matrix.write_npy(&mut out).map_err(|e| match e {
            WriteNpyError::Io(source) => io(source),
            other => io(std::io::Error::other(other.to_string())),
        })?;
        out.flush().map_err(io)
    } else {
        write_csv(file, matrix).map_err(io)
    }
}

/// Write a matrix as CSV: one row per line, comma-separated, each value in
/// Rust's shortest round-trip form (`{:?}`), so parsing it back gives the
/// same bits.
pub fn write_csv<W: Write, T: Float>(out: W, matrix: ArrayView2<T>) -> std::io::Result<()> {
    let mut out = BufWriter::new(out);
    for row in matrix.outer_iter() {
        for (j, v) in row.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{v:?}")?;
        }
        out.write_all(b"\n")?;
    }
    out.flush()
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
        Format::Ts => parse_ts(path, text(path, bytes)?),
        Format::Ucr => parse_ucr(path, text(path, bytes)?),
        Format::Csv => parse_csv(path, text(path, bytes)?),
        Format::Npy => parse_npy(path, bytes),
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

fn parse_error(path: &Path, line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

/// `text` quoted and escaped, cut short if long: for messages.
fn shorten(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        format!("{}...", text.chars().take(MAX).collect::<String>())
    }
}

fn quoted(text: &str) -> String {
    format!("{:?}", shorten(text))
}

/// The file as text: UTF-8 (a leading byte-order mark is dropped).
fn text<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        parse_error(path, Some(line), "line is not valid UTF-8 text")
    })
}

/// Lines with their 1-based numbers, trimmed.
fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
}

/// Why a field is not a usable value.
enum BadValue<'a> {
    Empty,
    Missing(&'a str),
    NotFinite(&'a str),
    NotANumber(&'a str),
}

impl BadValue<'_> {
    fn describe(&self, position: impl Display) -> String {
        match self {
            Self::Empty => format!("{position} is empty"),
            Self::Missing(s) => format!(
                "{position}: value is {} (missing values are not supported)",
                if s.eq_ignore_ascii_case("nan") {
                    "NaN".to_string()
                } else {
                    quoted(s)
                }
            ),
            Self::NotFinite(s) => format!(
                "{position}: value {} is not finite (values must be finite)",
                quoted(s)
            ),
            Self::NotANumber(s) => format!("{position} is not a number: {}", quoted(s)),
        }
    }
}

fn parse_value(field: &str) -> std::result::Result<f64, BadValue<'_>> {
    let s = field.trim();
    if s.is_empty() {
        return Err(BadValue::Empty);
    }
    if s == "?" {
        return Err(BadValue::Missing(s));
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_nan() => Err(BadValue::Missing(s)),
        Ok(v) if v.is_infinite() => Err(BadValue::NotFinite(s)),
        Ok(v) => Ok(v),
        Err(_) => Err(BadValue::NotANumber(s)),
    }
}

/// Parse delimited fields as values; `first` is the 1-based field number of
/// the first one (for messages).
fn parse_fields<'a>(
    path: &Path,
    line: usize,
    fields: impl Iterator<Item = &'a str>,
    first: usize,
) -> Result<Vec<f64>> {
    fields
        .enumerate()
        .map(|(i, field)| {
            parse_value(field).map_err(|bad| {
                parse_error(
                    path,
                    Some(line),
                    bad.describe(format_args!("field {}", first + i)),
                )
            })
        })
        .collect()
}

/// A univariate series: `length x 1`.
fn column(values: Vec<f64>) -> Array2<f64> {
    Array1::from(values).insert_axis(Axis(1))
}

/// Equal lengths for the line-per-series formats.
fn check_length(path: &Path, line: usize, length: usize, first: &mut Option<usize>) -> Result<()> {
    match *first {
        None => *first = Some(length),
        Some(expected) if expected != length => {
            return Err(parse_error(
                path,
                Some(line),
                format!("line has {length} values, the first series has {expected}"),
            ))
        }
        _ => {}
    }
    Ok(())
}

fn finish(path: &Path, series: Vec<Array2<f64>>, labels: Option<Vec<String>>) -> Result<Dataset> {
    if series.is_empty() {
        return Err(parse_error(path, None, "no series in file"));
    }
    Ok(Dataset { series, labels })
}

/// `.csv`: values only, one univariate series per line.
fn parse_csv(path: &Path, text: &str) -> Result<Dataset> {
    let mut series = Vec::new();
    let mut length = None;
    for (number, line) in numbered_lines(text) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let values = parse_fields(path, number, line.split(','), 1)?;
        check_length(path, number, values.len(), &mut length)?;
        series.push(column(values));
    }
    finish(path, series, None)
}

/// `.tsv` / `.txt`: the UCR archive format, label first.
fn parse_ucr(path: &Path, text: &str) -> Result<Dataset> {
    let mut series = Vec::new();
    let mut labels = Vec::new();
    let mut length = None;
    for (number, line) in numbered_lines(text) {
        if line.is_empty() {
            continue;
        }
        let mut fields: Box<dyn Iterator<Item = &str>> = if line.contains(',') {
            Box::new(line.split(','))
        } else {
            Box::new(line.split_whitespace())
        };
        let label = fields.next().unwrap_or_default().trim();
        if label.is_empty() {
            return Err(parse_error(
                path,
                Some(number),
                "field 1 (the class label) is empty",
            ));
        }
        let values = parse_fields(path, number, fields, 2)?;
        if values.is_empty() {
            return Err(parse_error(
                path,
                Some(number),
                "line has a class label but no values",
            ));
        }
        check_length(path, number, values.len(), &mut length)?;
        series.push(column(values));
        labels.push(label.to_string());
    }
    finish(path, series, Some(labels))
}

/// What the header of a `.ts` file declares (with the line that declares it,
/// where messages need it).
#[derive(Default)]
struct TsHeader {
    dims: Option<(usize, usize)>,
    univariate: Option<(bool, usize)>,
    equal_length: Option<bool>,
    series_length: Option<usize>,
    labels: Option<Vec<String>>,
}

impl TsHeader {
    /// Read one header line (`key` without the `@`, `value` trimmed). Returns
    /// whether it was `@data`.
    fn read(&mut self, path: &Path, line: usize, key: &str, value: &str) -> Result<bool> {
        let error = |message: String| parse_error(path, Some(line), message);
        let boolean = |value: &str| {
            let word = value.split_whitespace().next().unwrap_or_default();
            if word.eq_ignore_ascii_case("true") {
                Ok(true)
            } else if word.eq_ignore_ascii_case("false") {
                Ok(false)
            } else {
                Err(error(format!(
                    "@{} expects true or false, got {}",
                    shorten(key),
                    quoted(value)
                )))
            }
        };
        let count = |value: &str| match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(error(format!(
                "@{key} expects a positive integer, got {}",
                quoted(value)
            ))),
        };
        match key.to_ascii_lowercase().as_str() {
            "problemname" => {}
            "timestamps" => {
                if boolean(value)? {
                    return Err(error(
                        "files with timestamps (@timeStamps true) are not supported".into(),
                    ));
                }
            }
            "missing" => {
                boolean(value)?;
            }
            "univariate" => self.univariate = Some((boolean(value)?, line)),
            "dimension" | "dimensions" => self.dims = Some((count(value)?, line)),
            "equallength" => self.equal_length = Some(boolean(value)?),
            "serieslength" => self.series_length = Some(count(value)?),
            "classlabel" => {
                let mut words = value.split_whitespace();
                let flag = words.next().unwrap_or_default();
                if flag.eq_ignore_ascii_case("true") {
                    let labels: Vec<String> = words.map(String::from).collect();
                    if labels.is_empty() {
                        return Err(error("@classLabel true declares no labels".into()));
                    }
                    self.labels = Some(labels);
                } else if flag.eq_ignore_ascii_case("false") {
                    self.labels = None;
                } else {
                    return Err(error(format!(
                        "@classLabel expects true (followed by the labels) or false, got {}",
                        quoted(value)
                    )));
                }
            }
            "targetlabel" => {
                if boolean(value)? {
                    return Err(error(
                        "regression data sets (@targetLabel true) are not supported".into(),
                    ));
                }
            }
            "data" => {
                if !value.is_empty() {
                    return Err(error(format!(
                        "@data takes no value, got {}",
                        quoted(value)
                    )));
                }
                if let (Some((true, u)), Some((d, l))) = (self.univariate, self.dims) {
                    if d != 1 {
                        return Err(parse_error(
                            path,
                            Some(u.max(l)),
                            format!("@univariate true contradicts @dimensions {d}"),
                        ));
                    }
                }
                return Ok(true);
            }
            _ => return Err(error(format!("unknown header @{}", shorten(key)))),
        }
        Ok(false)
    }

    /// The number of dimensions the header declares, and how, for messages.
    fn declared_dims(&self) -> Option<(usize, &'static str)> {
        match (self.dims, self.univariate) {
            (Some((d, _)), _) => Some((d, "@dimensions")),
            (None, Some((true, _))) => Some((1, "@univariate true")),
            _ => None,
        }
    }

    /// The length every series must have, if any, and why.
    fn declared_length(&self) -> Option<(usize, &'static str)> {
        match (self.equal_length, self.series_length) {
            (Some(false), _) | (_, None) => None,
            (_, Some(n)) => Some((n, "@seriesLength")),
        }
    }
}

/// `.ts`: the sktime / aeon format.
fn parse_ts(path: &Path, text: &str) -> Result<Dataset> {
    let mut header = TsHeader::default();
    let mut in_data = false;
    let mut series = Vec::new();
    let mut labels = Vec::new();
    // The first series' dimensions and length.
    let mut first: Option<(usize, usize)> = None;
    for (number, line) in numbered_lines(text) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let error = |message: String| parse_error(path, Some(number), message);
        if let Some(rest) = line.strip_prefix('@') {
            if in_data {
                return Err(error("header line after @data".into()));
            }
            let (key, value) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            in_data = header.read(path, number, key, value.trim())?;
            continue;
        }
        if !in_data {
            return Err(error(
                "data before @data (header lines start with '@', comments with '#')".into(),
            ));
        }

        let mut fields: Vec<&str> = line.split(':').collect();
        if let Some(declared) = &header.labels {
            let label =
                match fields.split_last() {
                    Some((label, rest)) if !rest.is_empty() => label.trim(),
                    _ => return Err(error(
                        "series has no class label (@classLabel true): expected values, ':', label"
                            .into(),
                    )),
                };
            if !declared.iter().any(|l| l == label) {
                let hint = if label.contains(',') {
                    " (is the label missing?)"
                } else {
                    ""
                };
                return Err(error(format!(
                    "class label {} is not declared by @classLabel{hint}",
                    quoted(label)
                )));
            }
            labels.push(label.to_string());
            fields.pop();
        }

        let dims = fields.len();
        if let Some((expected, why)) = header.declared_dims() {
            if dims != expected {
                return Err(error(format!(
                    "series has {dims} dimensions, expected {expected} ({why})"
                )));
            }
        } else if let Some((expected, _)) = first {
            if dims != expected {
                return Err(error(format!(
                    "series has {dims} dimensions, the first series has {expected}"
                )));
            }
        }

        let mut channels: Vec<Vec<f64>> = Vec::with_capacity(dims);
        for (k, field) in fields.iter().enumerate() {
            let values = field
                .split(',')
                .enumerate()
                .map(|(i, v)| {
                    parse_value(v).map_err(|bad| {
                        error(bad.describe(format_args!("dimension {}, value {}", k + 1, i + 1)))
                    })
                })
                .collect::<Result<Vec<f64>>>()?;
            if let Some(first_channel) = channels.first() {
                if values.len() != first_channel.len() {
                    return Err(error(format!(
                        "dimension {} has {} values, dimension 1 has {}",
                        k + 1,
                        values.len(),
                        first_channel.len()
                    )));
                }
            }
            channels.push(values);
        }
        let length = channels.first().map_or(0, Vec::len);

        if let Some((expected, why)) = header.declared_length() {
            if length != expected {
                return Err(error(format!(
                    "series has length {length}, expected {expected} ({why})"
                )));
            }
        } else if header.equal_length == Some(true) {
            if let Some((_, expected)) = first {
                if length != expected {
                    return Err(error(format!(
                        "series has length {length}, the first series has {expected} (@equalLength true)"
                    )));
                }
            }
        }
        first.get_or_insert((dims, length));
        series.push(Array2::from_shape_fn((length, dims), |(t, k)| {
            channels[k][t]
        }));
    }
    if !in_data {
        return Err(parse_error(path, None, "no @data line (no series in file)"));
    }
    finish(path, series, header.labels.map(|_| labels))
}

/// `.npy`: a 2-D or 3-D array of float64 or float32.
fn parse_npy(path: &Path, bytes: &[u8]) -> Result<Dataset> {
    let error = |message: String| parse_error(path, None, message);
    let invalid = |e: &dyn Display| error(format!("not a valid .npy file: {e}"));

    // The header first: to name a wrong dtype or shape, and to check that
    // the data is all there before allocating for it.
    let mut data = bytes;
    let header = Header::from_reader(&mut data).map_err(|e| invalid(&e))?;
    let descriptor = header.type_descriptor.to_string();
    let item_size = match descriptor.trim_matches(['\'', '"']) {
        "<f8" | ">f8" => 8,
        "<f4" | ">f4" => 4,
        _ => {
            return Err(error(format!(
                "unsupported dtype {}: expected float64 or float32",
                shorten(&descriptor)
            )))
        }
    };
    let shape = &header.shape;
    if !(2..=3).contains(&shape.len()) {
        return Err(error(format!(
            "array has {} dimensions (shape {shape:?}), expected 2 (series x time) or 3 (series x time x dims)",
            shape.len()
        )));
    }
    match shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) {
        Some(0) => return Err(error(format!("array is empty (shape {shape:?})"))),
        Some(n) if n.checked_mul(item_size).is_some_and(|b| b <= data.len()) => {}
        _ => {
            return Err(error(format!(
                "file is truncated: shape {shape:?} needs more than the {} bytes of data present",
                data.len()
            )))
        }
    }

    // Try f64, then f32.
    let array = match ArrayD::<f64>::read_npy(bytes) {
        Ok(array) => array,
        Err(ndarray_npy::ReadNpyError::WrongDescriptor(_)) => ArrayD::<f32>::read_npy(bytes)
            .map_err(|e| invalid(&e))?
            .mapv(f64::from),
        Err(e) => return Err(invalid(&e)),
    };
    let array = if array.ndim() == 2 {
        array
            .into_dimensionality::<Ix2>()
            .map(|a| a.insert_axis(Axis(2)))
    } else {
        array.into_dimensionality::<Ix3>()
    }
    .map_err(|e| invalid(&e))?;

    let univariate = shape.len() == 2;
    for ((i, t, k), &v) in array.indexed_iter() {
        if !v.is_finite() {
            let position = if univariate {
                format!("series {i}, sample {t}")
            } else {
                format!("series {i}, sample {t}, dimension {k}")
            };
            let problem = if v.is_nan() {
                "is NaN (missing values are not supported)"
            } else {
                "is infinite (values must be finite)"
            };
            return Err(error(format!("{position} (0-based) {problem}")));
        }
    }
    let series = array
        .outer_iter()
        .map(|s| s.as_standard_layout().into_owned())
        .collect();
    finish(path, series, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array3, ShapeBuilder};
    use std::path::PathBuf;

    /// Write `contents` to a file called `name` in a fresh directory.
    fn file(name: &str, contents: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        (dir, path)
    }

    fn read(name: &str, contents: &str) -> Result<Dataset> {
        let (_dir, path) = file(name, contents.as_bytes());
        read_dataset(&path)
    }

    /// Assert that reading gives a parse error at `line` containing `needle`.
    #[track_caller]
    fn assert_parse_error(result: Result<Dataset>, line: Option<usize>, needle: &str) {
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

    fn bundled(name: &str) -> Dataset {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name);
        read_dataset(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    fn lengths(d: &Dataset) -> (usize, usize) {
        let lengths = d.series.iter().map(|s| s.nrows());
        (lengths.clone().min().unwrap(), lengths.max().unwrap())
    }

    fn classes(d: &Dataset) -> Vec<String> {
        let mut classes = d.labels.clone().unwrap();
        classes.sort();
        classes.dedup();
        classes
    }

    // ---- .ts ----------------------------------------------------------------

    const TS_UNIVARIATE: &str = "\
# A comment\r
#another one\r
@problemName Tiny\r
@timeStamps false\r
@missing false\r
@univariate true\r
@equalLength true\r
@seriesLength 3\r
@classLabel true a b\r
@data\r
1.5,-2,3e2:a\r
\r
 0.25, 0.5 ,1 : b \r
";

    #[test]
    fn ts_univariate() {
        let d = read("tiny.ts", TS_UNIVARIATE).unwrap();
        assert_eq!(d.len(), 2);
        assert!(!d.is_empty());
        assert_eq!(d.dims(), 1);
        assert_eq!(d.series[0], array![[1.5], [-2.0], [300.0]]);
        assert_eq!(d.series[1], array![[0.25], [0.5], [1.0]]);
        assert_eq!(d.labels, Some(vec!["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn ts_multivariate_unequal_lengths() {
        let text = "@problemName m\n@timeStamps false\n@univariate false\n@dimensions 2\n\
                    @equalLength false\n@classLabel true Walking Running\n@data\n\
                    1,2,3:4,5,6:Walking\n7,8:9,10:Running\n";
        let d = read("m.ts", text).unwrap();
        assert_eq!(d.dims(), 2);
        // Channels become columns: sample t is (channel 1[t], channel 2[t]).
        assert_eq!(d.series[0], array![[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]);
        assert_eq!(d.series[1], array![[7.0, 9.0], [8.0, 10.0]]);
        assert_eq!(d.labels.unwrap(), ["Walking", "Running"]);
    }

    #[test]
    fn ts_without_labels_and_dimensions_inferred() {
        // No @dimensions: taken from the first series. Keys in any case.
        let text =
            "@PROBLEMNAME x\n@Univariate FALSE\n@CLASSLABEL false\n@DATA\n1,2:3,4:5,6\n7:8:9\n";
        let d = read("x.ts", text).unwrap();
        assert_eq!(d.labels, None);
        assert_eq!(d.dims(), 3);
        assert_eq!(d.series[0], array![[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]);
        assert_eq!(d.series[1], array![[7.0, 8.0, 9.0]]);
        // @dimension (singular) as the aeon docs spell it, @targetLabel false.
        let text = "@dimension 2\n@targetLabel false\n@data\n1:2\n";
        assert_eq!(read("y.TS", text).unwrap().series[0], array![[1.0, 2.0]]);
    }

    #[test]
    fn ts_bad_input() {
        let head =
            "@problemName p\n@univariate false\n@dimensions 2\n@classLabel true a b\n@data\n";
        let cases: &[(&str, Option<usize>, &str)] = &[
            ("@timeStamps true\n@data\n1:a\n", Some(1), "timestamps"),
            ("@targetLabel true\n@data\n1\n", Some(1), "regression"),
            ("@timeStamps maybe\n", Some(1), "expects true or false"),
            (
                "#c\n@dimensions x\n",
                Some(2),
                "positive integer, got \"x\"",
            ),
            ("@dimensions 0\n", Some(1), "positive integer"),
            ("@dimensions\n", Some(1), "positive integer"),
            ("@seriesLength -3\n", Some(1), "positive integer"),
            ("@classLabel true\n@data\n", Some(1), "declares no labels"),
            ("@classLabel yes a b\n", Some(1), "@classLabel expects true"),
            (
                "@problemName p\n@fooBar 3\n@data\n",
                Some(2),
                "unknown header @fooBar",
            ),
            (
                "@univariate true\n@dimensions 2\n@data\n",
                Some(2),
                "contradicts",
            ),
            ("@data extra\n", Some(1), "@data takes no value"),
            ("1,2,3\n@data\n", Some(1), "data before @data"),
            ("@problemName p\n\n# only a header\n", None, "no @data"),
            ("", None, "no @data"),
            ("@problemName p\n@data\n\n", None, "no series in file"),
            (
                "@data\n1,2\n@classLabel false\n",
                Some(3),
                "header line after @data",
            ),
        ];
        for &(text, line, needle) in cases {
            assert_parse_error(read("bad.ts", text), line, needle);
        }
        let data_cases: &[(&str, usize, &str)] = &[
            (
                "1,2:3,4:a\n1,2:3,4:5,6:b\n",
                7,
                "series has 3 dimensions, expected 2",
            ),
            (
                "1,2,3:4,5:a\n",
                6,
                "dimension 2 has 2 values, dimension 1 has 3",
            ),
            (
                "1,?:3,4:a\n",
                6,
                "dimension 1, value 2: value is \"?\" (missing values",
            ),
            ("1,2:NaN,4:a\n", 6, "dimension 2, value 1: value is NaN"),
            (
                "1,2:3,abc:b\n",
                6,
                "dimension 2, value 2 is not a number: \"abc\"",
            ),
            ("1,2:3,1e400:b\n", 6, "value \"1e400\" is not finite"),
            ("1,2,:3,4,5:a\n", 6, "dimension 1, value 3 is empty"),
            ("1,2::a\n", 6, "dimension 2, value 1 is empty"),
            (
                "1,2:3,4\n",
                6,
                "class label \"3,4\" is not declared by @classLabel (is the label",
            ),
            ("1,2\n", 6, "no class label"),
            ("1,2:3,4:c\n", 6, "class label \"c\" is not declared"),
            ("1,2:3,4:\n", 6, "class label \"\" is not declared"),
        ];
        for &(data, line, needle) in data_cases {
            assert_parse_error(read("bad.ts", &format!("{head}{data}")), Some(line), needle);
        }
        // Lengths: declared by @seriesLength, or equal to the first series'.
        let text = "@equalLength true\n@seriesLength 2\n@data\n1,2\n1,2,3\n";
        assert_parse_error(
            read("len.ts", text),
            Some(5),
            "series has length 3, expected 2 (@seriesLength)",
        );
        let text = "@equalLength true\n@data\n1,2\n\n3,4,5\n";
        assert_parse_error(read("len.ts", text), Some(5), "the first series has 2");
        let text = "@univariate false\n@data\n1:2\n1:2:3\n";
        assert_parse_error(
            read("dims.ts", text),
            Some(4),
            "series has 3 dimensions, the first series has 2",
        );
        let text = "@univariate true\n@data\n1:2\n";
        assert_parse_error(
            read("dims.ts", text),
            Some(3),
            "expected 1 (@univariate true)",
        );
        // Without length headers, or with @equalLength false, lengths may differ.
        for text in [
            "@data\n1,2\n1,2,3\n",
            "@equalLength false\n@seriesLength 2\n@data\n1\n1,2,3\n",
        ] {
            assert_eq!(read("ok.ts", text).unwrap().len(), 2);
        }
    }

    #[test]
    fn non_utf8_line() {
        let (_dir, path) = file("bad.ts", b"@data\n1,2\n3,\xff\n");
        assert_parse_error(read_dataset(&path), Some(3), "not valid UTF-8");
    }

    // ---- the bundled real files ----------------------------------------------

    #[test]
    fn gunpoint() {
        for (name, count) in [("GunPoint_TRAIN.ts", 50), ("GunPoint_TEST.ts", 150)] {
            let d = bundled(name);
            assert_eq!(d.len(), count, "{name}");
            assert_eq!(d.dims(), 1);
            assert_eq!(lengths(&d), (150, 150));
            assert_eq!(classes(&d), ["1", "2"]);
        }
        let d = bundled("GunPoint_TRAIN.ts");
        assert_eq!(d.series[0][[0, 0]], -0.6478854);
        assert_eq!(d.labels.as_ref().unwrap()[0], "2");
        let set = d.to_series_set::<f32>().unwrap();
        assert_eq!((set.len(), set.dims(), set.max_len()), (50, 1, 150));
    }

    #[test]
    fn basic_motions() {
        for name in ["BasicMotions_TRAIN.ts", "BasicMotions_TEST.ts"] {
            let d = bundled(name);
            assert_eq!(d.len(), 40, "{name}");
            assert_eq!(d.dims(), 6);
            assert_eq!(lengths(&d), (100, 100));
            assert_eq!(classes(&d), ["Badminton", "Running", "Standing", "Walking"]);
        }
        let d = bundled("BasicMotions_TRAIN.ts");
        assert_eq!(d.series[0][[0, 0]], 0.079106);
        assert_eq!(d.series[0][[2, 0]], -0.903497);
        assert_eq!(d.series[0].dim(), (100, 6));
    }

    #[test]
    fn japanese_vowels() {
        // Lengths 7..=26 in the training file, 7..=29 in the test file.
        for (name, count, longest) in [
            ("JapaneseVowels_TRAIN.ts", 270, 26),
            ("JapaneseVowels_TEST.ts", 370, 29),
        ] {
            let d = bundled(name);
            assert_eq!(d.len(), count, "{name}");
            assert_eq!(d.dims(), 12);
            assert_eq!(lengths(&d), (7, longest));
            assert_eq!(classes(&d), ["1", "2", "3", "4", "5", "6", "7", "8", "9"]);
            let set = d.to_series_set::<f64>().unwrap();
            assert_eq!((set.len(), set.dims(), set.max_len()), (count, 12, longest));
            assert_eq!(set.series(3), d.series[3].view());
        }
        let d = bundled("JapaneseVowels_TRAIN.ts");
        assert_eq!(d.series[0].dim(), (20, 12));
        assert_eq!(d.series[0][[0, 0]], 1.860936);
        assert_eq!(d.series[0][[0, 1]], -0.207383);
        assert_eq!(d.series[0][[1, 0]], 1.891651);
    }

    // ---- .tsv / .txt ----------------------------------------------------------

    #[test]
    fn ucr() {
        let d = read("a.tsv", "1\t0.5\t-1\t2\n2\t3\t4\t5\n\n").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d.dims(), 1);
        assert_eq!(d.series[0], array![[0.5], [-1.0], [2.0]]);
        assert_eq!(d.labels.unwrap(), ["1", "2"]);
        // Commas, with spaces around fields.
        let d = read("a.txt", "cat, 1, 2\r\ndog ,3 , 4,\t5\r\n");
        assert_parse_error(d, Some(2), "line has 3 values, the first series has 2");
        let d = read("a.txt", "cat, 1, 2\r\ndog ,3 ,\t5\r\n").unwrap();
        assert_eq!(d.series[1], array![[3.0], [5.0]]);
        assert_eq!(d.labels.unwrap(), ["cat", "dog"]);
        // Runs of whitespace, labels kept verbatim, the old UCR style.
        let text = "   1.0000000e+00   2.5e-01  -1.0000000e+00\n  -1.0000000e+00 3  4\n";
        let d = read("old.TXT", text).unwrap();
        assert_eq!(d.labels.unwrap(), ["1.0000000e+00", "-1.0000000e+00"]);
        assert_eq!(d.series[0], array![[0.25], [-1.0]]);
    }

    #[test]
    fn ucr_bad_input() {
        let cases: &[(&str, Option<usize>, &str)] = &[
            (
                "1\t2\t3\n\n2\t4\n",
                Some(3),
                "line has 1 values, the first series has 2",
            ),
            ("1\t2\n2\n", Some(2), "class label but no values"),
            ("1,2,\n", Some(1), "field 3 is empty"),
            (",1,2\n", Some(1), "field 1 (the class label) is empty"),
            ("1 2 abc\n", Some(1), "field 3 is not a number: \"abc\""),
            (
                "1 2\n1 NaN\n",
                Some(2),
                "field 2: value is NaN (missing values are not supported)",
            ),
            ("1,?\n", Some(1), "missing values are not supported"),
            ("1 inf\n", Some(1), "not finite"),
            ("", None, "no series in file"),
            ("\n  \n", None, "no series in file"),
        ];
        for &(text, line, needle) in cases {
            assert_parse_error(read("bad.tsv", text), line, needle);
        }
    }

    // ---- .csv ---------------------------------------------------------------

    #[test]
    fn csv() {
        let d = read("a.csv", "# x\n1, 2 ,3\n\n  4,5,6  \n").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d.dims(), 1);
        assert_eq!(d.labels, None);
        assert_eq!(d.series[1], array![[4.0], [5.0], [6.0]]);
    }

    #[test]
    fn csv_bad_input() {
        let cases: &[(&str, Option<usize>, &str)] = &[
            (
                "1,2,3\n4,5\n",
                Some(2),
                "line has 2 values, the first series has 3",
            ),
            (
                "1,2\n\n3,abc\n",
                Some(3),
                "field 2 is not a number: \"abc\"",
            ),
            ("1,2,\n", Some(1), "field 3 is empty"),
            (
                "1,NaN\n",
                Some(1),
                "field 2: value is NaN (missing values are not supported)",
            ),
            ("a,b\n1,2\n", Some(1), "field 1 is not a number: \"a\""),
            ("", None, "no series in file"),
        ];
        for &(text, line, needle) in cases {
            assert_parse_error(read("bad.CSV", text), line, needle);
        }
    }

    // ---- .npy ---------------------------------------------------------------

    #[test]
    fn npy_round_trip_2d() {
        let dir = tempfile::tempdir().unwrap();
        let m64 = array![[1.0, -0.0, 1e-300], [0.1, 2.5, -7.0]];
        let path = dir.path().join("m.npy");
        write_matrix(&path, m64.view()).unwrap();
        let d = read_dataset(&path).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d.dims(), 1);
        assert_eq!(d.labels, None);
        for (s, row) in d.series.iter().zip(m64.outer_iter()) {
            assert_eq!(s.column(0), row);
        }
        assert!(d.series[0][[1, 0]].is_sign_negative());

        let m32 = array![[0.1f32, 3.4e38], [-1.0 / 3.0, 1e-45]];
        let path = dir.path().join("m32.NPY");
        write_matrix(&path, m32.view()).unwrap();
        let d = read_dataset(&path).unwrap();
        let set = d.to_series_set::<f32>().unwrap();
        for i in 0..2 {
            assert_eq!(set.series(i).column(0), m32.row(i));
        }
    }

    #[test]
    fn npy_round_trip_3d() {
        let dir = tempfile::tempdir().unwrap();
        let m = Array3::from_shape_fn((3, 4, 2), |(i, t, k)| (i * 100 + t * 10 + k) as f64 / 7.0);
        let path = dir.path().join("m.npy");
        ndarray_npy::write_npy(&path, &m).unwrap();
        let d = read_dataset(&path).unwrap();
        assert_eq!((d.len(), d.dims()), (3, 2));
        for (s, expected) in d.series.iter().zip(m.outer_iter()) {
            assert_eq!(s, &expected);
        }

        let m32 = m.mapv(|v| v as f32);
        ndarray_npy::write_npy(&path, &m32).unwrap();
        let set = read_dataset(&path).unwrap().to_series_set::<f32>().unwrap();
        for i in 0..3 {
            assert_eq!(set.series(i), m32.index_axis(Axis(0), i));
        }

        // Fortran order.
        let mut f = Array3::zeros(m.raw_dim().f());
        f.assign(&m);
        assert!(!f.is_standard_layout());
        ndarray_npy::write_npy(&path, &f).unwrap();
        let d = read_dataset(&path).unwrap();
        for (s, expected) in d.series.iter().zip(m.outer_iter()) {
            assert_eq!(s, &expected);
        }
    }

    #[test]
    fn npy_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.npy");
        let check = |needle: &str| assert_parse_error(read_dataset(&path), None, needle);

        ndarray_npy::write_npy(&path, &array![[1i32, 2], [3, 4]]).unwrap();
        check("unsupported dtype '<i4': expected float64 or float32");
        ndarray_npy::write_npy(&path, &array![1.0, 2.0]).unwrap();
        check("array has 1 dimensions");
        ndarray_npy::write_npy(&path, &Array2::<f64>::zeros((0, 5))).unwrap();
        check("array is empty (shape [0, 5])");
        ndarray_npy::write_npy(&path, &Array3::<f32>::zeros((2, 3, 0))).unwrap();
        check("array is empty");
        ndarray_npy::write_npy(&path, &array![[1.0, 2.0], [3.0, f64::NAN]]).unwrap();
        check("series 1, sample 1 (0-based) is NaN");
        let mut m = Array3::<f32>::zeros((2, 3, 4));
        m[[1, 2, 3]] = f32::NEG_INFINITY;
        ndarray_npy::write_npy(&path, &m).unwrap();
        check("series 1, sample 2, dimension 3 (0-based) is infinite");

        // Truncated data, garbage, and a header promising far more data than
        // there is (which must not be allocated).
        ndarray_npy::write_npy(&path, &array![[1.0, 2.0], [3.0, 4.0]]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        check("truncated");
        let mut extra = bytes.clone();
        extra.extend_from_slice(&[0; 8]);
        std::fs::write(&path, &extra).unwrap();
        check("not a valid .npy file");
        std::fs::write(&path, b"hello, world").unwrap();
        check("not a valid .npy file");
        std::fs::write(&path, b"").unwrap();
        check("not a valid .npy file");
        let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000), }";
        let mut huge = b"\x93NUMPY\x01\x00".to_vec();
        let padded = format!("{dict:<117}\n");
        huge.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        huge.extend_from_slice(padded.as_bytes());
        huge.extend_from_slice(&[0; 64]);
        std::fs::write(&path, &huge).unwrap();
        check("truncated");
    }

    // ---- writing --------------------------------------------------------------

    #[test]
    fn write_csv_round_trip_f64() {
        let awkward = [
            0.1,
            1e-300,
            -0.0,
            1.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -123_456_789.123_456_79,
            1e22,
            2.0f64.powi(60) + 2048.0,
            0.30000000000000004,
        ];
        let m = Array2::from_shape_fn((2, awkward.len()), |(i, j)| {
            if i == 0 {
                awkward[j]
            } else {
                -awkward[j]
            }
        });
        let mut text = Vec::new();
        write_csv(&mut text, m.view()).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with("0.1,1e-300,-0.0,0.3333333333333333,"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 2);
        for (line, row) in text.lines().zip(m.outer_iter()) {
            let parsed: Vec<f64> = line.split(',').map(|v| v.parse().unwrap()).collect();
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&parsed), bits(row.as_slice().unwrap()));
        }

        // And through the files: write_matrix, then read_dataset.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        write_matrix(&path, m.view()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let d = read_dataset(&path).unwrap();
        for (s, row) in d.series.iter().zip(m.outer_iter()) {
            for (a, b) in s.iter().zip(row) {
                assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }

    #[test]
    fn write_csv_round_trip_f32() {
        let awkward = [
            0.1f32,
            1.0 / 3.0,
            -0.0,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            16777216.0,
            3.4028235e38,
            0.3,
            1.1754942e-38,
        ];
        let m = Array2::from_shape_vec((1, awkward.len()), awkward.to_vec()).unwrap();
        let mut text = Vec::new();
        write_csv(&mut text, m.view()).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("0.1,0.33333334,-0.0,"), "{text}");
        let parsed: Vec<f32> = text.trim().split(',').map(|v| v.parse().unwrap()).collect();
        for (a, b) in parsed.iter().zip(&awkward) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        // Read back as f64, then to f32: the same bits.
        let (_dir, path) = file("m.csv", text.as_bytes());
        let set = read_dataset(&path).unwrap().to_series_set::<f32>().unwrap();
        for (a, b) in set.series(0).iter().zip(&awkward) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn write_unknown_extension() {
        let dir = tempfile::tempdir().unwrap();
        let m = array![[1.0, 2.0]];
        for name in ["m.foo", "m.ts", "m"] {
            let path = dir.path().join(name);
            let e = write_matrix(&path, m.view()).unwrap_err();
            assert!(
                matches!(&e, Error::Parse { line: None, message, .. } if message.contains("expected .csv or .npy")),
                "{e}"
            );
            assert!(!path.exists(), "{name} was written");
        }
        let e = write_matrix(&dir.path().join("missing/m.csv"), m.view()).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
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
