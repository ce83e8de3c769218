"""timewarp.dask on a local cluster of two worker processes: tiles and
shards give exactly what the in-process calls give, a worker killed while
tasks run changes nothing, a failing task raises, bad input raises before
any work is sent. Skipped, with the reason printed, without dask and
distributed."""

from __future__ import annotations

import importlib
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
    # 10^5 series of 512 against themselves on 64 GPU workers: tiles of
    # 2^40 cells (2^22 pairs, 2048 x 2048); the balance bound is far above.
    assert twd.block_rule(10**5, 10**5, 512, 512, 64, gpu=True, symmetric=True) == 2048
    # Few series: blocks of at least 64 (one block here) unless the pairs are long.
    assert twd.block_rule(40, 40, 8, 8, 2, gpu=True, symmetric=True) == 40
    assert twd.block_rule(1000, 1000, 8, 8, 2, gpu=True) == 353  # 4 tiles per worker at least
    assert twd.block_rule(1000, 1000, 10**5, 10**5, 2, gpu=True) == 10  # long series
    assert twd.block_rule(1000, 1000, 128, 128, 2, gpu=False) == 353
    assert twd.block_rule(10**4, 10**4, 128, 128, 2, gpu=False) == 362  # 2^31 cells a tile


def test_timewarp_imports_without_dask(monkeypatch):
    for name in [n for n in sys.modules if n == "dask" or n.startswith("dask.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.delitem(sys.modules, "timewarp.dask")
    with pytest.raises(ImportError, match=r'pip install "dask\[array\]" distributed'):
        importlib.import_module("timewarp.dask")
    monkeypatch.undo()
    assert importlib.import_module("timewarp.dask") is twd
