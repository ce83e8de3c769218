//! Searching series in files read unit by unit (`SeriesFile`: `.npy`,
//! raw `.f32` / `.f64`) gives what searching the same values in memory
//! gives; text series; the files' errors.

use crate::common::rng;
use ndarray::{Array1, Array2};
use rand::Rng;
use rand_distr::StandardNormal;
use std::io::Write;
use std::path::Path;
use timewarp::search::{read_text, subsequences, Band, SearchOptions, SeriesFile, SeriesSource};
use timewarp::{Device, Error, Precision};

fn walk(n: usize, dims: usize, seed: u64) -> Array2<f64> {
    let mut rng = rng(seed);
    let mut x = Array2::zeros((n, dims));
    for k in 0..dims {
        let mut v = 0.0;
        for i in 0..n {
            v += rng.sample::<f64, _>(StandardNormal);
            x[[i, k]] = v;
        }
    }
    x
}

fn options() -> SearchOptions {
    SearchOptions::default()
        .with_band(Band::Fraction(0.1))
        .with_k(3)
        .with_chunk(500)
        .on(Device::Cpu)
}

/// A `.npy` file written by hand: `descr`, shape, then the bytes.
fn npy(path: &Path, descr: &str, shape: &str, data: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(b"\x93NUMPY\x01\x00").unwrap();
    file.write_all(&(header.len() as u16).to_le_bytes())
        .unwrap();
    file.write_all(header.as_bytes()).unwrap();
    file.write_all(data).unwrap();
}

#[test]
fn files_search_as_memory_does() {
    let dir = tempfile::tempdir().unwrap();
    let series = walk(3000, 1, 1);
    let query = series.slice(ndarray::s![1200..1264, ..]).to_owned();
    let expected = subsequences(query.view(), &series.view(), &options()).unwrap();
    assert_eq!(expected.matches[0].start, 1200);

    let values: Vec<f64> = series.iter().copied().collect();
    let little: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let big: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    let raw = dir.path().join("walk.f64");
    std::fs::write(&raw, &little).unwrap();
    let written = dir.path().join("walk.npy");
    ndarray_npy::write_npy(&written, &Array1::from(values.clone())).unwrap();
    let big_npy = dir.path().join("big.npy");
    npy(&big_npy, ">f8", "(3000,)", &big);
    for path in [&raw, &written, &big_npy] {
        let file = SeriesFile::open(path).unwrap();
        assert_eq!(file.precision(), Precision::F64);
        let got = subsequences(query.view(), &file, &options()).unwrap();
        // The statistics depend on the threads' timing; the matches do not.
        assert_eq!(got.matches, expected.matches, "{}", path.display());
    }

    // Single precision: as the widened values in memory.
    let narrow: Vec<f32> = values.iter().map(|&v| v as f32).collect();
    let expected = subsequences(query.view(), &narrow[..], &options()).unwrap();
    let raw = dir.path().join("walk.f32");
    std::fs::write(
        &raw,
        narrow
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let got = subsequences(query.view(), &SeriesFile::open(&raw).unwrap(), &options()).unwrap();
    assert_eq!(got.matches, expected.matches);
}

#[test]
fn multivariate_files_are_samples_by_dims() {
    let dir = tempfile::tempdir().unwrap();
    let series = walk(2000, 3, 2);
    let query = series.slice(ndarray::s![700..740, ..]).to_owned();
    let expected = subsequences(query.view(), &series.view(), &options()).unwrap();
    let path = dir.path().join("multi.npy");
    ndarray_npy::write_npy(&path, &series.mapv(|v| v as f32)).unwrap();
    let file = SeriesFile::open(&path).unwrap();
    assert_eq!((file.len(), file.dims()), (2000, 3));
    let narrow = series.mapv(|v| f64::from(v as f32));
    let expected_narrow = subsequences(query.view(), &narrow.view(), &options()).unwrap();
    let got = subsequences(query.view(), &file, &options()).unwrap();
    assert_eq!(got.matches, expected_narrow.matches);
    assert_eq!(expected.matches[0].start, 700);
    let raw = dir.path().join("multi.bin");
    let bytes: Vec<u8> = series.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).unwrap();
    let file = SeriesFile::raw(&raw, Precision::F64, 3).unwrap();
    let got = subsequences(query.view(), &file, &options()).unwrap();
    assert_eq!(got.matches, expected.matches);
}

#[test]
fn a_nan_in_a_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut values: Vec<f64> = walk(5000, 1, 3).iter().copied().collect();
    values[4321] = f64::NAN;
    let path = dir.path().join("nan.f64");
    std::fs::write(
        &path,
        values
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let query = Array2::from_shape_fn((32, 1), |(i, _)| (i as f64).sin());
    match subsequences(query.view(), &SeriesFile::open(&path).unwrap(), &options()) {
        Err(Error::InvalidInput(message)) => {
            assert!(message.contains("(NaN) at sample 4321"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("odd.f64");
    std::fs::write(&odd, [0u8; 12]).unwrap();
    assert!(matches!(SeriesFile::open(&odd), Err(Error::Parse { .. })));
    let truncated = dir.path().join("short.npy");
    npy(&truncated, "<f8", "(100,)", &[0u8; 80]);
    let message = SeriesFile::open(&truncated).unwrap_err().to_string();
    assert!(message.contains("truncated"), "{message}");
    let ints = dir.path().join("ints.npy");
    npy(&ints, "<i8", "(10,)", &[0u8; 80]);
    let message = SeriesFile::open(&ints).unwrap_err().to_string();
    assert!(message.contains("unsupported dtype"), "{message}");
    let cube = dir.path().join("cube.npy");
    npy(&cube, "<f8", "(2, 2, 2)", &[0u8; 64]);
    let message = SeriesFile::open(&cube).unwrap_err().to_string();
    assert!(message.contains("1-D, or 2-D"), "{message}");
    let text = dir.path().join("series.csv");
    std::fs::write(&text, "1\n2\n").unwrap();
    assert!(SeriesFile::open(&text).is_err());
}

#[test]
fn text_series_one_sample_a_line_or_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let column = dir.path().join("column.txt");
    std::fs::write(&column, "1.5\n-2\n\n3e2\n").unwrap();
    assert_eq!(
        read_text(&column).unwrap(),
        ndarray::array![[1.5], [-2.0], [300.0]]
    );
    let line = dir.path().join("line.txt");
    std::fs::write(&line, "1 2,3\t4\n").unwrap();
    assert_eq!(
        read_text(&line).unwrap(),
        ndarray::array![[1.0], [2.0], [3.0], [4.0]]
    );
    let rows = dir.path().join("rows.csv");
    std::fs::write(&rows, "1,2\n3,4\n5,6\n").unwrap();
    assert_eq!(
        read_text(&rows).unwrap(),
        ndarray::array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    );
    let ragged = dir.path().join("ragged.csv");
    std::fs::write(&ragged, "1,2\n3\n").unwrap();
    assert!(matches!(
        read_text(&ragged),
        Err(Error::Parse { line: Some(2), .. })
    ));
    let word = dir.path().join("word.txt");
    std::fs::write(&word, "1\nabc\n").unwrap();
    assert!(matches!(
        read_text(&word),
        Err(Error::Parse { line: Some(2), .. })
    ));
}
