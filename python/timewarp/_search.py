"""Subsequence search: the best places of a query in a long series under
banded DTW, with the UCR Suite's cascade of lower bounds, on every CPU
core; and the one best match of any length under DTW with a free start and
end, with its path (docs/python.md, "Search")."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np
from numpy.typing import NDArray

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


def _query_and_series(query: Any, series: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The query as C-contiguous float64 ``(m, dims)``, the series as
    C-contiguous float32 or float64 ``(length, dims)``, from numpy arrays
    or CPU tensors."""
    prepared_query = _inputs.series(query, "query")
    prepared_series = _inputs.series(series, "series")
    for prepared, name in ((prepared_query, "query"), (prepared_series, "series")):
        if prepared.origin.kind == "torch" and prepared.origin.torch_device.type != "cpu":
            raise InputError(f"{name}: {what} takes CPU tensors (it runs on the CPU)")
    q = _inputs.cast(prepared_query, np.dtype(np.float64))[0]
    dtype = np.dtype(np.float32) if prepared_series.dtype == np.float32 else np.dtype(np.float64)
    return q, _inputs.cast(prepared_series, dtype)[0]


def _check_k_and_exclusion(k: Any, exclusion: Any) -> None:
    """`search`'s first checks (also `timewarp.dask.search`'s)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k = {k!r}: at least one match")
    if exclusion is not None and (
        isinstance(exclusion, (bool, np.bool_))
        or not isinstance(exclusion, (int, np.integer))
        or exclusion < 0
    ):
        raise InputError(f"exclusion = {exclusion!r}: a number of samples >= 0")


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
    by unit). ``device="gpu"`` searches on the GPU (the same matches and
    distances, bit for bit); ``"auto"`` does from 2**21 samples for each
    CPU thread on, when a GPU is usable.
    """
    _check_k_and_exclusion(k, exclusion)
    q, s = _query_and_series(query, series, "search")
    value, is_radius = _band(band)
    return _ext.search(q, s, value, is_radius, int(k), bool(znorm),
                       None if exclusion is None else int(exclusion), device)


class SubsequenceAlignment(NamedTuple):
    """The best match of a query in a long series (`subsequence_alignment`)."""

    start: int
    """The series' first sample in the match."""
    end: int
    """The series' last sample in the match (``end >= start``)."""
    cost: float
    """The square root of the accumulated squared Euclidean cost along the
    path, as tslearn's ``dtw_subsequence_path`` returns it."""
    path: NDArray[np.int64]
    """``(L, 2)`` cells ``(i, j)``: query sample `i` meets series sample
    `j`, from ``(0, start)`` to ``(m - 1, end)``."""


def subsequence_alignment(query: Any, series: Any, device: str = "auto") -> SubsequenceAlignment:
    """The best match of the whole `query` (``(m,)`` or ``(m, dims)``)
    anywhere in `series` (``(length,)`` or ``(length, dims)``), numpy arrays
    or CPU torch tensors, under DTW with a free start and a free end in the
    series and no fixed length (tslearn's ``dtw_subsequence_path``,
    dtaidistance's ``subsequence_alignment``): the same end, cost and path
    as tslearn's. Squared Euclidean local cost over the dimensions
    (dependent DTW), no band, no normalisation. Any lengths: the match may
    be shorter than the query.

    Ties: the earliest end among equal costs; along the path the diagonal
    step, then the step from the query's previous sample, then the one from
    the series' previous sample (tslearn's order). One pass over the series
    on one CPU core (``device="cpu"``), or on the GPU (``device="gpu"``,
    the series copied there in chunks; ``"auto"``, the default, takes the
    GPU when one is usable, the query has at least 8 samples and the
    series times the query at least 2^24 cells): the same start, end and
    cost, bit for bit, and the same path (computed on the CPU). Memory
    linear in `m` (then the path's); float32 series are read as they are.
    """
    q, s = _query_and_series(query, series, "subsequence_alignment")
    start, end, cost, path = _ext.subsequence_alignment(q, s, device)
    return SubsequenceAlignment(int(start), int(end), float(cost), path)
