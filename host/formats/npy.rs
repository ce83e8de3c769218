//! `.npy`: a 2-D (`series x time`) or 3-D (`series x time x dims`) array of
//! `float64` or `float32`.

use super::text::{finish, parse_error, shorten};
use super::Dataset;
use crate::Result;
use ndarray::{ArrayD, Axis, Ix2, Ix3};
use ndarray_npy::npy::header::Header;
use ndarray_npy::ReadNpyExt;
use std::fmt::Display;
use std::path::Path;

/// `.npy`: a 2-D or 3-D array of float64 or float32.
pub(super) fn parse(path: &Path, bytes: &[u8]) -> Result<Dataset> {
    let error = |message: String| parse_error(path, None, message);
    let invalid = |e: &dyn Display| error(format!("not a valid .npy file: {e}"));

    // The header first: to name a wrong dtype or shape, and to check that
    // the data is all there before allocating for it; and before that, what
    // would make ndarray-npy allocate too much or take too long.
    check_header(bytes).map_err(error)?;
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

/// numpy's own limit on the length of a header (its `max_header_size`,
/// numpy 1.24 on); a header of a 2-D or 3-D float array is about 128 bytes.
const MAX_HEADER_LENGTH: usize = 10_000;

/// The deepest nesting of brackets allowed in a header. A float array's
/// header needs 2 (`{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }`).
const MAX_HEADER_DEPTH: usize = 4;

/// Check what ndarray-npy (`Header::from_reader`) would choke on before it
/// reads the header; anything else wrong with the preamble is left for it to
/// report.
///
/// - The header length must not promise more bytes than the file has: it
///   allocates a buffer of that length before reading, and a version 2 or 3
///   file can promise 4 GiB in 12 bytes.
/// - The header must be at most [`MAX_HEADER_LENGTH`] bytes and nest brackets
///   at most [`MAX_HEADER_DEPTH`] deep: the parser of its Python literal
///   (py_literal) backtracks, and its time doubles with each level of
///   nested lists, tuples, dictionaries or sets (20 levels of `[` took
///   53 s).
pub(crate) fn check_header(bytes: &[u8]) -> std::result::Result<(), String> {
    let Some(rest) = bytes.strip_prefix(b"\x93NUMPY") else {
        return Ok(());
    };
    // Version (major, minor), then the length: u16 in version 1, u32 after.
    let (length, preamble) = match rest {
        [1, _, a, b, ..] => (usize::from(u16::from_le_bytes([*a, *b])), 10),
        [2 | 3, _, a, b, c, d, ..] => (
            usize::try_from(u32::from_le_bytes([*a, *b, *c, *d])).unwrap_or(usize::MAX),
            12,
        ),
        _ => return Ok(()),
    };
    let present = bytes.len() - preamble;
    if length > present {
        return Err(format!(
            "file is truncated: the header is {length} bytes long, {present} bytes follow the preamble"
        ));
    }
    if length > MAX_HEADER_LENGTH {
        return Err(format!(
            "not a valid .npy file: the header is {length} bytes long, more than numpy's limit of {MAX_HEADER_LENGTH}"
        ));
    }
    // Brackets inside strings count too: no float array's header has any.
    let mut depth = 0usize;
    for &byte in &bytes[preamble..preamble + length] {
        match byte {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > MAX_HEADER_DEPTH {
                    return Err(format!(
                        "not a valid .npy file: the header nests brackets more than {MAX_HEADER_DEPTH} deep"
                    ));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testing::assert_parse_error;
    use super::super::{read_dataset, write_matrix};
    use ndarray::{array, Array2, Array3, Axis, ShapeBuilder};

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

    /// Found by fuzz_npy (docs/fuzzing.md): a version 2 header length of
    /// 0xffff0074 bytes in a 150-byte file. ndarray-npy allocated a buffer of
    /// that length (4 GiB) before finding the file too short; the length is
    /// now checked against the file first.
    #[test]
    fn npy_header_length_beyond_the_file() {
        let found: &[u8] = b"\x93NUMPY\x02\x00t\x00\xff\xff\xff\xff\xff\x00\x00{'de\x83scr': '<f1', 'fortran_order': False, 'shape': (1, 4), }                                                        \x0a\x00\x00\x00?\x9e\xc9\x7f\x7f\x00\x00\x80\xbf\x01\x00\x00\x00";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("oom.npy");
        let check = |bytes: &[u8], needle: &str| {
            std::fs::write(&path, bytes).unwrap();
            assert_parse_error(read_dataset(&path), None, needle);
        };
        check(
            found,
            "file is truncated: the header is 4294901876 bytes long, 138 bytes follow",
        );
        // The largest lengths of versions 1, 2 and 3, with nothing after.
        check(
            b"\x93NUMPY\x01\x00\xff\xff",
            "the header is 65535 bytes long, 0 bytes",
        );
        for version in [2, 3] {
            let mut bytes = b"\x93NUMPY".to_vec();
            bytes.extend_from_slice(&[version, 0, 0xff, 0xff, 0xff, 0xff]);
            check(&bytes, "the header is 4294967295 bytes long, 0 bytes");
        }
        // A short or foreign preamble is still ndarray-npy's to report.
        check(b"\x93NUMPY\x02\x00\xff", "not a valid .npy file");
        check(
            b"\x93NUMPY\x04\x00\x00\x00\x00\x00",
            "not a valid .npy file",
        );
    }

    /// Found while fuzzing `.npy` (docs/fuzzing.md), with hand-made headers:
    /// nested brackets took time doubling with each level, in py_literal
    /// under ndarray-npy (20 levels of `[`: a minute). Now more than 4
    /// levels, or more than numpy's 10,000 bytes, are refused first.
    #[test]
    fn npy_header_nesting_and_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested.npy");
        let npy = |dict: &str| {
            let header = format!(
                "{dict:<width$}\n",
                width = (dict.len() + 13).div_ceil(64) * 64 - 13
            );
            let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
            bytes.extend_from_slice(&u32::try_from(header.len()).unwrap().to_le_bytes());
            bytes.extend_from_slice(header.as_bytes());
            bytes
        };
        let check = |dict: &str, needle: &str| {
            std::fs::write(&path, npy(dict)).unwrap();
            assert_parse_error(read_dataset(&path), None, needle);
        };
        let deep = "nests brackets more than 4 deep";
        for n in [5, 30, 1000] {
            let lists = format!("{}{}", "[".repeat(n), "]".repeat(n));
            check(&format!("{{'descr': {lists}, }}"), deep);
            let tuples = format!("{}1{}", "(1, ".repeat(n), ")".repeat(n));
            check(&format!("{{'shape': {tuples}, }}"), deep);
            check(&"{".repeat(n), deep);
        }
        // Four levels are parsed (and the header found wanting).
        check("{'descr': [[[1]]], }", "not a valid .npy file");
        check(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
            "truncated",
        );
        let long = format!("{{'descr': '<f8', 'x': '{}', }}", "x".repeat(10_000));
        check(
            &long,
            "the header is 10036 bytes long, more than numpy's limit of 10000",
        );
    }
}
