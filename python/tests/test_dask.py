"""timewarp.dask on a local cluster of two worker processes: tiles and
shards give exactly what the in-process calls give, a worker killed while
tasks run changes nothing, a failing task raises, bad input raises before
any work is sent. Skipped, with the reason printed, without dask and
distributed."""

from __future__ import annotations

import heapq
import importlib
import itertools
import math
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

import timewarp

try:
    import dask  # noqa: F401
    import distributed
    from distributed import Client, LocalCluster
    from distributed.diagnostics.plugin import SchedulerPlugin
except ImportError as missing:
    reason = (
        f'dask or distributed is not installed ({missing}): pip install "dask[array]" distributed'
    )
    print(f"skipped: {reason}", file=sys.stderr)
    pytest.skip(reason, allow_module_level=True)

import timewarp.dask as twd

RNG = np.random.default_rng(16)
ON_GPU = timewarp.gpu_available()


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture
def own_client():
    """A cluster of its own for a test that kills one of its workers: no
    other test then waits on the nanny's replacement, a new process that
    imports numpy, dask and timewarp (on a busy two-core machine this has
    taken over two minutes)."""
    # Any free port for its scheduler's HTTP server: the module's cluster
    # holds the default one.
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


def ragged(count: int, dims: int = 1, low: int = 3, high: int = 24) -> list:
    return [RNG.normal(size=(int(n), dims)) for n in RNG.integers(low, high, count)]


def assert_same(got, expected, metric: str) -> None:
    """Bit for bit, for every metric: a pair's value does not depend on the
    tile it is computed in (on the CPU, Soft-DTW's pairs without others of
    their shape run in a lane of their own for that)."""
    np.testing.assert_array_equal(got, expected, err_msg=metric)


METRICS = ["dtw", "twed", "soft_dtw"]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_cdist_of_a_batch_against_itself(client, metric, precision):
    x = RNG.normal(size=(29, 17))  # 5 blocks of 7 (the last of 1): 15 tiles computed, 10 mirrored
    result = twd.cdist(x, block=7, metric=metric, precision=precision)
    assert result.chunks == ((7, 7, 7, 7, 1), (7, 7, 7, 7, 1))
    got = result.compute()
    expected = timewarp.cdist(x, metric=metric, precision=precision)
    assert got.dtype == expected.dtype
    assert_same(got, expected, metric)
    np.testing.assert_array_equal(got, got.T)


@pytest.mark.parametrize("metric", METRICS)
def test_cdist_a_against_b_ragged_multivariate(client, metric):
    a, b = ragged(23, dims=2), ragged(11, dims=2)
    got = twd.cdist(a, b, block=5, metric=metric).compute()
    assert_same(got, timewarp.cdist(a, b, metric=metric), metric)
    # A ragged batch against itself, with a band.
    if metric != "twed":
        got = twd.cdist(a, block=4, metric=metric, band=2).compute()
        assert_same(got, timewarp.cdist(a, metric=metric, band=2), metric)


def test_cdist_divergence_and_three_dimensional_arrays(client):
    a = RNG.normal(size=(13, 9, 3))
    b = RNG.normal(size=(6, 12, 3))
    params = dict(metric="soft_dtw", gamma=0.5, normalize=True)
    assert_same(
        twd.cdist(a, b, block=4, **params).compute(), timewarp.cdist(a, b, **params), "soft_dtw"
    )
    got = twd.cdist(a, block=4, **params).compute()
    assert_same(got, timewarp.cdist(a, **params), "soft_dtw")


