//! `.tsv` / `.txt`: the UCR archive format, one univariate series per line,
//! the class label first.

use super::text::{check_length, column, finish, numbered_lines, parse_error, parse_fields};
use super::Dataset;
use crate::Result;
use std::path::Path;

/// `.tsv` / `.txt`: the UCR archive format, label first.
pub(super) fn parse(path: &Path, text: &str) -> Result<Dataset> {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_parse_error, read};
    use ndarray::array;

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
}
