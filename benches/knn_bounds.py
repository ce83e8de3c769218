"""k-NN under banded DTW on the CPU or the GPU (`--device gpu`: the
database resident on one GPU, the bounds on the GPU and the survivors'
distances by the GPU brute force's own kernel, a path that is not the
default there and that this script turns on, `TIMEWARP_GPU_KNN_BOUNDS=1`): the lower bounds (LB_Kim, LB_Keogh
both ways, the DTW abandoned against each query's k-th best) against the
brute force (every distance, `brute_force=True`), with the results checked
equal: the same indices and the same distances bit for bit.

Data: cylinder-bell-funnel series (Saito 1994, the shapes of the UCR
archive's CBF, stretched to `--length`: a plateau of height 6 + eta over
[a, b], rising for the bell, falling for the funnel, plus unit Gaussian
noise; a in [L/8, L/4], b - a in [L/4, 3L/4]), the three shapes in turn,
float64. The database and the queries are drawn apart (one seed each).

    python benches/knn_bounds.py                                  # 2^16 and 2^18 series
    python benches/knn_bounds.py --sizes 1048576 --no-brute-over 262144
    python benches/knn_bounds.py --device gpu --sizes 1048576 --repeat 3 --brute-repeat 3

Each size prints one JSON line: the times of the bounds and of the brute
force (each the best of `--repeat` and `--brute-repeat` calls, after a
warm-up on a small database, timed with `time.perf_counter`: the machine
may be shared), their ratio, what the bounds pruned, the load average
before and after, and whether the results are equal. `--no-brute-over N`: above N series the brute force is
not run (its time is then null, and equality not checked); it is linear
in the database's size, so a smaller size's time scales to it.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import timewarp


def cbf(rng: np.random.Generator, count: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` CBF series of `length` (float64) and their shapes (0, 1, 2:
    cylinder, bell, funnel), made a block at a time."""
    out = np.empty((count, length))
    shapes = np.arange(count) % 3
    t = np.arange(length, dtype=np.float64)
    for first in range(0, count, 1 << 15):
        end = min(first + (1 << 15), count)
        n = end - first
        a = rng.uniform(length / 8, length / 4, size=n)[:, None]
        b = a + rng.uniform(length / 4, 3 * length / 4, size=n)[:, None]
        height = (6.0 + rng.standard_normal(n))[:, None]
        inside = (t >= a) & (t <= b)
        shape = shapes[first:end, None]
        ramp = np.where(shape == 0, 1.0, np.where(shape == 1, (t - a) / (b - a), (b - t) / (b - a)))
        out[first:end] = height * inside * ramp + rng.standard_normal((n, length))
    return out, shapes


def timed_neighbours(model, queries, repeat: int) -> tuple[float, np.ndarray, np.ndarray]:
    """The best of `repeat` calls, and the neighbours (the same every call)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        distances, indices = model.kneighbors(queries)
        best = min(best, time.perf_counter() - start)
    return best, distances, indices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="65536,262144", help="database sizes, commas")
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--band", type=float, default=0.1, help="radius: a fraction of the length")
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("-k", type=int, default=1)
    parser.add_argument("--no-brute-over", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3, help="calls with bounds, best taken")
    parser.add_argument("--brute-repeat", type=int, default=1, help="calls by brute force")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    args = parser.parse_args()
    # Read at the first GPU k-NN: the bounds' path on the GPU is opt-in.
    os.environ.setdefault("TIMEWARP_GPU_KNN_BOUNDS", "1")
    radius = int(args.band * args.length)
    queries, _ = cbf(np.random.default_rng(1), args.queries, args.length)
    # Warm-up: the thread pool and the extension's first calls.
    small, small_labels = cbf(np.random.default_rng(3), 512, args.length)
    for brute_force in (False, True):
        warm = timewarp.KNeighborsClassifier(
            n_neighbors=args.k, band=radius, device=args.device, brute_force=brute_force
        ).fit(small, small_labels)
        warm.kneighbors(queries)
    for size in (int(s) for s in args.sizes.split(",")):
        database, labels = cbf(np.random.default_rng(2), size, args.length)
        record = {
            "size": size,
            "length": args.length,
            "radius": radius,
            "queries": args.queries,
            "k": args.k,
            "device": args.device,
            "threads": os.cpu_count(),
            "load_before": os.getloadavg()[0],
        }
        model = timewarp.KNeighborsClassifier(
            n_neighbors=args.k, band=radius, device=args.device
        ).fit(database, labels)
        bounds_s, distances, indices = timed_neighbours(model, queries, args.repeat)
        record["bounds_s"] = round(bounds_s, 4)
        record["pruning"] = model.pruning_
        record["brute_s"] = None
        record["equal"] = None
        if args.no_brute_over is None or size <= args.no_brute_over:
            model.set_params(brute_force=True)
            brute_s, brute_distances, brute_indices = timed_neighbours(
                model, queries, args.brute_repeat
            )
            assert model.pruning_ is None
            record["brute_s"] = round(brute_s, 4)
            record["speedup"] = round(brute_s / bounds_s, 2)
            record["equal"] = bool(
                np.array_equal(indices, brute_indices)
                and distances.tobytes() == brute_distances.tobytes()
            )
        record["load_after"] = os.getloadavg()[0]
        print(json.dumps(record), flush=True)
        del model, database


if __name__ == "__main__":
    main()