def test_cdist_default_blocks_and_the_local_scheduler(client, monkeypatch):
    x = RNG.normal(size=(40, 8))
    result = twd.cdist(x)  # the block rule: 40 series fit one block of at least 64
    assert result.numblocks == (1, 1)
    np.testing.assert_array_equal(result.compute(), timewarp.cdist(x))

    # No client in the process: dask's threaded scheduler, the blocks in the graph.
    def no_client():
        raise ValueError("No global client found")

    monkeypatch.setattr(distributed, "get_client", no_client)
    local = twd.cdist(x, block=6)
    np.testing.assert_array_equal(local.compute(scheduler="threads"), timewarp.cdist(x))
    indices, distances = twd.knn(x[:9], x, k=3, block=(4, 7))
    full = timewarp.cdist(x[:9], x)
    expected = np.argsort(full, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_array_equal(distances, np.take_along_axis(full, expected, axis=1))


def reference_knn(queries, database, k, **params):
    full = timewarp.cdist(queries, database, **params)
    indices = np.argsort(full, axis=1, kind="stable")[:, :k]
    return indices, np.take_along_axis(full, indices, axis=1)


@pytest.mark.parametrize("metric", METRICS)
def test_knn_equals_the_in_process_reference(client, metric):
    database = RNG.normal(size=(31, 14))
    # Ties: every series twice (also across shards), and queries that are
    # database series: the smaller index wins.
    database = np.concatenate([database, database[::-1]])
    queries = np.concatenate([RNG.normal(size=(7, 14)), database[[3, 40]]])
    for k, block in [(1, (4, 9)), (5, (3, 10)), (62, (9, 5))]:
        indices, distances = twd.knn(queries, database, k=k, block=block, metric=metric)
        expected_indices, expected_distances = reference_knn(queries, database, k, metric=metric)
        assert indices.shape == distances.shape == (len(queries), k)
        assert indices.dtype == np.int64
        np.testing.assert_array_equal(indices, expected_indices)
        assert_same(distances, expected_distances, metric)


def test_knn_ragged_multivariate_float32(client):
    database, queries = ragged(40, dims=3), ragged(6, dims=3)
    indices, distances = twd.knn(
        queries, database, k=4, block=(2, 6), precision="float32", metric="twed"
    )
    expected_indices, expected_distances = reference_knn(
        queries, database, 4, precision="float32", metric="twed"
    )
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(distances, expected_distances)
    assert distances.dtype == np.float32


def tiles_on(client, worker: str) -> int:
    return sum(str(key).startswith("('timewarp-") for key in client.has_what()[worker])


def kill_while_running(client, done) -> str:
    """Kills a worker's process (SIGKILL) once it holds finished tiles and
    runs another; the address of the worker killed."""
    pids = client.run(os.getpid)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not done():
        for worker, keys in client.processing().items():
            if keys and tiles_on(client, worker) > 0:
                os.kill(pids[worker], signal.SIGKILL)
                return worker
        time.sleep(0.005)
    pytest.fail("the work ended before a worker could be killed during it: make it longer")


def assert_gone(client, victim: str) -> None:
    """The killed worker has left the cluster (the kill hit the worker, so
    the result came from the tiles recomputed elsewhere)."""
    deadline = time.monotonic() + 60
    while victim in client.nthreads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert victim not in client.nthreads(), "the killed worker is still listed"


# The fault tests compute on the CPU (device="cpu"), whose tiles take long
# enough to be caught in flight on any machine; a GPU finishes them first.
# Each has a cluster of its own (`own_client`), closed with the test.


def test_a_worker_killed_during_cdist(own_client):
    client = own_client
    x = RNG.normal(size=(36, 700))  # 6 x 6 blocks: 21 tiles of 36 pairs of 700 x 700 cells
    expected = timewarp.cdist(x, device="cpu")
    future = client.compute(twd.cdist(x, block=6, device="cpu", client=client))
    victim = kill_while_running(client, future.done)
    got = future.result(timeout=120)
    assert_gone(client, victim)
    np.testing.assert_array_equal(got, expected)


def test_a_worker_killed_during_knn(own_client):
    client = own_client
    database = RNG.normal(size=(48, 600))
    queries = RNG.normal(size=(12, 600))
    expected = reference_knn(queries, database, 3, device="cpu")
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = twd.knn(
                queries, database, k=3, block=(2, 12), client=client, device="cpu"
            )
        except BaseException as error:  # handed to the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    victim = kill_while_running(client, lambda: not thread.is_alive())
    thread.join(timeout=120)
    assert not thread.is_alive(), "knn did not finish within 120 s of the kill"
    assert_gone(client, victim)
    if "error" in outcome:
        raise outcome["error"]
    np.testing.assert_array_equal(outcome["result"][0], expected[0])
    np.testing.assert_array_equal(outcome["result"][1], expected[1])


@pytest.mark.skipif(ON_GPU, reason="the workers have a usable GPU")
def test_a_failing_task_raises(client):
    x = RNG.normal(size=(10, 5))
    with pytest.raises(timewarp.TimewarpError, match="no usable GPU"):
        twd.cdist(x, block=4, device="gpu").compute()
    with pytest.raises(timewarp.TimewarpError, match="no usable GPU"):
        twd.knn(x, x, k=2, block=4, device="gpu", retries=0)


class NoWork:
    """A client that fails the test if anything is sent to it."""

    def __getattr__(self, name):
        raise AssertionError(f"work was sent (client.{name}) before the input was checked")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda c: twd.cdist([], client=c), "has no series"),
        (lambda c: twd.cdist(np.zeros((0, 5)), client=c), "has no series"),
        (lambda c: twd.cdist(np.zeros((3, 0)), client=c), "empty"),
        (lambda c: twd.cdist([np.ones(3), np.ones(0)], client=c), "series 1 of the batch is empty"),
        (lambda c: twd.cdist(np.ones((3, 4, 2)), np.ones((3, 4, 3)), client=c), "dimension"),
        (lambda c: twd.cdist([np.ones((3, 2)), np.ones((4, 3))], client=c), "dimensions"),
        (lambda c: twd.cdist(np.array([[1.0, np.nan]]), client=c), "not finite"),
        (lambda c: twd.cdist(np.ones((3, 4)), metric="lcss", client=c), "metric"),
        (lambda c: twd.cdist(np.ones((3, 4)), band=-1, client=c), "band"),
        (lambda c: twd.cdist(np.ones((3, 4)), metric="twed", band=2, client=c), "band"),
        (lambda c: twd.cdist(np.ones((3, 4)), normalize=True, client=c), "normalize"),
        (lambda c: twd.cdist(np.ones((3, 4)), gamma=-1, metric="soft_dtw", client=c), "gamma"),
        (lambda c: twd.cdist(np.ones((3, 4)), device="gpu:1", client=c), "CUDA_VISIBLE"),
        (lambda c: twd.cdist(np.ones((3, 4)), device="tpu", client=c), "device"),
        (lambda c: twd.cdist(np.ones((3, 4)), block=0, client=c), "block"),
        (lambda c: twd.knn(np.ones((2, 4)), np.ones((3, 4)), k=4, client=c), "only 3 series"),
        (lambda c: twd.knn(np.ones((2, 4)), np.ones((3, 4)), k=0, client=c), "k = 0"),
        (lambda c: twd.knn(np.ones((2, 4)), np.ones((3, 4)), k=1.5, client=c), "k = 1.5"),
        (lambda c: twd.knn(np.ones((2, 4)), np.ones((3, 4, 2)), client=c), "dimension"),
        (lambda c: twd.knn(np.ones((2, 4)), [], client=c), "no series"),
        (lambda c: twd.knn(np.ones((2, 4)), np.ones((3, 4)), block=(0, 2), client=c), "block"),
        (lambda c: twd.knn(np.ones((2, 4)), np.ones((3, 4)), retries=-1, client=c), "retries"),
    ],
)
def test_bad_input_raises_before_any_work(call, message):
    with pytest.raises(timewarp.TimewarpError, match=message):
        call(NoWork())


