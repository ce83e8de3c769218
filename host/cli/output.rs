//! What the commands write: text and matrices on stdout (a closed pipe is
//! not a failure), output files (checked before any work, written through
//! temporary files and renamed into place together, so a failed run leaves
//! none), and progress bars.

use super::Failure;
use indicatif::{ProgressBar, ProgressStyle};
use ndarray::ArrayView2;
use ndarray_npy::{WritableElement, WriteNpyError, WriteNpyExt};
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use timewarp::formats;
use timewarp::Float;

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

/// Checks `--out` before any work: `.csv` or `.npy`, and a file that can
/// be written ([`check_destination`]).
pub fn check_output_path(path: &Path) -> Result<(), Failure> {
    check_destination(path, &["csv", "npy"], "the output")
}

/// Checks an output path before any work: one of `extensions`, not a
/// folder, in an existing folder where a file can be created (tried with a
/// temporary file, removed at once). A symbolic link is checked where it
/// points.
pub fn check_destination(path: &Path, extensions: &[&str], what: &str) -> Result<(), Failure> {
    let fail = |problem: String| Err(Failure::usage(format!("{}: {problem}", path.display())));
    let names: Vec<String> = extensions.iter().map(|e| format!(".{e}")).collect();
    let names = names.join(" or ");
    let extension = path.extension().map(|e| e.to_string_lossy().to_lowercase());
    if !extension.is_some_and(|e| extensions.contains(&e.as_str())) {
        return fail(format!("{what} must end in {names}"));
    }
    let target = match destination(path)? {
        Destination::Direct(_) => return Ok(()),
        Destination::Replace(target) => target,
    };
    let folder = folder_of(&target);
    if !folder.is_dir() {
        return fail(format!("no folder {}", folder.display()));
    }
    let probe = temporary_path(&target);
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

/// The folder of `path` (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The file `path` names, its symbolic links followed to the end (which
/// need not exist yet), so that writing replaces the file a link points to
/// rather than the link.
fn resolve_links(path: &Path) -> Result<PathBuf, Failure> {
    let mut current = path.to_path_buf();
    // The kernel's own limit on the links of one lookup.
    for _ in 0..40 {
        let is_link = std::fs::symlink_metadata(&current).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            return Ok(current);
        }
        let target = std::fs::read_link(&current)
            .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
        // A relative target is relative to the link's folder.
        current = current.parent().unwrap_or(Path::new("")).join(target);
    }
    Err(Failure::usage(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}

/// How an output reaches its file.
enum Destination {
    /// A regular file, or none yet: written beside it and renamed onto it.
    Replace(PathBuf),
    /// Something else that exists (a device, a pipe): written directly,
    /// there being no file to replace.
    Direct(PathBuf),
}

fn destination(path: &Path) -> Result<Destination, Failure> {
    let target = resolve_links(path)?;
    match std::fs::metadata(&target) {
        Ok(meta) if meta.is_dir() => Err(Failure::usage(format!(
            "{}: is a folder; give a file name",
            path.display()
        ))),
        Ok(meta) if !meta.is_file() => Ok(Destination::Direct(target)),
        _ => Ok(Destination::Replace(target)),
    }
}

/// A temporary file beside `path`, in the same folder (so a rename moves
/// it onto `path`), named after it, this process and a count (two outputs
/// of one run never share one).
fn temporary_path(path: &Path) -> PathBuf {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let extension = path.extension().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(
        ".{name}.{}.{}.partial.{extension}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// One output written under a temporary name, not yet renamed.
struct Staged {
    temporary: PathBuf,
    target: PathBuf,
    /// The path as given, for messages.
    given: PathBuf,
}

/// The files of one run. Each is written beside its destination under a
/// temporary name, and all are renamed into place by [`Outputs::commit`]
/// once every one has been written, so a run that fails part way leaves
/// none of them; dropped uncommitted, the temporary files are removed.
/// A destination that is not a regular file (a device, a pipe, through a
/// link) is written directly, as it has no file to rename onto.
#[derive(Default)]
pub struct Outputs {
    staged: Vec<Staged>,
}

impl Outputs {
    /// Writes an output for `path` with `write(file)`; a failure names
    /// `path` and the system's reason.
    pub fn write(
        &mut self,
        path: &Path,
        write: impl FnOnce(File) -> std::io::Result<()>,
    ) -> Result<(), Failure> {
        let failed = |e: std::io::Error| Failure::usage(format!("{}: {e}", path.display()));
        let target = match destination(path)? {
            Destination::Direct(target) => {
                return File::create(target).and_then(write).map_err(failed)
            }
            Destination::Replace(target) => target,
        };
        let temporary = temporary_path(&target);
        let written = File::create(&temporary).and_then(write);
        // Staged even when the write failed part way, so that it is removed.
        self.staged.push(Staged {
            temporary,
            target,
            given: path.to_path_buf(),
        });
        written.map_err(failed)
    }

    /// Writes `bytes` as the output for `path`.
    pub fn write_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<(), Failure> {
        self.write(path, |mut file| file.write_all(bytes))
    }

    /// Writes a matrix as the output for `path`: `.npy` by its extension,
    /// else CSV.
    pub fn write_matrix<T: Float + WritableElement>(
        &mut self,
        path: &Path,
        matrix: ArrayView2<T>,
    ) -> Result<(), Failure> {
        let npy = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
        self.write(path, |file| {
            if !npy {
                return formats::write_csv(file, matrix);
            }
            let mut out = BufWriter::new(file);
            matrix.write_npy(&mut out).map_err(|e| match e {
                WriteNpyError::Io(source) => source,
                other => std::io::Error::other(other.to_string()),
            })?;
            out.flush()
        })
    }

    /// Renames every output into place. Should a rename fail, the outputs
    /// already renamed are removed with the rest.
    pub fn commit(mut self) -> Result<(), Failure> {
        let staged = std::mem::take(&mut self.staged);
        for (k, output) in staged.iter().enumerate() {
            if let Err(e) = std::fs::rename(&output.temporary, &output.target) {
                for done in &staged[..k] {
                    let _ = std::fs::remove_file(&done.target);
                }
                for left in &staged[k..] {
                    let _ = std::fs::remove_file(&left.temporary);
                }
                return Err(Failure::usage(format!("{}: {e}", output.given.display())));
            }
        }
        Ok(())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for output in &self.staged {
            let _ = std::fs::remove_file(&output.temporary);
        }
    }
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

/// `n` and the noun in its number: "1 distance", "2 distances".
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::{time_left, Outputs};
    use std::time::Duration;

    fn names(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Nothing is in place before the commit; a failed write leaves no
    /// file, and neither do the outputs written before it.
    #[test]
    fn outputs_are_renamed_into_place_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.png"));
        let mut outputs = Outputs::default();
        outputs.write_bytes(&a, b"1,2\n").unwrap();
        outputs.write_bytes(&b, b"png").unwrap();
        assert!(!a.exists() && !b.exists());
        outputs.commit().unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"1,2\n");
        assert_eq!(names(dir.path()), ["a.csv", "b.png"]);

        let mut outputs = Outputs::default();
        let c = dir.path().join("c.csv");
        outputs.write_bytes(&c, b"3\n").unwrap();
        let full = std::io::Error::from_raw_os_error(28);
        let failure = outputs
            .write(&b, |_| Err(full))
            .expect_err("the write failed");
        assert_eq!(failure.status, 2);
        assert!(
            failure.message.starts_with(&format!("{}: ", b.display()))
                && failure.message.ends_with("(os error 28)"),
            "{failure:?}"
        );
        drop(outputs);
        assert_eq!(names(dir.path()), ["a.csv", "b.png"], "c.csv never written");
    }

    #[test]
    fn the_eta_follows_the_average_rate() {
        // 29% done after 3 minutes: about 7 more, whatever the last step took.
        let left = time_left(Duration::from_secs(180), 0.29);
        assert_eq!(left.as_secs(), 440);
        assert_eq!(time_left(Duration::from_secs(10), 1.0), Duration::ZERO);
    }
}
