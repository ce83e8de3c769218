"""timewarp.subsequence_alignment against tslearn's dtw_subsequence_path
(the same end, cost and path; skipped, saying why, without tslearn) and a
numpy transcription of its definition; numpy, torch and float32 inputs;
the errors; Ctrl-C."""

import numpy as np
import pytest
from conftest import assert_ctrl_c_stops

import timewarp
from timewarp import InputError


def reference(query, series):
    """tslearn's algorithm in numpy: the accumulated matrix with a free
    row 0, the earliest least end, the traceback by argmin of [diagonal,
    up, left] until row 0. Returns (path, cost)."""
    query = query.reshape(len(query), -1)
    series = series.reshape(len(series), -1)
    m, n = len(query), len(series)
    c = np.full((m + 1, n + 1), np.inf)
    c[0, :] = 0.0
    for i in range(m):
        for j in range(n):
            d = 0.0
            for a, b in zip(query[i], series[j]):
                d += (a - b) * (a - b)
            c[i + 1, j + 1] = d + min(c[i, j + 1], c[i + 1, j], c[i, j])
    acc = c[1:, 1:]
    end = int(np.argmin(acc[-1]))
    path = [(m - 1, end)]
    i, j = m - 1, end
    while i != 0:
        if j == 0:
            i, j = i - 1, 0
        else:
            k = int(np.argmin([acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]]))
            i, j = [(i - 1, j - 1), (i - 1, j), (i, j - 1)][k]
        path.append((i, j))
    return path[::-1], float(np.sqrt(acc[-1, end]))


def cases(count):
    """Random queries and series, with small integers (ties) in a third."""
    rng = np.random.default_rng(5)
    for case in range(count):
        dims = [1, 1, 2, 3][case % 4]
        m = int(rng.integers(1, 12))
        n = int(rng.integers(1, 60))
        if case % 3 == 2:
            query = rng.integers(0, 3, size=(m, dims)).astype(np.float64)
            series = rng.integers(0, 3, size=(n, dims)).astype(np.float64)
        else:
            query = rng.normal(size=(m, dims))
            series = rng.normal(size=(n, dims))
        if dims == 1 and case % 2:
            query, series = query[:, 0], series[:, 0]
        yield case, query, series


def check(found, path, cost):
    assert isinstance(found, timewarp.SubsequenceAlignment)
    assert found.path.dtype == np.int64 and found.path.shape == (len(path), 2)
    assert [tuple(cell) for cell in found.path.tolist()] == path
    assert (found.start, found.end) == (path[0][1], path[-1][1])
    assert found.cost == pytest.approx(cost, rel=1e-12, abs=1e-300)


def test_equals_tslearns_dtw_subsequence_path():
    try:
        from tslearn.metrics import dtw_subsequence_path
    except ImportError as missing:
        pytest.skip(f"tslearn is not installed ({missing})")
    for case, query, series in cases(50):
        tslearn_path, tslearn_cost = dtw_subsequence_path(query, series)
        found = timewarp.subsequence_alignment(query, series, device="cpu")
        check(found, [(int(i), int(j)) for i, j in tslearn_path], float(tslearn_cost))


def test_equals_the_reference_on_ties_and_random_data():
    for case, query, series in cases(60):
        path, cost = reference(np.asarray(query), np.asarray(series))
        check(timewarp.subsequence_alignment(query, series), path, cost)


def test_finds_a_stretched_copy_in_a_long_series():
    rng = np.random.default_rng(9)
    series = rng.normal(size=50_000)
    query = 3.0 * rng.normal(size=40)
    series[31_000:31_120] = np.repeat(query, 3)
    found = timewarp.subsequence_alignment(query, series)
    assert found.cost == 0.0
    # Free ends skip the first repeat of the first sample and the last two
    # of the last one.
    assert (found.start, found.end) == (31_002, 31_117)
    assert found.path[0].tolist() == [0, 31_002] and found.path[-1].tolist() == [39, 31_117]


def test_torch_and_float32_inputs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    query, series = rng.normal(size=(7, 2)), rng.normal(size=(90, 2))
    want = timewarp.subsequence_alignment(query, series)
    got = timewarp.subsequence_alignment(torch.from_numpy(query), torch.from_numpy(series))
    assert (got.start, got.end, got.cost) == (want.start, want.end, want.cost)
    np.testing.assert_array_equal(got.path, want.path)
    # float32 series are widened: the same as the float64 copy of them.
    narrow = series.astype(np.float32)
    got = timewarp.subsequence_alignment(query, narrow)
    want = timewarp.subsequence_alignment(query, narrow.astype(np.float64))
    assert got.cost == want.cost
    np.testing.assert_array_equal(got.path, want.path)


def test_bad_input_raises_input_errors():
    series = np.arange(10.0)
    with pytest.raises(InputError, match="empty"):
        timewarp.subsequence_alignment(np.zeros(0), series)
    with pytest.raises(InputError, match="empty"):
        timewarp.subsequence_alignment(np.ones(3), np.zeros(0))
    with pytest.raises(InputError):
        timewarp.subsequence_alignment(np.ones((3, 2)), series)
    bad = series.copy()
    bad[7] = np.nan
    with pytest.raises(InputError, match="sample 7"):
        timewarp.subsequence_alignment(np.ones(3), bad)
    with pytest.raises(InputError, match="sample 1"):
        timewarp.subsequence_alignment(np.array([0.0, np.inf]), series)
    if not timewarp.gpu_available():
        with pytest.raises(timewarp.GpuError):
            timewarp.subsequence_alignment(np.ones(3), series, device="gpu")


def test_gpu_alignment_is_the_cpus(gpu):
    """On the GPU: the same start, end, cost (bit for bit) and path as on
    the CPU, univariate and not, float64 and float32, numpy and torch."""
    rng = np.random.default_rng(6)
    for m, dims in [(1, 1), (20, 1), (128, 1), (40, 3), (300, 2)]:
        series = rng.normal(size=(30_000, dims)).cumsum(axis=0)
        query = series[12_000:12_000 + m] + rng.normal(scale=0.1, size=(m, dims))
        if dims == 1:
            query, series = query[:, 0], series[:, 0]
        for s in [series, series.astype(np.float32)]:
            cpu = timewarp.subsequence_alignment(query, s, device="cpu")
            gpu = timewarp.subsequence_alignment(query, s, device="gpu")
            assert (gpu.start, gpu.end) == (cpu.start, cpu.end)
            assert gpu.cost == cpu.cost
            np.testing.assert_array_equal(gpu.path, cpu.path)
    # "auto" on a longer series takes the GPU (m * length >= 2^24): the
    # same result as the CPU's.
    series = rng.normal(size=200_000).cumsum()
    query = series[150_000:150_128] + rng.normal(scale=0.1, size=128)
    auto = timewarp.subsequence_alignment(query, series)
    cpu = timewarp.subsequence_alignment(query, series, device="cpu")
    assert (auto.start, auto.end, auto.cost) == (cpu.start, cpu.end, cpu.cost)


def test_ctrl_c_stops_a_long_alignment():
    rng = np.random.default_rng(4)
    # 2e10 cells: many seconds on any CPU.
    query, series = rng.normal(size=2000), rng.normal(size=10_000_000)
    assert_ctrl_c_stops(lambda: timewarp.subsequence_alignment(query, series, device="cpu"))
    assert timewarp.subsequence_alignment(query[:3], series[:10]).path.shape[1] == 2
