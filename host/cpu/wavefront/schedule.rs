//! Which tile of the wavefront runs next, and on which thread: each tile as
//! soon as the tiles it reads are done, with no barrier between
//! anti-diagonals.
//!
//! Tile `(r, c)` reads the borders that tile `(r, c - 1)` and the last tile
//! of column `c` above it left behind, so it may run once every row of
//! tiles above has passed column `c` (or never computes it) and its own row
//! has reached it. The schedule keeps, per row of tiles, the next column it
//! computes, and a worker takes any tile that this makes ready, the one on
//! the earliest anti-diagonal first (the critical path). A worker that a
//! busy processor slows down then holds up only the tiles below and right
//! of its tile, while the others take the rest of the frontier: with a
//! barrier per anti-diagonal, every anti-diagonal waited for its slowest
//! tile.
//!
//! A worker with no ready tile waits on a condition variable, never on
//! rayon (a worker that ran other rayon tasks while it waits could run
//! another worker inside itself, which would then wait on the tile its own
//! thread holds). Any tile it waits for is held by a worker that is
//! running, so the schedule completes on any number of threads, one
//! included: workers that start late find the tiles taken or done, and
//! leave. The waits are bounded, and an interrupt stops every worker within
//! a tile's time.

use crate::interrupt;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long a waiting worker sleeps at most before it looks for an
/// interrupt itself (the worker that sees one first wakes the others).
const WAIT: Duration = Duration::from_millis(5);

/// The tiles of a grid: row `r` of tiles computes columns `spans[r].0 ..=
/// spans[r].1`, left to right (none if the first is after the last).
pub(super) struct Schedule<'a> {
    spans: &'a [(usize, usize)],
    /// The least first column of rows `r..`: no row from `r` on can have
    /// a ready tile once the rows above have not all passed it.
    least_start: Vec<usize>,
    state: Mutex<State>,
    ready: Condvar,
}

/// What the workers share.
struct State {
    /// Each row's next column to compute; `usize::MAX` once it has none.
    next: Vec<usize>,
    /// Whether a worker is computing the row's next tile.
    busy: Vec<bool>,
    /// The first row with a column left (rows above are done).
    first: usize,
    /// Tiles not yet computed, and tiles being computed.
    left: usize,
    computing: usize,
    /// Workers waiting for a ready tile.
    waiting: usize,
    /// Interrupted, or a tile panicked: every worker leaves.
    stopped: bool,
}

impl<'a> Schedule<'a> {
    pub(super) fn new(spans: &'a [(usize, usize)]) -> Self {
        let next: Vec<usize> = spans
            .iter()
            .map(|&(lo, hi)| if lo <= hi { lo } else { usize::MAX })
            .collect();
        let mut least_start = next.clone();
        for r in (1..least_start.len()).rev() {
            least_start[r - 1] = least_start[r - 1].min(least_start[r]);
        }
        let left = spans
            .iter()
            .map(|&(lo, hi)| (hi + 1).saturating_sub(lo))
            .sum();
        let first = next.iter().take_while(|&&c| c == usize::MAX).count();
        Schedule {
            spans,
            least_start,
            state: Mutex::new(State {
                busy: vec![false; next.len()],
                next,
                first,
                left,
                computing: 0,
                waiting: 0,
                stopped: false,
            }),
            ready: Condvar::new(),
        }
    }

