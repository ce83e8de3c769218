"""Distance matrices, k-nearest neighbours and subsequence search over a
Dask cluster.

    >>> from distributed import Client
    >>> client = Client("tcp://scheduler:8786")  # or Client() for a local cluster
    >>> d = timewarp.dask.cdist(x, metric="dtw")  # a dask.array.Array of tiles
    >>> d.compute()                                # == timewarp.cdist(x)
    >>> timewarp.dask.search(query, long_series)  # == timewarp.search(query, long_series)

Each task computes one tile with `timewarp.cdist` on its worker (on that
worker's GPU 0 under ``device="auto"``, which is the worker's own GPU when
each worker sees one GPU through CUDA_VISIBLE_DEVICES). The inputs are cut
into row blocks that go to the cluster once, as data of the task graph
(which the scheduler can send again if the workers holding a block are
lost); the tasks refer to them. The blocks are sized so that the tiles'
cost (in cells) shares out evenly over the workers, and each computing
task carries its cost to the scheduler (annotations: ``timewarp_cells``,
and a ``priority`` that starts the costliest first). docs/dask.md has the
block rule, what moves over the network and the fault behaviour. `search`
cuts a long series (a numpy array, a memory map, a dask array) into
overlapping pieces, a task each, and chooses the matches again over what
the pieces return: the single call's matches, bit for bit (the scheme is
at "search" below).

Needs ``pip install "dask[array]" distributed`` (distributed for clusters;
without a client the work runs on dask's local threaded scheduler).
"""

from __future__ import annotations

import bisect
import functools
import math
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.threaded
    from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
except ImportError as error:  # pragma: no cover - exercised without dask
    raise ImportError('timewarp.dask needs Dask: pip install "dask[array]" distributed') from error

from . import _core, _inputs, _search
from . import _timewarp as _ext
from ._errors import InputError

__all__ = ["block_rule", "cdist", "knn", "search"]

# ---- The block rule --------------------------------------------------------
#
# A tile should hold enough work that the per-task cost (scheduling, a few
# milliseconds; moving its blocks; on a GPU, staging) is small beside it, and
# the tiles should be many enough that every worker gets several (load
# balance, and a lost worker costs only its tiles). Work is counted in
# dynamic-programming cells (pairs x length_a x length_b); a diagonal tile
# of a batch against itself computes each pair once, so it costs about half
# of an off-diagonal one of the same size.

#: Cells a tile aims at on a GPU: 2^40, about 0.25 s of f32 DTW on an H200
#: (DTW reaches about 4.5 TCUPS at L = 512), seconds of Soft-DTW.
GPU_TILE_CELLS = 2**40
#: Cells a tile aims at on a CPU worker: 2^31, about a second of DTW on a
#: few cores.
CPU_TILE_CELLS = 2**31
#: When the matrix is large enough, the tiles' total cost is at least this
#: many times the costliest tile's per worker (cost counted, not tiles): any
#: greedy order of the tiles (each worker taking the next one when it is
#: free, whatever their costs) then ends within 1/8 of the mean.
TILES_PER_WORKER = 8
#: The most a worker may get over the mean cost (1.1: 10 %) when the tiles
#: are handed out greedily, largest first (`_greedy_loads`); the rule takes
#: the largest block that meets this and `TILES_PER_WORKER`.
BALANCE = 1.1
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
#: The annotation that carries each computing task's cost, in cells, to the
#: scheduler (beside ``priority``: the costlier, the sooner).
COST_ANNOTATION = "timewarp_cells"

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

#: Tile costs as (cost of one tile, how many tiles cost that).
Costs = List[Tuple[float, int]]


