"""Subsequence search: the best places of a query in a long series under
banded DTW, with the UCR Suite's cascade of lower bounds, on every CPU
core (docs/python.md, "Search")."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _inputs
from . import _timewarp as _ext
from ._errors import InputError


def _band(band: Any) -> tuple[float, bool]:
    """(value, is a radius): a float in [0, 1] is a fraction of the
    query's length, an int a radius in samples."""
    if isinstance(band, (bool, np.bool_)):
        raise InputError(f"band = {band!r}: a fraction in [0, 1] or a radius in samples")
    if isinstance(band, (int, np.integer)):
        if band < 0:
            raise InputError(f"band = {band}: a radius is >= 0")
        return float(band), True
    if isinstance(band, (float, np.floating)):
        return float(band), False
    raise InputError(f"band = {band!r}: a fraction in [0, 1] or a radius in samples")


def search(
    query: Any,
    series: Any,
    band: Any = 0.05,
    k: int = 1,
    znorm: bool = True,
    exclusion: Optional[int] = None,
    device: str = "auto",
):
    """The `k` best matches of `query` (``(m,)`` or ``(m, dims)``) in
    `series` (``(length,)`` or ``(length, dims)``), numpy arrays or CPU
    torch tensors.

    Each start's cost is the DTW (squared Euclidean local cost, Sakoe-Chiba
    band) of the z-normalised query and the z-normalised subsequence
    (`znorm=False`: the values as they are); matches are chosen greedily,
    each at least `exclusion` (default ``m // 2``) from those before.
    `band`: a float in [0, 1], a fraction of `m` (radius ``floor(band * m)``,
    as the UCR Suite's R), or an int, a radius; 0 is the Euclidean distance.

    Returns ``(starts, distances, stats)``: int64 and float64 arrays, best
    first (distance: the square root of the cost, as the UCR Suite prints
    it), and a dict of the pruning statistics (``candidates``, ``kim``,
    ``keogh_query``, ``keogh_data``, ``dtw``, ``abandoned``, ``radius``,
    ``exclusion``). float32 series are searched as they are (widened unit
    by unit). Runs on the CPU; ``device="gpu"`` raises (no GPU kernels
    yet).
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k = {k!r}: at least one match")
    if exclusion is not None and (
        isinstance(exclusion, (bool, np.bool_))
        or not isinstance(exclusion, (int, np.integer))
        or exclusion < 0
    ):
        raise InputError(f"exclusion = {exclusion!r}: a number of samples >= 0")
    prepared_query = _inputs.series(query, "query")
    prepared_series = _inputs.series(series, "series")
    for prepared, name in ((prepared_query, "query"), (prepared_series, "series")):
        if prepared.origin.kind == "torch" and prepared.origin.torch_device.type != "cpu":
            raise InputError(f"{name}: search takes CPU tensors (the search runs on the CPU)")
    q = _inputs.cast(prepared_query, np.dtype(np.float64))[0]
    dtype = np.dtype(np.float32) if prepared_series.dtype == np.float32 else np.dtype(np.float64)
    s = _inputs.cast(prepared_series, dtype)[0]
    value, is_radius = _band(band)
    return _ext.search(q, s, value, is_radius, int(k), bool(znorm),
                       None if exclusion is None else int(exclusion), device)
