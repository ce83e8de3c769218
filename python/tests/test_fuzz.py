"""Random input to every entry point of the Python API: shapes (empty,
one sample, ragged lists, 0-D to 4-D), dtypes (float16/32/64, integers,
booleans, complex, object, torch's bfloat16), NaN and infinities, and
parameters of any sign and size, bad names and devices. Each call either
returns or raises one of the errors the API documents; anything else
(another exception, a Rust panic, an aborted interpreter) fails.

Seeded and bounded (hypothesis' derandomized mode, small sizes, the CPU),
so that it takes a few seconds and fails the same way every run."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import timewarp  # noqa: E402
from timewarp import TimewarpError  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

# Complex values silently cast to real would be a wrong answer.
pytestmark = pytest.mark.filterwarnings("error::numpy.exceptions.ComplexWarning")

# What bad input may raise: TimewarpError is a ValueError.
EXPECTED = (TimewarpError, ValueError, TypeError, MemoryError)

FUZZ = settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

DTYPES = ["float16", "float32", "float64", "int8", "int64", "uint8", "bool", "complex64", "object"]


def mostly(plausible, wild):
    """`plausible` seven times in eight, so that many calls compute."""
    return st.one_of(*[plausible] * 7, wild)


finite = st.floats(-10, 10, allow_nan=False)
special = st.sampled_from([0.0, np.nan, np.inf, -np.inf, 1e300, -1e-300, 3e38, 65504.0])


@st.composite
def arrays(draw, max_dims: int = 4):
    ndim = draw(mostly(st.integers(1, min(3, max_dims)), st.integers(0, max_dims)))
    lengths = mostly(st.integers(1, 4), st.integers(0, 4))
    shape = tuple(draw(st.lists(lengths, min_size=ndim, max_size=ndim)))
    size = int(np.prod(shape))
    values = mostly(finite, st.one_of(finite, special))
    data = np.array(draw(st.lists(values, min_size=size, max_size=size)), dtype=np.float64)
    dtype = draw(st.one_of(st.sampled_from(["float32", "float64"]), st.sampled_from(DTYPES)))
    with np.errstate(all="ignore"):
        if dtype == "object":
            return data.reshape(shape).astype(object)
        if np.dtype(dtype).kind in "iub":
            data = np.nan_to_num(data, posinf=100, neginf=-100).clip(-100, 100)
        return data.astype(dtype).reshape(shape)


@st.composite
def tensors(draw):
    array = draw(arrays(max_dims=3))
    if array.dtype == object:
        return array
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if draw(st.booleans()) and tensor.is_floating_point():
        tensor = tensor.to(torch.bfloat16)
    return tensor


def batches():
    """Anything a batch or a series could be given as, and some things not."""
    wild = [
        arrays(),
        st.lists(arrays(max_dims=3), max_size=4),
        st.tuples(arrays(max_dims=2), arrays(max_dims=2)),
        st.sampled_from([None, 3, "abc", [[1, 2], [3]], [["a"]], {"x": 1}, 1.5]),
    ]
    if torch is not None:
        wild.append(tensors())
        wild.append(st.lists(tensors(), max_size=3))
    plausible = st.one_of(arrays(max_dims=3), st.lists(arrays(max_dims=2), min_size=1, max_size=4))
    return mostly(plausible, st.one_of(*wild))


numbers = mostly(
    st.one_of(st.floats(0.01, 10), st.integers(1, 5)),
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**40), 10**40),
        st.sampled_from([0, -1, True, None, "1", "x", 10**400, 10**5000, [1], 2**63, 2**64]),
    ),
)
bands = mostly(st.one_of(st.none(), st.integers(0, 5)), numbers)
metrics = mostly(
    st.sampled_from(["dtw", "twed", "soft_dtw"]),
    st.sampled_from(["soft-dtw", "SoftDTW", "euclid", "", 3, None]),
)
devices = mostly(
    st.just("cpu"),
    st.sampled_from(["CPU", "tpu", "gpu:x", "gpu:-1", "cuda:99999999999999999999", 5, None]),
)


def run(call) -> None:
    """`call()` returns, or raises an expected error with a one-line message."""
    try:
        call()
    except EXPECTED as error:
        assert str(error), f"{type(error).__name__} without a message"


@FUZZ
@given(
    a=batches(),
    b=st.one_of(st.none(), batches()),
    metric=metrics,
    band=bands,
    gamma=numbers,
    nu=numbers,
    lmbda=numbers,
    degree=numbers,
    normalize=st.booleans(),
    device=devices,
)
def test_cdist(a, b, metric, band, gamma, nu, lmbda, degree, normalize, device):
    parameters = dict(
        metric=metric,
        band=band,
        gamma=gamma,
        nu=nu,
        lmbda=lmbda,
        degree=degree,
        normalize=normalize,
        device=device,
    )
    run(lambda: timewarp.cdist(a, b, **parameters))
    run(lambda: timewarp.distance(a, b, **parameters))


@FUZZ
@given(
    x=batches(),
    y=batches(),
    gamma=numbers,
    band=bands,
    normalize=st.booleans(),
    device=devices,
    precision=st.sampled_from([None, "float32", "float64", "f16", 3]),
)
def test_soft_dtw(x, y, gamma, band, normalize, device, precision):
    parameters = dict(
        gamma=gamma, band=band, normalize=normalize, device=device, precision=precision
    )
    run(lambda: timewarp.soft_dtw(x, y, **parameters))
    run(lambda: timewarp.soft_dtw_gradient(x, y, **parameters))


def one_series():
    return mostly(arrays(max_dims=2), batches())


@FUZZ
@given(
    x=one_series(),
    y=one_series(),
    band=bands,
    gamma=numbers,
    nu=numbers,
    lmbda=numbers,
    degree=numbers,
    device=devices,
    times=mostly(st.none(), arrays(max_dims=2)),
)
def test_paths(x, y, band, gamma, nu, lmbda, degree, device, times):
    run(lambda: timewarp.dtw_path(x, y, band=band, device=device))
    run(
        lambda: timewarp.twed_path(
            x, y, nu=nu, lmbda=lmbda, degree=degree, device=device, x_times=times, y_times=times
        )
    )
    run(lambda: timewarp.soft_dtw_alignment(x, y, gamma=gamma, band=band, device=device))
    run(lambda: timewarp.subsequence_alignment(x, y, device=device))


@FUZZ
@given(
    train=batches(),
    data=st.data(),
    queries=batches(),
    k=mostly(st.integers(1, 3), numbers),
    metric=metrics,
    weights=st.sampled_from(["uniform", "distance", "x"]),
    band=bands,
    device=devices,
)
def test_k_neighbors(train, data, queries, k, metric, weights, band, device):
    # One label a training series, mostly.
    sized = isinstance(train, (list, tuple)) or getattr(train, "ndim", 0) > 0
    count = len(train) if sized else 1
    labels = data.draw(
        mostly(st.lists(st.integers(0, 2), min_size=count, max_size=count), arrays(max_dims=2))
    )
    model = timewarp.KNeighborsClassifier(
        n_neighbors=k, metric=metric, weights=weights, band=band, device=device
    )
    run(lambda: model.fit(train, labels).predict(queries))
    run(lambda: model.kneighbors(queries, n_neighbors=k))


@st.composite
def valid_batches(draw, dims: int, count: int | None = None):
    """A batch every entry point takes: `count` series (1 to 4 if None) of
    `dims` dimensions, 1 to 5 samples each, finite, in a real dtype."""
    count = draw(st.integers(1, 4)) if count is None else count
    dtype = draw(st.sampled_from(["float16", "float32", "float64", "int16", "bool"]))

    def series(length):
        values = draw(st.lists(finite, min_size=length * dims, max_size=length * dims))
        return np.array(values).reshape(length, dims).astype(dtype)

    if draw(st.booleans()):
        return [series(draw(st.integers(1, 5))) for _ in range(count)]
    length = draw(st.integers(1, 5))
    batch = np.stack([series(length) for _ in range(count)])
    return batch[:, :, 0] if dims == 1 and draw(st.booleans()) else batch


@FUZZ
@given(data=st.data(), dims=st.integers(1, 3), metric=st.sampled_from(["dtw", "twed", "soft_dtw"]))
def test_valid_input_computes(data, dims, metric):
    a = data.draw(valid_batches(dims))
    b = data.draw(st.one_of(st.none(), valid_batches(dims)))
    band = None if metric == "twed" else data.draw(st.one_of(st.none(), st.integers(0, 6)))
    parameters = dict(
        metric=metric,
        band=band,
        gamma=data.draw(st.floats(0.01, 10)),
        nu=data.draw(st.floats(0, 10)),
        lmbda=data.draw(st.floats(0, 10)),
        degree=data.draw(st.floats(1, 4)),
        device="cpu",
    )
    matrix = timewarp.cdist(a, b, **parameters)
    rows, cols = len(a), len(a if b is None else b)
    assert matrix.shape == (rows, cols) and np.isfinite(matrix).all()
    if b is None:
        np.testing.assert_array_equal(matrix, matrix.T)
        if metric != "soft_dtw":
            assert (np.diag(matrix) == 0).all()
    x, y = list(a)[0], list(a if b is None else b)[-1]
    value = timewarp.distance(x, y, **parameters)
    expected = matrix[0, cols - 1]
    assert value == pytest.approx(float(expected), rel=1e-5 if matrix.dtype == np.float32 else 1e-9)
    paired = data.draw(valid_batches(dims, count=rows))
    values, grad_x, grad_y = timewarp.soft_dtw_gradient(
        a, paired, gamma=parameters["gamma"], band=band, device="cpu"
    )
    assert values.shape == (rows,) and np.isfinite(values).all()
    path, cost = timewarp.dtw_path(x, y, band=band, device="cpu")
    assert tuple(path[0]) == (0, 0) and tuple(path[-1]) == (len(x) - 1, len(y) - 1)