def test_unknown_parameter_is_a_type_error():
    with pytest.raises(TypeError, match="lambda"):
        twd.cdist(np.ones((3, 4)), client=NoWork(), **{"lambda": 1.0})


def test_block_rule():
    # 10^5 series of 512 against themselves on 64 GPU workers: tiles of at
    # most 2^40 cells (2^22 pairs): 49 equal blocks of 2041, 1225 tiles.
    assert twd.block_rule(10**5, 10**5, 512, 512, 64, gpu=True, symmetric=True) == 2041
    # Few series: blocks of at least 64 (one block here) unless the pairs are long.
    assert twd.block_rule(40, 40, 8, 8, 2, gpu=True, symmetric=True) == 40
    # 16 tiles: 8 tiles' cost for each worker at least.
    assert twd.block_rule(1000, 1000, 8, 8, 2, gpu=True) == 250
    assert twd.block_rule(1000, 1000, 10**5, 10**5, 2, gpu=True) == 10  # long series
    assert twd.block_rule(1000, 1000, 128, 128, 2, gpu=False) == 250
    assert twd.block_rule(10**4, 10**4, 128, 128, 2, gpu=False) == 358  # 2^31 cells a tile
    # benches/dask_bench.py's 8192 x 8192 of 256 on 2 GPUs: blocks of 2048
    # would give 10 tiles, 4 of them diagonal (half cost): 8 units, 4 a
    # worker. Blocks of 1366: 15 + 6 halves, 9 units a worker.
    assert twd.block_rule(8192, 8192, 256, 256, 2, gpu=True, symmetric=True) == 1366
    assert twd.block_rule(8192, 8192, 256, 256, 1, gpu=True, symmetric=True) == 2048


def lpt(costs, workers):
    """Greedy largest-first list scheduling, tile by tile (a heap)."""
    loads = [0.0] * workers
    heapq.heapify(loads)
    for cost in sorted((c for c, n in costs for _ in range(n)), reverse=True):
        heapq.heapreplace(loads, loads[0] + cost)
    return sorted(loads, reverse=True)


