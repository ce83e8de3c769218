"""Alignments of one pair: DTW's warping path, TWED's edit path, Soft-DTW's
expected alignment, in float64 (on the GPU for Soft-DTW's alignment and
the passes of long DTW and TWED paths when `device` resolves to one)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _inputs
from . import _timewarp as _ext
from ._core import _band, _float
from ._errors import InputError


def _series(x: Any, name: str) -> np.ndarray:
    """One series as a C-contiguous float64 ``(length, dims)`` array, read
    as `distance` reads it (tensors, dtypes, the errors)."""
    prepared = _inputs.series(x, name)
    return _inputs.cast(prepared, np.dtype(np.float64))[0]


def dtw_path(x: Any, y: Any, band: Optional[int] = None, device: str = "auto"):
    """DTW's optimal warping path of `x` against `y` (``(length,)`` or
    ``(length, dims)`` each) and its value, which is ``cdist``'s.

    Returns ``(path, value)``: `path` a ``(k, 2)`` int64 array of the cells
    ``(i, j)`` from ``(0, 0)`` to ``(n-1, m-1)``. Ties between equally cheap
    steps prefer the diagonal, then ``(i-1, j)``, then ``(i, j-1)``. Long
    pairs take memory linear in their lengths (Hirschberg's algorithm).
    """
    return _ext.dtw_path(_series(x, "x"), _series(y, "y"), _band(band), device)


def _times(times: Any, name: str) -> Optional[np.ndarray]:
    """Timestamps as a C-contiguous float64 ``(length,)`` array, or None."""
    if times is None:
        return None
    array = _inputs.numbers(times, name).astype(np.float64)
    if array.ndim != 1:
        raise InputError(f"{name}: one timestamp a sample, shape (length,); got shape {array.shape}")
    return np.ascontiguousarray(array)


def twed_path(
    x: Any,
    y: Any,
    nu: float = 0.001,
    lmbda: float = 1.0,
    degree: float = 2.0,
    device: str = "auto",
    x_times: Any = None,
    y_times: Any = None,
):
    """TWED's optimal edit path of `x` against `y` and its value, the
    samples at times `x_times` and `y_times` (``(length,)`` each, finite,
    non-decreasing; None: 0, 1, 2, ...). Returns ``(path, steps, costs,
    value)``: `path` the ``(k, 2)`` cells the steps reach, `steps` their
    kinds (``"match"``, ``"delete-x"``, ``"delete-y"``), `costs` their
    costs, adding up to `value`. Long pairs take memory linear in their
    lengths."""
    return _ext.twed_path(
        _series(x, "x"),
        _series(y, "y"),
        _float("nu", nu),
        _float("lmbda", lmbda),
        _float("degree", degree),
        device,
        _times(x_times, "x_times"),
        _times(y_times, "y_times"),
    )


def soft_dtw_alignment(
    x: Any, y: Any, gamma: float = 1.0, band: Optional[int] = None, device: str = "auto"
):
    """Soft-DTW's expected alignment ``(n, m)`` (the derivative of the value
    with respect to each cell's cost; 0 outside the band) and the value.
    Computed on the GPU when `device` resolves to one (``"gpu"``,
    ``"gpu:N"``, or ``"auto"`` with a GPU), else on the CPU. Pairs whose two
    matrices exceed 1 GiB are refused before any work."""
    return _ext.soft_dtw_alignment(
        _series(x, "x"), _series(y, "y"), _float("gamma", gamma), _band(band), device
    )
