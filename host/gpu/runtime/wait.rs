//! Every wait of the host for the device is bounded: a stream or an event
//! is polled until it is done, an error, or [`device_wait_bound`] has
//! passed, which is an [`Error::DeviceWait`] naming what was waited for. The
//! device's own waits are bounded too (`timewarp_kernels::hw::WaitBound`),
//! so a launch always ends; the host's bound is the second line, for a
//! GPU that stopped.

use crate::error::DriverCall;
use crate::{Error, Result};
use cudarc::driver::{sys, CudaEvent, CudaStream, DriverError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The default of [`device_wait_bound`]: longer than any one launch of the
/// kernels takes on the pairs that fit a GPU's memory.
const DEFAULT_BOUND: Duration = Duration::from_secs(600);

/// Busy polling for this long first: most waits end within it, and a
/// sleep would add its own latency (as the driver's own synchronisation
/// spins while the host has cores to spare).
const SPIN: Duration = Duration::from_millis(2);

/// Then yielding the core between polls, up to this long.
const YIELD: Duration = Duration::from_millis(50);

/// Then a sleep between polls: a wait this long is not worth a core.
const SLEEP: Duration = Duration::from_micros(200);

/// How long the host waits for the device before it gives up with
/// [`Error::DeviceWait`]: `TIMEWARP_DEVICE_WAIT_SECONDS` if set (a positive
/// number of seconds), else 600 s.
pub fn device_wait_bound() -> Duration {
    static BOUND: OnceLock<Duration> = OnceLock::new();
    *BOUND.get_or_init(|| {
        std::env::var("TIMEWARP_DEVICE_WAIT_SECONDS")
            .ok()
            .and_then(|text| text.trim().parse::<f64>().ok())
            .filter(|seconds| seconds.is_finite() && *seconds > 0.0)
            .map_or(DEFAULT_BOUND, Duration::from_secs_f64)
    })
}

/// Polls `done` (whether the work is finished, or the driver's error) until
/// it says so, or the bound passes.
fn poll(
    kernel: &str,
    mut done: impl FnMut() -> std::result::Result<bool, DriverError>,
) -> Result<()> {
    let started = Instant::now();
    let bound = device_wait_bound();
    loop {
        // The call's name is made only on an error: this loop spins.
        if done().map_err(|e| Error::driver(format!("waiting for {kernel}"), e))? {
            return Ok(());
        }
        let waited = started.elapsed();
        if waited > bound {
            return Err(Error::DeviceWait {
                kernel: kernel.to_string(),
                what: format!(
                    "the device was still busy after {:.0} s (TIMEWARP_DEVICE_WAIT_SECONDS)",
                    waited.as_secs_f64()
                ),
            });
        }
        if waited < SPIN {
            std::hint::spin_loop();
        } else if waited < YIELD {
            std::thread::yield_now();
        } else {
            std::thread::sleep(SLEEP);
        }
    }
}

/// Waits until everything queued on `stream` is done (the work of
/// `kernel`, named in the error if the wait passes its bound).
pub(crate) fn wait_stream(stream: &CudaStream, kernel: &str) -> Result<()> {
    stream
        .context()
        .bind_to_thread()
        .call("binding the context to the thread")?;
    poll(kernel, || {
        // SAFETY: the stream is alive (borrowed).
        match unsafe { sys::cuStreamQuery(stream.cu_stream()) } {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            status => status.result().map(|()| true),
        }
    })
}

/// Waits until the work recorded in `event` is done.
pub(crate) fn wait_event(event: &CudaEvent, kernel: &str) -> Result<()> {
    event
        .context()
        .bind_to_thread()
        .call("binding the context to the thread")?;
    poll(kernel, || event.try_is_complete())
}

/// Whether the fault word a launch's bounded waits write (zeroed before
/// it) says that one gave up; read once the launch is done.
pub(crate) fn check_fault_word(
    stream: &Arc<CudaStream>,
    word: &cudarc::driver::CudaView<'_, u32>,
    kernel: &str,
) -> Result<()> {
    let fault = stream.clone_dtoh(word).call("copying to the host")?;
    if fault.iter().any(|&f| f != 0) {
        return Err(Error::DeviceWait {
            kernel: kernel.to_string(),
            what: "a warp waited longer than its bound for another warp's values".into(),
        });
    }
    Ok(())
}
