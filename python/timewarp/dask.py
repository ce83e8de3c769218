"""Distance matrices and k-nearest neighbours over a Dask cluster.

    >>> from distributed import Client
    >>> client = Client("tcp://scheduler:8786")  # or Client() for a local cluster
    >>> d = timewarp.dask.cdist(x, metric="dtw")  # a dask.array.Array of tiles
    >>> d.compute()                                # == timewarp.cdist(x)

Each task computes one tile with `timewarp.cdist` on its worker (on that
worker's GPU 0 under ``device="auto"``, which is the worker's own GPU when
each worker sees one GPU through CUDA_VISIBLE_DEVICES). The inputs are cut
into row blocks that go to the cluster once, as data of the task graph
(which the scheduler can send again if the workers holding a block are
lost); the tasks refer to them. docs/dask.md has the block
rule, what moves over the network and the fault behaviour.

Needs ``pip install "dask[array]" distributed`` (distributed for clusters;
without a client the work runs on dask's local threaded scheduler).
"""

from __future__ import annotations

import math
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.threaded
    from dask.highlevelgraph import HighLevelGraph
except ImportError as error:  # pragma: no cover - exercised without dask
    raise ImportError('timewarp.dask needs Dask: pip install "dask[array]" distributed') from error

from . import _core, _inputs
from . import _timewarp as _ext
from ._errors import InputError

__all__ = ["block_rule", "cdist", "knn"]

# ---- The block rule --------------------------------------------------------
#
# A tile should hold enough work that the per-task cost (scheduling, a few
# milliseconds; moving its blocks; on a GPU, staging) is small beside it, and
# the tiles should be many enough that every worker gets several (load
# balance, and a lost worker costs only its tiles). Work is counted in
# dynamic-programming cells (pairs x length_a x length_b):

#: Cells a tile aims at on a GPU: 2^40, about 0.25 s of f32 DTW on an H200
#: (DTW reaches about 4.5 TCUPS at L = 512), seconds of Soft-DTW.
GPU_TILE_CELLS = 2**40
#: Cells a tile aims at on a CPU worker: 2^31, about a second of DTW on a
#: few cores.
CPU_TILE_CELLS = 2**31
#: At least this many tiles per worker when the matrix is large enough.
TILES_PER_WORKER = 4
#: Blocks of fewer series than this leave a GPU idle (64 x 64 pairs is a
#: warp each for 4,096 pairs); they are used only when the work per pair is
#: large (long series) or the batch is smaller.
MIN_BLOCK = 64
#: A tile of 4096 x 4096 float64 values is 128 MiB: the largest block.
MAX_BLOCK = 4096
#: Entries of a k-NN task's tile (queries x shard): 2^26, 512 MiB in float64.
MAX_TILE_ENTRIES = 2**26
#: Shard results merged by one task of the k-NN's reduction tree.
MERGE_FAN_IN = 8

_PARAMETERS = (
    "metric",
    "gamma",
    "band",
    "nu",
    "lmbda",
    "degree",
    "normalize",
    "device",
    "precision",
)


def block_rule(
    rows: int,
    columns: int,
    row_length: float,
    column_length: float,
    workers: int,
    gpu: bool,
    symmetric: bool = False,
) -> int:
    """Series per block of `cdist`'s tiles (rows and columns alike).

    ``min(work, max(balance, MIN_BLOCK), MAX_BLOCK)``, at least 1: `work`
    is the block whose square tile holds the target cells (2^40 on a GPU,
    2^31 on a CPU) for series of the mean lengths given; `balance` the
    block that still gives every worker `TILES_PER_WORKER` tiles (counting
    only the upper triangle when `symmetric`)."""
    cells = GPU_TILE_CELLS if gpu else CPU_TILE_CELLS
    work = math.sqrt(cells / max(row_length * column_length, 1.0))
    pairs = rows * columns / (2.0 if symmetric else 1.0)
    balance = math.sqrt(pairs / (TILES_PER_WORKER * max(workers, 1)))
    block = min(work, max(balance, MIN_BLOCK), MAX_BLOCK)
    return int(max(1, min(math.floor(block), max(rows, columns))))


