"""Where Soft-DTW forward and backward on CUDA tensors spend their time
(docs/history/benchmarks-2026.md): medians in microseconds of an empty call, a trivial
torch forward and backward, the extension call (values; values and
gradient), the Python forward without and with a gradient, and forward
plus backward; then torch.profiler tables. Run on a machine with a GPU:
python tools/profile_sdtw.py
"""

import time, sys, json
import torch, timewarp
from timewarp import _timewarp as ext


def med(f, n=60):
    f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s = time.perf_counter()
        f()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - s)
    ts.sort()
    return round(ts[n // 2] * 1e6, 1)


for pairs, length in ((1024, 128), (256, 512)):
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(pairs, length, 1, device="cuda", generator=g).requires_grad_()
    y = torch.randn(pairs, length, 1, device="cuda", generator=g)
    shape = (pairs, length, 1)
    n = ext.soft_dtw_cuda_output_len(shape, shape, False, "gradient_x")
    out = torch.empty(n, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream

    def call(outputs="gradient_x"):
        ext.soft_dtw_pairs_cuda(
            x.data_ptr(),
            shape,
            y.data_ptr(),
            shape,
            "float32",
            1.0,
            None,
            False,
            outputs,
            out.data_ptr(),
            stream,
        )

    def step():
        x.grad = None
        timewarp.soft_dtw(x, y, gamma=1.0).sum().backward()

    row = {
        "shape": f"{pairs}x{length}",
        "nothing": med(lambda: None),
        "torch trivial fwd+bwd": med(lambda: (x * 1).sum().backward()),
        "ext values": med(lambda: call("values")),
        "ext gradient_x": med(call),
        "python fwd no grad": med(lambda: timewarp.soft_dtw(x.detach(), y)),
        "python fwd with grad": med(lambda: timewarp.soft_dtw(x, y)),
        "python fwd+bwd": med(step),
    }
    print(json.dumps(row), flush=True)
    from torch.profiler import profile, ProfilerActivity

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            step()
        torch.cuda.synchronize()
    print(
        prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20),
        flush=True,
    )
    print(
        prof.key_averages().table(sort_by="self_device_time_total", row_limit=15),
        flush=True,
    )
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            call()
        torch.cuda.synchronize()
    print("EXT ONLY", flush=True)
    print(
        prof.key_averages().table(sort_by="self_device_time_total", row_limit=15),
        flush=True,
    )
