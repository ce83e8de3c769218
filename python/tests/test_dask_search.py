"""timewarp.dask.search against timewarp.search on the whole series: the
same starts and distances, bit for bit, for any cut into pieces (down to
one start a piece), numpy arrays, memory maps and dask arrays, univariate
and multivariate, with and without z-normalisation, band 0; a start's
distance does not depend on the piece it is searched in; starts of two
pieces at one distance but different costs; the errors, a non-finite value
named at its place in the whole series; the tasks' costs on the scheduler.
On dask's local scheduler and on a cluster of two in-process workers.
Skipped, with the reason printed, without dask and distributed."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import timewarp

try:
    import dask.array as da
    from distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import SchedulerPlugin
except ImportError as missing:
    reason = (
        f'dask or distributed is not installed ({missing}): pip install "dask[array]" distributed'
    )
    print(f"skipped: {reason}", file=sys.stderr)
    pytest.skip(reason, allow_module_level=True)

import timewarp.dask as twd


@pytest.fixture(scope="module")
def cluster_client():
    """Two workers in this process (threads): fast to start, and the
    graph goes through the distributed scheduler as on any cluster."""
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    )
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def walk(rng, n, dims=1):
    x = np.cumsum(rng.normal(size=(n, dims)), axis=0)
    return x[:, 0] if dims == 1 else x


def case_series(seed, n, m, dims=1):
    """A random walk with the query planted twice (scaled, shifted, noisy)
    and the query."""
    rng = np.random.default_rng(seed)
    series = walk(rng, n, dims)
    query = walk(rng, m, dims)
    for at in rng.integers(0, n - m, 2):
        series[at : at + m] = 2.0 * query + 0.1 * rng.normal(size=query.shape) + 3.0
    return series, query


def assert_same_matches(got, expected):
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    assert got[1].tobytes() == expected[1].tobytes()  # bit for bit
    assert got[0].dtype == np.int64 and got[1].dtype == np.float64
    assert got[2]["candidates"] == expected[2]["candidates"]


def assert_same(got, expected):
    """The same matches, and the statistics' keys and what they must share
    (the pruning counts depend on the pieces)."""
    assert_same_matches(got, expected)
    assert got[2]["radius"] == expected[2]["radius"]
    assert got[2]["exclusion"] == expected[2]["exclusion"]
    assert list(got[2]) == list(expected[2])
    pruned = sum(got[2][key] for key in ("kim", "keogh_query", "keogh_data", "dtw"))
    assert pruned == got[2]["candidates"]


# (seed, n, m, dims, band, k, exclusion, znorm, chunks): chunks in samples,
# from one start a piece (chunk = m) to the whole series.
CASES = [
    (0, 400, 20, 1, 0.1, 1, None, True, [20, 21, 23, 39, 100, 350]),
    (1, 700, 20, 1, 0.1, 5, None, True, [20, 22, 40, 97, 260]),
    (2, 900, 16, 1, 0.25, 8, 3, True, [17, 33, 64, 301]),
    (3, 500, 16, 1, 0.25, 6, 0, True, [16, 18, 200]),
    (4, 900, 16, 1, 0.25, 6, 1, True, [19, 150]),
    (5, 800, 24, 1, 0.0, 4, None, True, [25, 80, 411]),
    (6, 800, 24, 1, 2, 4, 40, True, [24, 47, 200]),
    (7, 800, 12, 1, 0.1, 7, None, False, [13, 30, 99]),
    (8, 600, 18, 2, 0.1, 3, None, True, [18, 19, 60, 250]),
    (9, 600, 18, 3, 0.2, 5, 9, False, [20, 75, 600]),
    (10, 1500, 32, 1, 0.05, 12, None, True, [33, 64, 129, 700]),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_equals_the_single_call_on_the_local_scheduler(case):
    seed, n, m, dims, band, k, exclusion, znorm, chunks = case
    series, query = case_series(seed, n, m, dims)
    params = dict(band=band, k=k, znorm=znorm, exclusion=exclusion, device="cpu")
    expected = timewarp.search(query, series, **params)
    assert len(expected[0]) == k
    for chunk in chunks + [None]:
        assert_same(twd.search(query, series, chunk=chunk, **params), expected)
    # A dask array cut in blocks of its own, of 7 and 3 m samples in turn
    # (some shorter than m - 1).
    sizes, total = [], 0
    while total < n:
        sizes.append(min([7, 3 * m][len(sizes) % 2], n - total))
        total += sizes[-1]
    source = da.from_array(series, chunks=(tuple(sizes),) + series.shape[1:])
    for chunk in chunks[:2] + chunks[-1:]:
        assert_same(twd.search(query, source, chunk=chunk, **params), expected)


def test_equals_the_single_call_on_a_cluster(cluster_client):
    series, query = case_series(11, 3000, 40, dims=2)
    params = dict(band=0.1, k=6, znorm=True, device="cpu")
    expected = timewarp.search(query, series, **params)
    for chunk in (41 + 60, 500, 1234):
        assert_same(
            twd.search(query, series, chunk=chunk, client=cluster_client, **params), expected
        )
    source = da.from_array(series, chunks=(333, 2))
    for chunk in (250, 900):
        assert_same(
            twd.search(query, source, chunk=chunk, client=cluster_client, **params), expected
        )


def test_float32_and_memory_mapped_series(tmp_path):
    series, query = case_series(12, 1200, 30)
    narrow = series.astype(np.float32)
    expected = timewarp.search(query, narrow, k=4, device="cpu")
    assert_same(twd.search(query, narrow, k=4, chunk=111, device="cpu"), expected)
    source = da.from_array(narrow, chunks=100)
    assert_same(twd.search(query, source, k=4, chunk=300, device="cpu"), expected)
    path = tmp_path / "walk.npy"
    np.save(path, series)
    mapped = np.load(path, mmap_mode="r")
    assert_same(
        twd.search(query, mapped, k=4, chunk=250, device="cpu"),
        timewarp.search(query, series, k=4, device="cpu"),
    )


def test_a_best_match_across_a_piece_boundary():
    m, chunk = 32, 200
    per_piece = chunk - m + 1  # starts a piece
    rng = np.random.default_rng(13)
    series = walk(rng, 2000)
    query = walk(rng, m)
    # Planted across the first two pieces' boundary (the second piece's
    # first start is `per_piece`), and across the samples they share.
    for at in (per_piece - m // 2, 3 * per_piece - 3):
        series[at : at + m] = query + 0.01 * rng.normal(size=m)
    expected = timewarp.search(query, series, k=3, device="cpu")
    assert set(expected[0][:2].tolist()) == {per_piece - m // 2, 3 * per_piece - 3}
    assert_same(twd.search(query, series, k=3, chunk=chunk, device="cpu"), expected)
    # The best match's own start is the first of a piece, or its last.
    for chunk in (per_piece - m // 2 + m - 1, per_piece - m // 2 + m):
        assert_same(twd.search(query, series, k=3, chunk=chunk, device="cpu"), expected)


@pytest.mark.parametrize(
    "dims,znorm,narrow", [(1, True, False), (2, False, False), (1, True, True)]
)
def test_a_starts_distance_does_not_depend_on_its_piece(dims, znorm, narrow):
    """What the pieces rest on: every start's distance, searched with no
    exclusion for all starts, is the same in the whole series and in any
    piece that holds it (its window's own normalisation; no pruning
    threshold changes a DTW that finishes)."""
    series, query = case_series(14, 500, 24, dims)
    if narrow:
        series = series.astype(np.float32)
    m = len(query)

    def every_start(x):
        starts, distances, _ = timewarp.search(
            query, x, band=0.2, k=len(x) - m + 1, znorm=znorm, exclusion=0, device="cpu"
        )
        return dict(zip(starts.tolist(), distances.tolist()))

    whole = every_start(series)
    assert len(whole) == len(series) - m + 1
    for first, stop in [(0, m), (1, m + 1), (37, 137), (200, 500), (476, 500), (100, 400)]:
        piece = every_start(series[first:stop])
        assert piece == {s - first: whole[s] for s in range(first, stop - m + 1)}


def test_starts_of_two_pieces_at_one_distance_go_by_their_costs(monkeypatch, cluster_client):
    """Two windows one ulp apart in one value: their costs differ, their
    square roots do not, and the later start is the better one. The
    pieces' distances cannot order them: the library is asked."""
    m = 16
    rng = np.random.default_rng(30)
    series = walk(rng, 600)
    window = walk(rng, m)
    series[100 : 100 + m] = window
    nudged = window.copy()
    at = rng.integers(0, m)
    nudged[at] = np.nextafter(nudged[at], np.inf if rng.random() < 0.5 else -np.inf)
    series[400 : 400 + m] = nudged
    query = window + 0.3 * rng.normal(size=m)
    expected = timewarp.search(query, series, k=2, device="cpu")
    assert expected[0].tolist() == [400, 100] and expected[1][0] == expected[1][1]

    asked = []
    order_ties = twd._order_ties

    def spy(group, **kwargs):
        asked.append(sorted(entry[1] for entry in group))
        return order_ties(group, **kwargs)

    monkeypatch.setattr(twd, "_order_ties", spy)
    source = da.from_array(series, chunks=64)
    for chunk in (16, 17, 250, 400):
        assert_same(twd.search(query, series, k=2, chunk=chunk, device="cpu"), expected)
        if chunk > 16:
            assert_same(twd.search(query, source, k=2, chunk=chunk, device="cpu"), expected)
    # The windows read from the workers.
    got = twd.search(query, source, k=2, chunk=250, device="cpu", client=cluster_client)
    assert_same(got, expected)
    assert asked and all(group == [100, 400] for group in asked)
    # In one piece, its own order settles it.
    asked.clear()
    assert_same(twd.search(query, series, k=2, chunk=600, device="cpu"), expected)
    assert asked == []


