//! What the text formats (`.ts`, `.tsv` / `.txt`, `.csv`) share: decoding,
//! numbered lines, values and their errors, and the checks every data set
//! passes. The error helpers serve `.npy` and writing too.

use super::Dataset;
use crate::{Error, Result};
use ndarray::{Array1, Array2, Axis};
use std::fmt::Display;
use std::path::Path;

pub(super) fn parse_error(path: &Path, line: Option<usize>, message: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

/// `text` cut short if long: for messages.
pub(super) fn shorten(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        text.to_string()
    } else {
        format!("{}...", text.chars().take(MAX).collect::<String>())
    }
}

/// `text` cut short, quoted and escaped: for messages.
pub(super) fn quoted(text: &str) -> String {
    format!("{:?}", shorten(text))
}

/// The file as text: UTF-8 (a leading byte-order mark is dropped).
pub(super) fn utf8<'a>(path: &Path, bytes: &'a [u8]) -> Result<&'a str> {
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
pub(super) fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
}

/// Why a field is not a usable value.
pub(super) enum BadValue<'a> {
    Empty,
    Missing(&'a str),
    NotFinite(&'a str),
    NotANumber(&'a str),
}

impl BadValue<'_> {
    pub(super) fn describe(&self, position: impl Display) -> String {
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

pub(super) fn parse_value(field: &str) -> std::result::Result<f64, BadValue<'_>> {
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
pub(super) fn parse_fields<'a>(
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
pub(super) fn column(values: Vec<f64>) -> Array2<f64> {
    Array1::from(values).insert_axis(Axis(1))
}

/// Equal lengths for the line-per-series formats.
pub(super) fn check_length(
    path: &Path,
    line: usize,
    length: usize,
    first: &mut Option<usize>,
) -> Result<()> {
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

pub(super) fn finish(
    path: &Path,
    series: Vec<Array2<f64>>,
    labels: Option<Vec<String>>,
) -> Result<Dataset> {
    if series.is_empty() {
        return Err(parse_error(path, None, "no series in file"));
    }
    Ok(Dataset { series, labels })
}

#[cfg(test)]
mod tests {
    use super::super::read_dataset;
    use super::super::testing::{assert_parse_error, file};

    #[test]
    fn non_utf8_line() {
        let (_dir, path) = file("bad.ts", b"@data\n1,2\n3,\xff\n");
        assert_parse_error(read_dataset(&path), Some(3), "not valid UTF-8");
    }
}