def _knn_blocks(
    queries: int,
    database: int,
    query_length: float,
    database_length: float,
    workers: int,
    gpu: bool,
) -> Tuple[int, int]:
    """(queries per block, series per shard) of `knn`: one shard per worker
    (each holds its part of the database, resident where it computes), and
    query blocks whose tile against a shard holds the target cells (at
    least one query, at most MAX_TILE_ENTRIES entries)."""
    shard = math.ceil(database / max(workers, 1))
    cells = GPU_TILE_CELLS if gpu else CPU_TILE_CELLS
    per_query = shard * max(query_length * database_length, 1.0)
    block = min(cells / per_query, MAX_TILE_ENTRIES / shard)
    return int(max(1, min(math.floor(block), queries))), shard


# ---- Inputs ------------------------------------------------------------------


@dataclass
class _Batch:
    """A batch cast to the precision of the whole computation."""

    data: Union[np.ndarray, List[np.ndarray]]  # (n, length, dims) or a list of (length, dims)
    count: int
    dims: int
    mean_length: float

    def rows(self, start: int, stop: int):
        return self.data[start:stop]


def _prepare(value: Any, what: str) -> _inputs.Prepared:
    prepared = _inputs.batch(value, what)
    if isinstance(prepared.data, list):
        dims = {s.shape[1] for s in prepared.data}
        if len(dims) > 1:
            raise InputError(
                f"the series of {what} have samples of different dimensions {sorted(dims)}"
            )
    return prepared


def _checked(prepared: _inputs.Prepared, dtype: np.dtype, what: str) -> _Batch:
    """The batch in `dtype`, with the checks the library makes on every
    series (not empty, finite values) made here, before any work is sent."""
    data = _inputs.cast(prepared, dtype)
    series = data if isinstance(data, list) else None
    if series is None:
        if data.shape[1] == 0:
            raise InputError(f"invalid input: the series of {what} are empty")
        finite = np.isfinite(data).reshape(data.shape[0], -1).all(axis=1)
        lengths = [data.shape[1]]
    else:
        for index, s in enumerate(series):
            if s.shape[0] == 0:
                raise InputError(f"invalid input: series {index} of {what} is empty")
        finite = np.array([bool(np.isfinite(s).all()) for s in series])
        lengths = [s.shape[0] for s in series]
    if not finite.all():
        index = int(np.argmin(finite))
        raise InputError(
            f"invalid input: series {index} of {what} has a value that is not finite "
            "(values must be finite)"
        )
    dims = data.shape[2] if series is None else series[0].shape[1]
    return _Batch(data, prepared.count, int(dims), float(np.mean(lengths)))


def _check_device(device: Any) -> str:
    """The device name as the extension reads it (checked here, resolved on
    the workers)."""
    name = str(device).lower()
    if name in ("auto", "cpu", "gpu", "cuda"):
        return name
    for prefix in ("gpu:", "cuda:"):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            if int(name[len(prefix) :]) != 0:
                raise InputError(
                    f"device {device!r}: each Dask worker computes on its GPU 0 "
                    "(give each worker its GPU through CUDA_VISIBLE_DEVICES)"
                )
            return name
    raise InputError(f'device {device!r}: expected "auto", "cpu", "gpu" or "gpu:N"')


def _parameters(params: Dict[str, Any]) -> Dict[str, Any]:
    unknown = sorted(set(params) - set(_PARAMETERS))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r}; timewarp.cdist's are "
            + ", ".join(_PARAMETERS)
        )
    params = dict(params)
    params["device"] = _check_device(params.get("device", "auto"))
    return params


def _inputs_for(a: Any, b: Any, params: Dict[str, Any]) -> Tuple[_Batch, Optional[_Batch]]:
    """Both batches cast to one precision, and the parameters checked by the
    library itself on one sample of each (on this process's CPU)."""
    left = _prepare(a, "a" if b is not None else "the batch")
    right = None if b is None else _prepare(b, "b")
    dtype = _inputs.common_dtype(params.get("precision"), left, right)
    left_batch = _checked(left, dtype, "a" if b is not None else "the batch")
    right_batch = None if right is None else _checked(right, dtype, "b")
    if right_batch is not None and right_batch.dims != left_batch.dims:
        raise InputError(
            f"dimension mismatch: the first batch has {left_batch.dims} dimensions per sample, "
            f"the second {right_batch.dims}"
        )
    probe = np.zeros((1, 1, left_batch.dims), dtype=dtype)
    checked = {k: v for k, v in params.items() if k != "device"}
    _core.cdist(probe, probe, device="cpu", **checked)
    return left_batch, right_batch