@pytest.mark.parametrize("znorm", [True, False])
def test_ties_everywhere(znorm):
    """Small integers, runs of equal values: many starts at equal costs
    (flat windows normalise to zeros), within pieces and across them."""
    rng = np.random.default_rng(21)
    series = rng.integers(0, 3, 400).astype(np.float64)
    series[100:160] = 1.0
    query = rng.integers(0, 3, 8).astype(np.float64)
    for k, exclusion in [(10, 3), (25, None), (40, 0)]:
        params = dict(band=0.25, k=k, znorm=znorm, exclusion=exclusion, device="cpu")
        expected = timewarp.search(query, series, **params)
        for chunk in (9, 30, 57, 200):
            assert_same(twd.search(query, series, chunk=chunk, **params), expected)


def test_pieces_find_their_witnesses_when_asked_again(monkeypatch):
    """A first ask of one start a piece: each piece asks again (4 times as
    many) until its k-th witness is among them; the same matches."""
    assert twd._most_needed(9, 10) == 8 * 37 + 1
    assert twd._most_needed(9, 1) == 9 and twd._first_ask(9, 0, 128) == 9
    assert twd._first_ask(9, 64, 128) == 9 * 16
    series, query = case_series(15, 1500, 20)
    monkeypatch.setattr(twd, "_first_ask", lambda k, exclusion, m: 1)
    expected = timewarp.search(query, series, k=9, device="cpu")
    assert_same(twd.search(query, series, k=9, chunk=300, device="cpu"), expected)