def test_greedy_loads_is_the_largest_first_schedule():
    rng = np.random.default_rng(3)
    for _ in range(300):
        costs = [
            (
                float(rng.choice([rng.integers(1, 40), rng.uniform(0.1, 40)])),
                int(rng.integers(0, 30)),
            )
            for _ in range(rng.integers(1, 6))
        ]
        workers = int(rng.integers(1, 10))
        np.testing.assert_allclose(twd._greedy_loads(costs, workers), lpt(costs, workers))
    # Equal tiles go round the workers; a diagonal tile costs about half.
    assert twd._greedy_loads([(1.0, 6), (0.5, 4)], 2) == [4.0, 4.0]
    assert twd._greedy_loads([(1.0, 3)], 2) == [2.0, 1.0]
    assert twd._spread([(1.0, 3)], 2) == pytest.approx(4 / 3)
    assert twd._greedy_loads([(2.0, 10**9)], 3)[0] == 2.0 * 333333334  # counts of any size


SIZES = [100, 300, 1000, 3000, 10**4, 3 * 10**4, 10**5]
LENGTHS = [8, 100, 512, 4096, 10**5]


def floor_of(longest, row_length, column_length, gpu):
    cells = twd.GPU_TILE_CELLS if gpu else twd.CPU_TILE_CELLS
    work = max(1, math.floor(math.sqrt(cells / (row_length * column_length))))
    return work, max(1, min(twd.MIN_BLOCK, work, longest))


@pytest.mark.parametrize("gpu", [True, False])
@pytest.mark.parametrize("symmetric", [True, False])
def test_block_rule_shares_the_tiles_out_evenly(gpu, symmetric):
    """For every size, length and worker count: the tiles handed out largest
    first give no worker more than 1.25 times the mean cost (the rule aims
    at BALANCE, 1.1), unless the matrix is too small to share (the blocks
    at their floor); the tile cells target and the block limits hold."""
    for rows, columns, row_length, column_length, workers in itertools.product(
        SIZES, SIZES, LENGTHS, [None, 37], range(1, 9)
    ):
        if symmetric and (rows != columns or column_length is not None):
            continue
        column_length = row_length if column_length is None else column_length
        block = twd.block_rule(
            rows, columns, row_length, column_length, workers, gpu, symmetric=symmetric
        )
        longest = max(rows, columns)
        work, floor = floor_of(longest, row_length, column_length, gpu)
        case = (rows, columns, row_length, column_length, workers, block)
        assert floor <= block <= min(work, twd.MAX_BLOCK, longest), case
        costs = twd._tile_costs(rows, columns, block, row_length, column_length, symmetric)
        if twd._spread(costs, workers) > 1.25:
            # Too few pairs for the workers: the smallest blocks allowed.
            assert block == floor, case
            assert rows * columns < 4 * twd.TILES_PER_WORKER * workers * twd.MIN_BLOCK**2, case
        else:
            # Enough cost for several tiles a worker, counting cost.
            total = sum(c * n for c, n in costs)
            if block > floor:
                assert total >= twd.TILES_PER_WORKER * workers * max(c for c, _ in costs), case


@pytest.mark.parametrize("gpu", [True, False])
def test_knn_blocks_share_the_tasks_out_evenly(gpu):
    """One shard per worker, equal to within the rounding, and equal query
    blocks: each worker's tasks (its shard against every query block) cost
    at most 1.25 times the mean, and so do the tasks handed out largest
    first; a task holds at most the target cells and MAX_TILE_ENTRIES."""
    cells = twd.GPU_TILE_CELLS if gpu else twd.CPU_TILE_CELLS
    for queries, database, length, workers in itertools.product(SIZES, SIZES, LENGTHS, range(1, 9)):
        block, shard = twd._knn_blocks(queries, database, length, length, workers, gpu)
        case = (queries, database, length, workers, block, shard)
        assert 1 <= block <= queries and shard == math.ceil(database / workers), case
        parts = math.ceil(queries / block)
        assert block * (parts - 1) < queries, case  # equal blocks, the last within `parts`
        if block > 1:
            assert block * shard * length * length <= cells, case
            assert block * shard <= twd.MAX_TILE_ENTRIES, case
        per_worker = [min(shard, database - i * shard) for i in range(workers)]
        per_worker = [max(p, 0) for p in per_worker]
        assert max(per_worker) * workers <= 1.25 * database, case
        costs = twd._knn_tile_costs(queries, database, block, shard, length, length)
        assert twd._spread(costs, workers) <= 1.25, case