# ---- Where the work runs -----------------------------------------------------


def _client(client: Any) -> Any:
    """The client given, else the default one, else None (dask's local
    scheduler in this process)."""
    if client is not None:
        return client
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:  # no client in this process
        return None


def _worker_gpu(device: str) -> bool:
    """Run on a worker: whether `device` computes on a GPU there."""
    if device == "cpu":
        return False
    return _ext.gpu_available()


def _on_gpu(client: Any, device: str) -> Tuple[int, bool]:
    """(workers, whether they compute on GPUs) for the block rule."""
    if device == "cpu":
        workers = 1 if client is None else max(len(client.nthreads()), 1)
        return workers, False
    if client is None:
        return 1, _worker_gpu(device)
    found = client.run(_worker_gpu, device)
    return max(len(found), 1), any(found.values())


def _blocks(count: int, size: int) -> List[Tuple[int, int]]:
    return [(start, min(start + size, count)) for start in range(0, count, size)]


def _placed(parts: Sequence[Any], name: str) -> Tuple[Dict[Any, Any], List[Any]]:
    """Graph entries and their keys for data blocks: each block is data in
    the graph, sent to the scheduler once with it and from there to the
    worker that first needs it. Unlike scattered data, such a block has a
    recipe: if the workers holding it are lost, the scheduler sends it
    again (scattered replicas are not a safeguard: Dask's active memory
    manager drops the extra ones within seconds)."""
    keys = [(name, index) for index in range(len(parts))]
    return dict(zip(keys, parts)), keys


# ---- cdist -------------------------------------------------------------------


@dataclass(frozen=True)
class _Tile:
    """A task of `cdist`: one tile with `timewarp.cdist` (`right=None`: a
    diagonal tile, computed in symmetric mode like the whole matrix's)."""

    params: Tuple[Tuple[str, Any], ...]

    def __call__(self, left: Any, right: Any = None) -> np.ndarray:
        return _core.cdist(left, right, **dict(self.params))


def cdist(
    a: Any,
    b: Any = None,
    *,
    client: Any = None,
    block: Optional[int] = None,
    **params: Any,
):
    """The distance matrix of `a` (rows) against `b` (columns), or of `a`
    against itself, as a ``dask.array.Array`` whose blocks are tasks, each
    one tile computed with `timewarp.cdist` on a worker. The values equal
    `timewarp.cdist(a, b, **params)`'s.

    `a`, `b`: as `timewarp.cdist` takes them (arrays ``(n, length[, dims])``
    or lists of series of any lengths; tensors are read to the host). They
    are cut into row blocks of `block` series (default: `block_rule`) and
    sent to the cluster once; with `b=None` only the tiles on and above the
    diagonal are computed, the diagonal ones in symmetric mode, and those
    below are their transposes. `client`: a ``distributed.Client``
    (default: the current one; none: dask's local threaded scheduler).
    `params`: `timewarp.cdist`'s (`metric`, `gamma`, `band`, `nu`,
    `lmbda`, `degree`, `normalize`, `device`, `precision`); `device` is
    resolved on each worker (``"auto"``: its GPU if usable).

    Compute it with ``.compute()`` (the default client) or
    ``client.compute(result, retries=2)``; keep it lazy to store it
    (``result.to_zarr(...)``) without ever holding the whole matrix.
    """
    params = _parameters(params)
    left, right = _inputs_for(a, b, params)
    client = _client(client)
    symmetric = right is None
    other = left if symmetric else right
    if block is None:
        workers, gpu = _on_gpu(client, params["device"])
        block = block_rule(
            left.count,
            other.count,
            left.mean_length,
            other.mean_length,
            workers,
            gpu,
            symmetric,
        )
    elif isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise InputError(f"block = {block!r}: must be an integer >= 1")
    block = int(block)

    token = uuid.uuid4().hex
    name = f"timewarp-cdist-{token}"
    rows = _blocks(left.count, block)
    columns = rows if symmetric else _blocks(other.count, block)
    graph, left_refs = _placed([left.rows(*r) for r in rows], f"timewarp-rows-{token}")
    right_refs = left_refs
    if not symmetric:
        right_graph, right_refs = _placed(
            [other.rows(*c) for c in columns], f"timewarp-columns-{token}"
        )
        graph.update(right_graph)

    tile = _Tile(tuple(sorted(params.items())))
    for i in range(len(rows)):
        for j in range(len(columns)):
            if not symmetric:
                graph[(name, i, j)] = (tile, left_refs[i], right_refs[j])
            elif i == j:
                graph[(name, i, j)] = (tile, left_refs[i])
            elif i < j:
                graph[(name, i, j)] = (tile, left_refs[i], right_refs[j])
            else:
                graph[(name, i, j)] = (np.transpose, (name, j, i))
    chunks = (
        tuple(stop - start for start, stop in rows),
        tuple(stop - start for start, stop in columns),
    )
    dtype = left.data[0].dtype if isinstance(left.data, list) else left.data.dtype
    layers = HighLevelGraph.from_collections(name, graph, dependencies=())
    return da.Array(layers, name, chunks, dtype=dtype)