def _greedy_loads(costs: Sequence[Tuple[float, int]], workers: int) -> List[float]:
    """Each worker's finishing time (total cost), sorted from the most
    loaded, when the tiles of `costs` ((cost, count) pairs) are handed out
    largest first, each to the worker least loaded so far (LPT list
    scheduling). Exact, in time independent of the counts: a group of
    equal tiles goes round the workers whole rounds at a time once the
    loads are within one tile of each other."""
    loads = [0.0] * max(int(workers), 1)
    for cost, count in sorted(costs, key=lambda group: -group[0]):
        cost, left = float(cost), int(count)
        if cost <= 0.0:
            continue
        while left > 0:
            loads.sort()
            if loads[-1] - loads[0] <= cost:
                # Each tile lifts the least loaded above all others: whole
                # rounds add `cost` to every worker, the rest go to the
                # least loaded, one each.
                rounds, rest = divmod(left, len(loads))
                loads = [
                    load + rounds * cost + (cost if i < rest else 0.0)
                    for i, load in enumerate(loads)
                ]
                left = 0
            else:
                # The least loaded takes tiles until it passes the next one.
                taken = min(left, int((loads[1] - loads[0]) // cost) + 1)
                loads[0] += taken * cost
                left -= taken
    return sorted(loads, reverse=True)


def _spread(costs: Sequence[Tuple[float, int]], workers: int) -> float:
    """The most loaded worker's cost over the mean, under `_greedy_loads`
    (1.0: even; inf without any cost)."""
    loads = _greedy_loads(costs, workers)
    total = sum(loads)
    return loads[0] * len(loads) / total if total > 0 else math.inf


def _sizes(count: int, block: int) -> List[Tuple[int, int]]:
    """Blocks of `block` series over `count`, as (size, how many)."""
    full, rest = divmod(count, block)
    return [(block, full)] + ([(rest, 1)] if rest else [])


def _tile_costs(
    rows: int,
    columns: int,
    block: int,
    row_length: float,
    column_length: float,
    symmetric: bool = False,
) -> Costs:
    """The costs (cells, for series of the mean lengths given) of the tiles
    `cdist` computes with blocks of `block` series: every tile, or with
    `symmetric` (a batch of `rows` series against itself) those on and
    above the diagonal, a diagonal tile of b series costing b (b + 1) / 2
    pairs."""
    per_pair = max(row_length * column_length, 1.0)
    costs: Costs = []
    if not symmetric:
        for size_r, count_r in _sizes(rows, block):
            for size_c, count_c in _sizes(columns, block):
                costs.append((size_r * size_c * per_pair, count_r * count_c))
    else:
        sizes = _sizes(rows, block)
        for index, (size_a, count_a) in enumerate(sizes):
            costs.append((size_a * (size_a + 1) / 2 * per_pair, count_a))
            costs.append((size_a * size_a * per_pair, count_a * (count_a - 1) // 2))
            for size_b, count_b in sizes[index + 1 :]:
                costs.append((size_a * size_b * per_pair, count_a * count_b))
    return [(cost, count) for cost, count in costs if count > 0]


def _balanced(costs: Sequence[Tuple[float, int]], workers: int) -> bool:
    """Whether tiles of these costs share out over `workers`: their total is
    at least `TILES_PER_WORKER` of the costliest per worker, and handed out
    largest first no worker gets more than `BALANCE` times the mean."""
    total = sum(cost * count for cost, count in costs)
    costliest = max((cost for cost, count in costs if count > 0), default=0.0)
    if total <= 0 or total < TILES_PER_WORKER * max(workers, 1) * costliest:
        return False
    return _spread(costs, workers) <= BALANCE


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

    The largest block of at most ``min(work, MAX_BLOCK)`` series that cuts
    the longer side into equal blocks (``ceil(n / parts)``) and whose tiles
    share out evenly over `workers`: their total cost is at least
    `TILES_PER_WORKER` times the costliest tile's per worker, and handed out
    largest first (`_greedy_loads`) no worker gets more than `BALANCE`
    times the mean. Costs count cells (pairs x the mean lengths given), the
    diagonal tiles of a batch against itself (`symmetric`) at their half.
    `work` is the block whose square tile holds the target cells (2^40 on a
    GPU, 2^31 on a CPU). Blocks do not go below `MIN_BLOCK` series (nor
    below `work` when that is smaller, nor below 1): a matrix too small to
    share out evenly gets blocks of that size, the most tiles allowed."""
    cells = GPU_TILE_CELLS if gpu else CPU_TILE_CELLS
    work = math.sqrt(cells / max(row_length * column_length, 1.0))
    rows, columns = max(int(rows), 1), max(int(columns), 1)
    longest = rows if symmetric else max(rows, columns)
    top = max(1, min(math.floor(work), MAX_BLOCK, longest))
    bottom = min(top, MIN_BLOCK)
    parts = math.ceil(longest / top)
    while True:
        block = math.ceil(longest / parts)
        if block < bottom:
            return bottom
        costs = _tile_costs(
            rows, rows if symmetric else columns, block, row_length, column_length, symmetric
        )
        if _balanced(costs, workers):
            return block
        if block == 1:
            return 1
        parts = max(parts + 1, math.ceil(longest / (block - 1)))


def _knn_blocks(
    queries: int,
    database: int,
    query_length: float,
    database_length: float,
    workers: int,
    gpu: bool,
) -> Tuple[int, int]:
    """(queries per block, series per shard) of `knn`: one shard per worker
    (each holds its part of the database, resident where it computes, and
    computes every query block against it: the shards' sizes, equal to
    within one block's rounding, share the work), and query blocks of equal
    size whose tile against a shard holds the target cells (at least one
    query, at most MAX_TILE_ENTRIES entries)."""
    shard = math.ceil(database / max(workers, 1))
    cells = GPU_TILE_CELLS if gpu else CPU_TILE_CELLS
    per_query = shard * max(query_length * database_length, 1.0)
    block = int(max(1, min(math.floor(min(cells / per_query, MAX_TILE_ENTRIES / shard)), queries)))
    return math.ceil(queries / math.ceil(queries / block)), shard


def _knn_tile_costs(
    queries: int,
    database: int,
    query_block: int,
    shard: int,
    query_length: float,
    database_length: float,
) -> Costs:
    """The costs (cells) of `knn`'s tasks: every query block against every
    shard."""
    per_pair = max(query_length * database_length, 1.0)
    return [
        (size_q * size_s * per_pair, count_q * count_s)
        for size_q, count_q in _sizes(queries, query_block)
        for size_s, count_s in _sizes(database, shard)
    ]


# ---- Costs for the scheduler -------------------------------------------------


@dataclass(frozen=True)
class _PerKey:
    """A layer annotation with a value per task key (dask calls it with each
    key of the layer); keys not listed get `default` (None: no annotation
    for that key)."""

    values: Dict[Any, Any]
    default: Any

    def __call__(self, key: Any) -> Any:
        return self.values.get(key, self.default)


def _annotations(costs: Dict[Any, int]) -> Dict[str, Any]:
    """A layer's annotations for the computing tasks `costs` ({key: cells}):
    their cost (`COST_ANNOTATION`), and a ``priority`` that starts the
    costliest first: the priority in force (``dask.annotate``, default 0)
    for the costliest, one less for each smaller cost. Other tasks of the
    layer (a transpose) keep the priority in force, so that what consumes a
    finished tile runs before the smaller tiles start (a tile is not held
    longer than it must be). Annotations in force otherwise are kept."""
    inherited = dict(dask.get_annotations())
    base = inherited.get("priority", 0)
    if not isinstance(base, (int, float)) or isinstance(base, bool):
        base = 0  # a callable or odd priority in force: ours relative to 0
    ranks = {cost: rank for rank, cost in enumerate(sorted(set(costs.values()), reverse=True))}
    priorities = {key: base - ranks[cost] for key, cost in costs.items()}
    inherited["priority"] = _PerKey(priorities, base)
    inherited[COST_ANNOTATION] = _PerKey(dict(costs), None)  # None: not sent
    return inherited


# ---- Inputs ------------------------------------------------------------------


@dataclass
class _Batch:
    """A batch cast to the precision of the whole computation."""

    data: Union[np.ndarray, List[np.ndarray]]  # (n, length, dims) or a list of (length, dims)
    count: int
    dims: int
    mean_length: float
    lengths: np.ndarray  # each series' length (int64)

    def rows(self, start: int, stop: int):
        return self.data[start:stop]

    def samples(self, start: int, stop: int) -> int:
        """The samples of series `start` to `stop` (the sum of their lengths)."""
        return int(self.lengths[start:stop].sum())

    def self_pairs(self, start: int, stop: int) -> int:
        """The cells of the pairs of series `start` to `stop` among
        themselves, each pair once and each series with itself: a diagonal
        tile's cost, ``(S^2 + sum of squared lengths) / 2``."""
        lengths = self.lengths[start:stop]
        return (int(lengths.sum()) ** 2 + int((lengths * lengths).sum())) // 2


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
        lengths = [data.shape[1]] * data.shape[0]
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
    return _Batch(
        data,
        prepared.count,
        int(dims),
        float(np.mean(lengths)),
        np.asarray(lengths, dtype=np.int64),
    )


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


def _layered(
    name: str,
    tasks: Dict[Any, Any],
    costs: Dict[Any, int],
    data: Dict[Any, Any],
    collections: Sequence[Any] = (),
) -> HighLevelGraph:
    """A graph of two layers: `data` (the blocks, see `_placed`) and, named
    `name`, the `tasks`, annotated with the `costs` of those that compute
    (`_annotations`); with the layers of the dask `collections` the tasks
    also read. Dask's low-level fusion (``optimization.fuse.active``,
    on by default for arrays) rebuilds the graph without its layers' annotations:
    with it off (or ``optimize_graph=False``) they reach the scheduler."""
    data_name = f"{name}-data"
    layers: Dict[str, Any] = {}
    dependencies: Dict[str, Any] = {}
    below = {data_name}
    for collection in collections:
        graph = collection.__dask_graph__()
        if not isinstance(graph, HighLevelGraph):
            graph = HighLevelGraph.from_collections(collection.name, graph)
        layers.update(graph.layers)
        dependencies.update(graph.dependencies)
        below.update(collection.__dask_layers__())
    layers[data_name] = MaterializedLayer(data)
    layers[name] = MaterializedLayer(tasks, annotations=_annotations(costs))
    dependencies[data_name] = set()
    dependencies[name] = below
    return HighLevelGraph(layers, dependencies)


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
    tiles: Dict[Any, Any] = {}
    costs: Dict[Any, int] = {}
    left_samples = [left.samples(*r) for r in rows]
    right_samples = left_samples if symmetric else [other.samples(*c) for c in columns]
    for i in range(len(rows)):
        for j in range(len(columns)):
            key = (name, i, j)
            if symmetric and i == j:
                tiles[key] = (tile, left_refs[i])
                costs[key] = left.self_pairs(*rows[i])
            elif not symmetric or i < j:
                tiles[key] = (tile, left_refs[i], right_refs[j])
                costs[key] = left_samples[i] * right_samples[j]
            else:
                tiles[key] = (np.transpose, (name, j, i))
    chunks = (
        tuple(stop - start for start, stop in rows),
        tuple(stop - start for start, stop in columns),
    )
    dtype = left.data[0].dtype if isinstance(left.data, list) else left.data.dtype
    return da.Array(_layered(name, tiles, costs, graph), name, chunks, dtype=dtype)


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


def _knn_graph(
    queries: _Batch,
    database: _Batch,
    k: int,
    query_block: int,
    shard_size: int,
    token: str,
    params: Dict[str, Any],
) -> Tuple[HighLevelGraph, List[Any]]:
    """`knn`'s graph and its outputs (one per query block): the shards and
    query blocks as data, a task per query block and shard annotated with
    its cost (`_annotations`), and each query block's tree of merges."""
    shards = _blocks(database.count, shard_size)
    query_blocks = _blocks(queries.count, query_block)
    data, shard_refs = _placed([database.rows(*s) for s in shards], f"timewarp-shard-{token}")
    query_data, query_refs = _placed(
        [queries.rows(*q) for q in query_blocks], f"timewarp-query-{token}"
    )
    data.update(query_data)

    nearest = _Nearest(k, token, tuple(sorted(params.items())))
    name = f"timewarp-knn-{token}"
    tasks: Dict[Any, Any] = {}
    costs: Dict[Any, int] = {}
    shard_samples = [database.samples(*s) for s in shards]
    outputs = []
    for q, query_rows in enumerate(query_blocks):
        level = []
        query_samples = queries.samples(*query_rows)
        for s, (start, _) in enumerate(shards):
            key = (f"{name}-tile", q, s)
            tasks[key] = (nearest, query_refs[q], shard_refs[s], s, start)
            costs[key] = query_samples * shard_samples[s]
            level.append(key)
        depth = 0
        while len(level) > 1:
            merged = []
            for m, first in enumerate(range(0, len(level), MERGE_FAN_IN)):
                key = (f"{name}-merge", q, depth, m)
                tasks[key] = (_merge, k, *level[first : first + MERGE_FAN_IN])
                merged.append(key)
            level, depth = merged, depth + 1
        outputs.append(level[0])
    return _layered(name, tasks, costs, data), outputs


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
    graph, outputs = _knn_graph(
        query_batch, database_batch, int(k), query_block, shard_size, token, params
    )
    try:
        if client is None:
            results = dask.threaded.get(dict(graph), outputs)
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


# ---- search ------------------------------------------------------------------
#
# The series is cut into pieces of consecutive starts; each piece is sent
# with the m - 1 samples after its last start, so consecutive pieces overlap
# by m - 1 samples and every start lies whole in exactly one piece. A
# start's cost does not depend on the piece it is searched in (its window's
# own two-pass z-normalisation, then the DTW, which an early abandon only
# skips), so the costs are the single call's.
#
# The matches are the greedy choice over all starts ordered by (cost,
# start), each at least `e` (the exclusion) from those before. The greedy
# never looks past its last match, so choosing again over any set of starts
# that holds every start up to the last match gives the same matches. Each
# piece sends its best starts in that order, with no exclusion, up to its
# k-th witness: the k-th pick of the same greedy with the zone 2 e - 1 over
# the piece (all its starts if it has fewer than k). Witnesses are 2 e - 1
# apart, and a match's zone (2 e - 1 consecutive starts) holds at most one
# of them, so after j < k matches one witness of every piece is still
# free: every match comes no later than any piece's k-th witness, and
# every start up to the last match is sent (the single call's threshold
# rests on the same witnesses, host/search/select.rs). A piece asks the
# library for its best `keep` starts and finds its witnesses among them
# (the greedy over a prefix is the greedy over all up to the prefix's end),
# asking again for 4 times more if they are not all there. A witness
# rejects at most the 4 e - 4 starts within 2 e - 2 of it, so the first
# (k - 1) (4 e - 3) + 1 starts always hold k witnesses (`_most_needed`): at
# most log4 of that over the first ask more calls. The first ask
# (`_first_ask`) covers what random walks need, 2 to 30 starts a match.
#
# The pieces return distances (the square roots of the costs), and two
# costs 1 ulp apart may have one square root: where starts of different
# pieces have equal distances, their order by cost is asked of the library
# (`_order_ties`). Within a piece the order is the returned one.

#: Pieces a worker gets by default: a slow or lost worker then costs a
#: fraction of its share.
SEARCH_CHUNKS_PER_WORKER = 4
#: Starts a piece holds at least by default (2^20: tens of milliseconds of
#: search on a few cores, far above a task's scheduling).
MIN_SEARCH_STARTS = 2**20


def _most_needed(k: int, exclusion: int) -> int:
    """The best starts of a piece that always hold its k witnesses (above)."""
    if exclusion <= 1:
        return k
    return (k - 1) * (4 * exclusion - 3) + 1


def _first_ask(k: int, exclusion: int, m: int) -> int:
    """The best starts a piece asks for first: `k` when any two starts may
    both be matches, else ``k * max(4, m // 8)`` (at most `_most_needed`).
    Random walks put the k-th witness at 2 to 5 k for m = 64 and 128, up
    to 30 k for m = 512."""
    if exclusion <= 1:
        return k
    return min(k * max(4, m // 8), _most_needed(k, exclusion))


def _near(taken: List[int], start: int, zone: int) -> bool:
    """Whether `start` is within `zone` (exclusive) of a start of `taken`
    (sorted); a zone <= 1 only excludes a start itself."""
    at = bisect.bisect_left(taken, start)
    if at < len(taken) and taken[at] - start < max(zone, 1):
        return True
    return at > 0 and start - taken[at - 1] < max(zone, 1)


def _witnesses(starts: Sequence[int], k: int, exclusion: int) -> Optional[int]:
    """How many of `starts` (best first) run up to the k-th witness (the
    greedy's k-th pick with the zone 2 e - 1), or None if they hold fewer."""
    zone = 2 * exclusion - 1
    taken: List[int] = []
    for index, start in enumerate(starts):
        if _near(taken, start, zone):
            continue
        bisect.insort(taken, start)
        if len(taken) == k:
            return index + 1
    return None


class _NonFinite(NamedTuple):
    """Where a piece's first non-finite value is (ordered by place)."""

    sample: int  # in the whole series
    dimension: int
    value: float
    dims: int


def _first_non_finite(piece: np.ndarray, offset: int) -> Optional[_NonFinite]:
    values = np.asarray(piece)
    flat = values.reshape(values.shape[0], -1)
    bad = ~np.isfinite(flat)
    if not bad.any():
        return None
    sample, dimension = divmod(int(np.argmax(bad.reshape(-1))), flat.shape[1])
    value = float(flat[sample, dimension])
    return _NonFinite(offset + sample, dimension, value, flat.shape[1])


def _non_finite_error(found: _NonFinite) -> InputError:
    """The single call's error for the series' first non-finite value."""
    sample, dimension, value, dims = found
    text = "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    where = f", dimension {dimension}" if dims > 1 else ""
    return InputError(
        f"invalid input: the series has a non-finite value ({text}) at sample {sample}{where}"
    )


@dataclass(frozen=True)
class _Piece:
    """A task of `search`: `timewarp.search` on one piece (its starts and
    the m - 1 samples after them, given as consecutive blocks) with no
    exclusion, its best starts up to its k-th witness (above), by (cost,
    start), made global, with the statistics of the call they come from.
    A piece with a non-finite value returns its first (`_NonFinite`)
    rather than raising, so that the call can name the series' first."""

    band: Any
    k: int
    exclusion: int
    first_ask: int
    znorm: bool
    device: str

    def __call__(self, query: np.ndarray, offset: int, length: int, *blocks: Any) -> Any:
        piece = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        piece = piece[:length]
        most = _most_needed(self.k, self.exclusion)
        keep = self.first_ask
        while True:
            try:
                starts, distances, stats = _search.search(
                    query, piece, self.band, keep, self.znorm, 0, self.device
                )
            except InputError:
                found = _first_non_finite(piece, offset)
                if found is None:
                    raise
                return found
            end = _witnesses(starts.tolist(), self.k, self.exclusion)
            if end is None and len(starts) == keep and keep < most:
                keep = min(4 * keep, most)
                continue
            end = len(starts) if end is None else end
            return starts[:end] + offset, distances[:end], stats


def _search_query(query: Any) -> np.ndarray:
    """The query as `timewarp.search` reads it: float64 ``(m, dims)``."""
    prepared = _inputs.series(query, "query")
    if prepared.origin.kind == "torch" and prepared.origin.torch_device.type != "cpu":
        raise InputError("query: search takes CPU tensors (it runs on the CPU)")
    return _inputs.cast(prepared, np.dtype(np.float64))[0]


def _search_series(series: Any) -> Any:
    """A dask array as it is, anything else as a numpy ``(length, dims)``
    view in its own dtype (a memory map stays one: pieces are read when
    they are sent)."""
    if isinstance(series, da.Array):
        if any(isinstance(size, float) and math.isnan(size) for size in series.shape):
            raise InputError(
                "series: a dask array of unknown length (call its compute_chunk_sizes() first)"
            )
        return series
    prepared = _inputs.series(series, "series")
    if prepared.origin.kind == "torch" and prepared.origin.torch_device.type != "cpu":
        raise InputError("series: search takes CPU tensors (it runs on the CPU)")
    return prepared.data[0]


@dataclass
class _Pieces:
    """How `search`'s tasks get their pieces: graph `data` (a numpy
    series' pieces), `tasks` that cut blocks, each piece's `blocks` (keys,
    in order) and the dask `collections` the keys come from."""

    data: Dict[Any, Any]
    tasks: Dict[Any, Any]
    blocks: List[List[Any]]
    collections: List[Any]


def _search_pieces(series: Any, m: int, bounds: List[Tuple[int, int]], name: str) -> _Pieces:
    """A numpy series' pieces are data of the graph (views until they are
    sent); a dask array is rechunked at the pieces' first starts, and each
    piece is its chunk and the first m - 1 samples of those after it (cut
    by tasks where they are, so that only those samples move)."""
    if not isinstance(series, da.Array):
        pieces = [series[first : stop + m - 1] for first, stop in bounds]
        data, keys = _placed(pieces, f"{name}-piece")
        return _Pieces(data, {}, [[key] for key in keys], [])
    length = series.shape[0]
    sizes = [stop - first for first, stop in bounds[:-1]] + [length - bounds[-1][0]]
    axes: Dict[int, Any] = {0: tuple(sizes)}
    if series.ndim == 2:
        axes[1] = -1
    rechunked = series.rechunk(axes)

    def chunk(index: int) -> Any:
        return (rechunked.name, index) if series.ndim == 1 else (rechunked.name, index, 0)

    entries: Dict[Any, Any] = {}
    blocks = []
    for index in range(len(bounds)):
        keys = [chunk(index)]
        needed, after = (m - 1 if index + 1 < len(bounds) else 0), index + 1
        while needed > 0:
            head = (f"{name}-head", after)
            entries[head] = (_head, chunk(after), m - 1)
            keys.append(head)
            needed -= min(sizes[after], m - 1)
            after += 1
        blocks.append(keys)
    return _Pieces({}, entries, blocks, [rechunked])


def _head(block: np.ndarray, count: int) -> np.ndarray:
    return block[:count]


def _windows(series: Any, starts: Sequence[int], m: int, client: Any) -> np.ndarray:
    """The windows at `starts`, one after the other."""
    parts = [series[start : start + m] for start in starts]
    if not isinstance(series, da.Array):
        return np.concatenate(parts)
    joined = da.concatenate(parts)
    if client is None:
        return np.asarray(joined.compute(scheduler="threads"))
    return np.asarray(client.compute(joined).result())


#: A start that a piece returned: (distance, start, piece, rank in the piece).
_Entry = Tuple[float, int, int, int]


def _order_ties(
    group: List[_Entry],
    series: Any,
    client: Any,
    query: np.ndarray,
    band: Any,
    znorm: bool,
) -> List[_Entry]:
    """Starts of several pieces at one distance, in the order of their
    costs, then starts: the library searches their windows laid end to end
    (in the order of their starts) for every start, with no exclusion, and
    the windows' own starts come back in that order (a window's cost is
    its own wherever it is searched)."""
    m = query.shape[0]
    starts = sorted(entry[1] for entry in group)
    joined = _windows(series, starts, m, client)
    found, distances, _ = _search.search(query, joined, band, len(joined) - m + 1, znorm, 0, "cpu")
    order = [
        (start // m, d) for start, d in zip(found.tolist(), distances.tolist()) if start % m == 0
    ]
    if len(order) != len(starts) or any(d != group[0][0] for _, d in order):
        raise RuntimeError(
            "timewarp.dask.search: a window's distance changed with its context "
            f"(starts {starts}): please report this"
        )
    by_start = {entry[1]: entry for entry in group}
    return [by_start[starts[index]] for index, _ in order]


def _choose(
    parts: Sequence[Tuple[np.ndarray, np.ndarray, Any]],
    k: int,
    exclusion: int,
    order_ties: Callable[[List[_Entry]], List[_Entry]],
) -> Tuple[List[int], List[float]]:
    """The greedy choice over the pieces' starts (`search`): ordered by
    distance, then start, except that equal distances are ordered by cost
    (a piece's own in its order, several pieces' by `order_ties`); each
    pick at least `exclusion` from those before (<= 1: any two starts)."""
    entries = [
        (distance, start, piece, rank)
        for piece, (starts, distances, _) in enumerate(parts)
        for rank, (start, distance) in enumerate(zip(starts.tolist(), distances.tolist()))
    ]
    entries.sort(key=lambda entry: (entry[0], entry[1]))
    starts: List[int] = []
    distances: List[float] = []
    taken: List[int] = []
    first = 0
    while first < len(entries) and len(starts) < k:
        last = first + 1
        while last < len(entries) and entries[last][0] == entries[first][0]:
            last += 1
        group = entries[first:last]
        if len({entry[2] for entry in group}) > 1:
            group = order_ties(group)
        else:
            group.sort(key=lambda entry: entry[3])
        for distance, start, _, _ in group:
            if len(starts) == k:
                break
            if _near(taken, start, exclusion):
                continue
            bisect.insort(taken, start)
            starts.append(start)
            distances.append(distance)
        first = last
    return starts, distances


def search(
    query: Any,
    series: Any,
    band: Any = 0.05,
    k: int = 1,
    znorm: bool = True,
    exclusion: Optional[int] = None,
    device: str = "auto",
    *,
    client: Any = None,
    chunk: Optional[int] = None,
    retries: int = 2,
) -> Tuple[np.ndarray, np.ndarray, Dict[str, int]]:
    """`timewarp.search` over the workers: the `k` best matches of `query`
    in `series`, ``(starts, distances, stats)``, the same starts and
    distances as ``timewarp.search(query, series, band, k, znorm,
    exclusion, device)``, bit for bit.

    `series`: a dask array ``(length,)`` or ``(length, dims)``, or what
    `timewarp.search` takes (a numpy array, a memory map, a CPU tensor). It
    is cut into pieces of `chunk` samples (default: `SEARCH_CHUNKS_PER_WORKER`
    pieces a worker, at least `MIN_SEARCH_STARTS` starts each) that overlap
    by ``m - 1``, so each start is searched in exactly one; each task runs
    `timewarp.search` on its piece (``device`` resolved there: under
    ``"auto"`` the library's rule on the piece's length) and returns its
    best starts, and the matches are chosen again over them here
    (docs/dask.md, "search", says why that is the single call's choice).
    `stats`: ``candidates``, ``kim``, ``keogh_query``, ``keogh_data``,
    ``dtw``, ``abandoned`` summed over the pieces (``candidates`` is every
    start, as the single call's; the others depend on the pieces'
    thresholds), ``radius`` and ``exclusion`` as the single call's.
    `client`, `retries`: as `knn`'s. Bad input raises what
    `timewarp.search` raises, before any work is sent, but a non-finite
    value of the series, which the tasks find (the error names the first
    one's place in the whole series).
    """
    _search._check_k_and_exclusion(k, exclusion)
    if isinstance(retries, bool) or not isinstance(retries, (int, np.integer)) or retries < 0:
        raise InputError(f"retries = {retries!r}: must be an integer >= 0")
    q = _search_query(query)
    m = q.shape[0]
    source = _search_series(series)
    shape = tuple(source.shape)
    length = int(shape[0]) if shape else 0
    # The library checks the rest (the query's length and values, the
    # dimensions, the band) on a series of zeros shaped as this one.
    probe = np.zeros((min(m, length),) + shape[1:] if shape else (), dtype=source.dtype)
    _, _, checked = _search.search(q, probe, band, k, znorm, exclusion, "cpu")
    device = _check_device(device)
    client = _client(client)

    starts = length - m + 1
    if chunk is None:
        workers = 1 if client is None else max(len(client.nthreads()), 1)
        per_piece = max(math.ceil(starts / (SEARCH_CHUNKS_PER_WORKER * workers)), MIN_SEARCH_STARTS)
    elif isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < m:
        raise InputError(
            f"chunk = {chunk!r}: the samples a task searches, at least the query's ({m})"
        )
    else:
        per_piece = int(chunk) - m + 1
    bounds = [(first, min(first + per_piece, starts)) for first in range(0, starts, per_piece)]
    e, radius = int(checked["exclusion"]), int(checked["radius"])

    token = uuid.uuid4().hex
    name = f"timewarp-search-{token}"
    pieces = _search_pieces(source, m, bounds, name)
    data, query_refs = _placed([q], f"{name}-query")
    data.update(pieces.data)
    task = _Piece(band, int(k), e, _first_ask(int(k), e, m), bool(znorm), device)
    tasks: Dict[Any, Any] = dict(pieces.tasks)
    costs: Dict[Any, int] = {}
    outputs = []
    for index, (first, stop) in enumerate(bounds):
        key = (name, index)
        tasks[key] = (task, query_refs[0], first, stop - first + m - 1, *pieces.blocks[index])
        # The cells of every start's banded DTW: a bound (most are pruned).
        costs[key] = (stop - first) * m * (2 * radius + 1)
        outputs.append(key)
    graph = _layered(name, tasks, costs, data, pieces.collections)
    if client is None:
        results = dask.threaded.get(dict(graph), outputs)
    else:
        results = client.get(graph, outputs, retries=int(retries), sync=True)

    bad = [result for result in results if isinstance(result, _NonFinite)]
    if bad:
        raise _non_finite_error(min(bad))

    order_ties = functools.partial(
        _order_ties, series=source, client=client, query=q, band=band, znorm=bool(znorm)
    )
    found, distances = _choose(results, int(k), e, order_ties)
    stats = {
        key: sum(int(result[2][key]) for result in results)
        for key in checked
        if key not in ("radius", "exclusion")
    }
    stats["radius"], stats["exclusion"] = radius, e
    return np.asarray(found, dtype=np.int64), np.asarray(distances, dtype=np.float64), stats
