"""timewarp: elastic time-series distances (DTW, TWED, Soft-DTW) on NVIDIA
GPUs and the CPU, with kernels written in Rust.

    >>> import numpy as np, timewarp
    >>> x = np.random.default_rng(0).normal(size=(100, 128))
    >>> d = timewarp.cdist(x, metric="dtw")  # 100 x 100, on the GPU if there is one

`cdist`, `distance`, `soft_dtw` (differentiable for torch tensors),
`soft_dtw_gradient`, `SoftDTWLoss`, `KNeighborsClassifier`, `search`,
`subsequence_alignment`, `load`, `info`;
`timewarp.dask` (`cdist`, `knn` over a Dask cluster).
Errors are `TimewarpError`s, and the builtin exception of their kind:
`InputError` (a `ValueError`), `GpuError` (a `RuntimeError`),
`OutOfMemoryError` and `GpuOutOfMemoryError` (`MemoryError`s), `FileError`
(an `OSError`); Ctrl-C raises `KeyboardInterrupt`. Conventions against
tslearn and aeon: docs/python.md.
"""

from __future__ import annotations

from typing import Any, Optional

from ._core import (
    cdist,
    distance,
    gpu_available,
    info,
    load,
    soft_dtw_gradient,
    soft_dtw_values,
)
from ._errors import (
    FileError,
    GpuError,
    GpuOutOfMemoryError,
    InputError,
    OutOfMemoryError,
    TimewarpError,
)
from ._inputs import is_torch_tensor
from ._paths import dtw_path, soft_dtw_alignment, twed_path
from ._search import SubsequenceAlignment, search, subsequence_alignment
from ._timewarp import __version__
from .neighbors import KNeighborsClassifier

__all__ = [
    "FileError",
    "GpuError",
    "GpuOutOfMemoryError",
    "InputError",
    "KNeighborsClassifier",
    "OutOfMemoryError",
    "SoftDTWLoss",
    "SubsequenceAlignment",
    "TimewarpError",
    "__version__",
    "cdist",
    "distance",
    "dtw_path",
    "gpu_available",
    "info",
    "load",
    "search",
    "soft_dtw",
    "soft_dtw_alignment",
    "soft_dtw_gradient",
    "subsequence_alignment",
    "twed_path",
]


def soft_dtw(
    x: Any,
    y: Any,
    *,
    gamma: float = 1.0,
    band: Optional[int] = None,
    normalize: bool = False,
    device: str = "auto",
    precision: Optional[str] = None,
):
    """Paired Soft-DTW: ``sdtw(x[k], y[k])`` for batches ``(batch, length)``
    or ``(batch, length, dims)`` (or lists of series), shape ``(batch,)``.
    For torch tensors the result is differentiable in both inputs; numpy in,
    numpy values out (`soft_dtw_gradient` gives their gradients).
    `normalize=True`: the soft-DTW divergence
    ``sdtw(x, y) - (sdtw(x, x) + sdtw(y, y)) / 2``."""
    if is_torch_tensor(x):
        from ._torch import soft_dtw_torch

        return soft_dtw_torch(
            x, y, gamma=gamma, band=band, normalize=normalize, device=device, precision=precision
        )
    return soft_dtw_values(
        x, y, gamma=gamma, band=band, normalize=normalize, device=device, precision=precision
    )


def __getattr__(name: str):
    # torch is imported only when its loss is asked for.
    if name == "SoftDTWLoss":
        from ._torch import SoftDTWLoss

        return SoftDTWLoss
    # timewarp.dask (and Dask) only when it is used.
    if name == "dask":
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'timewarp' has no attribute {name!r}")
