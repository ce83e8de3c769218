"""numpy batches on the GPU against the CPU backend: every metric, both
precisions, ragged and multivariate, the resident k-NN. Float64 within
1e-10 relative (the same recurrences, summed in another order), float32
within 1e-4."""

from __future__ import annotations

import numpy as np
import pytest

import timewarp

RNG = np.random.default_rng(11)
PARAMS = {"gamma": 0.5, "nu": 0.01, "lmbda": 0.5, "degree": 2.0}


def close(got, expected, dtype):
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=0 if dtype == np.float64 else 1e-5)


@pytest.mark.parametrize("metric", ["dtw", "soft_dtw", "twed"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cdist_on_the_gpu_matches_the_cpu(gpu, metric, dtype):
    a = [RNG.normal(size=(n, 2)).astype(dtype) for n in (1, 7, 64, 200, 33)]
    b = [RNG.normal(size=(n, 2)).astype(dtype) for n in (5, 128, 1)]
    for band in [None] if metric == "twed" else [None, 0, 4]:
        got = timewarp.cdist(a, b, metric=metric, band=band, device="gpu", **PARAMS)
        expected = timewarp.cdist(a, b, metric=metric, band=band, device="cpu", **PARAMS)
        assert got.dtype == dtype
        close(got, expected, dtype)
        got = timewarp.cdist(a, metric=metric, band=band, device="gpu:0", **PARAMS)
        close(got, timewarp.cdist(a, metric=metric, band=band, device="cpu", **PARAMS), dtype)


def test_soft_dtw_gradient_on_the_gpu(gpu):
    x = RNG.normal(size=(16, 40, 3))
    y = RNG.normal(size=(16, 50, 3))
    for normalize in (False, True):
        got = timewarp.soft_dtw_gradient(x, y, normalize=normalize, device="gpu")
        expected = timewarp.soft_dtw_gradient(x, y, normalize=normalize, device="cpu")
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("band", [None, 0, 3])
def test_soft_dtw_alignment_on_the_gpu(gpu, band):
    x, y = RNG.normal(size=(30, 2)), RNG.normal(size=(25, 2))
    e, value = timewarp.soft_dtw_alignment(x, y, gamma=0.5, band=band, device="gpu")
    expected_e, expected = timewarp.soft_dtw_alignment(x, y, gamma=0.5, band=band, device="cpu")
    assert e.shape == (30, 25) and e.dtype == np.float64
    # Each device within 4 (n + m) u (1 + scale / gamma) of the exact E
    # (docs/algorithms.md, "Paths"): below 1e-10 for a scale under 1000.
    np.testing.assert_allclose(e, expected_e, rtol=0, atol=1e-10)
    assert value == pytest.approx(expected, rel=1e-10)
    if band is not None:
        i, j = np.indices(e.shape)
        assert np.all(e[np.abs(i - j) > band + 5] == 0)


def test_twed_path_of_a_long_pair_on_the_gpu(gpu):
    # Past the GPU route's 64 Mi cells: divide and conquer over the GPU's
    # passes, against the CPU's full-matrix traceback of the same pair.
    rng = np.random.default_rng(17)
    x, y = rng.normal(size=9000).cumsum(), rng.normal(size=8000).cumsum()
    x_times, y_times = rng.uniform(0, 2, 9000).cumsum(), rng.uniform(0, 2, 8000).cumsum()
    path, steps, costs, value = timewarp.twed_path(
        x, y, device="gpu", x_times=x_times, y_times=y_times
    )
    expected = timewarp.twed_path(x, y, device="cpu", x_times=x_times, y_times=y_times)[3]
    assert value == pytest.approx(expected, rel=1e-10)
    assert costs.sum() == pytest.approx(value, rel=1e-10)
    assert steps[0] == "match" and tuple(path[-1]) == (8999, 7999)


def test_knn_keeps_the_training_set_on_the_gpu(gpu):
    train = RNG.normal(size=(40, 30))
    labels = RNG.integers(0, 3, size=40)
    queries = RNG.normal(size=(10, 30))
    on_gpu = timewarp.KNeighborsClassifier(n_neighbors=3, device="gpu").fit(train, labels)
    assert on_gpu._resident.device == "gpu:0"
    on_cpu = timewarp.KNeighborsClassifier(n_neighbors=3, device="cpu").fit(train, labels)
    np.testing.assert_allclose(
        on_gpu.kneighbors(queries)[0], on_cpu.kneighbors(queries)[0], rtol=1e-10
    )
    np.testing.assert_array_equal(on_gpu.predict(queries), on_cpu.predict(queries))


def test_info_lists_the_gpu(gpu):
    info = timewarp.info()
    assert info["gpus"] and info["gpus"][0]["usable"]


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_knn_lower_bounds_on_the_gpu_equal_its_brute_force(gpu, precision):
    """Banded DTW on a resident GPU database: the bounds (on the GPU) and
    the GPU's brute force give the same neighbours and the same bits."""
    from timewarp import KNeighborsClassifier

    t = np.arange(96)
    base = np.where((t > 20) & (t < 60), 6.0, 0.0)
    train = base * RNG.uniform(0.5, 1.5, size=(2000, 1)) + RNG.normal(size=(2000, 96))
    train[1500] = train[7]  # a tie: the lower index first
    labels = np.arange(2000) % 3
    queries = base * RNG.uniform(0.5, 1.5, size=(9, 1)) + RNG.normal(size=(9, 96))
    results = {}
    for brute_force in (False, True):
        model = KNeighborsClassifier(
            # GPU 0 alone: the bounds' path takes a database on one GPU.
            n_neighbors=5, band=9, device="gpu:0", precision=precision, brute_force=brute_force
        ).fit(train, labels)
        distances, indices = model.kneighbors(queries)
        results[brute_force] = (distances, indices, model.pruning_)
    (bounded_d, bounded_i, pruning), (brute_d, brute_i, brute_pruning) = results[False], results[True]
    np.testing.assert_array_equal(bounded_i, brute_i)
    assert bounded_d.tobytes() == brute_d.tobytes()
    assert brute_pruning is None
    assert pruning["candidates"] == 9 * 2000
    skipped = pruning["kim"] + pruning["keogh_query"] + pruning["keogh_data"]
    assert skipped + pruning["dtw"] == pruning["candidates"]
    assert skipped > 0