# ---- knn ---------------------------------------------------------------------

# Shards kept where a worker computes them (on its GPU under "auto"), for
# the k-NN calls in progress: {(call token, shard index): Resident}.
_RESIDENT: Dict[Tuple[str, int], Any] = {}
_RESIDENT_LOCK = threading.Lock()


def _resident(token: str, index: int, shard: Any, device: str) -> Any:
    key = (token, index)
    with _RESIDENT_LOCK:
        found = _RESIDENT.get(key)
        if found is None:
            found = _ext.Resident(shard, device)
            _RESIDENT[key] = found
    return found


def _forget(token: str) -> None:
    """Run on the workers when a k-NN call ends: its resident shards go."""
    with _RESIDENT_LOCK:
        for key in [key for key in _RESIDENT if key[0] == token]:
            del _RESIDENT[key]


def _aligned(data: Any) -> Any:
    """A block as it arrived (possibly misaligned, from pickle protocol 5's
    buffers), aligned for the extension's own calls."""
    if isinstance(data, list):
        return [_inputs._contiguous(s, s.dtype) for s in data]
    return _inputs._contiguous(data, data.dtype)


@dataclass(frozen=True)
class _Nearest:
    """A task of `knn`: one query block against one shard, its `k` nearest
    (ties: the smaller index), indices global."""

    k: int
    token: str
    params: Tuple[Tuple[str, Any], ...]

    def __call__(
        self, queries: Any, shard: Any, index: int, offset: int
    ) -> Tuple[np.ndarray, np.ndarray]:
        params = dict(self.params)
        queries, shard = _aligned(queries), _aligned(shard)
        if params.get("normalize"):
            distances = _core.cdist(queries, shard, **params)
            k = min(self.k, distances.shape[1])
            order = np.argsort(distances, axis=1, kind="stable")[:, :k]
            return order.astype(np.int64) + offset, np.take_along_axis(distances, order, axis=1)
        # The shard stays where it is compared (GPU memory) for the next
        # query blocks: resident and streamed values agree bit for bit. Its
        # k nearest come from the extension (banded DTW on the CPU: with
        # lower bounds, the same neighbours).
        resident = _resident(self.token, index, shard, params["device"])
        distances, order, _ = resident.kneighbors(
            queries,
            min(self.k, len(resident)),
            _core._metric(params.get("metric", "dtw")),
            _core._float("gamma", params.get("gamma", 1.0)),
            _core._band(params.get("band")),
            _core._float("nu", params.get("nu", 0.001)),
            _core._float("lmbda", params.get("lmbda", 1.0)),
            _core._float("degree", params.get("degree", 2.0)),
        )
        return order + offset, distances


