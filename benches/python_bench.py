"""The Python package's speed figures (issue 15), printed as one JSON line
per case:

- Soft-DTW forward + backward on CUDA tensors (f32, 1024 x 128 and
  256 x 512), beside `timewarp bench --metric soft-dtw --paired --gradient
  --resident` for the same batch;
- `timewarp.cdist` of a numpy batch 1024 x 1024 x 128 f32 DTW, beside
  `timewarp bench` for that case;
- the per-call time of `timewarp.distance` for one tiny pair on the CPU.

Run: python benches/python_bench.py [--skip-gpu]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import timewarp


def median_seconds(run, repeats: int, sync=lambda: None) -> float:
    run()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def soft_dtw_cuda(pairs: int, length: int, repeats: int) -> dict:
    import torch

    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(
        pairs, length, 1, device="cuda", generator=generator
    ).requires_grad_()
    y = torch.randn(pairs, length, 1, device="cuda", generator=generator)

    def step():
        x.grad = None
        timewarp.soft_dtw(x, y, gamma=1.0).sum().backward()

    seconds = median_seconds(step, repeats, torch.cuda.synchronize)
    cells = pairs * length * length
    return {
        "case": f"soft_dtw fwd+bwd cuda f32 {pairs} x {length}",
        "seconds": seconds,
        "gcups": cells / seconds / 1e9,
    }


def cdist_numpy(device: str, repeats: int) -> dict:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1024, 128)).astype(np.float32)
    b = rng.normal(size=(1024, 128)).astype(np.float32)
    seconds = median_seconds(
        lambda: timewarp.cdist(a, b, metric="dtw", device=device), repeats
    )
    cells = 1024 * 1024 * 128 * 128
    return {
        "case": f"cdist dtw numpy f32 1024 x 1024 x 128 on {device}",
        "seconds": seconds,
        "gcups": cells / seconds / 1e9,
    }


def tiny_pair(repeats: int) -> dict:
    x = np.array([0.0, 1.0, 2.0, 1.0])
    y = np.array([0.0, 2.0, 1.0])
    calls = 20000
    start = time.perf_counter()
    for _ in range(calls):
        timewarp.distance(x, y)
    per_call = (time.perf_counter() - start) / calls
    return {"case": "distance, one tiny pair, cpu", "seconds_per_call": per_call}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-gpu", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(tiny_pair(args.repeats)))
    if args.skip_gpu or not timewarp.gpu_available():
        print(json.dumps({"note": "no GPU: the GPU cases are skipped"}))
        return
    for pairs, length in ((1024, 128), (256, 512)):
        print(json.dumps(soft_dtw_cuda(pairs, length, args.repeats)))
    print(json.dumps(cdist_numpy("gpu", max(3, args.repeats // 10))))


if __name__ == "__main__":
    main()
