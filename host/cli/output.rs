//! What the commands write: text and matrices on stdout (a closed pipe is
//! not a failure), `--out` files (checked before any work, written through
//! a temporary file so a failure leaves none), and progress bars.

use super::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use ndarray::ArrayView2;
use ndarray_npy::WritableElement;
use std::io::{IsTerminal, Write};
use std::path::Path;
use timewarp::formats;
use timewarp::{Error, Float};

/// Text on stdout. A closed pipe (`| head`) is not a failure.
pub fn print(text: &str) -> Result<(), Failure> {
    stdout_result(std::io::stdout().lock().write_all(text.as_bytes()))
}

/// A matrix as CSV on stdout.
pub fn print_csv<T: Float>(matrix: ArrayView2<T>) -> Result<(), Failure> {
    stdout_result(formats::write_csv(std::io::stdout().lock(), matrix))
}

fn stdout_result(result: std::io::Result<()>) -> Result<(), Failure> {
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::runtime(format!("writing to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// Checks `--out` before any work: a known extension, not a folder, in an
/// existing folder where a file can be created (tried with the temporary
/// file [`write_output`] writes, removed at once).
pub fn check_output_path(path: &Path) -> Result<(), Failure> {
    let fail = |problem: String| Err(Failure::usage(format!("{}: {problem}", path.display())));
    let extension = path.extension().map(|e| e.to_string_lossy().to_lowercase());
    if !matches!(extension.as_deref(), Some("csv" | "npy")) {
        return fail("the output must end in .csv or .npy".into());
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return fail(format!("no folder {}", folder.display()));
    }
    if path.is_dir() {
        return fail("is a folder; give a file name ending in .csv or .npy".into());
    }
    let probe = temporary_path(path);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => fail(format!("cannot write a file in {}: {e}", folder.display())),
    }
}

/// The temporary file `path` is written through, in the same folder.
fn temporary_path(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let extension = path.extension().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(
        ".{name}.{}.partial.{extension}",
        std::process::id()
    ))
}

/// Writes the matrix to `path` (.csv or .npy) through a temporary file in
/// the same folder, renamed at the end, so a failure leaves no partial file.
pub fn write_output<T: Float + WritableElement>(
    path: &Path,
    matrix: ArrayView2<T>,
) -> Result<(), Failure> {
    let temporary = temporary_path(path);
    let result = formats::write_matrix(&temporary, matrix).and_then(|()| {
        std::fs::rename(&temporary, path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })
    });
    result.map_err(|error| {
        let _ = std::fs::remove_file(&temporary);
        // Name the file asked for, not the temporary one.
        match error {
            Error::Io { source, .. } => Failure::usage(format!("{}: {source}", path.display())),
            other => other.into(),
        }
    })
}

/// Writes `text` to `path` through a temporary file in the same folder,
/// renamed at the end, like [`write_output`].
pub fn write_text(path: &Path, text: &str) -> Result<(), Failure> {
    let temporary = temporary_path(path);
    let result = std::fs::write(&temporary, text).and_then(|()| std::fs::rename(&temporary, path));
    result.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        Failure::usage(format!("{}: {e}", path.display()))
    })
}

/// A progress bar on stderr of `total` steps, drawn only when stderr is a
/// terminal, so that it never mixes into redirected output.
pub fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{bar:40} {percent:>3}% {elapsed} (eta {eta}) {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(total).with_style(style)
}

/// A progress bar for one long computation, in thousandths of its work
/// ([`set_fraction_done`]), drawn only when stderr is a terminal. Its ETA
/// is the elapsed time scaled by the work left, which stays steady where
/// indicatif's estimate of the recent rate jumps between uneven steps.
pub fn work_bar() -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{bar:40} {percent:>3}% {elapsed} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::new(1000).with_style(style)
}

/// Moves a [`work_bar`] to `fraction` (0 to 1) of the work done.
pub fn set_fraction_done(bar: &ProgressBar, fraction: f64) {
    let fraction = fraction.clamp(0.0, 1.0);
    bar.set_position((1000.0 * fraction) as u64);
    if fraction > 0.0 {
        let left = time_left(bar.elapsed(), fraction);
        bar.set_message(format!("(eta {})", indicatif::HumanDuration(left)));
    }
}

/// The time the rest of the work takes at the average rate so far.
fn time_left(elapsed: std::time::Duration, fraction: f64) -> std::time::Duration {
    elapsed.mul_f64((1.0 - fraction) / fraction)
}

#[cfg(test)]
mod tests {
    use super::time_left;
    use std::time::Duration;

    #[test]
    fn the_eta_follows_the_average_rate() {
        // 29% done after 3 minutes: about 7 more, whatever the last step took.
        let left = time_left(Duration::from_secs(180), 0.29);
        assert_eq!(left.as_secs(), 440);
        assert_eq!(time_left(Duration::from_secs(10), 1.0), Duration::ZERO);
    }
}