def _merge(k: int, *parts: Tuple[np.ndarray, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """The `k` nearest among candidate lists: by distance, then index."""
    indices = np.concatenate([p[0] for p in parts], axis=1)
    distances = np.concatenate([p[1] for p in parts], axis=1)
    order = np.lexsort((indices, distances), axis=-1)[:, :k]
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(distances, order, axis=1)


def knn(
    queries: Any,
    database: Any,
    k: int = 1,
    *,
    client: Any = None,
    block: Union[None, int, Tuple[int, int]] = None,
    retries: int = 2,
    **params: Any,
) -> Tuple[np.ndarray, np.ndarray]:
    """The `k` nearest series of `database` to each query: ``(indices,
    distances)``, numpy arrays of shape ``(n_queries, k)``, nearest first;
    equal distances go to the smaller database index, as
    ``np.argsort(timewarp.cdist(queries, database, **params), kind="stable")[:, :k]``.

    The database is cut into shards (default: one per worker) sent to the
    cluster once and kept where each worker computes (its GPU's memory);
    each task compares one block of queries with one shard and returns only
    that shard's `k` nearest, which a tree of merge tasks (`MERGE_FAN_IN`
    at a time) reduces per query block. No task holds more than a
    queries x shard tile. `block`: ``(queries per block, series per
    shard)``, or one number for both. `retries`: how often a task that
    raised is tried again before its error is raised here (a lost worker's
    tasks are recomputed regardless). Other arguments as `cdist`.
    """
    params = _parameters(params)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k = {k!r}: must be an integer >= 1")
    if isinstance(retries, bool) or not isinstance(retries, (int, np.integer)) or retries < 0:
        raise InputError(f"retries = {retries!r}: must be an integer >= 0")
    query_batch, database_batch = _inputs_for(queries, database, params)
    assert database_batch is not None
    if k > database_batch.count:
        raise InputError(f"k = {k} but the database has only {database_batch.count} series")
    client = _client(client)
    if block is None:
        workers, gpu = _on_gpu(client, params["device"])
        query_block, shard_size = _knn_blocks(
            query_batch.count,
            database_batch.count,
            query_batch.mean_length,
            database_batch.mean_length,
            workers,
            gpu,
        )
    else:
        sizes = (block, block) if not isinstance(block, (tuple, list)) else tuple(block)
        if len(sizes) != 2 or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 1 for s in sizes
        ):
            raise InputError(
                f"block = {block!r}: an integer >= 1 or (queries per block, series per shard)"
            )
        query_block, shard_size = int(sizes[0]), int(sizes[1])

    token = uuid.uuid4().hex
    shards = _blocks(database_batch.count, shard_size)
    query_blocks = _blocks(query_batch.count, query_block)
    graph, shard_refs = _placed(
        [database_batch.rows(*s) for s in shards], f"timewarp-shard-{token}"
    )
    query_graph, query_refs = _placed(
        [query_batch.rows(*q) for q in query_blocks], f"timewarp-query-{token}"
    )
    graph.update(query_graph)

    nearest = _Nearest(int(k), token, tuple(sorted(params.items())))
    name = f"timewarp-knn-{token}"
    outputs = []
    for q, query_ref in enumerate(query_blocks):
        level = []
        for s, (start, _) in enumerate(shards):
            key = (f"{name}-tile", q, s)
            graph[key] = (nearest, query_refs[q], shard_refs[s], s, start)
            level.append(key)
        depth = 0
        while len(level) > 1:
            merged = []
            for m, first in enumerate(range(0, len(level), MERGE_FAN_IN)):
                key = (f"{name}-merge", q, depth, m)
                graph[key] = (_merge, int(k), *level[first : first + MERGE_FAN_IN])
                merged.append(key)
            level, depth = merged, depth + 1
        outputs.append(level[0])

    try:
        if client is None:
            results = dask.threaded.get(graph, outputs)
        else:
            results = client.get(graph, outputs, retries=int(retries), sync=True)
    finally:
        if client is None:
            _forget(token)
        else:
            try:
                client.run(_forget, token)
            except Exception:  # a worker gone meanwhile holds nothing any more
                pass
    indices = np.concatenate([r[0] for r in results], axis=0)
    distances = np.concatenate([r[1] for r in results], axis=0)
    return indices, distances
