//! Running the crate's computations from Python: the GIL released, and
//! long ones stopped by Ctrl-C.

use crate::errors::{py_error, TimewarpError};
use pyo3::prelude::*;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;
use timewarp::{Float, SeriesSet};

/// Work of more cells than this runs on a thread of its own, so that
/// Ctrl-C can stop it; less finishes sooner than the thread would start.
const INTERRUPTIBLE_CELLS: f64 = 1e7;

/// `work` (of about `cells` cells) with the GIL released. Large work runs
/// on a thread of its own while this one checks every 50 ms for a signal
/// (Ctrl-C): then the computation is asked to stop at its next tile
/// (`timewarp::interrupt`), and the signal's exception (KeyboardInterrupt)
/// is raised once it has.
pub fn compute<T: Send>(
    py: Python<'_>,
    cells: f64,
    work: impl FnOnce() -> timewarp::Result<T> + Send,
) -> PyResult<T> {
    if cells < INTERRUPTIBLE_CELLS {
        return py.detach(work).map_err(py_error);
    }
    std::thread::scope(|scope| {
        let (done, finished) = std::sync::mpsc::channel();
        // Shared with the closures that wait without the GIL.
        let finished = std::sync::Mutex::new(finished);
        let wait = |timeout: Option<Duration>| {
            let finished = finished
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match timeout {
                Some(timeout) => finished.recv_timeout(timeout),
                None => finished.recv().map_err(|_| RecvTimeoutError::Disconnected),
            }
        };
        scope.spawn(move || {
            let _ = done.send(work());
        });
        loop {
            let waited = py.detach(|| wait(Some(Duration::from_millis(50))));
            match waited {
                Ok(result) => return result.map_err(py_error),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        // Asked again until the computation ends: the
                        // signal may come before it has started (a busy
                        // machine), when an interrupt reaches nothing.
                        loop {
                            timewarp::interrupt();
                            let waited = py.detach(|| wait(Some(Duration::from_millis(50))));
                            if !matches!(waited, Err(RecvTimeoutError::Timeout)) {
                                return Err(signal);
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(TimewarpError::new_err(
                        "the computation's thread ended without a result",
                    ));
                }
            }
        }
    })
}

/// Cells of the matrices of `a` against `b` (or itself).
pub fn cells<T: Float>(a: &SeriesSet<T>, b: Option<&SeriesSet<T>>) -> f64 {
    let a_samples = a.total_samples() as f64;
    match b {
        Some(b) => a_samples * b.total_samples() as f64,
        None => a_samples * a_samples / 2.0,
    }
}
