"""Turning what users pass (numpy arrays, lists of series, torch tensors,
objects with ``__dlpack__``) into the batches the extension takes, and
results back into what they passed.

The rules, in one place:

- A batch is a 3-D array ``(n, length, dims)``, a 2-D array ``(n, length)``
  (univariate), a 1-D array (one univariate series, as tslearn reads it), or
  a list/tuple of series, each ``(length,)`` or ``(length, dims)``, lengths
  free. A single series (``distance``) is ``(length,)`` or ``(length, dims)``.
- float32 and float64 are computed in their own precision. Other real types
  are converted: float16 (and bfloat16) to float32, integers and booleans to
  float64. Complex values are an error. Two batches of different precisions
  are computed in the wider one. ``precision="float32"``/``"float64"``
  overrides all of this.
- Non-contiguous or misaligned arrays are copied into contiguous, aligned ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Union

import numpy as np

from ._errors import InputError

Batch = Union[np.ndarray, List[np.ndarray]]

_PRECISIONS = {
    "float32": np.float32,
    "f32": np.float32,
    "single": np.float32,
    "float64": np.float64,
    "f64": np.float64,
    "double": np.float64,
}


@dataclass
class Origin:
    """Where an input came from, so results go back the same way."""

    kind: str  # "numpy" or "torch"
    torch_device: Any = None
    torch_dtype: Any = None


def is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def requires_grad(value: Any) -> bool:
    """Whether `value` (or a series of a list of them) is a tensor that
    requires a gradient while autograd records."""
    if isinstance(value, (list, tuple)):
        return any(requires_grad(item) for item in value)
    if not is_torch_tensor(value) or not getattr(value, "requires_grad", False):
        return False
    return bool(_torch().is_grad_enabled())


def precision_dtype(precision: Optional[str]) -> Optional[np.dtype]:
    if precision is None:
        return None
    if isinstance(precision, str):
        key = precision.lower()
        if key in _PRECISIONS:
            return np.dtype(_PRECISIONS[key])
    else:
        dtype = np.dtype(precision)
        if dtype in (np.float32, np.float64):
            return dtype
    raise InputError(f"precision {precision!r}: expected 'float32' or 'float64'")


def native_dtype(dtype: np.dtype) -> np.dtype:
    """The precision values of `dtype` are computed in (the rule above)."""
    if dtype == np.float32 or dtype == np.float64:
        return dtype
    if dtype.kind == "c":
        raise InputError(f"complex values ({dtype}) are not supported")
    if dtype.kind == "f":  # float16, longdouble
        return np.dtype(np.float32) if dtype.itemsize < 4 else np.dtype(np.float64)
    if dtype.kind in "iub":
        return np.dtype(np.float64)
    if dtype.name == "bfloat16":
        return np.dtype(np.float32)
    raise InputError(f"values of type {dtype} are not numbers timewarp can take")


def _to_numpy(value: Any) -> tuple[Any, Origin]:
    """A numpy view of `value` (a copy for CUDA tensors) and its origin."""
    if is_torch_tensor(value):
        tensor = value.detach()
        origin = Origin("torch", tensor.device, tensor.dtype)
        if tensor.is_complex():
            raise InputError(f"complex values ({tensor.dtype}) are not supported")
        if tensor.dtype not in _torch_numpy_dtypes():
            tensor = tensor.to(_torch().float32)
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        return tensor.numpy(), origin
    if isinstance(value, np.ndarray):
        return value, Origin("numpy")
    if hasattr(value, "__dlpack__") and not isinstance(value, (list, tuple)):
        if _on_cuda(value):
            # A GPU array of another framework: read through torch's view
            # of it (no copy); results come back as torch tensors.
            try:
                import torch
            except ImportError:
                raise InputError(
                    f"a {type(value).__name__} in GPU memory needs torch to be read"
                ) from None
            return _to_numpy(torch.from_dlpack(value))
        try:
            return np.from_dlpack(value), Origin("numpy")
        except (BufferError, RuntimeError, TypeError) as error:
            raise InputError(
                f"cannot read a {type(value).__name__} through DLPack on the host: {error}"
            ) from None
    return value, Origin("numpy")


def _on_cuda(value: Any) -> bool:
    """Whether a `__dlpack__` object lives in CUDA memory (DLPack device
    types 2, CUDA, and 13, CUDA managed)."""
    try:
        return value.__dlpack_device__()[0] in (2, 13)
    except (AttributeError, TypeError, ValueError):
        return False


def _torch():
    import torch

    return torch


def _torch_numpy_dtypes():
    torch = _torch()
    return (
        torch.float32,
        torch.float64,
        torch.float16,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    )


def _array(value: Any, what: str) -> np.ndarray:
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:
        raise InputError(f"{what} is not an array of numbers: {error}") from None
    if array.dtype == object:
        raise InputError(
            f"{what} is not a regular array of numbers (series of different lengths go in a list)"
        )
    native_dtype(array.dtype)  # rejects complex and non-numbers early
    return array


@dataclass
class Prepared:
    """A batch as the extension takes it, and how it was given."""

    data: Batch
    dtype: np.dtype
    origin: Origin
    count: int
    lengths: Optional[List[int]] = None  # of a list's series
    flat: Optional[List[bool]] = None  # which of a list's series were 1-D
    shape: Optional[tuple] = None  # of an array batch as given


def batch(value: Any, what: str = "the batch") -> Prepared:
    """A batch with its values still in their own dtype (see `cast`)."""
    value, origin = _to_numpy(value)
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            raise InputError(f"{what} has no series")
        series, flat = [], []
        for index, item in enumerate(value):
            item, _ = _to_numpy(item)
            array = _array(item, f"series {index} of {what}")
            flat.append(array.ndim == 1)
            if array.ndim == 1:
                array = array[:, None]
            elif array.ndim != 2:
                raise InputError(
                    f"series {index} of {what} has {array.ndim} axes; "
                    "a series is (length,) or (length, dims)"
                )
            series.append(array)
        dtype = np.result_type(*[s.dtype for s in series])
        return Prepared(series, dtype, origin, len(series), [len(s) for s in series], flat)
    array = _array(value, what)
    shape = array.shape
    if array.ndim == 1:
        array = array[None, :, None]
    elif array.ndim == 2:
        array = array[:, :, None]
    elif array.ndim != 3:
        raise InputError(
            f"{what} has {array.ndim} axes; expected (n, length), (n, length, dims) "
            "or a list of series"
        )
    if array.shape[0] == 0:
        raise InputError(f"{what} has no series")
    return Prepared(array, array.dtype, origin, array.shape[0], shape=shape)


def series(value: Any, what: str) -> Prepared:
    """One series, ``(length,)`` or ``(length, dims)``, as a batch of one."""
    value, origin = _to_numpy(value)
    array = _array(value, what)
    if array.ndim == 1:
        array = array[:, None]
    elif array.ndim != 2:
        raise InputError(
            f"{what} has {array.ndim} axes; a series is (length,) or (length, dims)"
        )
    return Prepared(array[None], array.dtype, origin, 1)


def numbers(value: Any, what: str) -> np.ndarray:
    """`value` (an array, a list, a tensor) as a numpy array of real numbers
    in their own dtype, any shape."""
    return _array(_to_numpy(value)[0], what)


def common_dtype(precision: Optional[str], *prepared: Optional[Prepared]) -> np.dtype:
    forced = precision_dtype(precision)
    if forced is not None:
        return forced
    dtypes = [native_dtype(p.dtype) for p in prepared if p is not None]
    return np.result_type(*dtypes)


def _contiguous(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`array` in `dtype`, C-contiguous and aligned: arrays read from a byte
    buffer (pickle protocol 5, as Dask sends them; `np.frombuffer` at an
    odd offset) may be contiguous but not aligned, and are copied."""
    array = np.ascontiguousarray(array, dtype=dtype)
    return array if array.flags.aligned else array.copy()


