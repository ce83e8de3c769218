//! `.csv`: one univariate series per line, values only, separated by
//! commas; lines starting with `#` are comments.

use super::text::{check_length, column, finish, numbered_lines, parse_fields};
use super::Dataset;
use crate::Result;
use std::path::Path;

/// `.csv`: values only, one univariate series per line.
pub(super) fn parse(path: &Path, text: &str) -> Result<Dataset> {
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

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_parse_error, read};
    use ndarray::array;

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
}
