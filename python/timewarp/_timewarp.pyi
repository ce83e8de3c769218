"""Types of `timewarp._timewarp`, the compiled extension (python/src/).

The Python layer (`timewarp/_core.py` and its siblings) normalises every
input before it calls these functions: a batch is a C-contiguous array of
`count x length x dims` or a list of `length x dims` arrays, all float32 or
all float64, and a result has the batch's precision. The names of the
parameters are the extension's, which also accepts them by keyword.
"""

import os
from typing import Any, Literal, Optional, Sequence, TypeVar, Union, final, overload

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "__version__",
    "cdist",
    "soft_dtw_pairs",
    "soft_dtw_pairs_cuda",
    "soft_dtw_cuda_output_len",
    "load",
    "dtw_path",
    "twed_path",
    "soft_dtw_alignment",
    "search",
    "subsequence_alignment",
    "info",
    "gpu_available",
    "Resident",
]

__version__: str

# The precision of a call: float32 in, float32 out; float64 likewise.
# Batches of two precisions in one call are an error.
_F = TypeVar("_F", np.float32, np.float64)

# A normalised batch: one 3-D array, or a list of 2-D arrays (lengths that
# differ).
_Batch = Union[NDArray[_F], Sequence[NDArray[_F]]]

# Gradients come back as one 3-D array where the batch's lengths are equal,
# else as a 2-D array a series.
_Gradient = Union[NDArray[_F], list[NDArray[_F]]]

_FloatArray = Union[NDArray[np.float32], NDArray[np.float64]]

# Errors are raised as the classes of `timewarp._errors` (TimewarpError and
# its kinds), which the extension imports rather than defines.

def cdist(
    a: _Batch[_F],
    b: Optional[_Batch[_F]],
    metric_name: str,
    gamma: float,
    band: Optional[int],
    nu: float,
    lmbda: float,
    degree: float,
    divergence: bool,
    device_name: str,
) -> NDArray[_F]:
    """The distance matrix of `a` (rows) against `b` (columns), or of `a`
    against itself when `b` is None."""

@overload
def soft_dtw_pairs(
    x: _Batch[_F],
    y: _Batch[_F],
    gamma: float,
    band: Optional[int],
    divergence: bool,
    device_name: str,
    gradient: Literal[False],
    with_respect_to_y: bool,
) -> NDArray[_F]: ...
@overload
def soft_dtw_pairs(
    x: _Batch[_F],
    y: _Batch[_F],
    gamma: float,
    band: Optional[int],
    divergence: bool,
    device_name: str,
    gradient: Literal[True],
    with_respect_to_y: bool,
) -> tuple[NDArray[_F], _Gradient[_F], Optional[_Gradient[_F]]]:
    """Paired Soft-DTW, `sdtw(x[k], y[k])` for every `k`: the values, or
    with `gradient` the values, the gradient with respect to `x`, and with
    `with_respect_to_y` the one with respect to `y` (else None). The Python
    layer always passes `gradient` as a literal, which picks the result's
    type."""
def soft_dtw_cuda_output_len(
    x_shape: tuple[int, int, int],
    y_shape: tuple[int, int, int],
    divergence: bool,
    outputs: str,
) -> int:
    """The values of the output buffer `soft_dtw_pairs_cuda` writes for
    these shapes; `outputs` is "values", "gradient_x" or "gradient_xy"."""

def soft_dtw_pairs_cuda(
    x: int,
    x_shape: tuple[int, int, int],
    y: int,
    y_shape: tuple[int, int, int],
    precision_name: str,
    gamma: float,
    band: Optional[int],
    divergence: bool,
    outputs: str,
    out: int,
    stream: int,
    gpu: int,
) -> None:
    """Paired Soft-DTW of two C-contiguous CUDA buffers (device addresses
    and `count x length x dims` shapes) on GPU `gpu`, read in place, the results
    written to the CUDA buffer `out` after the work queued on `stream`;
    returns once the work is queued. `precision` is "float32" or
    "float64"."""

def load(path: Union[str, os.PathLike[str]]) -> tuple[list[NDArray[np.float64]], Optional[list[str]]]:
    """A data file (`.ts`, `.tsv`/`.txt`, `.csv`, `.npy`): its series as
    `length x dims` float64 arrays, and its labels (None without)."""

def dtw_path(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    band: Optional[int],
    device_name: str,
) -> tuple[NDArray[np.int64], float]:
    """DTW's warping path of one pair, `steps x 2` indices `(i, j)`, and
    its value."""

def twed_path(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    nu: float,
    lmbda: float,
    degree: float,
    device_name: str,
    x_times: Optional[NDArray[np.float64]],
    y_times: Optional[NDArray[np.float64]],
) -> tuple[NDArray[np.int64], list[str], NDArray[np.float64], float]:
    """TWED's edit path of one pair: each edit's cell `(i, j)`, its step
    ("match", "delete-x" or "delete-y"), its cost, and the value."""

def soft_dtw_alignment(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    gamma: float,
    band: Optional[int],
    device_name: str,
) -> tuple[NDArray[np.float64], float]:
    """Soft-DTW's expected alignment of one pair, `len(x) x len(y)`, and
    the value."""

def info() -> dict[str, Any]:
    """The version, the kernel build (`kernels`, `ptx_target`, `ptx_hash`,
    `kernel_compiler`, `kernel_toolchain`), the GPUs found (`gpus`, a dict
    each, or `gpu_error`) and `cpu_threads`."""

def gpu_available() -> bool:
    """Whether GPU 0 is usable (the driver, a GPU, the kernels built)."""

@final
class Resident:
    """A batch kept where computations run: in GPU memory when uploaded to
    a GPU, else on the host. Queries are compared with it without moving
    it."""

    def __new__(cls, series: _Batch[Any], device_name: str) -> "Resident": ...
    @property
    def device(self) -> str:
        """Where the batch lives: "gpu:0" or "cpu"."""
    @property
    def dtype(self) -> Literal["float32", "float64"]:
        """The batch's precision."""
    def __len__(self) -> int: ...
    def cdist(
        self,
        queries: _Batch[Any],
        metric_name: str,
        gamma: float,
        band: Optional[int],
        nu: float,
        lmbda: float,
        degree: float,
    ) -> _FloatArray:
        """The distances of `queries` (rows) to the resident series
        (columns), in the resident batch's precision (the queries' must be
        the same)."""
    def kneighbors(
        self,
        queries: _Batch[Any],
        k: int,
        metric_name: str,
        gamma: float,
        band: Optional[int],
        nu: float,
        lmbda: float,
        degree: float,
        brute_force: bool = False,
    ) -> tuple[_FloatArray, NDArray[np.int64], Optional[dict[str, int]]]:
        """The `k` nearest resident series of each query, nearest first
        (ties by index): `(distances, indices, pruning)`, `queries x k`
        each, and what the lower bounds pruned (counts by name), or None
        where every distance was computed (no band, not DTW, the GPU,
        `brute_force`)."""

def search(
    query: NDArray[np.float64],
    series: Union[NDArray[np.float64], NDArray[np.float32]],
    band: float,
    band_is_radius: bool,
    k: int,
    znorm: bool,
    exclusion: Optional[int],
    device_name: str,
) -> tuple[NDArray[np.int64], NDArray[np.float64], dict[str, Any]]: ...
def subsequence_alignment(
    query: NDArray[np.float64],
    series: Union[NDArray[np.float64], NDArray[np.float32]],
    device_name: str,
) -> tuple[int, int, float, NDArray[np.int64]]:
    """The best match of `query` anywhere in `series` under DTW with a free
    start and end: (start, end, cost, path as `L x 2` cells)."""