def test_witnesses_and_the_greedy():
    # Zone 2 e - 1 = 5: 10, then 12 is too near, 15 is not, then 4.
    assert twd._witnesses([10, 12, 15, 4], 3, 3) == 4
    assert twd._witnesses([10, 12, 15], 3, 3) is None
    assert twd._witnesses([10, 11], 2, 1) == 2
    parts = [
        (np.array([10, 12]), np.array([1.0, 2.0]), {}),
        (np.array([14, 30]), np.array([1.5, 3.0]), {}),
    ]
    # Exclusion 3: 10, then 12 (2 away) is out, 14 (4 away) in, then 30.
    assert twd._choose(parts, 3, 3, lambda group: group) == ([10, 14, 30], [1.0, 1.5, 3.0])
    assert twd._choose(parts, 9, 0, lambda group: group)[0] == [10, 14, 12, 30]


@pytest.mark.parametrize("dims", [1, 2])
def test_a_non_finite_value_is_named_at_its_place_in_the_series(dims, cluster_client):
    series, query = case_series(16, 900, 20, dims)
    series[700] = np.inf if dims == 1 else [0.0, -np.inf]
    series[433] = np.nan if dims == 1 else [1.0, np.nan]
    with pytest.raises(timewarp.InputError) as single:
        timewarp.search(query, series, k=2, device="cpu")
    assert "sample 433" in str(single.value)
    for source, client, chunks in [
        (series, None, (21, 100, 430, 460, None)),
        (da.from_array(series, chunks=(50,) + series.shape[1:]), None, (100, 460)),
        (series, cluster_client, (100, None)),
    ]:
        for chunk in chunks:
            with pytest.raises(timewarp.InputError) as got:
                twd.search(query, source, k=2, chunk=chunk, device="cpu", client=client)
            assert str(got.value) == str(single.value)


