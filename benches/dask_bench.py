"""timewarp.dask on one host: the first task of a worker against its later
ones (the GPU opened and the kernels loaded once per worker process), and
the scaling of `cdist`, `knn` and `search` from 1 to N workers, one GPU each.

    python benches/dask_bench.py                      # 1, 2, 4, ... up to the GPUs found
    python benches/dask_bench.py --workers 1,2,4,8 --series 16384 --length 512
    python benches/dask_bench.py --device cpu --series 256 --length 64 --queries 32 \
        --search-points 100000   # a smoke run

Each worker is a process of its own (a distributed Nanny) with one thread
and CUDA_VISIBLE_DEVICES set to its GPU, so timewarp's GPU 0 is that GPU
(what dask-cuda's LocalCUDACluster does; dask-cuda is not needed). Data:
random walks in float32. `cdist` is timed to its row sums (the matrix
stays on the workers, as when it is stored; dask's low-level fusion off,
so that the tiles' costs and priorities reach the scheduler), with one
block size for every worker count (the rule's for the most workers), so
that the sums of different worker counts must be equal bit for bit; `knn`
with the default blocks (one shard per worker); `search` of a query of
128 cut from a random walk of 10^7 points (float64, plus noise of standard
deviation 0.1), band 0.05, the default pieces (4 a worker). Each call is made `--repeat` times on
the same workers: the first call's time is printed, and the speed-ups
use the median of the later ones (workers that have computed before).
Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import time

import numpy as np


def gpu_count() -> int:
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in listing.stdout.splitlines())


def cluster(workers: int, gpus: int, threads: int):
    from distributed import Client, Nanny, Scheduler, SpecCluster

    specs = {}
    for index in range(workers):
        env = {"RAYON_NUM_THREADS": str(threads), "OMP_NUM_THREADS": "1"}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(index % gpus)
        specs[index] = {
            "cls": Nanny,
            "options": {"nthreads": 1, "env": env, "silence_logs": logging.ERROR},
        }
    spec = SpecCluster(
        workers=specs,
        scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
        silence_logs=logging.ERROR,
    )
    client = Client(spec)
    client.wait_for_workers(workers)
    return spec, client


def timed_tile(block: np.ndarray, device: str):
    """Run on a worker: one tile's time, and where it computed."""
    import timewarp

    start = time.perf_counter()
    timewarp.cdist(block, block[::-1].copy(), device=device)
    seconds = time.perf_counter() - start
    return seconds, timewarp.gpu_available(), os.environ.get("CUDA_VISIBLE_DEVICES", "")


