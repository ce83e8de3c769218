//! `.ts`: the sktime / aeon format of the UCR and UEA archives (the module
//! docs of [`super`] describe it).

use super::text::{finish, numbered_lines, parse_error, parse_value, quoted, shorten};
use super::Dataset;
use crate::{Error, Result};
use ndarray::Array2;
use std::path::Path;

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
pub(super) fn parse(path: &Path, text: &str) -> Result<Dataset> {
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
        let (values, label) = parse_series(line, &header, first, &error)?;
        first.get_or_insert((values.ncols(), values.nrows()));
        series.push(values);
        labels.extend(label);
    }
    if !in_data {
        return Err(parse_error(path, None, "no @data line (no series in file)"));
    }
    finish(path, series, header.labels.map(|_| labels))
}

/// One series' line: its values (a row per sample, a column per
/// dimension) and its label when the header declares labels, checked
/// against the header and the `first` series' dimensions and length.
fn parse_series(
    line: &str,
    header: &TsHeader,
    first: Option<(usize, usize)>,
    error: &impl Fn(String) -> Error,
) -> Result<(Array2<f64>, Option<String>)> {
    let mut fields: Vec<&str> = line.split(':').collect();
    let label = match &header.labels {
        Some(declared) => Some(split_label(&mut fields, declared, error)?),
        None => None,
    };
    let dims = fields.len();
    check_dims(dims, header, first, error)?;
    let channels = parse_channels(&fields, error)?;
    let length = channels.first().map_or(0, Vec::len);
    check_length(length, header, first, error)?;
    let values = Array2::from_shape_fn((length, dims), |(t, k)| channels[k][t]);
    Ok((values, label))
}

/// The class label, the last of `fields`, taken off them: one of those
/// `declared`.
fn split_label(
    fields: &mut Vec<&str>,
    declared: &[String],
    error: &impl Fn(String) -> Error,
) -> Result<String> {
    let label = match fields.split_last() {
        Some((label, rest)) if !rest.is_empty() => label.trim(),
        _ => {
            return Err(error(
                "series has no class label (@classLabel true): expected values, ':', label".into(),
            ))
        }
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
    let label = label.to_string();
    fields.pop();
    Ok(label)
}

/// A series has the dimensions the header declares, or else the first
/// series'.
fn check_dims(
    dims: usize,
    header: &TsHeader,
    first: Option<(usize, usize)>,
    error: &impl Fn(String) -> Error,
) -> Result<()> {
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
    Ok(())
}

/// The values of each dimension's field, all of one length.
fn parse_channels(fields: &[&str], error: &impl Fn(String) -> Error) -> Result<Vec<Vec<f64>>> {
    let mut channels: Vec<Vec<f64>> = Vec::with_capacity(fields.len());
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
    Ok(channels)
}

/// A series has the length the header declares, or the first series' with
/// `@equalLength true`.
fn check_length(
    length: usize,
    header: &TsHeader,
    first: Option<(usize, usize)>,
    error: &impl Fn(String) -> Error,
) -> Result<()> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_parse_error, read};
    use super::super::{read_dataset, Dataset};
    use ndarray::array;
    use std::path::Path;

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
    fn ts_bad_header() {
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
    }

    #[test]
    fn ts_bad_series_line() {
        let head =
            "@problemName p\n@univariate false\n@dimensions 2\n@classLabel true a b\n@data\n";
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
    }

    #[test]
    fn ts_lengths_and_dimensions() {
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
}
