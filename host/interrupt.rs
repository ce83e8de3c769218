//! Stopping computations that are running, e.g. on Ctrl-C: [`interrupt`]
//! asks every computation running now to stop at its next tile (the GPU's
//! streamed tiles, the CPU backend's units of pairs); each then returns
//! [`Error::Interrupted`] instead of a result. Computations that start
//! after all of those have ended are not affected.

use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Computations running, and whether they were asked to stop.
struct Interrupts {
    running: AtomicUsize,
    requested: AtomicBool,
}

impl Interrupts {
    const fn new() -> Self {
        Interrupts {
            running: AtomicUsize::new(0),
            requested: AtomicBool::new(false),
        }
    }

    fn interrupt(&self) {
        if self.running.load(Ordering::SeqCst) > 0 {
            self.requested.store(true, Ordering::SeqCst);
        }
    }

    fn check(&self) -> Result<()> {
        if self.requested.load(Ordering::Relaxed) {
            return Err(Error::Interrupted);
        }
        Ok(())
    }

    fn start(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
    }

    /// The last computation to end clears the request.
    fn end(&self) {
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.requested.store(false, Ordering::SeqCst);
        }
    }
}

static INTERRUPTS: Interrupts = Interrupts::new();

/// Asks every computation running now to stop at its next tile; a no-op
/// when none is running. Safe to call from any thread.
pub fn interrupt() {
    INTERRUPTS.interrupt();
}

/// [`Error::Interrupted`] if the running computations were asked to stop.
pub(crate) fn check() -> Result<()> {
    INTERRUPTS.check()
}

/// Whether the running computations were asked to stop.
pub(crate) fn requested() -> bool {
    check().is_err()
}

/// A computation running: while one is held, [`interrupt`] reaches it.
pub(crate) struct Running(());

impl Running {
    pub(crate) fn start() -> Self {
        INTERRUPTS.start();
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        INTERRUPTS.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_reaches_the_running_computations_only() {
        let state = Interrupts::new();
        // Nothing running: no effect on what starts later.
        state.interrupt();
        state.start();
        assert!(state.check().is_ok());
        state.interrupt();
        state.start();
        assert!(matches!(state.check(), Err(Error::Interrupted)));
        state.end();
        assert!(
            state.check().is_err(),
            "one still running: the request holds"
        );
        state.end();
        state.start();
        assert!(state.check().is_ok(), "the last to end cleared it");
        state.end();
    }
}
