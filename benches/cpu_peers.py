"""timewarp's CPU backend beside the CPU libraries users run, on the same
machine in the same run (issue 19): all pairs of a set of series against
itself, f64, each library's own all-pairs function, every core each allows.

- DTW: timewarp, dtaidistance (`distance_matrix_fast`, C, parallel),
  aeon (`dtw_pairwise_distance`, numba), tslearn (`cdist_dtw`, numba,
  n_jobs=-1);
- TWED: timewarp, aeon (`twe_pairwise_distance`);
- Soft-DTW: timewarp, tslearn (`cdist_soft_dtw`), aeon
  (`soft_dtw_pairwise_distance`).

Each is timed once after a warm-up call on a small set (numba compiles on
its first call), and checked against timewarp's matrix under the
conventions of docs/python.md. Prints one JSON line per library and
measure. Run: python benches/cpu_peers.py [--count 200] [--length 256]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import timewarp


def timed(run):
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, np.asarray(result, dtype=np.float64)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--length", type=int, default=256)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.count, args.length))
    warm = x[:4, :32]
    cells = args.count * args.count * args.length * args.length

    def ours(metric, **params):
        return lambda data: timewarp.cdist(data, metric=metric, device="cpu", **params)

    cases = {
        "dtw": [("timewarp", ours("dtw"), lambda m: m)],
        "twed": [("timewarp", ours("twed", nu=0.001, lmbda=1.0), lambda m: m)],
        "soft_dtw": [("timewarp", ours("soft_dtw", gamma=1.0), lambda m: m)],
    }
    try:
        from dtaidistance import dtw as dtai

        cases["dtw"].append(
            (
                "dtaidistance",
                lambda d: dtai.distance_matrix_fast(d, parallel=True),
                np.square,
            )
        )
    except ImportError:
        pass
    try:
        from aeon import distances as aeon

        cases["dtw"].append(
            ("aeon", lambda d: aeon.dtw_pairwise_distance(d), lambda m: m)
        )
        cases["twed"].append(
            (
                "aeon",
                lambda d: aeon.twe_pairwise_distance(d, nu=0.001, lmbda=1.0),
                lambda m: m,
            )
        )
        cases["soft_dtw"].append(
            ("aeon", lambda d: aeon.soft_dtw_pairwise_distance(d, gamma=1.0), None)
        )
    except ImportError:
        pass
    try:
        from tslearn import metrics as tsl

        cases["dtw"].append(
            ("tslearn", lambda d: tsl.cdist_dtw(d, n_jobs=-1), np.square)
        )
        cases["soft_dtw"].append(
            ("tslearn", lambda d: tsl.cdist_soft_dtw(d, gamma=1.0), lambda m: m)
        )
    except ImportError:
        pass
    for measure, runs in cases.items():
        reference = None
        for name, run, to_ours in runs:
            run(warm)
            seconds, matrix = timed(lambda: run(x))
            if reference is None:
                reference = matrix
            agrees = None
            if to_ours is not None:
                agrees = bool(
                    np.allclose(to_ours(matrix), reference, rtol=1e-8, atol=1e-8)
                )
            print(
                json.dumps(
                    {
                        "measure": measure,
                        "library": name,
                        "count": args.count,
                        "length": args.length,
                        "seconds": round(seconds, 4),
                        "gcups": round(cells / seconds / 1e9, 4),
                        "agrees": agrees,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
