"""timewarp.search against a brute force in numpy: every start's
z-normalised window, a banded DTW, the greedy choice with the exclusion
zone; numpy and torch inputs; the errors."""

import numpy as np
import pytest

import timewarp


def znorm(x):
    """Per dimension (x - mean) / std, zeros where all values are equal."""
    out = np.zeros_like(x)
    for k in range(x.shape[1]):
        column = x[:, k]
        if np.all(column == column[0]):
            continue
        mean = column.mean()
        std = np.sqrt(((column - mean) ** 2).mean())
        if std > 0:
            out[:, k] = (column - mean) / std
    return out


def banded_dtw(a, b, r):
    """Squared-cost DTW of two series of one length, |i - j| <= r."""
    m = len(a)
    c = np.full((m + 1, m + 1), np.inf)
    c[0, 0] = 0.0
    for i in range(1, m + 1):
        for j in range(max(1, i - r), min(m, i + r) + 1):
            cost = float(np.sum((a[i - 1] - b[j - 1]) ** 2))
            c[i, j] = cost + min(c[i - 1, j - 1], c[i - 1, j], c[i, j - 1])
    return c[m, m]


def brute_force(query, series, r, k, exclusion, normalise=True):
    query = query.reshape(len(query), -1)
    series = series.reshape(len(series), -1)
    m = len(query)
    prepare = znorm if normalise else (lambda x: x)
    q = prepare(query)
    costs = [(banded_dtw(q, prepare(series[s:s + m]), r), s) for s in range(len(series) - m + 1)]
    costs.sort()
    picks = []
    for cost, s in costs:
        if len(picks) == k:
            break
        if all(abs(s - p) >= max(exclusion, 1) for p, _ in picks):
            picks.append((s, np.sqrt(cost)))
    return picks


def walk(rng, n, dims=1):
    return np.cumsum(rng.normal(size=(n, dims)), axis=0)


@pytest.mark.parametrize("case", range(12))
def test_search_equals_a_numpy_brute_force(case):
    rng = np.random.default_rng(case)
    dims = 2 if case % 4 == 3 else 1
    m = [4, 16, 25][case % 3]
    series = walk(rng, 300 + 17 * case, dims)
    query = walk(rng, m, dims)
    at = rng.integers(0, len(series) - m)
    series[at:at + m] = 2.0 * query + 0.05 * rng.normal(size=query.shape) + 3.0
    band = [0.0, 0.1, 0.5][case % 3]
    k = [1, 3][case % 2]
    exclusion = None if case % 5 else m
    normalise = case % 6 != 5
    starts, distances, stats = timewarp.search(
        query if dims > 1 else query[:, 0], series if dims > 1 else series[:, 0],
        band=band, k=k, znorm=normalise, exclusion=exclusion, device="cpu")
    expected = brute_force(query, series, int(np.floor(band * m)), k,
                           m // 2 if exclusion is None else exclusion, normalise)
    assert starts.dtype == np.int64 and distances.dtype == np.float64
    assert starts.tolist() == [s for s, _ in expected]
    np.testing.assert_allclose(distances, [d for _, d in expected], rtol=1e-10, atol=1e-12)
    assert stats["candidates"] == len(series) - m + 1
    assert stats["kim"] + stats["keogh_query"] + stats["keogh_data"] + stats["dtw"] == stats["candidates"]
    assert stats["radius"] == int(np.floor(band * m))


def test_band_as_a_radius_and_float32_series():
    rng = np.random.default_rng(7)
    series = walk(rng, 400)[:, 0]
    query = series[100:130].copy()
    starts, distances, stats = timewarp.search(query, series.astype(np.float32), band=3, k=2)
    expected = brute_force(query, series.astype(np.float32).astype(np.float64), 3, 2, 15)
    assert starts.tolist() == [s for s, _ in expected]
    np.testing.assert_allclose(distances, [d for _, d in expected], rtol=1e-10, atol=1e-6)
    assert stats["radius"] == 3


def test_torch_cpu_tensors_give_what_numpy_gives():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    series = walk(rng, 500)[:, 0]
    query = series[200:232] * 2 + 1
    expected = timewarp.search(query, series, k=3)
    got = timewarp.search(torch.from_numpy(query), torch.from_numpy(series), k=3)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    assert got[0][0] == 200


def test_bad_input_raises():
    series = np.sin(np.arange(100) * 0.3)
    with pytest.raises(timewarp.TimewarpError, match="longer than the series"):
        timewarp.search(np.zeros(101), series)
    with pytest.raises(timewarp.TimewarpError, match="at least 2"):
        timewarp.search(np.zeros(1), series)
    bad = series.copy()
    bad[42] = np.nan
    with pytest.raises(timewarp.TimewarpError, match="at sample 42"):
        timewarp.search(series[:10], bad)
    with pytest.raises(timewarp.TimewarpError, match="band"):
        timewarp.search(series[:10], series, band=1.5)
    with pytest.raises(timewarp.TimewarpError, match="band"):
        timewarp.search(series[:10], series, band=-1)
    with pytest.raises(timewarp.TimewarpError, match="k = 0"):
        timewarp.search(series[:10], series, k=0)
    if not timewarp.gpu_available():
        with pytest.raises(timewarp.GpuError):
            timewarp.search(series[:10], series, device="gpu")


def test_gpu_search_finds_the_cpus_matches(gpu):
    rng = np.random.default_rng(5)
    series = walk(rng, 20_000)[:, 0]
    query = series[7000:7064] * 3 - 2
    cpu = timewarp.search(query, series, k=4, device="cpu")
    gpu = timewarp.search(query, series, k=4, device="gpu")
    np.testing.assert_array_equal(gpu[0], cpu[0])
    np.testing.assert_array_equal(gpu[1], cpu[1])
    assert gpu[2]["candidates"] == cpu[2]["candidates"]
