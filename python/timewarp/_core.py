"""Distances, paired Soft-DTW values and gradients, data files, build info."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _inputs
from . import _timewarp as _ext
from ._errors import InputError

METRICS = ("dtw", "twed", "soft_dtw")


def _metric(metric: str) -> str:
    if not isinstance(metric, str):
        raise InputError(f"metric {metric!r}: expected 'dtw', 'twed' or 'soft_dtw'")
    name = metric.lower().replace("-", "_")
    if name == "softdtw":
        name = "soft_dtw"
    if name not in METRICS:
        raise InputError(f"metric {metric!r}: expected 'dtw', 'twed' or 'soft_dtw'")
    return name


# The extension takes the radius as a signed 64-bit integer.
_BAND_MAX = 2**63 - 1


def _band(band: Optional[int]) -> Optional[int]:
    if band is None:
        return None
    if isinstance(band, (bool, np.bool_)) or not isinstance(band, (int, np.integer)):
        if isinstance(band, (float, np.floating)) and float(band).is_integer():
            band = int(band)
        else:
            raise InputError(
                f"band = {band!r}: the Sakoe-Chiba radius is a whole number of samples"
            )
    band = int(band)
    if not 0 <= band <= _BAND_MAX:
        raise InputError(
            f"band = {_shown(band)}: the Sakoe-Chiba radius must be between 0 and {_BAND_MAX}"
        )
    return band


def _shown(value: Any) -> str:
    """`value` for a message: integers of more than 30 digits by their size
    (Python refuses to print those of more than 4300)."""
    if isinstance(value, (int, np.integer)) and abs(int(value)).bit_length() > 100:
        return f"an integer of {abs(int(value)).bit_length()} bits"
    return repr(value)


def _float(name: str, value: Any) -> float:
    if isinstance(value, (str, bytes)):
        raise InputError(f"{name} = {value!r} is not a number")
    try:
        return float(value)
    except OverflowError:
        raise InputError(f"{name} = {_shown(value)} is too large for a float") from None
    except (TypeError, ValueError):
        raise InputError(f"{name} = {value!r} is not a number") from None


def _check_not_differentiated(value: Any, name: str, function: str) -> None:
    """An error for a tensor that requires a gradient (while autograd
    records): `function`'s result would silently have none."""
    if _inputs.requires_grad(value):
        raise InputError(
            f"{function} is not differentiable but {name} requires grad: use timewarp.soft_dtw "
            f"for a differentiable Soft-DTW, or pass {name}.detach()"
        )


def cdist(
    a: Any,
    b: Any = None,
    *,
    metric: str = "dtw",
    gamma: float = 1.0,
    band: Optional[int] = None,
    nu: float = 0.001,
    lmbda: float = 1.0,
    degree: float = 2.0,
    normalize: bool = False,
    device: str = "auto",
    precision: Optional[str] = None,
):
    """The distance of every series of `a` (rows) to every series of `b`
    (columns); `b=None` compares `a` with itself, each symmetric pair once.

    `a`, `b`: ``(n, length)`` or ``(n, length, dims)`` arrays, lists of
    ``(length,)``/``(length, dims)`` series of any lengths, torch tensors or
    objects with ``__dlpack__``. Returns a numpy array for numpy input and
    a tensor on the input's device for tensor input.

    metric: ``"dtw"`` (the sum of squared differences along the best path;
    tslearn's `cdist_dtw` is its square root), ``"twed"`` (parameters `nu`,
    `lmbda`, `degree`) or ``"soft_dtw"`` (`gamma`; `normalize=True` gives
    the soft-DTW divergence). `band`: a Sakoe-Chiba radius in samples
    (DTW and Soft-DTW). `device`: ``"auto"`` (the GPU if one is usable,
    else every CPU core), ``"cpu"``, ``"gpu"`` or ``"gpu:N"``.
    `precision`: ``"float32"`` or ``"float64"`` (default: the inputs').
    """
    _check_not_differentiated(a, "a", "cdist")
    _check_not_differentiated(b, "b", "cdist")
    left = _inputs.batch(a, "a")
    right = None if b is None else _inputs.batch(b, "b")
    if right is not None:
        _inputs.check_same_origin(left, right)
    matrix = _matrix(
        left, right, metric, gamma, band, nu, lmbda, degree, normalize, device, precision
    )
    return _inputs.result(matrix, left.origin)


def _matrix(left, right, metric, gamma, band, nu, lmbda, degree, normalize, device, precision):
    """The extension's matrix of two prepared batches (or one)."""
    dtype = _inputs.common_dtype(precision, left, right)
    return _ext.cdist(
        _inputs.cast(left, dtype),
        None if right is None else _inputs.cast(right, dtype),
        _metric(metric),
        _float("gamma", gamma),
        _band(band),
        _float("nu", nu),
        _float("lmbda", lmbda),
        _float("degree", degree),
        bool(normalize),
        _inputs.device_for(device, left, right),
    )


