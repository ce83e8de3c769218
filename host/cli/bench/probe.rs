//! How long one run of a case would take on a backend, estimated before
//! running it, so that `--variant all` skips what would run for minutes.
//!
//! The model: a backend's time grows in proportion to the cells at most.
//! A probe is the case made smaller (every series cut shorter, then fewer
//! queries or series), run twice, the second run timed; the estimate is
//! that time scaled by the case's cells over the probe's. Cutting lengths
//! first keeps the pairs, so the kernels that run pairs side by side see
//! the same parallelism; a probe only ever offers less parallel work and
//! carries the same fixed costs (launches, copies) over fewer cells, so
//! the estimate errs high. An estimate over the limit is checked again
//! with a larger probe while that probe is cheap, since fixed costs
//! inflate small probes most.

use super::Case;
use ndarray::s;
use timewarp::SeriesSet;

/// Cases of up to this many cells and pairs are run without a probe: well
/// under a second on any backend (the pair-by-pair variants cost a few
/// launches a pair, whatever its cells).
const SMALL_CELLS: f64 = PROBE_START_CELLS * PROBE_GROWTH;
const SMALL_PAIRS: f64 = 256.0;
/// Cells of the first probe.
const PROBE_START_CELLS: f64 = (1u64 << 20) as f64;
/// Each probe after the first has this many times the cells of the last.
const PROBE_GROWTH: f64 = 32.0;
/// A probe cuts no series shorter than this (or than it is): shorter ones
/// are more fixed cost than cells.
const MIN_PROBE_LENGTH: usize = 32;
/// A larger probe is run only if it is expected to take at most this share
/// of the limit.
const PROBE_SHARE_OF_LIMIT: f64 = 0.25;

/// What the probes said.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Estimate {
    /// Small enough to run without a probe.
    Small,
    /// One run is estimated to take this long, within the limit.
    Within { seconds: f64 },
    /// One run is estimated to take this long, over the limit, from a
    /// probe of `probe_cells` that took `probe_seconds`.
    Over {
        seconds: f64,
        probe_cells: f64,
        probe_seconds: f64,
    },
}

/// Estimates one run of `case` (or `run_share` of it: the CPU runs a
/// sample) against `limit` seconds, `time_probe(probe)` giving the seconds
/// of one run of a smaller case (after a warm-up run of it).
pub fn estimate<E>(
    case: &Case,
    run_share: f64,
    limit: f64,
    mut time_probe: impl FnMut(&Case) -> Result<f64, E>,
) -> Result<Estimate, E> {
    let cells = case.cells();
    if cells * run_share <= SMALL_CELLS && case.pairs() * run_share <= SMALL_PAIRS {
        return Ok(Estimate::Small);
    }
    let mut target = PROBE_START_CELLS;
    loop {
        let probe = shrunk(case, target / cells);
        let probe_cells = probe.cells();
        let probe_seconds = time_probe(&probe)?;
        let seconds = probe_seconds * cells / probe_cells * run_share;
        if seconds <= limit {
            return Ok(Estimate::Within { seconds });
        }
        target = probe_cells * PROBE_GROWTH;
        let next_seconds = probe_seconds * PROBE_GROWTH;
        if target >= cells || next_seconds > PROBE_SHARE_OF_LIMIT * limit {
            return Ok(Estimate::Over {
                seconds,
                probe_cells,
                probe_seconds,
            });
        }
    }
}

