//! Long series in files, searched without being loaded whole: `.npy`
//! (1-D, or 2-D `samples x dims`, float64 or float32, either byte order)
//! and raw little-endian float32 / float64 (`.f32`, `.f64`), read unit by
//! unit with positional reads (`pread`), so a search holds a unit per
//! thread whatever the file's size, and threads read concurrently.
//!
//! Not a memory map: mapping is `unsafe` in Rust (a file truncated or
//! written by another process while mapped is undefined behaviour, a
//! SIGBUS at best), and the OS page cache serves positional reads of a
//! file read before at memory speed, one copy into the unit's buffer
//! that the conversion to `f64` needs anyway.
//!
//! Text (one sample a line, values separated by spaces, tabs or commas,
//! as the UCR Suite's data files) is parsed whole by [`read_text`].

use super::SeriesSource;
use crate::formats::check_npy_header;
use crate::{Error, Precision, Result};
use ndarray::Array2;
use ndarray_npy::npy::header::Header;
use std::fs::File;
use std::path::{Path, PathBuf};

/// A series in a binary file, read as it is searched.
#[derive(Debug)]
pub struct SeriesFile {
    file: File,
    path: PathBuf,
    /// Where the samples start.
    offset: u64,
    len: usize,
    dims: usize,
    precision: Precision,
    big_endian: bool,
}

fn parse_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line: None,
        message: message.into(),
    }
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl SeriesFile {
    /// A `.npy` file, or raw little-endian `.f32` / `.f64` (univariate),
    /// by the file's extension.
    pub fn open(path: &Path) -> Result<Self> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => Self::npy(path),
            Some("f32") => Self::raw(path, Precision::F32, 1),
            Some("f64") => Self::raw(path, Precision::F64, 1),
            _ => Err(parse_error(
                path,
                "not a binary series: expected .npy, .f32 or .f64 (raw little-endian)",
            )),
        }
    }

    /// Raw little-endian samples of `dims` values, no header.
    pub fn raw(path: &Path, precision: Precision, dims: usize) -> Result<Self> {
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let bytes = file.metadata().map_err(|e| io_error(path, e))?.len();
        let sample = (precision_bytes(precision) * dims.max(1)) as u64;
        if dims == 0 || bytes % sample != 0 {
            return Err(parse_error(
                path,
                format!(
                    "{bytes} bytes are not a whole number of {dims}-value samples of {precision:?}"
                ),
            ));
        }
        Self::finish(
            file,
            path,
            0,
            (bytes / sample) as usize,
            dims,
            precision,
            false,
        )
    }

    /// A `.npy` file: its header, then reads of its data as needed.
    pub fn npy(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        let bytes = file.metadata().map_err(|e| io_error(path, e))?.len();
        // numpy's header limit, the preamble and the newline.
        let mut head = vec![0u8; bytes.min(10_016) as usize];
        read_at(&file, &mut head, 0).map_err(|e| io_error(path, e))?;
        check_npy_header(&head).map_err(|m| parse_error(path, m))?;
        let mut rest = &head[..];
        let header = Header::from_reader(&mut rest)
            .map_err(|e| parse_error(path, format!("not a valid .npy file: {e}")))?;
        let offset = (head.len() - rest.len()) as u64;
        let descriptor = header.type_descriptor.to_string();
        let (precision, big_endian) = match descriptor.trim_matches(['\'', '"']) {
            "<f8" => (Precision::F64, false),
            ">f8" => (Precision::F64, true),
            "<f4" => (Precision::F32, false),
            ">f4" => (Precision::F32, true),
            other => {
                return Err(parse_error(
                    path,
                    format!("unsupported dtype {other}: expected float64 or float32"),
                ))
            }
        };
        let (len, dims) = match header.shape[..] {
            [n] => (n, 1),
            [n, d] if !header.layout.is_fortran() || d == 1 => (n, d),
            [_, _] => {
                return Err(parse_error(
                    path,
                    "a Fortran-order 2-D array: save it in C order (np.ascontiguousarray)",
                ))
            }
            ref shape => {
                return Err(parse_error(
                    path,
                    format!("array of shape {shape:?}: a series is 1-D, or 2-D (samples x dims)"),
                ))
            }
        };
        let needed = (len as u128) * (dims as u128) * precision_bytes(precision) as u128;
        if dims == 0 || u128::from(bytes - offset.min(bytes)) < needed {
            return Err(parse_error(
                path,
                format!(
                    "file is truncated or empty: shape {:?} needs {needed} bytes of data",
                    header.shape
                ),
            ));
        }
        Self::finish(file, path, offset, len, dims, precision, big_endian)
    }

    fn finish(
        file: File,
        path: &Path,
        offset: u64,
        len: usize,
        dims: usize,
        precision: Precision,
        big_endian: bool,
    ) -> Result<Self> {
        Ok(SeriesFile {
            file,
            path: path.to_path_buf(),
            offset,
            len,
            dims,
            precision,
            big_endian,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }
}

fn precision_bytes(precision: Precision) -> usize {
    match precision {
        Precision::F32 => 4,
        Precision::F64 => 8,
    }
}

#[cfg(unix)]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_at(file: &File, mut buffer: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buffer.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buffer, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buffer = &mut buffer[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

impl SeriesSource for SeriesFile {
    fn len(&self) -> usize {
        self.len
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn read(&self, start: usize, count: usize, out: &mut Vec<f64>) -> Result<()> {
        let size = precision_bytes(self.precision);
        let values = count * self.dims;
        let mut bytes = vec![0u8; values * size];
        let at = self.offset + (start * self.dims * size) as u64;
        read_at(&self.file, &mut bytes, at).map_err(|e| io_error(&self.path, e))?;
        out.clear();
        out.reserve(values);
        match (self.precision, self.big_endian) {
            (Precision::F64, false) => out.extend(
                bytes
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap())),
            ),
            (Precision::F64, true) => out.extend(
                bytes
                    .chunks_exact(8)
                    .map(|b| f64::from_be_bytes(b.try_into().unwrap())),
            ),
            (Precision::F32, false) => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap()))),
            ),
            (Precision::F32, true) => out.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| f64::from(f32::from_be_bytes(b.try_into().unwrap()))),
            ),
        }
        Ok(())
    }
}

/// A series in a text file, whole: one sample a line (values separated by
/// spaces, tabs or commas), or, where there is one line, a univariate
/// series of its values. Empty lines are skipped.
pub fn read_text(path: &Path) -> Result<Array2<f64>> {
    let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    let mut values = Vec::new();
    let mut dims = None;
    let mut lines = 0;
    for (number, line) in text.lines().enumerate() {
        let before = values.len();
        for field in line
            .split([' ', '\t', ','])
            .filter(|f| !f.trim().is_empty())
        {
            let value: f64 = field.trim().parse().map_err(|_| Error::Parse {
                path: path.to_path_buf(),
                line: Some(number + 1),
                message: format!("not a number: {:?}", field.trim()),
            })?;
            values.push(value);
        }
        let count = values.len() - before;
        if count == 0 {
            continue;
        }
        lines += 1;
        match dims {
            None => dims = Some(count),
            Some(d) if d == count => {}
            Some(d) => {
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    line: Some(number + 1),
                    message: format!("{count} values, where the lines before have {d}"),
                })
            }
        }
    }
    let dims = match (dims, lines) {
        (None, _) => return Err(parse_error(path, "no values")),
        (Some(_), 1) => 1,
        (Some(d), _) => d,
    };
    let len = values.len() / dims;
    Ok(Array2::from_shape_vec((len, dims), values).expect("whole lines"))
}