def timed(call, repeat: int):
    """(the first call's seconds, the median of the later calls' seconds,
    the last result); with one call, its time twice."""
    seconds, result = [], None
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    later = seconds[1:] or seconds
    return seconds[0], float(np.median(later)), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workers",
        help="worker counts, e.g. 1,2,4,8 (default: powers of 2 up to the GPUs)",
    )
    parser.add_argument(
        "--series",
        type=int,
        default=16384,
        help="series of the cdist and the knn database",
    )
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--queries", type=int, default=1024, help="knn queries")
    parser.add_argument("--k", type=int, default=10, help="k of knn and search")
    parser.add_argument(
        "--search-points",
        type=int,
        default=10**7,
        help="length of the walk searched (0: no search)",
    )
    parser.add_argument("--search-query", type=int, default=128)
    parser.add_argument("--search-band", type=float, default=0.05)
    parser.add_argument("--metric", default="dtw")
    parser.add_argument("--device", default="auto")
    parser.add_argument(
        "--warm-block", type=int, default=1024, help="series of the warm-up tile"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="times each call is made on the same workers; the speed-ups use "
        "the median of the calls after the first (workers that have computed)",
    )
    args = parser.parse_args()

    import dask

    import timewarp.dask as twd

    gpus = 0 if args.device == "cpu" else gpu_count()
    if args.workers:
        counts = [int(w) for w in args.workers.split(",")]
    else:
        top = max(gpus, 1)
        counts = [1 << p for p in range(top.bit_length()) if 1 << p <= top]
        if counts[-1] != top:
            counts.append(top)
    cores = os.cpu_count() or 1
    rng = np.random.default_rng(0)
    data = np.cumsum(rng.normal(size=(args.series, args.length)), axis=1).astype(
        np.float32
    )
    queries = np.cumsum(rng.normal(size=(args.queries, args.length)), axis=1).astype(
        np.float32
    )
    warm = data[: args.warm_block]
    walk = np.cumsum(rng.normal(size=args.search_points))
    middle = args.search_points // 2
    query = walk[middle : middle + args.search_query]
    query = query + 0.1 * rng.normal(size=len(query))
    block = twd.block_rule(
        args.series,
        args.series,
        args.length,
        args.length,
        max(counts),
        gpus > 0,
        symmetric=True,
    )
    cells_cdist = args.series * (args.series + 1) / 2 * args.length**2
    cells_knn = args.queries * args.series * args.length**2
    print(
        f"GPUs: {gpus}; workers {counts}; cdist {args.series} x {args.series} (symmetric) "
        f"of length {args.length}, block {block}; knn {args.queries} queries, k = {args.k}; "
        f"metric {args.metric}, float32, device {args.device}; search of {len(query)} "
        f"in {args.search_points} points, band {args.search_band}, k = {args.k}",
        flush=True,
    )
    baseline: dict = {}
    for workers in counts:
        spec, client = cluster(workers, gpus, max(1, cores // workers))
        try:
            # First task against later ones, on every worker.
            addresses = sorted(client.nthreads())
            [warm_future] = client.scatter([warm], broadcast=True)
            rounds = []
            for _ in range(3):
                futures = [
                    client.submit(
                        timed_tile, warm_future, args.device, workers=[a], pure=False
                    )
                    for a in addresses
                ]
                rounds.append(client.gather(futures))
            on_gpu = all(r[1] for r in rounds[0])
            first, second, third = (np.median([r[0] for r in each]) for each in rounds)
            print(
                f"[{workers} workers] tile of {len(warm)} x {len(warm)} on "
                f"{'GPU' if on_gpu else 'CPU'} (CUDA_VISIBLE_DEVICES {[r[2] for r in rounds[0]]}): "
                f"first task {first * 1e3:.1f} ms, second {second * 1e3:.1f} ms, "
                f"third {third * 1e3:.1f} ms (medians over workers)",
                flush=True,
            )

            params = dict(metric=args.metric, device=args.device)

            def run_cdist():
                matrix = twd.cdist(data, block=block, client=client, **params)
                # Without low-level fusion, which drops the tiles' cost and
                # priority annotations (docs/dask.md, "Blocks").
                with dask.config.set({"optimization.fuse.active": False}):
                    return client.compute(matrix.sum(axis=1, dtype=np.float64)).result()

            def run_knn():
                return twd.knn(queries, data, k=args.k, client=client, **params)[0]

            def run_search():
                return twd.search(
                    query,
                    walk,
                    band=args.search_band,
                    k=args.k,
                    device=args.device,
                    client=client,
                )

            cdist_first, cdist_s, sums = timed(run_cdist, args.repeat)
            knn_first, knn_s, indices = timed(run_knn, args.repeat)
            search_first, search_s, found = 0.0, 0.0, None
            if args.search_points:
                search_first, search_s, found = timed(run_search, args.repeat)
        finally:
            client.close()
            spec.close()
        if not baseline:
            baseline = {
                "cdist": cdist_s,
                "knn": knn_s,
                "sums": sums,
                "indices": indices,
                "search": search_s,
                "found": found,
            }
        same = np.array_equal(sums, baseline["sums"]) and np.array_equal(
            indices, baseline["indices"]
        )
        if found is not None:
            same = same and all(
                np.array_equal(a, b) for a, b in zip(found[:2], baseline["found"][:2])
            )
        print(
            f"[{workers} workers] first calls: cdist {cdist_first:.2f} s, knn "
            f"{knn_first:.2f} s" + (f", search {search_first:.2f} s" if found else ""),
            flush=True,
        )
        print(
            f"[{workers} workers] cdist {cdist_s:.2f} s ({cells_cdist / cdist_s / 1e9:.4g} GCUPS, "
            f"x{baseline['cdist'] / cdist_s:.2f} of 1st count); knn {knn_s:.2f} s "
            f"({cells_knn / knn_s / 1e9:.4g} GCUPS, x{baseline['knn'] / knn_s:.2f}); "
            + (
                f"search {search_s:.2f} s ({args.search_points / search_s:.3g} points "
                f"a second, x{baseline['search'] / search_s:.2f}; best {found[0][0]} at "
                f"{found[1][0]:.6g}); "
                if found is not None
                else ""
            )
            + f"results equal to the first count's bit for bit: {same}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
