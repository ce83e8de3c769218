"""The Python package's speed figures (issue 15), printed as one JSON line
per case:

- Soft-DTW forward + backward on CUDA tensors (f32, 1024 x 128 and
  256 x 512), beside `timewarp bench --metric soft-dtw --paired --gradient
  --resident` for the same batch;
- `timewarp.cdist` of a numpy batch 1024 x 1024 x 128 f32 DTW, beside
  `timewarp bench` for that case;
- `timewarp.soft_dtw_gradient` of numpy batches (f32, 1024 x 128), values
  and gradients with respect to both, on the GPU;
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


def soft_dtw_cuda(pairs: int, length: int, repeats: int) -> list:
    """Forward + backward, and its parts: the forward alone, and the
    extension's call alone on a buffer allocated once (the kernels and the
    library's own work, without the Python layer or torch's ops)."""
    import torch

    from timewarp import _timewarp as ext

    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(
        pairs, length, 1, device="cuda", generator=generator
    ).requires_grad_()
    y = torch.randn(pairs, length, 1, device="cuda", generator=generator)
    cells = pairs * length * length
    shape = (pairs, length, 1)
    out = torch.empty(
        ext.soft_dtw_cuda_output_len(shape, shape, False, "gradient_x"), device="cuda"
    )
    stream = torch.cuda.current_stream().cuda_stream

    def step():
        x.grad = None
        timewarp.soft_dtw(x, y, gamma=1.0).sum().backward()

    def forward():
        timewarp.soft_dtw(x, y, gamma=1.0)

    def extension():
        ext.soft_dtw_pairs_cuda(
            x.data_ptr(),
            shape,
            y.data_ptr(),
            shape,
            "float32",
            1.0,
            None,
            False,
            "gradient_x",
            out.data_ptr(),
            stream,
        )

    rows = []
    for name, run in (
        ("fwd+bwd", step),
        ("fwd with grad", forward),
        ("extension call", extension),
    ):
        seconds = median_seconds(run, repeats, torch.cuda.synchronize)
        rows.append(
            {
                "case": f"soft_dtw {name} cuda f32 {pairs} x {length}",
                "seconds": seconds,
                "gcups": cells / seconds / 1e9,
            }
        )
    return rows


def cdist_numpy(device: str, repeats: int) -> list:
    """`timewarp.cdist`, and the extension's call alone on the same arrays."""
    from timewarp import _timewarp as ext

    rng = np.random.default_rng(0)
    a = rng.normal(size=(1024, 128)).astype(np.float32)
    b = rng.normal(size=(1024, 128)).astype(np.float32)
    a3, b3 = a[:, :, None], b[:, :, None]
    cells = 1024 * 1024 * 128 * 128
    rows = []
    for name, run in (
        ("cdist", lambda: timewarp.cdist(a, b, metric="dtw", device=device)),
        (
            "extension call",
            lambda: ext.cdist(a3, b3, "dtw", 1.0, None, 0.001, 1.0, 2.0, False, device),
        ),
    ):
        seconds = median_seconds(run, repeats)
        rows.append(
            {
                "case": f"{name} dtw numpy f32 1024 x 1024 x 128 on {device}",
                "seconds": seconds,
                "gcups": cells / seconds / 1e9,
            }
        )
    return rows


def soft_dtw_gradient_numpy(device: str, repeats: int) -> dict:
    """Values and both gradients of numpy batches, as a numpy user's
    training loop asks for them (uploaded, computed and returned each
    call)."""
    rng = np.random.default_rng(0)
    pairs, length = 1024, 128
    x = rng.normal(size=(pairs, length, 1)).astype(np.float32)
    y = rng.normal(size=(pairs, length, 1)).astype(np.float32)
    seconds = median_seconds(
        lambda: timewarp.soft_dtw_gradient(x, y, gamma=1.0, device=device), repeats
    )
    return {
        "case": f"soft_dtw_gradient numpy f32 {pairs} x {length} on {device}",
        "seconds": seconds,
        "gcups": pairs * length * length / seconds / 1e9,
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
        for row in soft_dtw_cuda(pairs, length, args.repeats):
            print(json.dumps(row))
    print(json.dumps(soft_dtw_gradient_numpy("gpu", args.repeats)))
    for row in cdist_numpy("gpu", max(5, args.repeats // 2)):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
