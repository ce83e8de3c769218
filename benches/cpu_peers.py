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

Issue 47's workloads (`--issue47`, instead of the above; each timing the
best of `--repeat` runs, as the machine may be shared):

- `gamma`: Soft-DTW of all pairs of 200 random walks of length 128 at
  gamma 0.01, 0.1, 1 and 10: timewarp, aeon, tslearn;
- `long`: one pair of 30,000-sample random walks, DTW, TWED and Soft-DTW:
  timewarp on every core and on one (`RAYON_NUM_THREADS=1`, a child
  process), aeon (`dtw_distance`, `twe_distance`, `soft_dtw_distance`);
- `loss`: the torch Soft-DTW loss, forward and backward (timed apart),
  and the values alone (under `torch.no_grad()`), batch 128, lengths 64
  and 128, gamma 1 and 0.1: timewarp's `SoftDTWLoss` and tslearn's
  `SoftDTWLossPyTorch`.
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


def best(run, repeat):
    """The least time of `repeat` runs of `run`, and its last result."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def report(**fields) -> None:
    print(json.dumps(fields), flush=True)


def gamma_sweep(repeat: int) -> None:
    from aeon import distances as aeon
    from tslearn import metrics as tsl

    walks = np.cumsum(np.random.default_rng(1).normal(size=(200, 128)), axis=1)
    libraries = {
        "timewarp": lambda d, g: timewarp.cdist(d, metric="soft_dtw", gamma=g, device="cpu"),
        "aeon": lambda d, g: aeon.soft_dtw_pairwise_distance(d, gamma=g),
        "tslearn": lambda d, g: tsl.cdist_soft_dtw(d, gamma=g),
    }
    for name, run in libraries.items():
        run(walks[:4, :32], 1.0)
        for gamma in (0.01, 0.1, 1.0, 10.0):
            # The peers once: each run is many seconds.
            seconds, _ = best(lambda: run(walks, gamma), repeat if name == "timewarp" else 1)
            report(workload="gamma", library=name, gamma=gamma, seconds=round(seconds, 4))


ONE_CORE = """
import sys, time, numpy as np, timewarp
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
metric, repeat = sys.argv[3], int(sys.argv[4])
times = []
for _ in range(repeat):
    start = time.perf_counter()
    timewarp.distance(x, y, metric=metric)
    times.append(time.perf_counter() - start)
print(min(times))
"""


def long_pair(repeat: int, length: int) -> None:
    import os
    import subprocess
    import sys
    import tempfile

    from aeon import distances as aeon

    rng = np.random.default_rng(2)
    x, y = np.cumsum(rng.normal(size=(2, length)), axis=1)
    peers = {
        "dtw": lambda: aeon.dtw_distance(x, y),
        "twed": lambda: aeon.twe_distance(x, y, nu=0.001, lmbda=1.0),
        "soft_dtw": lambda: aeon.soft_dtw_distance(x, y, gamma=1.0),
    }
    aeon.dtw_distance(x[:10], y[:10])
    aeon.twe_distance(x[:10], y[:10])
    aeon.soft_dtw_distance(x[:10], y[:10])
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, name) for name in ("x.npy", "y.npy")]
        np.save(paths[0], x)
        np.save(paths[1], y)
        for metric, peer in peers.items():
            # Soft-DTW's pair takes tens of seconds: once.
            runs = 1 if metric == "soft_dtw" else repeat
            ours, value = best(lambda: timewarp.distance(x, y, metric=metric), runs)
            env = dict(os.environ, RAYON_NUM_THREADS="1")
            one = subprocess.run(
                [sys.executable, "-c", ONE_CORE, *paths, metric, str(runs)],
                env=env, check=True, capture_output=True, text=True,
            )
            one_core = float(one.stdout)
            theirs, their_value = best(peer, 1)
            report(
                workload="long", metric=metric, length=length,
                timewarp=round(ours, 3), timewarp_one_core=round(one_core, 3),
                aeon=round(theirs, 3), speedup_cores=round(one_core / ours, 2),
                vs_aeon=round(theirs / ours, 2),
                # aeon's Soft-DTW is another convention (docs/python.md).
                agrees=bool(np.isclose(abs(value), their_value, rtol=1e-9)),
            )


def torch_loss(repeat: int) -> None:
    import torch
    from tslearn.metrics import SoftDTWLossPyTorch

    rng = np.random.default_rng(3)
    for length in (64, 128):
        for gamma in (1.0, 0.1):
            x0 = torch.tensor(rng.normal(size=(128, length, 1)))
            y0 = torch.tensor(rng.normal(size=(128, length, 1)))
            losses = {
                "timewarp": timewarp.SoftDTWLoss(gamma=gamma, device="cpu"),
                "tslearn": lambda a, b, f=SoftDTWLossPyTorch(gamma=gamma): f(a, b).mean(),
            }
            for name, loss in losses.items():
                forward, backward = [], []
                for _ in range(repeat + 1):
                    x = x0.clone().requires_grad_(True)
                    start = time.perf_counter()
                    value = loss(x, y0)
                    middle = time.perf_counter()
                    value.backward()
                    end = time.perf_counter()
                    forward.append(middle - start)
                    backward.append(end - middle)
                # The first run warms up (numba compiles, torch allocates).
                f, b = min(forward[1:]), min(backward[1:])
                # The values alone (no graph recorded): timewarp's forward
                # pass computes the gradients too when one is recorded, so
                # its gradients cost `forward - values`.
                with torch.no_grad():
                    values, _ = best(lambda: loss(x0, y0), repeat)
                report(
                    workload="loss", library=name, length=length, gamma=gamma,
                    forward_ms=round(1e3 * f, 2), backward_ms=round(1e3 * b, 2),
                    total_ms=round(1e3 * (f + b), 2), values_only_ms=round(1e3 * values, 2),
                )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--issue47", action="store_true")
    parser.add_argument("--only", choices=["gamma", "long", "loss"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--long-length", type=int, default=30_000)
    args = parser.parse_args()
    if args.issue47:
        if args.only in (None, "gamma"):
            gamma_sweep(args.repeat)
        if args.only in (None, "long"):
            long_pair(args.repeat, args.long_length)
        if args.only in (None, "loss"):
            torch_loss(args.repeat)
        return
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
