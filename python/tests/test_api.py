"""The numpy API against the plain reference in reference.py: every metric,
univariate and multivariate, equal and unequal lengths, length 1, bands,
dtypes, layouts, errors. Tolerances: float64 results within 1e-12 relative
(the same sums in a different order); float32 within 1e-4 relative (single
precision over a few hundred cells)."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from conftest import assert_ctrl_c_stops

import timewarp
from timewarp import TimewarpError

RNG = np.random.default_rng(42)


def ragged(lengths, dims=1, scale=1.0):
    return [RNG.normal(size=(n, dims)) * scale for n in lengths]


MEASURES = {
    "dtw": lambda band: lambda x, y: ref.dtw(x, y, band),
    "soft_dtw": lambda band: lambda x, y: ref.soft_dtw(x, y, 0.7, band),
    "twed": lambda band: lambda x, y: ref.twed(x, y, 0.01, 0.5, 2.0),
}
PARAMS = {"gamma": 0.7, "nu": 0.01, "lmbda": 0.5, "degree": 2.0}


@pytest.mark.parametrize("metric", ["dtw", "soft_dtw", "twed"])
@pytest.mark.parametrize("dims", [1, 3])
@pytest.mark.parametrize("band", [None, 0, 2])
def test_cdist_matches_reference(metric, dims, band):
    if metric == "twed" and band is not None:
        pytest.skip("TWED has no band")
    a = ragged([1, 2, 7, 12], dims)
    b = ragged([1, 5, 9], dims)
    expected = ref.matrix(a, b, MEASURES[metric](band))
    got = timewarp.cdist(a, b, metric=metric, band=band, device="cpu", **PARAMS)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    # a against itself: each symmetric pair once, the diagonal included.
    self_expected = ref.matrix(a, a, MEASURES[metric](band))
    got = timewarp.cdist(a, metric=metric, band=band, device="cpu", **PARAMS)
    np.testing.assert_allclose(got, self_expected, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(got, got.T)


def test_array_layouts_agree():
    x = RNG.normal(size=(4, 9))
    as_list = [row for row in x]
    as_3d = x[:, :, None]
    expected = timewarp.cdist(x, device="cpu")
    np.testing.assert_array_equal(timewarp.cdist(as_list, device="cpu"), expected)
    np.testing.assert_array_equal(timewarp.cdist(as_3d, device="cpu"), expected)
    # Non-contiguous views give the same values.
    wide = RNG.normal(size=(4, 18))
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(
        timewarp.cdist(view, device="cpu"), timewarp.cdist(view.copy(), device="cpu")
    )
    fortran = np.asfortranarray(x)
    np.testing.assert_array_equal(timewarp.cdist(fortran, device="cpu"), expected)
    # Contiguous but misaligned (read from a byte buffer at an odd offset, as
    # pickle protocol 5 and Dask may hand arrays over): copied, not a panic.
    buffer = bytearray(x.nbytes + 1)
    misaligned = np.frombuffer(buffer, dtype=np.float64, offset=1, count=x.size).reshape(x.shape)
    misaligned[...] = x
    assert not misaligned.flags.aligned
    np.testing.assert_array_equal(timewarp.cdist(misaligned, device="cpu"), expected)
    np.testing.assert_array_equal(timewarp.cdist(list(misaligned), device="cpu"), expected)


def test_one_dimensional_input_is_one_series():
    x = RNG.normal(size=11)
    y = RNG.normal(size=(3, 11))
    got = timewarp.cdist(x, y, device="cpu")
    assert got.shape == (1, 3)
    np.testing.assert_allclose(got[0], [ref.dtw(x, row) for row in y], rtol=1e-12)


def test_distance_is_one_pair():
    x, y = RNG.normal(size=(13, 2)), RNG.normal(size=(8, 2))
    for metric, measure in MEASURES.items():
        got = timewarp.distance(x, y, metric=metric, **PARAMS)
        assert isinstance(got, float)
        assert got == pytest.approx(measure(None)(x, y), rel=1e-12)
    assert timewarp.distance(x, y, band=1) == pytest.approx(ref.dtw(x, y, 1), rel=1e-12)


def test_dtypes_follow_the_rule():
    x = RNG.normal(size=(3, 10))
    f64 = timewarp.cdist(x, device="cpu")
    f32 = timewarp.cdist(x.astype(np.float32), device="cpu")
    assert f64.dtype == np.float64 and f32.dtype == np.float32
    np.testing.assert_allclose(f32, f64, rtol=1e-4)
    # float16 computes in float32, integers in float64.
    assert timewarp.cdist(x.astype(np.float16), device="cpu").dtype == np.float32
    ints = (x * 10).astype(np.int32)
    got = timewarp.cdist(ints, device="cpu")
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, timewarp.cdist(ints.astype(np.float64), device="cpu"))
    # Mixed precisions compute in the wider one; precision= overrides.
    assert timewarp.cdist(x.astype(np.float32), x, device="cpu").dtype == np.float64
    assert timewarp.cdist(x, precision="float32", device="cpu").dtype == np.float32
    with pytest.raises(TimewarpError, match="complex"):
        timewarp.cdist(x.astype(np.complex128))
    with pytest.raises(TimewarpError, match="precision"):
        timewarp.cdist(x, precision="float16")


def test_huge_and_tiny_values():
    x = RNG.normal(size=(3, 6))
    for scale in (1e-150, 1e100):
        got = timewarp.cdist(x * scale, device="cpu")
        expected = ref.matrix(x * scale, x * scale, MEASURES["dtw"](None))
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    with pytest.raises(TimewarpError, match="overflow"):
        timewarp.cdist((x * 1e30).astype(np.float32), device="cpu")


def test_soft_dtw_paired_values_and_divergence():
    x = RNG.normal(size=(5, 12, 2))
    y = RNG.normal(size=(5, 9, 2))
    values = timewarp.soft_dtw(x, y, gamma=0.5, device="cpu")
    expected = [ref.soft_dtw(a, b, 0.5) for a, b in zip(x, y)]
    np.testing.assert_allclose(values, expected, rtol=1e-12)
    divergence = timewarp.soft_dtw(x, y, gamma=0.5, normalize=True, device="cpu")
    expected = [
        ref.soft_dtw(a, b, 0.5) - (ref.soft_dtw(a, a, 0.5) + ref.soft_dtw(b, b, 0.5)) / 2
        for a, b in zip(x, y)
    ]
    np.testing.assert_allclose(divergence, expected, rtol=1e-10)
    assert np.all(divergence >= 0)
    same = timewarp.soft_dtw(x, x, gamma=0.5, normalize=True, device="cpu")
    np.testing.assert_allclose(same, 0.0, atol=1e-12)
    # Ragged batches pair series k with k.
    xs, ys = ragged([3, 8, 1]), ragged([5, 1, 6])
    got = timewarp.soft_dtw(xs, ys, gamma=0.2, device="cpu")
    np.testing.assert_allclose(got, [ref.soft_dtw(a, b, 0.2) for a, b in zip(xs, ys)], rtol=1e-12)


def numeric_gradient(f, x, step=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += step
        down[index] -= step
        grad[index] = (f(up) - f(down)) / (2 * step)
    return grad


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("band", [None, 1])
def test_soft_dtw_gradient_against_finite_differences(normalize, band):
    x = RNG.normal(size=(2, 6, 2))
    y = RNG.normal(size=(2, 5, 2))
    values, grad_x, grad_y = timewarp.soft_dtw_gradient(
        x, y, gamma=0.3, band=band, normalize=normalize, device="cpu"
    )
    for k in range(2):

        def value(a, b):
            if normalize:
                return (
                    ref.soft_dtw(a, b, 0.3, band)
                    - (ref.soft_dtw(a, a, 0.3, band) + ref.soft_dtw(b, b, 0.3, band)) / 2
                )
            return ref.soft_dtw(a, b, 0.3, band)

        assert values[k] == pytest.approx(value(x[k], y[k]), rel=1e-10)
        # Central differences of step 1e-6 are good to about 1e-8 here.
        np.testing.assert_allclose(
            grad_x[k], numeric_gradient(lambda a: value(a, y[k]), x[k]), atol=1e-6
        )
        np.testing.assert_allclose(
            grad_y[k], numeric_gradient(lambda b: value(x[k], b), y[k]), atol=1e-6
        )


def test_soft_dtw_gradient_shapes_follow_the_input():
    x, y = RNG.normal(size=(3, 7)), RNG.normal(size=(3, 4))
    _, grad_x, grad_y = timewarp.soft_dtw_gradient(x, y, device="cpu")
    assert grad_x.shape == x.shape and grad_y.shape == y.shape
    _, grad_x, grad_y = timewarp.soft_dtw_gradient(x, y, with_respect_to_y=False, device="cpu")
    assert grad_y is None
    xs = [RNG.normal(size=n) for n in (3, 5)]
    ys = [RNG.normal(size=(n, 1)) for n in (4, 2)]
    _, grad_x, grad_y = timewarp.soft_dtw_gradient(xs, ys, device="cpu")
    assert [g.shape for g in grad_x] == [(3,), (5,)]
    assert [g.shape for g in grad_y] == [(4, 1), (2, 1)]


BAD_INPUTS = [
    ("NaN", lambda: timewarp.cdist(np.array([[1.0, np.nan]]))),
    ("is inf", lambda: timewarp.cdist([np.array([1.0, np.inf])])),
    ("empty", lambda: timewarp.cdist(np.zeros((2, 0)))),
    ("no series", lambda: timewarp.cdist(np.zeros((0, 5)))),
    ("no series", lambda: timewarp.cdist([])),
    ("dimension", lambda: timewarp.cdist(np.zeros((2, 3, 1)), np.zeros((2, 3, 2)))),
    ("dimension", lambda: timewarp.cdist([np.zeros((3, 1)), np.zeros((3, 2))])),
    ("axes", lambda: timewarp.cdist(np.zeros((2, 3, 1, 1)))),
    ("axes", lambda: timewarp.cdist([np.zeros((2, 3, 1))])),
    ("metric", lambda: timewarp.cdist(np.zeros((2, 3)), metric="euclid")),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=-1)),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=1.5)),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", band=2)),
    ("gamma", lambda: timewarp.cdist(np.zeros((2, 3)), metric="soft_dtw", gamma=0)),
    ("gamma", lambda: timewarp.cdist(np.zeros((2, 3)), metric="soft_dtw", gamma=np.nan)),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=10**30)),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=-(10**30))),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=True)),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=np.inf)),
    ("band", lambda: timewarp.soft_dtw(np.zeros((2, 3)), np.zeros((2, 3)), band=10**30)),
    ("band", lambda: timewarp.dtw_path(np.zeros(3), np.zeros(3), band=2**64)),
    ("degree", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", degree=10**400)),
    ("band", lambda: timewarp.cdist(np.zeros((2, 3)), band=10**5000)),
    ("gamma", lambda: timewarp.cdist(np.zeros((2, 3)), metric="soft_dtw", gamma=-(10**5000))),
    ("nu", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", nu=10**400)),
    ("lmbda", lambda: timewarp.twed_path(np.zeros(3), np.zeros(3), lmbda=-(10**400))),
    ("gamma", lambda: timewarp.cdist(np.zeros((2, 3)), metric="soft_dtw", gamma=10**400)),
    ("gamma", lambda: timewarp.soft_dtw_alignment(np.zeros(3), np.zeros(3), gamma=np.inf)),
    ("nu", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", nu=-1)),
    ("lambda", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", lmbda=-1)),
    ("degree", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", degree=0.5)),
    ("not a number", lambda: timewarp.cdist(np.zeros((2, 3)), metric="twed", nu="x")),
    ("device", lambda: timewarp.cdist(np.zeros((2, 3)), device="tpu")),
    ("complex", lambda: timewarp.cdist(np.zeros((2, 3), dtype=complex))),
    ("not a regular array", lambda: timewarp.cdist(np.array([[1.0, 2.0], [1.0]], dtype=object))),
    ("not numbers", lambda: timewarp.cdist(["abc", "de"])),
    ("divergence", lambda: timewarp.cdist(np.zeros((2, 3)), metric="dtw", normalize=True)),
    ("paired", lambda: timewarp.soft_dtw(np.zeros((2, 3)), np.zeros((3, 3)))),
    ("series", lambda: timewarp.distance(np.zeros((2, 3, 1)), np.zeros(3))),
]


@pytest.mark.parametrize(
    "match, call", BAD_INPUTS, ids=[f"{i}-{m}" for i, (m, _) in enumerate(BAD_INPUTS)]
)
def test_bad_input_is_a_timewarp_error(match, call):
    with pytest.raises(TimewarpError, match=match) as caught:
        call()
    assert isinstance(caught.value, ValueError)
    assert "\n" not in str(caught.value)


def test_errors_pickle_as_the_same_class():
    # Raised in another process (a Dask worker, multiprocessing), an error
    # must arrive as the same class of timewarp's, not as a copy.
    import pickle

    for cls in (
        TimewarpError,
        timewarp.InputError,
        timewarp.GpuError,
        timewarp.GpuOutOfMemoryError,
        timewarp.OutOfMemoryError,
    ):
        assert cls.__module__ == "timewarp" and getattr(timewarp, cls.__name__) is cls
        error = pickle.loads(pickle.dumps(cls("no usable GPU: none")))
        assert type(error) is cls
        assert str(error) == "no usable GPU: none"
    error = pickle.loads(pickle.dumps(timewarp.FileError(2, "No such file", "a.ts")))
    assert type(error) is timewarp.FileError
    assert (error.errno, error.strerror, error.filename) == (2, "No such file", "a.ts")


def test_gpu_without_one_is_a_clear_error():
    if timewarp.gpu_available():
        pytest.skip("this machine has a usable GPU")
    with pytest.raises(timewarp.GpuError, match="no usable GPU") as caught:
        timewarp.cdist(np.zeros((2, 3)), device="gpu")
    assert isinstance(caught.value, RuntimeError) and isinstance(caught.value, TimewarpError)
    assert not isinstance(caught.value, ValueError)
    # auto falls back to the CPU.
    assert timewarp.cdist(np.ones((2, 3)), device="auto").shape == (2, 2)


def test_a_missing_gpu_ordinal_is_refused():
    with pytest.raises(TimewarpError, match="999"):
        timewarp.cdist(np.zeros((2, 3)), device="gpu:999")
    # No machine that runs these tests has 64 GPUs.
    with pytest.raises(TimewarpError):
        timewarp.cdist(np.zeros((2, 3)), device="gpu:63")


def test_load_reads_the_crates_formats(tmp_path):
    import pathlib

    data = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"
    X, y = timewarp.load(data / "GunPoint_TRAIN.ts")
    assert X.shape == (50, 150, 1) and X.dtype == np.float64
    assert y.shape == (50,) and set(y) == {"1", "2"}
    X, y = timewarp.load(data / "JapaneseVowels_TRAIN.ts")
    assert isinstance(X, list) and X[0].shape[1] == 12 and len(y) == len(X)
    csv = tmp_path / "two.csv"
    csv.write_text("1,2,3\n4,5,6\n")
    X, y = timewarp.load(csv)
    np.testing.assert_array_equal(X[:, :, 0], [[1, 2, 3], [4, 5, 6]])
    assert y is None
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(6.0).reshape(2, 3))
    X, _ = timewarp.load(npy)
    np.testing.assert_array_equal(X[:, :, 0], np.arange(6.0).reshape(2, 3))
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n3,oops\n")
    with pytest.raises(TimewarpError, match="bad.csv:2"):
        timewarp.load(bad)
    with pytest.raises(TimewarpError):
        timewarp.load(tmp_path / "missing.ts")


def test_info_describes_the_build():
    info = timewarp.info()
    assert info["version"] == timewarp.__version__
    assert info["cpu_threads"] >= 1
    assert isinstance(info["gpus"], list)
    assert info["kernels"] == "built" or info["kernels"].startswith("not built")


def test_the_gil_is_released_while_computing():
    import threading
    import time

    def ticks_during(x) -> tuple:
        ticks = []
        done = threading.Event()

        def tick():
            while not done.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.001)

        thread = threading.Thread(target=tick)
        thread.start()
        start = time.perf_counter()
        timewarp.cdist(x, metric="twed", device="cpu")
        elapsed = time.perf_counter() - start
        done.set()
        thread.join()
        return elapsed, len([t for t in ticks if start < t < start + elapsed])

    # A batch whose matrix takes at least 0.1 s here (a release build on
    # many cores, or a debug build on two).
    for count in (50, 100, 200, 400, 800):
        elapsed, during = ticks_during(RNG.normal(size=(count, 200)))
        if elapsed >= 0.1:
            break
    # A thread that holds the GIL for the whole call lets the other tick at
    # most once or twice.
    assert elapsed >= 0.1 and during > 5, (count, elapsed, during)


def test_ctrl_c_stops_a_long_computation():
    import os
    import signal
    import threading
    import time

    # About 4e10 TWED cells: minutes on any CPU, so only an interrupt ends
    # it within the bound below.
    x = RNG.normal(size=(400, 1000))
    # Python's own Ctrl-C handler, also where the process was started with
    # SIGINT ignored (a job started in the background by a shell without
    # job control), where Python installs none.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        start = time.perf_counter()
        with pytest.raises(KeyboardInterrupt):
            timewarp.cdist(x, metric="twed", device="cpu")
        assert time.perf_counter() - start < 30
    finally:
        signal.signal(signal.SIGINT, previous)
    assert_the_next_computation_runs()


def test_huge_but_representable_parameters_compute():
    x = RNG.normal(size=(3, 6))
    # A radius wider than the series is no band at all.
    np.testing.assert_array_equal(
        timewarp.cdist(x, band=2**63 - 1, device="cpu"), timewarp.cdist(x, device="cpu")
    )
    np.testing.assert_array_equal(
        timewarp.cdist(x, band=6.0, device="cpu"), timewarp.cdist(x, band=6, device="cpu")
    )
    # A huge gamma: finite values or a clear error, never a crash.
    try:
        values = timewarp.cdist(x, metric="soft_dtw", gamma=1e300, device="cpu")
    except TimewarpError:
        return
    assert np.isfinite(values).all()


def test_a_result_too_large_for_memory_is_a_memory_error():
    # 5,000,000 series of one sample: a 5e6 x 5e6 float64 matrix, 2e14
    # bytes, more than any host's address space. Refused before any work,
    # with the size in the message.
    many = np.zeros((5_000_000, 1))
    with pytest.raises(MemoryError, match="200000000000000 bytes") as caught:
        timewarp.cdist(many, device="cpu")
    assert type(caught.value) is timewarp.OutOfMemoryError
    assert isinstance(caught.value, TimewarpError)
    with pytest.raises(MemoryError, match="bytes"):
        timewarp.cdist(many, many[:4_000_000], device="cpu")


@pytest.mark.parametrize("metric", ["dtw", "twed", "soft_dtw"])
def test_a_set_against_itself_has_the_right_diagonal(metric):
    a = ragged([1, 4, 7, 7, 9], 2)
    got = timewarp.cdist(a, metric=metric, device="cpu", **PARAMS)
    expected = ref.matrix(a, a, MEASURES[metric](None))
    if metric == "soft_dtw":
        # Soft-DTW's value of a series against itself is not 0 (but for
        # one sample): computed.
        np.testing.assert_allclose(np.diag(got), np.diag(expected), rtol=1e-12)
        assert (np.diag(got)[1:] != 0).all()
    else:
        # DTW and TWED: 0, left so rather than computed.
        assert (np.diag(got) == 0).all()
    off = ~np.eye(len(a), dtype=bool)
    np.testing.assert_allclose(got[off], expected[off], rtol=1e-12)
    np.testing.assert_array_equal(got, got.T)
    # Two series: the one pair off the diagonal.
    x, y = a[1], a[2]
    pair = timewarp.cdist([x], [y], metric=metric, device="cpu", **PARAMS)[0, 0]
    assert timewarp.cdist([x, y], metric=metric, device="cpu", **PARAMS)[0, 1] == pair


# One long pair (60,000 samples, or 20,000 x 1,000 for Soft-DTW's
# alignment, whose workspace is the whole matrix): seconds to minutes on
# any CPU, computed by the wavefront over tiles, Hirschberg's passes or the
# alignment's passes, each of which checks for an interrupt every tile or
# row.
LONG = np.sin(np.arange(60_000) * 1e-3)
LONG_PAIR_CALLS = {
    "distance": lambda: timewarp.distance(LONG, LONG[::-1], metric="dtw"),
    "distance_twed": lambda: timewarp.distance(LONG, LONG[::-1], metric="twed"),
    "distance_soft_dtw": lambda: timewarp.distance(LONG, LONG[::-1], metric="soft_dtw"),
    "cdist": lambda: timewarp.cdist(LONG[None], LONG[None, ::-1], device="cpu"),
    "dtw_path": lambda: timewarp.dtw_path(LONG, LONG[::-1], device="cpu"),
    "twed_path": lambda: timewarp.twed_path(LONG, LONG[::-1], device="cpu"),
    "soft_dtw_alignment": lambda: timewarp.soft_dtw_alignment(
        LONG[:20_000], LONG[:1000], device="cpu"
    ),
}


@pytest.mark.parametrize("name", list(LONG_PAIR_CALLS))
def test_ctrl_c_stops_one_long_pair(name):
    assert_ctrl_c_stops(LONG_PAIR_CALLS[name])
    assert_the_next_computation_runs()


def assert_the_next_computation_runs():
    """After an interrupted computation, the next one is not interrupted."""
    small = RNG.normal(size=(3, 5))
    np.testing.assert_allclose(
        timewarp.cdist(small, device="cpu"),
        ref.matrix(small, small, MEASURES["dtw"](None)),
        rtol=1e-12,
    )
