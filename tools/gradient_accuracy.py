"""Soft-DTW gradients of timewarp (the torch loss on the CPU) and tslearn
(`SoftDTWLossPyTorch`, torch's default dtype float64) against an exact
reference (mpmath, 60 digits, the same recurrences): per gamma, the
largest error relative to the largest gradient entry, the largest
entrywise relative error, and timewarp's entrywise disagreement with
tslearn. Run: python tools/gradient_accuracy.py [length] [cases]
(docs/python.md records the figures)."""
import sys
import numpy as np
import mpmath as mp
import torch
import timewarp
from tslearn.metrics import SoftDTWLossPyTorch

mp.mp.dps = 60
torch.set_default_dtype(torch.float64)


def exact_gradient(x, y, gamma):
    n, m = len(x), len(y)
    g = mp.mpf(gamma)
    X = [mp.mpf(float(v)) for v in x]
    Y = [mp.mpf(float(v)) for v in y]
    D = [[(X[i] - Y[j]) ** 2 for j in range(m)] for i in range(n)]
    inf = mp.inf
    R = [[inf] * (m + 2) for _ in range(n + 2)]
    R[0][0] = mp.mpf(0)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            a, b, c = R[i - 1][j - 1], R[i - 1][j], R[i][j - 1]
            lo = min(a, b, c)
            s = sum(mp.exp(-(v - lo) / g) for v in (a, b, c) if v != inf)
            R[i][j] = D[i - 1][j - 1] + lo - g * mp.log(s)
    E = [[mp.mpf(0)] * (m + 2) for _ in range(n + 2)]
    for i in range(1, n + 1):
        R[i][m + 1] = -inf
    for j in range(1, m + 1):
        R[n + 1][j] = -inf
    R[n + 1][m + 1] = R[n][m]
    E[n + 1][m + 1] = mp.mpf(1)
    Dp = lambda i, j: D[i - 1][j - 1] if i <= n and j <= m else mp.mpf(0)
    for i in range(n, 0, -1):
        for j in range(m, 0, -1):
            total = mp.mpf(0)
            for (k, l) in ((i + 1, j), (i, j + 1), (i + 1, j + 1)):
                if R[k][l] == -inf or E[k][l] == 0:
                    continue
                total += E[k][l] * mp.exp((R[k][l] - R[i][j] - Dp(k, l)) / g)
            E[i][j] = total
    grad = [sum(E[i][j] * 2 * (X[i - 1] - Y[j - 1]) for j in range(1, m + 1)) for i in range(1, n + 1)]
    return np.array([float(v) for v in grad]), float(R[n][m])


def ours(x, y, gamma):
    t = torch.tensor(x[None, :, None], requires_grad=True)
    loss = timewarp.SoftDTWLoss(gamma=gamma, reduction="sum", device="cpu")
    v = loss(t, torch.tensor(y[None, :, None]))
    v.backward()
    return t.grad.numpy().ravel(), float(v)


def theirs(x, y, gamma):
    t = torch.tensor(x[None, :, None], requires_grad=True)
    v = SoftDTWLossPyTorch(gamma=gamma)(t, torch.tensor(y[None, :, None])).sum()
    v.backward()
    return t.grad.numpy().ravel(), float(v)


length = int(sys.argv[1]) if len(sys.argv) > 1 else 32
rng = np.random.default_rng(0)
for gamma in (1.0, 0.1):
    worst = {"timewarp": [], "tslearn": []}
    for case in range(int(sys.argv[2]) if len(sys.argv) > 2 else 6):
        x, y = rng.normal(size=length), rng.normal(size=length)
        g, value = exact_gradient(x, y, gamma)
        scale = np.abs(g).max()
        theirs_g = theirs(x, y, gamma)[0]
        for name, f in (("timewarp", ours), ("tslearn", theirs)):
            got, v = f(x, y, gamma)
            worst[name].append((np.abs(got - g).max() / scale, abs(v - value) / abs(value), np.max(np.abs(got - g) / np.abs(g)), np.max(np.abs(got - theirs_g) / np.abs(got)) if name == 'timewarp' else 0.0))
    for name, errors in worst.items():
        e = np.array(errors)
        print(f"gamma {gamma} length {length}: {name}: gradient error max {e[:, 0].max():.2e} "
              f"median {np.median(e[:, 0]):.2e}; value error max {e[:, 1].max():.2e}; "
              f"largest entrywise relative error {e[:, 2].max():.2e}; vs the other side {e[:, 3].max():.2e}", flush=True)
