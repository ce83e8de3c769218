//! Whether a run's largest allocations can fit this machine, checked before
//! any work, so that a run far too large fails at once with one line
//! rather than aborting part way through.

use super::{three_significant_digits, Failure};

/// A usage error unless `bytes` (`None`: more than a `usize` counts) fit
/// in this machine's memory and swap and a fallible allocation of them
/// succeeds (released at once). `what` names them, `advice` what to do
/// instead. The allocation alone does not settle it: where the system
/// overcommits memory, it succeeds for sizes that no run could fill.
pub fn check_fits(what: &str, bytes: Option<usize>, advice: &str) -> Result<(), Failure> {
    let memory = total_memory();
    let why = match bytes {
        None => "more than this machine can address".to_string(),
        Some(bytes) if memory.is_some_and(|m| bytes > m) => format!(
            "more than this machine's memory and swap ({} GB)",
            gigabytes(memory.unwrap_or_default())
        ),
        Some(bytes) if Vec::<u8>::new().try_reserve_exact(bytes).is_err() => {
            "more than can be allocated here".to_string()
        }
        Some(_) => return Ok(()),
    };
    let size = bytes.map_or(String::new(), |b| {
        format!(" {} GB ({b} bytes),", gigabytes(b))
    });
    Err(Failure::usage(format!("{what}:{size} {why}; {advice}")))
}

/// `bytes` in GB with three significant digits.
fn gigabytes(bytes: usize) -> String {
    three_significant_digits(bytes as f64 / 1e9)
}

/// Memory and swap in bytes, where the system says (Linux's
/// `/proc/meminfo`).
fn total_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<usize>()
            .ok()
    };
    let total = kib("MemTotal:")?.saturating_add(kib("SwapTotal:").unwrap_or(0));
    Some(total.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_allocations_fit_and_impossible_ones_are_one_line() {
        assert!(check_fits("a kilobyte", Some(1024), "never mind").is_ok());
        for bytes in [None, Some(usize::MAX), Some(isize::MAX as usize)] {
            let failure = check_fits("the matrix", bytes, "use less").unwrap_err();
            assert_eq!(failure.status, 2);
            assert!(failure.message.starts_with("the matrix: "), "{failure:?}");
            assert!(failure.message.ends_with("; use less"), "{failure:?}");
            assert!(!failure.message.contains('\n'), "{failure:?}");
        }
        let failure = check_fits("x", Some(usize::MAX), "y").unwrap_err();
        assert!(
            failure.message.contains(&format!("({} bytes)", usize::MAX)),
            "{failure:?}"
        );
    }

    #[test]
    fn this_machine_has_memory() {
        if cfg!(target_os = "linux") {
            assert!(total_memory().is_some_and(|bytes| bytes > 1 << 20));
        }
    }
}
