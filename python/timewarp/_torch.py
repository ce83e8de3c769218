"""Soft-DTW for PyTorch: a differentiable paired function and a loss module.

The forward pass computes the values and, when an input requires a
gradient, the gradients with respect to both inputs in the same call (the
backward pass of Cuturi & Blondel over each pair's cost matrix); the
backward pass scales them by the incoming gradient.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from . import _inputs
from . import _timewarp as _ext
from ._core import _band, _float
from ._errors import InputError


def _numpy(tensor: torch.Tensor, dtype: np.dtype) -> np.ndarray:
    array = tensor.detach()
    if array.device.type != "cpu":
        array = array.cpu()
    # Converted by torch first: numpy has no bfloat16.
    array = _contiguous(array, torch.float32 if dtype == np.float32 else torch.float64)
    return array.numpy()


def _batch3(tensor: torch.Tensor, what: str) -> torch.Tensor:
    if tensor.dim() == 2:
        return tensor.unsqueeze(-1)
    if tensor.dim() != 3:
        raise InputError(
            f"{what} has {tensor.dim()} axes; expected (batch, length) or (batch, length, dims)"
        )
    return tensor


def _on_device(x, y, dtype: np.dtype, gamma, band, normalize, outputs: str):
    """The CUDA path: both batches read in place on their GPU, the values
    (and gradients) written to one CUDA buffer, ordered after torch's
    current stream. Returns the values, the two gradients (or None) and
    the check of the inputs and values, queued on torch's stream."""
    torch_dtype = torch.float32 if dtype == np.float32 else torch.float64
    x, y = _contiguous(x, torch_dtype), _contiguous(y, torch_dtype)
    shapes = (tuple(x.shape), tuple(y.shape))
    length = _ext.soft_dtw_cuda_output_len(shapes[0], shapes[1], normalize, outputs)
    out = torch.empty(length, dtype=torch_dtype, device=x.device)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    arguments = (x.data_ptr(), shapes[0], y.data_ptr(), shapes[1], str(dtype), gamma, band)
    # Returns once the work is queued, torch's stream ordered after it.
    gpu = x.device.index if x.device.index is not None else torch.cuda.current_device()
    _ext.soft_dtw_pairs_cuda(*arguments, normalize, outputs, out.data_ptr(), stream, gpu)
    pairs = x.shape[0]
    launches = 3 if normalize else 1
    values = out[:pairs]
    if normalize:
        values = values - (out[pairs : 2 * pairs] + out[2 * pairs : 3 * pairs]) / 2
    check = _Check(x, y, values, dtype)
    if outputs == "values":
        return values, None, None, check
    at = launches * pairs
    x_size, y_size = x.numel(), y.numel()
    grad_x = out[at : at + x_size].view(x.shape)
    at += x_size
    grad_y = None
    if outputs == "gradient_xy":
        grad_y = out[at : at + y_size].view(y.shape)
        at += y_size
    if normalize:
        grad_x = grad_x - out[at : at + x_size].view(x.shape)
        if grad_y is not None:
            grad_y = grad_y - out[at + x_size : at + x_size + y_size].view(y.shape)
    return values, grad_x, grad_y, check


