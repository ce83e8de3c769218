"""Open-ended subsequence alignment (`timewarp.subsequence_alignment`) on a
random walk, against tslearn's `dtw_subsequence_path` where it is
installed (which holds the whole m x N matrix: 1 GiB at the defaults).
The figures of docs/benchmarks.md's "Subsequence alignment" section.

    python benches/subsequence_alignment.py [--length N] [--query M] [--dims D] [--repeat R]
        [--device auto|cpu|gpu] [--with-cpu] [--no-tslearn]

`--device` is where timewarp computes (default auto); `--with-cpu` also
times the CPU (one call after a warm-up) and checks that the start, end,
cost (bit for bit) and path are the same. The GPU at 10^7 points:

    python benches/subsequence_alignment.py --length 10000000 --query 128 --device gpu --with-cpu --no-tslearn
"""

import argparse
import time

import numpy as np

import timewarp


def timed(call, repeat):
    """Every timed call's seconds, after a warm-up, and the last result."""
    result = call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return sorted(times), result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--length", type=int, default=1_000_000)
    parser.add_argument("--query", type=int, default=128)
    parser.add_argument("--dims", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    parser.add_argument("--with-cpu", action="store_true")
    parser.add_argument("--no-tslearn", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    series = rng.normal(size=(args.length, args.dims)).cumsum(axis=0)
    query = rng.normal(size=(args.query, args.dims)).cumsum(axis=0)
    cells = args.length * args.query
    times, found = timed(
        lambda: timewarp.subsequence_alignment(query, series, device=args.device), args.repeat)
    print(f"timewarp ({args.device}): {times[0]:.3f}-{times[-1]:.3f} s, "
          f"median {np.median(times):.3f} s ({cells / np.median(times) / 1e9:.2f} GCUPS); "
          f"match {found.start}..{found.end}, cost {found.cost!r}")
    if args.with_cpu:
        cpu_times, cpu = timed(
            lambda: timewarp.subsequence_alignment(query, series, device="cpu"), 1)
        same = ((cpu.start, cpu.end, cpu.cost) == (found.start, found.end, found.cost)
                and np.array_equal(cpu.path, found.path))
        print(f"timewarp (cpu): {cpu_times[0]:.3f} s "
              f"({cells / cpu_times[0] / 1e9:.2f} GCUPS); the same match, cost and path: {same}")
    if args.no_tslearn:
        return
    try:
        from tslearn.metrics import dtw_subsequence_path
    except ImportError as missing:
        print(f"tslearn: not installed ({missing})")
        return
    times, (path, cost) = timed(lambda: dtw_subsequence_path(query, series), 1)
    same = [tuple(cell) for cell in found.path.tolist()] == [tuple(cell) for cell in path]
    print(f"tslearn: {times[0]:.3f} s; same path: {same}, cost {float(cost)!r}")


if __name__ == "__main__":
    main()