    /// Computes every tile, `tile(r, c)` on up to `threads` of rayon's
    /// threads (the calling one among them): true if all were computed,
    /// false if an interrupt stopped them.
    pub(super) fn run(&self, threads: usize, tile: impl Fn(usize, usize) + Sync) -> bool {
        let tile = &tile;
        rayon::scope(|scope| {
            for _ in 1..threads {
                scope.spawn(move |_| self.work(tile));
            }
            self.work(tile);
        });
        !self.lock().stopped
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One worker: takes ready tiles until none are left or the schedule
    /// stops, waiting while none is ready.
    fn work(&self, tile: &(impl Fn(usize, usize) + Sync)) {
        let mut state = self.lock();
        loop {
            if state.left == 0 || state.stopped {
                return;
            }
            if interrupt::requested() {
                state.stopped = true;
                self.ready.notify_all();
                return;
            }
            let Some(r) = self.pick(&state) else {
                // Some worker holds a tile that will make one ready (or
                // none is left, handled above): without one, the schedule
                // would wait forever.
                assert!(state.computing > 0, "no tile ready and none running");
                state.waiting += 1;
                state = self
                    .ready
                    .wait_timeout(state, WAIT)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                state.waiting -= 1;
                continue;
            };
            let c = state.next[r];
            state.busy[r] = true;
            state.computing += 1;
            if state.waiting > 0 && self.pick(&state).is_some() {
                // Another ready tile: a waiting worker takes it (it wakes
                // the next one if there are more still).
                self.ready.notify_one();
            }
            drop(state);
            let guard = Abandon(self);
            tile(r, c);
            std::mem::forget(guard);
            state = self.lock();
            state.busy[r] = false;
            state.computing -= 1;
            state.left -= 1;
            state.next[r] = if c < self.spans[r].1 {
                c + 1
            } else {
                usize::MAX
            };
            while state.first < state.next.len() && state.next[state.first] == usize::MAX {
                state.first += 1;
            }
            if state.left == 0 {
                self.ready.notify_all();
            }
        }
    }

    /// The ready tile on the earliest anti-diagonal (the earlier row on a
    /// tie), by its row: a row's next tile is ready when no worker computes
    /// it and every row above has passed its column.
    fn pick(&self, state: &State) -> Option<usize> {
        // The least next column of the rows above `r`.
        let mut above = usize::MAX;
        let mut best: Option<(usize, usize)> = None;
        for r in state.first..state.next.len() {
            if above <= self.least_start[r] {
                break;
            }
            let c = state.next[r];
            if c < above && !state.busy[r] && best.is_none_or(|(d, _)| r + c < d) {
                best = Some((r + c, r));
            }
            above = above.min(c);
        }
        best.map(|(_, r)| r)
    }
}

/// Stops the schedule if a tile panics, so that the other workers leave
/// instead of waiting for its tiles (the panic then reaches the caller
/// through rayon).
struct Abandon<'s, 'a>(&'s Schedule<'a>);

impl Drop for Abandon<'_, '_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.stopped = true;
        self.0.ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Each tile's turn, in the order the tiles ran: checks that every
    /// tile ran once, after the tiles it reads and before those that read
    /// it, however many threads took them.
    fn check_order(spans: &[(usize, usize)], threads: usize) {
        let cols = spans.iter().map(|&(_, hi)| hi + 1).max().unwrap_or(0);
        let turn = AtomicUsize::new(0);
        let order: Vec<Vec<AtomicUsize>> = spans
            .iter()
            .map(|_| (0..cols).map(|_| AtomicUsize::new(usize::MAX)).collect())
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let schedule = Schedule::new(spans);
        let done = pool.install(|| {
            schedule.run(threads, |r, c| {
                // Long enough for the other workers to run ahead if the
                // schedule let them.
                std::thread::sleep(Duration::from_micros(50));
                let previous =
                    order[r][c].swap(turn.fetch_add(1, Ordering::SeqCst), Ordering::SeqCst);
                assert_eq!(previous, usize::MAX, "tile ({r}, {c}) ran twice");
            })
        });
        assert!(done);
        let at = |r: usize, c: usize| order[r][c].load(Ordering::SeqCst);
        for (r, &(lo, hi)) in spans.iter().enumerate() {
            for c in 0..cols {
                let inside = lo <= c && c <= hi;
                assert_eq!(
                    at(r, c) != usize::MAX,
                    inside,
                    "tile ({r}, {c}) of {spans:?}"
                );
                if !inside {
                    continue;
                }
                if c > lo {
                    assert!(at(r, c - 1) < at(r, c), "({r}, {c}) before its left");
                }
                for above in 0..r {
                    let t = at(above, c);
                    if t != usize::MAX {
                        assert!(t < at(r, c), "({r}, {c}) before ({above}, {c})");
                    }
                }
            }
        }
    }

    #[test]
    fn tiles_run_after_those_they_read() {
        let band = [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4)];
        // Spans no band gives: later rows starting before earlier ones,
        // empty rows, a row reaching past the others.
        let odd = [(2, 3), (1, 1), (5, 2), (0, 5), (4, 4), (1, 0), (0, 0)];
        for threads in [1, 2, 3, 8] {
            check_order(&[(0, 5); 6], threads);
            check_order(&[(0, 0)], threads);
            check_order(&[(0, 9)], threads);
            check_order(&[(0, 0); 7], threads);
            check_order(&band, threads);
            check_order(&odd, threads);
            check_order(&[(1, 0); 3], threads);
        }
    }

    #[test]
    fn an_empty_grid_runs_nothing() {
        let schedule = Schedule::new(&[]);
        assert!(schedule.run(4, |r, c| panic!("tile ({r}, {c})")));
    }

    #[test]
    fn a_panicking_tile_stops_every_worker() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let spans = [(0, 20); 20];
        let schedule = Schedule::new(&spans);
        let ran = AtomicUsize::new(0);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.install(|| {
                schedule.run(3, |r, c| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    assert!((r, c) != (2, 2), "the tile that fails");
                })
            })
        }));
        assert!(result.is_err(), "the panic reaches the caller");
        assert!(ran.load(Ordering::SeqCst) < 400, "the others stopped");
    }
}