BAD = [
    (lambda q, s: (q[:1], s), {}),  # m < 2
    (lambda q, s: (q, s[:10]), {}),  # the query longer than the series
    (lambda q, s: (q, s), {"band": 1.5}),
    (lambda q, s: (q, s), {"band": -1}),
    (lambda q, s: (q, s), {"k": 0}),
    (lambda q, s: (q, s), {"exclusion": -2}),
    (lambda q, s: (np.stack([q, q], axis=1), s), {}),  # dimensions differ
    (lambda q, s: (q, s[:, None, None]), {}),  # three axes
    (lambda q, s: (q.copy() * np.nan, s), {}),  # a NaN in the query
]


@pytest.mark.parametrize("bad", range(len(BAD)))
def test_bad_input_raises_what_the_single_call_raises(bad):
    series, query = case_series(17, 200, 20)
    make, params = BAD[bad]
    q, s = make(query, series)
    with pytest.raises(timewarp.InputError) as single:
        timewarp.search(q, s, device="cpu", **params)
    for source in (s, da.from_array(s)):
        with pytest.raises(timewarp.InputError) as got:
            twd.search(q, source, device="cpu", **params)
        assert str(got.value) == str(single.value)


def test_bad_dask_parameters():
    series, query = case_series(18, 200, 20)
    for chunk in (19, 0, 2.5, True):
        with pytest.raises(timewarp.InputError, match="chunk"):
            twd.search(query, series, chunk=chunk)
    with pytest.raises(timewarp.InputError, match="retries"):
        twd.search(query, series, retries=-1)
    with pytest.raises(timewarp.InputError, match="GPU 0"):
        twd.search(query, series, device="gpu:1")
    unknown = da.from_array(series, chunks=50)
    unknown = unknown[unknown > -1e9]  # unknown chunk sizes
    with pytest.raises(timewarp.InputError, match="unknown length"):
        twd.search(query, unknown)


class CostRecorder(SchedulerPlugin):
    """The cost annotation and priority of every task that has a cost."""

    name = "timewarp-search-cost-recorder"

    def __init__(self) -> None:
        self.seen: dict = {}

    def update_graph(self, scheduler, *, annotations, priority, **kwargs) -> None:
        for key, cells in annotations.get(twd.COST_ANNOTATION, {}).items():
            if cells is not None:
                self.seen[key] = (cells, priority.get(key))


def test_pieces_carry_their_costs_and_share_out_over_the_workers(cluster_client, monkeypatch):
    series, query = case_series(19, 5000, 50)
    m, radius = 50, 2  # band 0.05 of 50
    monkeypatch.setattr(twd, "MIN_SEARCH_STARTS", 1)
    cluster_client.register_plugin(CostRecorder())
    try:
        got = twd.search(query, series, k=3, client=cluster_client, device="cpu")
        seen = cluster_client.run_on_scheduler(
            lambda dask_scheduler: dict(dask_scheduler.plugins[CostRecorder.name].seen)
        )
    finally:
        cluster_client.unregister_scheduler_plugin(CostRecorder.name)
    assert_same(got, timewarp.search(query, series, k=3, device="cpu"))
    # Two workers, 4 pieces each; starts 4951 = 7 x 619 + 618.
    assert len(seen) == 2 * twd.SEARCH_CHUNKS_PER_WORKER == 8
    costs = sorted((cells for cells, _ in seen.values()), reverse=True)
    assert costs == [619 * m * (2 * radius + 1)] * 7 + [618 * m * (2 * radius + 1)]
    # The costliest first.
    order = sorted(seen.values(), key=lambda entry: entry[1])
    assert [cells for cells, _ in order] == costs


def test_gpu_pieces_equal_the_single_call(gpu):
    series, query = case_series(20, 3000, 64, dims=2)
    expected = timewarp.search(query, series, k=4, device="cpu")
    assert_same_matches(timewarp.search(query, series, k=4, device="gpu"), expected)
    for chunk in (300, 700):
        got = twd.search(query, series, k=4, chunk=chunk, device="gpu")
        assert_same_matches(got, expected)
    source = da.from_array(series, chunks=(512, 2))
    assert_same_matches(twd.search(query, source, k=4, chunk=900, device="gpu"), expected)