def cast(prepared: Prepared, dtype: np.dtype) -> Batch:
    """The batch's data in `dtype`, C-contiguous and aligned."""
    if isinstance(prepared.data, list):
        return [_contiguous(s, dtype) for s in prepared.data]
    return _contiguous(prepared.data, dtype)


def check_same_origin(a: Prepared, b: Prepared) -> None:
    if a.origin.kind == "torch" and b.origin.kind == "torch":
        if a.origin.torch_device != b.origin.torch_device:
            raise InputError(
                f"the inputs are on different devices ({a.origin.torch_device} and "
                f"{b.origin.torch_device})"
            )


def device_for(device: str, *prepared: Optional[Prepared]) -> str:
    """The device the extension computes on: `device` as given, with "auto"
    following CUDA tensors to their GPU; a CUDA tensor on a GPU other than
    `device` names is an error."""
    if not isinstance(device, str):
        device = str(device)
    device = device.lower()
    for p in prepared:
        if p is None or p.origin.kind != "torch" or p.origin.torch_device.type != "cuda":
            continue
        index = p.origin.torch_device.index or 0
        if device == "auto":
            device = f"gpu:{index}"
        elif device == "cpu":
            continue  # the values were copied to the host; computing there is asked for
        elif device in ("gpu", "cuda"):
            device = f"gpu:{index}"
        elif device.split(":")[-1] != str(index):
            raise InputError(f"a tensor is on cuda:{index} but device={device!r}")
    return device


def result(values: np.ndarray, origin: Origin):
    """`values` as the kind of input they came from: numpy, or a tensor on
    the input's device (in the precision computed)."""
    if origin.kind != "torch":
        return values
    tensor = _torch().from_numpy(np.ascontiguousarray(values))
    return tensor.to(device=origin.torch_device)
