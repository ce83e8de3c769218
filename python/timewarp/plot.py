"""matplotlib helpers: an alignment of two series, a matrix as a heat map.

Needs matplotlib (``pip install matplotlib``); importing this module
without it raises an ImportError that says so."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

try:
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "timewarp.plot needs matplotlib, which is not installed: pip install matplotlib"
    ) from error


def _first_dimension(series: Any, name: str) -> np.ndarray:
    array = np.asarray(series, dtype=float)
    if array.ndim not in (1, 2) or len(array) == 0 or array.size == 0:
        raise ValueError(
            f"{name}: one series, (length,) or (length, dims), not empty; got shape {array.shape}"
        )
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or infinite values")
    return array.reshape(len(array), -1)[:, 0]


# Pairs lighter than this share of the heaviest are not drawn: an expected
# alignment has a weight in every cell, most of them negligible.
_LIGHTEST_DRAWN = 0.01


def _matched_pairs(path: Any, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The cells `(i, j)` to draw and their weights in (0, 1]: every cell
    of a path, weight 1; the cells of an ``(n, m)`` matrix of weights, by
    their share of the heaviest."""
    array = np.asarray(path)
    if array.dtype.kind == "f" and array.shape == (n, m):
        if not np.isfinite(array).all() or (array < 0).any():
            raise ValueError("the alignment matrix must hold finite weights >= 0")
        heaviest = array.max()
        weights = array / heaviest if heaviest > 0 else array
        cells = np.argwhere(weights >= _LIGHTEST_DRAWN)
        return cells, weights[cells[:, 0], cells[:, 1]]
    if array.dtype.kind not in "iuf" or array.ndim != 2 or array.shape[1:] != (2,):
        raise ValueError(
            f"path: a (k, 2) array of cells (i, j), or an ({n}, {m}) alignment matrix; "
            f"got shape {array.shape} of {array.dtype}"
        )
    if not np.isfinite(array).all() or (array != np.round(array)).any():
        raise ValueError("path: the cells (i, j) are whole numbers")
    cells = array.astype(np.int64)
    outside = (cells[:, 0] < 0) | (cells[:, 0] >= n) | (cells[:, 1] < 0) | (cells[:, 1] >= m)
    if outside.any():
        i, j = cells[np.argmax(outside)]
        raise ValueError(f"path: cell ({i}, {j}) is outside the {n} x {m} samples of x and y")
    return cells, np.ones(len(cells))


def plot_alignment(x: Any, y: Any, path: Any, ax: Optional[Any] = None):
    """The two series (first dimension), `x` shifted above `y`, with a line
    between the samples each cell ``(i, j)`` of `path` matches. Returns the
    axes.

    `path`: a ``(k, 2)`` array of cells (`dtw_path`, `twed_path`), or an
    ``(n, m)`` float matrix of weights (`soft_dtw_alignment`'s expected
    alignment), whose pairs are drawn as lines as opaque and wide as their
    weight's share of the heaviest, those under 1% of it not at all."""
    x = _first_dimension(x, "x")
    y = _first_dimension(y, "y")
    cells, weights = _matched_pairs(path, len(x), len(y))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4))
    low = min(x.min(), y.min())
    span = max(x.max(), y.max()) - low or 1.0
    shift = 1.25 * span
    segments = [[(i, x[i] + shift), (j, y[j])] for i, j in cells]
    colours = [(0.6, 0.6, 0.6, w) for w in weights]
    lines = LineCollection(segments, colors=colours, linewidths=0.3 + 0.3 * weights, zorder=1)
    ax.add_collection(lines)
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
