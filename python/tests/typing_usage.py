"""The public API called as a user would, for the type checker (CI runs
`mypy --strict` on this file; pytest does not collect it). It checks that
the package's types (`py.typed`, the extension's `_timewarp.pyi`) accept
ordinary use and give the types a user relies on. Running it computes a
few small matrices on the CPU.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray

if sys.version_info >= (3, 11):
    from typing import assert_type
else:  # pragma: no cover
    from typing_extensions import assert_type

import timewarp
from timewarp import _timewarp


def user_calls() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 32))
    y = rng.normal(size=(8, 32))

    d = timewarp.cdist(x, metric="dtw", device="cpu")
    d2 = timewarp.cdist(x, y, metric="twed", nu=0.01, lmbda=0.5, device="cpu")
    one = timewarp.distance(x[0], y[0], metric="soft_dtw", gamma=0.5, device="cpu")
    values = timewarp.soft_dtw(x, y, gamma=0.1, device="cpu")
    gradients = timewarp.soft_dtw_gradient(x, y, gamma=0.1, device="cpu")
    path, cost = timewarp.dtw_path(x[0], y[0], band=4, device="cpu")
    alignment, value = timewarp.soft_dtw_alignment(x[0], y[0], gamma=1.0, device="cpu")
    print(d.shape, d2.shape, one, values.shape, len(gradients), len(path), cost, alignment.shape)
    print(value, timewarp.gpu_available(), timewarp.__version__)

    match = timewarp.subsequence_alignment(x[0, :5], y[0], device="cpu")
    assert_type(match, timewarp.SubsequenceAlignment)
    assert_type(match.path, NDArray[np.int64])
    assert_type(match.cost, float)
    start: int = match.start
    print(start, match.end)

    found: dict[str, Any] = timewarp.info()
    print(found["version"])

    model = timewarp.KNeighborsClassifier(n_neighbors=1, metric="dtw", device="cpu")
    model.fit(x, np.arange(8) % 2)
    predicted: NDArray[Any] = model.predict(y)
    print(predicted)

    try:
        timewarp.cdist(x, metric="no such metric")
    except timewarp.TimewarpError as error:
        print(error)


def extension_calls() -> None:
    """The extension's own signatures, as the Python layer calls them: the
    result has the batch's precision."""
    a32 = np.zeros((4, 16, 1), dtype=np.float32)
    a64 = np.zeros((4, 16, 1), dtype=np.float64)
    m32 = _timewarp.cdist(a32, None, "dtw", 1.0, None, 0.001, 1.0, 2.0, False, "cpu")
    assert_type(m32, NDArray[np.float32])
    m64 = _timewarp.cdist(a64, a64, "twed", 1.0, None, 0.001, 1.0, 2.0, False, "cpu")
    assert_type(m64, NDArray[np.float64])

    values = _timewarp.soft_dtw_pairs(a32, a32, 0.1, None, False, "cpu", False, False)
    assert_type(values, NDArray[np.float32])
    values64, grad_x, grad_y = _timewarp.soft_dtw_pairs(a64, a64, 0.1, 3, True, "cpu", True, True)
    assert_type(values64, NDArray[np.float64])
    assert_type(grad_y, "NDArray[np.float64] | list[NDArray[np.float64]] | None")

    path, steps, costs, value = _timewarp.twed_path(
        a64[0], a64[1], 0.001, 1.0, 2.0, "cpu", None, None
    )
    assert_type(steps, list[str])
    assert_type(value, float)

    start, end, cost, cells = _timewarp.subsequence_alignment(a64[0], a32[1], "cpu")
    assert_type(cells, NDArray[np.int64])
    print(start + end, cost)

    resident = _timewarp.Resident(a64, "cpu")
    distances, indices, pruning = resident.kneighbors(a64, 2, "dtw", 1.0, 3, 0.001, 1.0, 2.0)
    assert_type(indices, NDArray[np.int64])
    assert_type(pruning, "dict[str, int] | None")
    print(len(resident), resident.device, resident.dtype, distances.shape, path.shape, costs.shape)
    print(m32.shape, m64.shape, values.shape, grad_x)

    series, labels = _timewarp.load("tests/data/GunPoint_TEST.ts")
    assert_type(labels, "list[str] | None")
    print(len(series))

    errors: tuple[type[timewarp.TimewarpError], ...] = (
        timewarp.InputError,
        timewarp.GpuError,
        timewarp.OutOfMemoryError,
        timewarp.GpuOutOfMemoryError,
        timewarp.FileError,
    )
    assert issubclass(timewarp.InputError, ValueError)
    print(errors)


if __name__ == "__main__":
    user_calls()
