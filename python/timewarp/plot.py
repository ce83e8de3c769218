"""matplotlib helpers: an alignment of two series, a matrix as a heat map.

Needs matplotlib (``pip install matplotlib``); importing this module
without it raises an ImportError that says so."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

try:
    import matplotlib.pyplot as plt
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "timewarp.plot needs matplotlib, which is not installed: pip install matplotlib"
    ) from error


def plot_alignment(x: Any, y: Any, path: Any, ax: Optional[Any] = None):
    """The two series (first dimension), `x` shifted above `y`, with a line
    between the samples each cell ``(i, j)`` of `path` matches. Returns the
    axes."""
    x = np.asarray(x, dtype=float).reshape(len(x), -1)[:, 0]
    y = np.asarray(y, dtype=float).reshape(len(y), -1)[:, 0]
    path = np.asarray(path, dtype=int).reshape(-1, 2)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4))
    low = min(x.min(), y.min())
    span = max(x.max(), y.max()) - low or 1.0
    shift = 1.25 * span
    for i, j in path:
        ax.plot([i, j], [x[i] + shift, y[j]], color="0.6", linewidth=0.6, zorder=1)
    ax.plot(np.arange(len(x)), x + shift, label="x", linewidth=2, zorder=2)
    ax.plot(np.arange(len(y)), y, label="y", linewidth=2, zorder=2)
    ax.set_xlabel("sample")
    ax.set_ylabel("value (x shifted up)")
    ax.legend(loc="upper right")
    return ax


def plot_matrix(d: Any, labels: Optional[Sequence[Any]] = None, ax: Optional[Any] = None):
    """A square or rectangular matrix as a heat map with a colour bar; with
    `labels` (one per row, for a set against itself), rows and columns are
    grouped by class with separators. Returns the axes."""
    d = np.asarray(d, dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    if labels is not None:
        labels = np.asarray(labels)
        if len(labels) != d.shape[0] or d.shape[0] != d.shape[1]:
            raise ValueError("labels: one per row of a square matrix")
        order = np.argsort(labels, kind="stable")
        d = d[np.ix_(order, order)]
        sorted_labels = labels[order]
        edges = np.flatnonzero(sorted_labels[1:] != sorted_labels[:-1]) + 1
        for edge in edges:
            ax.axhline(edge - 0.5, color="white", linewidth=1.5)
            ax.axvline(edge - 0.5, color="white", linewidth=1.5)
        starts = np.concatenate([[0], edges])
        ends = np.concatenate([edges, [len(labels)]])
        centres = (starts + ends - 1) / 2
        names = [str(sorted_labels[s]) for s in starts]
        ax.set_xticks(centres, names)
        ax.set_yticks(centres, names)
    image = ax.imshow(d, cmap="viridis", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax)
    ax.set_xlabel("series (columns)" + (", by class" if labels is not None else ""))
    ax.set_ylabel("series (rows)" + (", by class" if labels is not None else ""))
    return ax
