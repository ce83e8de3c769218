//! Writing matrices: `.csv` and `.npy`.

use super::text::parse_error;
use super::{extension, unknown_extension};
use crate::{Error, Float, Result};
use ndarray::ArrayView2;
use ndarray_npy::{WritableElement, WriteNpyError, WriteNpyExt};
use std::io::{BufWriter, Write};
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::super::read_dataset;
    use super::super::testing::file;
    use super::*;
    use ndarray::{array, Array2};

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
}