class _Check:
    """Whether CUDA batches and their Soft-DTW values are finite, queued on
    torch's stream after the values (nothing waits until `raise_if_bad`):
    one float64 sum of all three, which is finite when they are (float32
    magnitudes cannot overflow it); only when it is not are they checked
    one by one, which also clears a sum that overflowed float64."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, values: torch.Tensor, dtype: np.dtype):
        wide = torch.float64
        self.total = x.sum(dtype=wide) + y.sum(dtype=wide) + values.sum(dtype=wide)
        self.tensors = (x.detach(), y.detach(), values.detach())
        self.dtype = dtype

    def raise_if_bad(self) -> None:
        if bool(torch.isfinite(self.total)):
            return
        x, y, values = self.tensors
        for name, batch in (("x", x), ("y", y)):
            if not bool(torch.isfinite(batch).all()):
                raise InputError(f"invalid input: {name} holds NaN or infinite values")
        if not bool(torch.isfinite(values).all()):
            raise InputError(
                f"a Soft-DTW value overflowed {self.dtype.name}: the samples are too large"
                " for this precision (scale them, or use float64)"
            )


def _contiguous(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _on_host(x, y, dtype: np.dtype, gamma, band, normalize, outputs: str, device: str):
    """The path of CPU tensors (and of CUDA tensors with device="cpu"):
    numpy copies of the batches, computed where `device` says."""
    arguments = (_numpy(x, dtype), _numpy(y, dtype), gamma, band, normalize, device)
    if outputs == "values":
        values = _ext.soft_dtw_pairs(*arguments, False, False)
        return torch.from_numpy(values), None, None
    values, grad_x, grad_y = _ext.soft_dtw_pairs(*arguments, True, outputs == "gradient_xy")
    return (
        torch.from_numpy(values),
        torch.from_numpy(grad_x),
        None if grad_y is None else torch.from_numpy(grad_y),
    )


class _SoftDtwFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, gamma, band, normalize, device, dtype, recording):  # type: ignore[override]
        x3, y3 = _batch3(x, "x"), _batch3(y, "y")
        if x3.shape[0] != y3.shape[0]:
            raise InputError(
                f"x has {x3.shape[0]} series but y has {y3.shape[0]}: "
                "paired batches pair series k with k"
            )
        if x3.shape[2] != y3.shape[2]:
            raise InputError(
                f"dimension mismatch: x has {x3.shape[2]} dimensions per sample, y {y3.shape[2]}"
            )
        # Under torch.no_grad() `needs_input_grad` still follows the inputs'
        # requires_grad; the caller says whether a graph is being recorded.
        if not recording:
            outputs = "values"
        elif ctx.needs_input_grad[1]:
            outputs = "gradient_xy"
        elif ctx.needs_input_grad[0]:
            outputs = "gradient_x"
        else:
            outputs = "values"
        if x.is_cuda and device != "cpu":
            values, grad_x, grad_y, check = _on_device(
                x3, y3, dtype, gamma, band, normalize, outputs
            )
        else:
            values, grad_x, grad_y = _on_host(
                x3, y3, dtype, gamma, band, normalize, outputs, device
            )
            check = None
        if outputs != "values":
            # The gradients in the inputs' own devices, dtypes and shapes
            # (on the CUDA path they already are).
            ctx.save_for_backward(_like(grad_x, x), None if grad_y is None else _like(grad_y, y))
        if check is not None and outputs != "values":
            # Raised in the backward pass, after its launches: waiting here
            # would keep the GPU's work from overlapping torch's recording
            # of the graph and the backward pass.
            ctx.check = check
        elif check is not None:
            check.raise_if_bad()
        return values if values.device == x.device else values.to(x.device)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):  # type: ignore[override]
        grad_x, grad_y = ctx.saved_tensors
        scale = grad_output.view((-1,) + (1,) * (grad_x.dim() - 1))
        dx = grad_x * _like_dtype(scale, grad_x) if ctx.needs_input_grad[0] else None
        dy = grad_y * _like_dtype(scale, grad_y) if ctx.needs_input_grad[1] else None
        check = getattr(ctx, "check", None)
        if check is not None:
            check.raise_if_bad()
        return dx, dy, None, None, None, None, None, None


def _like(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`tensor` on `like`'s device, in its dtype and shape (no op when it
    already is: each torch call costs microseconds of Python)."""
    if tensor.device != like.device or tensor.dtype != like.dtype:
        tensor = tensor.to(like.device, like.dtype)
    return tensor if tensor.shape == like.shape else tensor.reshape(like.shape)


def _like_dtype(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return tensor if tensor.dtype == like.dtype else tensor.to(like.dtype)


def soft_dtw_torch(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    gamma: float = 1.0,
    band: Optional[int] = None,
    normalize: bool = False,
    device: str = "auto",
    precision: Optional[str] = None,
) -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        raise InputError("x is a tensor but y is not: give both as tensors")
    if x.device != y.device:
        raise InputError(f"x is on {x.device} but y on {y.device}")
    if x.is_cuda and device == "auto":
        where = f"gpu:{x.device.index or 0}"
    else:
        left = _inputs.Prepared(None, _F64, _inputs.Origin("torch", x.device, x.dtype), 0)
        where = _inputs.device_for(device, left)
    forced = _inputs.precision_dtype(precision)
    if forced is not None:
        dtype = forced
    elif x.dtype == y.dtype and x.dtype in _NATIVE:
        dtype = _NATIVE[x.dtype]
    else:
        dtypes = [_inputs.native_dtype(_torch_to_numpy_dtype(t.dtype)) for t in (x, y)]
        dtype = np.result_type(*dtypes)
    recording = torch.is_grad_enabled() and (x.requires_grad or y.requires_grad)
    values = _SoftDtwFunction.apply(
        x, y, _float("gamma", gamma), _band(band), bool(normalize), where, dtype, recording
    )
    return values


_F64 = np.dtype(np.float64)
_NATIVE = {torch.float32: np.dtype(np.float32), torch.float64: _F64}


def _torch_to_numpy_dtype(dtype: torch.dtype) -> np.dtype:
    if dtype.is_complex:
        raise InputError(f"complex values ({dtype}) are not supported")
    if dtype == torch.bfloat16:
        return np.dtype(np.float16)
    return torch.empty(0, dtype=dtype).numpy().dtype


class SoftDTWLoss(torch.nn.Module):
    """The Soft-DTW loss between paired batches ``(batch, length[, dims])``:
    ``reduction`` ``"mean"`` (default), ``"sum"`` or ``"none"`` of
    ``soft_dtw(x, y)``; `normalize=True` uses the soft-DTW divergence
    ``sdtw(x, y) - (sdtw(x, x) + sdtw(y, y)) / 2``, which is >= 0 and 0 for
    ``x == y``."""

    def __init__(
        self,
        gamma: float = 1.0,
        normalize: bool = False,
        band: Optional[int] = None,
        reduction: str = "mean",
        device: str = "auto",
    ) -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise InputError(f"reduction {reduction!r}: expected 'mean', 'sum' or 'none'")
        self.gamma = gamma
        self.normalize = normalize
        self.band = band
        self.reduction = reduction
        self.device = device

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        values = soft_dtw_torch(
            x, y, gamma=self.gamma, band=self.band, normalize=self.normalize, device=self.device
        )
        if self.reduction == "mean":
            return values.mean()
        if self.reduction == "sum":
            return values.sum()
        return values

    def extra_repr(self) -> str:
        return (
            f"gamma={self.gamma}, normalize={self.normalize}, band={self.band}, "
            f"reduction={self.reduction!r}"
        )