def distance(
    x: Any,
    y: Any,
    *,
    metric: str = "dtw",
    gamma: float = 1.0,
    band: Optional[int] = None,
    nu: float = 0.001,
    lmbda: float = 1.0,
    degree: float = 2.0,
    normalize: bool = False,
    device: str = "cpu",
    precision: Optional[str] = None,
) -> float:
    """The distance between two series (``(length,)`` or ``(length, dims)``),
    as a float. One pair is computed on the CPU unless `device` says
    otherwise. Parameters as `cdist`."""
    _check_not_differentiated(x, "x", "distance")
    _check_not_differentiated(y, "y", "distance")
    left = _inputs.series(x, "x")
    right = _inputs.series(y, "y")
    matrix = _matrix(
        left, right, metric, gamma, band, nu, lmbda, degree, normalize, device, precision
    )
    return float(matrix[0, 0])


def _paired(x: Any, y: Any, precision: Optional[str], device: str):
    left = _inputs.batch(x, "x")
    right = _inputs.batch(y, "y")
    _inputs.check_same_origin(left, right)
    if left.count != right.count:
        raise InputError(
            f"x has {left.count} series but y has {right.count}: paired batches pair series k with k"
        )
    dtype = _inputs.common_dtype(precision, left, right)
    where = _inputs.device_for(device, left, right)
    return left, right, dtype, where


def soft_dtw_values(
    x: Any,
    y: Any,
    *,
    gamma: float = 1.0,
    band: Optional[int] = None,
    normalize: bool = False,
    device: str = "auto",
    precision: Optional[str] = None,
):
    """Paired Soft-DTW ``sdtw(x[k], y[k])`` for every k, values only."""
    left, right, dtype, where = _paired(x, y, precision, device)
    values = _ext.soft_dtw_pairs(
        _inputs.cast(left, dtype),
        _inputs.cast(right, dtype),
        _float("gamma", gamma),
        _band(band),
        bool(normalize),
        where,
        False,
        False,
    )
    return _inputs.result(values, left.origin)


def _shaped(gradient, prepared: _inputs.Prepared):
    """A gradient in its input's layout: an array batch's shape, or a list
    of arrays each shaped like its series."""
    if isinstance(gradient, list) or prepared.flat is not None:
        flat = prepared.flat or [False] * len(gradient)
        return [g[:, 0] if was_flat else g for g, was_flat in zip(gradient, flat)]
    return gradient.reshape(prepared.shape)


def soft_dtw_gradient(
    x: Any,
    y: Any,
    *,
    gamma: float = 1.0,
    band: Optional[int] = None,
    normalize: bool = False,
    with_respect_to_y: bool = True,
    device: str = "auto",
    precision: Optional[str] = None,
):
    """Paired Soft-DTW and its gradients, for numpy users:
    ``(values, grad_x, grad_y)``, each gradient shaped like its batch (a list
    for a list input); `grad_y` is None unless `with_respect_to_y`. With
    `normalize=True`, of the soft-DTW divergence."""
    left, right, dtype, where = _paired(x, y, precision, device)
    values, grad_x, grad_y = _ext.soft_dtw_pairs(
        _inputs.cast(left, dtype),
        _inputs.cast(right, dtype),
        _float("gamma", gamma),
        _band(band),
        bool(normalize),
        where,
        True,
        bool(with_respect_to_y),
    )
    grad_x = _shaped(grad_x, left)
    grad_y = None if grad_y is None else _shaped(grad_y, right)
    return values, grad_x, grad_y


def load(path: Any):
    """A data file through timewarp's own loaders: ``.ts`` (sktime/aeon),
    ``.tsv``/``.txt`` (UCR), ``.csv`` (one series a line), ``.npy``.
    Returns ``(X, y)``: X a float64 array ``(n, length, dims)`` when every
    series has the same length, else a list of ``(length, dims)`` arrays;
    y a numpy array of the labels as strings, or None."""
    import os

    series, labels = _ext.load(os.fspath(path))
    lengths = {s.shape[0] for s in series}
    X = np.stack(series) if len(lengths) == 1 else list(series)
    y = None if labels is None else np.asarray(labels)
    return X, y


def info() -> dict:
    """The version, the kernel build and the GPUs the driver reports (each
    with whether timewarp can use it)."""
    return _ext.info()


def gpu_available() -> bool:
    """Whether GPU 0 can run timewarp's kernels here."""
    return _ext.gpu_available()
