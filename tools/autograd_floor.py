"""PyTorch's own cost of a custom autograd Function on this host, with no
timewarp in it: the floor under `timewarp.soft_dtw`'s forward and backward
(docs/history/benchmarks-2026.md). A Function that saves a view of one CUDA buffer and
multiplies it by the incoming gradient (`View`), one that saves a fresh
tensor (`Plain`), one that returns it unscaled (`NoMul`), and a plain
`(x * 1).sum().backward()`; medians in microseconds, one JSON line.

Run on a machine with a GPU: python tools/autograd_floor.py
"""

import json
import time

import torch


def med(f, n=80):
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


pairs, length = 1024, 128
x = torch.randn(pairs, length, 1, device="cuda").requires_grad_()
size = pairs + pairs * length


class View(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.empty(size, device=x.device)
        out.zero_()
        ctx.save_for_backward(out[pairs:].view(x.shape))
        return out[:pairs]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, go):
        (g,) = ctx.saved_tensors
        return g * go.view(-1, 1, 1)


class Plain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        g = torch.zeros_like(x)
        ctx.save_for_backward(g)
        return torch.zeros(pairs, device=x.device)

    @staticmethod
    def backward(ctx, go):
        (g,) = ctx.saved_tensors
        return g * go.view(-1, 1, 1)


class NoMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        g = torch.zeros_like(x)
        ctx.save_for_backward(g)
        return torch.zeros(pairs, device=x.device)

    @staticmethod
    def backward(ctx, go):
        (g,) = ctx.saved_tensors
        return g


def step(F):
    def run():
        x.grad = None
        F.apply(x).sum().backward()

    return run


row = {"trivial": med(lambda: (x * 1).sum().backward())}
for F in (View, Plain, NoMul):
    row[F.__name__ + " fwd"] = med(lambda: F.apply(x))
    row[F.__name__ + " fwd+bwd"] = med(step(F))
row["mul alone"] = med(
    lambda: torch.zeros_like(x) * torch.ones(pairs, device="cuda").view(-1, 1, 1)
)
print(json.dumps(row))
