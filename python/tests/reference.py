"""Plain numpy/Python definitions of the measures, written from the papers,
as an independent reference for the package's results (slow; small inputs
only)."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np


def _2d(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x[:, None] if x.ndim == 1 else x


def in_band(i: int, j: int, n: int, m: int, band: Optional[int]) -> bool:
    """Sakoe-Chiba band of radius `band` around the diagonal, widened by the
    difference of the lengths (tslearn's `sakoe_chiba_mask`); 0-based."""
    if band is None:
        return True
    return i - band - max(0, n - m) <= j <= i + band + max(0, m - n)


def dtw(x, y, band: Optional[int] = None) -> float:
    """Sum of squared Euclidean sample distances along the cheapest path
    through the band."""
    x, y = _2d(x), _2d(y)
    n, m = len(x), len(y)
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if not in_band(i - 1, j - 1, n, m, band):
                continue
            cost = float(np.sum((x[i - 1] - y[j - 1]) ** 2))
            d[i, j] = cost + min(d[i - 1, j], d[i, j - 1], d[i - 1, j - 1])
    return float(d[n, m])


def soft_min(values, gamma: float) -> float:
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return math.inf
    low = finite.min()
    return float(low - gamma * math.log(np.sum(np.exp(-(finite - low) / gamma))))


def soft_dtw(x, y, gamma: float, band: Optional[int] = None) -> float:
    """Cuturi & Blondel's Soft-DTW with squared Euclidean costs."""
    x, y = _2d(x), _2d(y)
    n, m = len(x), len(y)
    r = np.full((n + 1, m + 1), np.inf)
    r[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if not in_band(i - 1, j - 1, n, m, band):
                continue
            cost = float(np.sum((x[i - 1] - y[j - 1]) ** 2))
            r[i, j] = cost + soft_min([r[i - 1, j], r[i, j - 1], r[i - 1, j - 1]], gamma)
    return float(r[n, m])


def twed(x, y, nu: float = 0.001, lmbda: float = 1.0, degree: float = 2.0) -> float:
    """Marteau's TWED: timestamps 0, 1, 2, ..., the Lp distance (p = degree)
    between samples, a virtual sample 0 at time 0 before each series."""
    x, y = _2d(x), _2d(y)
    dims = x.shape[1]
    xa = np.vstack([np.zeros(dims), x])
    ya = np.vstack([np.zeros(dims), y])
    ta = np.concatenate([[0.0], np.arange(len(x), dtype=np.float64)])
    tb = np.concatenate([[0.0], np.arange(len(y), dtype=np.float64)])

    def dist(a, b):
        return float(np.sum(np.abs(a - b) ** degree) ** (1.0 / degree))

    n, m = len(x), len(y)
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            delete_a = d[i - 1, j] + dist(xa[i], xa[i - 1]) + nu * (ta[i] - ta[i - 1]) + lmbda
            delete_b = d[i, j - 1] + dist(ya[j], ya[j - 1]) + nu * (tb[j] - tb[j - 1]) + lmbda
            match = (
                d[i - 1, j - 1]
                + dist(xa[i], ya[j])
                + dist(xa[i - 1], ya[j - 1])
                + nu * (abs(ta[i] - tb[j]) + abs(ta[i - 1] - tb[j - 1]))
            )
            d[i, j] = min(delete_a, delete_b, match)
    return float(d[n, m])


def matrix(a, b, measure) -> np.ndarray:
    return np.array([[measure(x, y) for y in b] for x in a])