/// A case of about `fraction` (0 to 1) of `case`'s cells: every series cut
/// to the same share of its length (not below [`MIN_PROBE_LENGTH`]), then,
/// for what that leaves, the first queries (or pairs) only, and past a
/// single query the first references; a set against itself, its first
/// series. Always at least one pair of at least one cell.
pub fn shrunk(case: &Case, fraction: f64) -> Case {
    let fraction = fraction.clamp(0.0, 1.0);
    let length_share = fraction.sqrt();
    let cut = |set: &SeriesSet<f64>, count: usize| -> SeriesSet<f64> {
        let series: Vec<_> = (0..count.clamp(1, set.len()))
            .map(|k| {
                let series = set.series(k);
                let len = series.nrows();
                let keep = ((len as f64 * length_share).ceil() as usize)
                    .max(MIN_PROBE_LENGTH)
                    .min(len);
                series.slice_move(s![..keep, ..])
            })
            .collect();
        SeriesSet::from_series(series).expect("parts of a valid batch")
    };
    // The share of the cells the shorter series leave, and so the share of
    // the pairs to keep.
    let shorter = Case {
        queries: cut(&case.queries, case.queries.len()),
        references: case.references.as_ref().map(|r| cut(r, r.len())),
        mode: case.mode,
    };
    let pairs_share = (fraction * case.cells() / shorter.cells()).min(1.0);
    let keep = |count: usize, share: f64| ((count as f64 * share).round() as usize).max(1);
    match &shorter.references {
        None => {
            let count = keep(shorter.queries.len(), pairs_share.sqrt());
            Case {
                queries: shorter.queries.slice(0..count),
                references: None,
                mode: case.mode,
            }
        }
        Some(references) if case.mode != super::Mode::Matrix => {
            let count = keep(shorter.queries.len(), pairs_share);
            Case {
                queries: shorter.queries.slice(0..count),
                references: Some(references.slice(0..count)),
                mode: case.mode,
            }
        }
        Some(references) => {
            let queries = keep(shorter.queries.len(), pairs_share);
            let left = pairs_share * shorter.queries.len() as f64 / queries as f64;
            let count = keep(references.len(), left.min(1.0));
            Case {
                queries: shorter.queries.slice(0..queries),
                references: Some(references.slice(0..count)),
                mode: case.mode,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Mode;
    use super::*;
    use timewarp::data::random_normal;

    fn case(queries: usize, references: Option<usize>, length: usize, mode: Mode) -> Case {
        Case {
            queries: random_normal(queries, length, 1, 1),
            references: references.map(|n| random_normal(n, length, 1, 2)),
            mode,
        }
    }

    fn lengths(set: &SeriesSet<f64>) -> Vec<usize> {
        (0..set.len()).map(|k| set.series_len(k)).collect()
    }

    #[test]
    fn probes_cut_lengths_first_then_queries() {
        // One query against 4096 references of 512: 2^30 cells.
        let big = case(1, Some(4096), 512, Mode::Matrix);
        assert_eq!(big.cells(), (4096 * 512 * 512) as f64);
        // A sixteenth: lengths cut to a quarter, every pair kept.
        let probe = shrunk(&big, 1.0 / 16.0);
        assert_eq!(probe.cells(), big.cells() / 16.0);
        assert_eq!(probe.queries.len(), 1);
        assert_eq!(probe.references.as_ref().unwrap().len(), 4096);
        // Far smaller: lengths stop at 32 (a 256th of the cells), then the
        // one query keeps a 16th of the references.
        let probe = shrunk(&big, 1.0 / 4096.0);
        assert_eq!(lengths(&probe.queries), [32]);
        let references = probe.references.as_ref().unwrap();
        assert!(lengths(references).iter().all(|&n| n == 32));
        assert_eq!(references.len(), 256);
        assert_eq!(probe.cells(), big.cells() / 4096.0);
        // Many queries: fewer queries, all references.
        let square = case(256, Some(256), 128, Mode::Matrix);
        let probe = shrunk(&square, 1.0 / 64.0);
        assert_eq!(lengths(&probe.queries)[0], 32);
        assert_eq!(probe.queries.len(), 64);
        assert_eq!(probe.references.as_ref().unwrap().len(), 256);
        // The probe's series are the case's, cut.
        assert_eq!(
            probe.queries.series(3),
            square.queries.series(3).slice(s![..32, ..])
        );
    }

    #[test]
    fn probes_of_paired_batches_and_of_a_set_against_itself() {
        let paired = case(1024, Some(1024), 256, Mode::Paired);
        let probe = shrunk(&paired, 1.0 / 256.0);
        // Lengths to 32 (a 64th), then a quarter of the pairs.
        assert_eq!(probe.queries.len(), 256);
        assert_eq!(probe.references.as_ref().unwrap().len(), 256);
        assert_eq!(probe.cells(), paired.cells() / 256.0);
        let itself = case(400, None, 64, Mode::Matrix);
        let probe = shrunk(&itself, 1.0 / 64.0);
        // Lengths to 32 (a quarter), then a 16th of the pairs: a quarter
        // of the series.
        assert_eq!(probe.queries.len(), 100);
        assert!(probe.references.is_none());
        let ratio = itself.cells() / probe.cells();
        assert!((60.0..70.0).contains(&ratio), "{ratio}");
    }

    #[test]
    fn probes_keep_at_least_a_pair_and_short_series_whole() {
        let short = case(3, Some(5), 10, Mode::Matrix);
        let probe = shrunk(&short, 1e-9);
        assert_eq!(lengths(&probe.queries), [10]);
        assert_eq!(probe.references.as_ref().unwrap().len(), 1);
        assert_eq!(probe.cells(), 100.0);
        assert_eq!(shrunk(&short, 1.0).cells(), short.cells());
    }

    /// A backend whose run costs `fixed` seconds plus cells at `rate`.
    fn linear(
        fixed: f64,
        rate: f64,
        probed: &mut Vec<f64>,
    ) -> impl FnMut(&Case) -> Result<f64, ()> + '_ {
        move |probe| {
            probed.push(probe.cells());
            Ok(fixed + probe.cells() / rate)
        }
    }

    #[test]
    fn estimates_scale_probes_and_refine_fixed_costs() {
        let mut probed = Vec::new();
        let small = case(2, Some(2), 100, Mode::Matrix);
        let got = estimate(&small, 1.0, 1.0, linear(0.0, 1e9, &mut probed));
        assert_eq!(got, Ok(Estimate::Small));
        assert!(probed.is_empty(), "a small case runs unprobed");
        // Few cells in many pairs: probed (a pair costs launches too).
        let many = case(600, Some(600), 8, Mode::Matrix);
        let got = estimate(&many, 1.0, 1.0, linear(0.0, 1e9, &mut probed));
        assert!(matches!(got, Ok(Estimate::Within { .. })), "{got:?}");
        assert_eq!(probed.len(), 1);
        probed.clear();

        // 2^32 cells at 1e9 a second: 4.3 s, over a 1 s limit, measured
        // exactly by any probe; checked with a larger probe (33 ms), not
        // with one that would take a quarter of the limit.
        let big = case(1, Some(1024), 2048, Mode::Matrix);
        let got = estimate(&big, 1.0, 1.0, linear(0.0, 1e9, &mut probed)).unwrap();
        let Estimate::Over { seconds, .. } = got else {
            panic!("{got:?}")
        };
        assert!((seconds - big.cells() / 1e9).abs() < 1e-6, "{seconds}");
        assert_eq!(probed.len(), 2, "{probed:?}");
        // Within a 10 s limit.
        probed.clear();
        let got = estimate(&big, 1.0, 10.0, linear(0.0, 1e9, &mut probed)).unwrap();
        assert!(matches!(got, Estimate::Within { seconds } if seconds < 4.4));

        // A fixed cost of 1 ms a run: the first probe's estimate (4 s) is
        // too high, larger probes bring it under the limit.
        probed.clear();
        let got = estimate(&big, 1.0, 2.0, linear(1e-3, 1e10, &mut probed)).unwrap();
        assert!(
            matches!(got, Estimate::Within { seconds } if seconds < 2.0),
            "{got:?}"
        );
        assert!(probed.len() >= 2, "{probed:?}");
        assert!(probed.windows(2).all(|p| p[1] > 10.0 * p[0]), "{probed:?}");

        // Slow: the probes stop once the next would take a quarter of the
        // limit, well before the case's size.
        probed.clear();
        let got = estimate(&big, 1.0, 1.0, linear(0.0, 1e7, &mut probed)).unwrap();
        let Estimate::Over { probe_cells, .. } = got else {
            panic!("{got:?}")
        };
        assert_eq!(probed.last(), Some(&probe_cells));
        let probing: f64 = probed.iter().map(|c| c / 1e7).sum();
        assert!(probing < 0.5, "{probed:?}");

        // A run of a 1024th of the case (one query of 1024, on the CPU):
        // 0.67 s at 1e8 cells a second, within the limit.
        probed.clear();
        let queries = case(1024, Some(1024), 256, Mode::Matrix);
        let got = estimate(&queries, 1.0 / 1024.0, 1.0, linear(0.0, 1e8, &mut probed));
        let Ok(Estimate::Within { seconds }) = got else {
            panic!("{got:?}")
        };
        assert!(
            (seconds - queries.cells() / 1024.0 / 1e8).abs() < 1e-6,
            "{seconds}"
        );
        // Over a tenth of a second, and no probe near the limit's length.
        probed.clear();
        let got = estimate(&queries, 1.0 / 1024.0, 0.1, linear(0.0, 1e8, &mut probed));
        assert!(matches!(got, Ok(Estimate::Over { .. })), "{got:?}");
        assert!(probed.iter().all(|c| c / 1e8 < 0.1), "{probed:?}");
    }
}