class CostRecorder(SchedulerPlugin):
    """Keeps the cost annotation and the priority of every task that has a
    cost, as the scheduler received them."""

    name = "timewarp-cost-recorder"

    def __init__(self) -> None:
        self.seen: dict = {}

    def update_graph(self, scheduler, *, annotations, priority, **kwargs) -> None:
        for key, cells in annotations.get(twd.COST_ANNOTATION, {}).items():
            if cells is not None:
                self.seen[key] = (cells, priority.get(key))


@pytest.fixture
def recorder(client):
    client.register_plugin(CostRecorder())
    yield
    client.unregister_scheduler_plugin(CostRecorder.name)


def recorded(client) -> dict:
    return client.run_on_scheduler(
        lambda dask_scheduler: dict(dask_scheduler.plugins[CostRecorder.name].seen)
    )


def assert_largest_first(seen: dict) -> None:
    """The scheduler starts the smaller priority tuple first: along that
    order the costs do not increase, and equal costs share a priority."""
    order = sorted(seen.values(), key=lambda entry: entry[1])
    costs = [cells for cells, _ in order]
    assert costs == sorted(costs, reverse=True)
    by_cost: dict = {}
    for cells, priority in order:
        by_cost.setdefault(cells, set()).add(priority[0])
    assert all(len(p) == 1 for p in by_cost.values())


def test_cdist_tiles_carry_their_costs(client, recorder):
    x = ragged(17, dims=2, low=3, high=30)
    lengths = np.array([len(s) for s in x])
    result = twd.cdist(x, block=4, metric="dtw")
    # In the graph: each computed tile's cells (the pairs' length products,
    # each pair of a diagonal tile once), none for the transposes.
    layer = result.dask.layers[result.name]
    cells = layer.annotations[twd.COST_ANNOTATION]
    blocks = [lengths[i : i + 4] for i in range(0, 17, 4)]
    for i, a in enumerate(blocks):
        for j, b in enumerate(blocks):
            if i < j:
                assert cells((result.name, i, j)) == a.sum() * b.sum()
            elif i == j:
                assert cells((result.name, i, j)) == (a.sum() ** 2 + (a * a).sum()) // 2
            else:
                assert cells((result.name, i, j)) is None
                assert layer.annotations["priority"]((result.name, i, j)) == 0
    # On the scheduler, with dask's low-level fusion off (it drops the
    # layers' annotations): costs and priorities, largest first.
    with dask.config.set({"optimization.fuse.active": False}):
        got = client.compute(result).result()
    np.testing.assert_array_equal(got, timewarp.cdist(x, metric="dtw"))
    seen = recorded(client)
    assert {k for k in seen if k[0] == result.name} == {
        (result.name, i, j) for i in range(5) for j in range(i, 5)
    }
    assert all(seen[k][0] == cells(k) for k in seen)
    assert_largest_first(seen)
    # A priority in force is the costliest tiles' (the others below it).
    with dask.annotate(priority=10, retries=1):
        annotated = twd.cdist(x, b=x[:5], block=4)
    annotations = annotated.dask.layers[annotated.name].annotations
    priorities = {
        annotations["priority"]((annotated.name, i, j)) for i in range(5) for j in range(2)
    }
    assert max(priorities) == 10 and min(priorities) < 10 and annotations["retries"] == 1


def test_knn_tasks_carry_their_costs(client, recorder):
    database, queries = ragged(30, low=5, high=40), ragged(7, low=5, high=40)
    indices, distances = twd.knn(queries, database, k=3, block=(3, 8), client=client)
    expected = reference_knn(queries, database, 3)
    np.testing.assert_array_equal(indices, expected[0])
    np.testing.assert_array_equal(distances, expected[1])
    seen = recorded(client)
    assert len(seen) == 3 * 4  # query blocks x shards
    q_samples = [sum(len(s) for s in queries[i : i + 3]) for i in range(0, 7, 3)]
    d_samples = [sum(len(s) for s in database[i : i + 8]) for i in range(0, 30, 8)]
    assert sorted(cells for cells, _ in seen.values()) == sorted(
        q * d for q in q_samples for d in d_samples
    )
    assert_largest_first(seen)


def test_timewarp_imports_without_dask(monkeypatch):
    for name in [n for n in sys.modules if n == "dask" or n.startswith("dask.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.delitem(sys.modules, "timewarp.dask")
    with pytest.raises(ImportError, match=r'pip install "dask\[array\]" distributed'):
        importlib.import_module("timewarp.dask")
    monkeypatch.undo()
    assert importlib.import_module("timewarp.dask") is twd
