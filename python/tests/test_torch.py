"""The PyTorch path: autograd against finite differences (gradcheck) and
the numpy path, the loss module, training, and CUDA tensors read in place
(compared with the CPU). Float64 gradients within gradcheck's defaults
(atol 1e-5, rtol 1e-3 on finite differences of step 1e-6); CUDA against
CPU within 1e-10 relative in float64 (the same recurrences, summed in a
different order) and 1e-4 in float32."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import need_cuda_torch, need_torch

import timewarp
from timewarp import TimewarpError


def tensors(torch, shape_x, shape_y, dtype=None, device="cpu", seed=0):
    generator = torch.Generator().manual_seed(seed)
    dtype = dtype or torch.float64
    x = torch.randn(*shape_x, generator=generator, dtype=dtype).to(device)
    y = torch.randn(*shape_y, generator=generator, dtype=dtype).to(device)
    return x.requires_grad_(), y.requires_grad_()


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("band", [None, 2])
def test_gradcheck(normalize, band):
    torch = need_torch()
    x, y = tensors(torch, (3, 8, 2), (3, 6, 2))
    function = lambda a, b: timewarp.soft_dtw(a, b, gamma=0.4, band=band, normalize=normalize)
    assert torch.autograd.gradcheck(function, (x, y))


def test_autograd_equals_the_numpy_gradient():
    torch = need_torch()
    x, y = tensors(torch, (4, 9), (4, 7))
    values = timewarp.soft_dtw(x, y, gamma=0.3)
    weights = torch.arange(1.0, 5.0, dtype=torch.float64)
    (values * weights).sum().backward()
    expected, grad_x, grad_y = timewarp.soft_dtw_gradient(
        x.detach().numpy(), y.detach().numpy(), gamma=0.3
    )
    np.testing.assert_allclose(values.detach().numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), grad_x * weights.numpy()[:, None], rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), grad_y * weights.numpy()[:, None], rtol=1e-12)


def test_only_the_inputs_that_need_it_get_a_gradient():
    torch = need_torch()
    x, y = tensors(torch, (2, 5, 1), (2, 5, 1))
    target = y.detach()
    timewarp.soft_dtw(x, target).sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
    with torch.no_grad():
        values = timewarp.soft_dtw(x, y)
    assert not values.requires_grad
    # No gradient is computed without a graph to record it in: the values
    # path's bits, not the gradient path's (the two use different kernels
    # on the GPU; on the CPU they agree, so check the call made).
    calls = []
    original = timewarp._torch._on_host

    def spy(*args):
        calls.append(args[6])
        return original(*args)

    timewarp._torch._on_host = spy
    try:
        with torch.no_grad():
            timewarp.soft_dtw(x, y)
        timewarp.soft_dtw(x, y)
    finally:
        timewarp._torch._on_host = original
    assert calls == ["values", "gradient_xy"]


def test_float32_and_dtypes():
    torch = need_torch()
    x, y = tensors(torch, (3, 10), (3, 11), dtype=torch.float32)
    values = timewarp.soft_dtw(x, y)
    assert values.dtype == torch.float32
    values.sum().backward()
    assert x.grad.dtype == torch.float32
    exact = timewarp.soft_dtw(x.detach().double(), y.detach().double())
    np.testing.assert_allclose(values.detach().numpy(), exact.numpy(), rtol=1e-5)


def test_divergence_is_zero_on_itself_and_nonnegative():
    torch = need_torch()
    x, y = tensors(torch, (5, 12, 3), (5, 12, 3))
    loss = timewarp.SoftDTWLoss(gamma=0.1, normalize=True, reduction="none")
    assert torch.all(loss(x, x.detach()).abs() < 1e-10)
    assert torch.all(loss(x, y) >= 0)


def test_loss_reductions_and_repr():
    torch = need_torch()
    x, y = tensors(torch, (4, 6), (4, 8))
    values = timewarp.soft_dtw(x, y, gamma=0.5)
    for reduction, expected in [("mean", values.mean()), ("sum", values.sum()), ("none", values)]:
        got = timewarp.SoftDTWLoss(gamma=0.5, reduction=reduction)(x, y)
        torch.testing.assert_close(got, expected)
    assert "gamma=0.5" in repr(timewarp.SoftDTWLoss(gamma=0.5))
    with pytest.raises(TimewarpError, match="reduction"):
        timewarp.SoftDTWLoss(reduction="max")


def test_a_training_loop_fits_a_target():
    torch = need_torch()
    torch.manual_seed(0)
    t = torch.linspace(0, 6.28, 40, dtype=torch.float64)
    target = torch.sin(t).repeat(8, 1)
    guess = torch.zeros(8, 40, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([guess], lr=0.05)
    loss_fn = timewarp.SoftDTWLoss(gamma=0.1, normalize=True)
    first = None
    for _ in range(150):
        optimizer.zero_grad()
        loss = loss_fn(guess, target)
        first = loss.item() if first is None else first
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05 * first


def test_tensor_inputs_to_cdist_return_tensors():
    torch = need_torch()
    x = torch.randn(4, 9, dtype=torch.float64)
    got = timewarp.cdist(x, metric="twed", device="cpu")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    np.testing.assert_array_equal(
        got.numpy(), timewarp.cdist(x.numpy(), metric="twed", device="cpu")
    )


def test_bad_tensor_inputs():
    torch = need_torch()
    x = torch.randn(2, 5, dtype=torch.float64)
    with pytest.raises(TimewarpError, match="paired"):
        timewarp.soft_dtw(x, torch.randn(3, 5, dtype=torch.float64))
    with pytest.raises(TimewarpError, match="dimension"):
        timewarp.soft_dtw(x, torch.randn(2, 5, 2, dtype=torch.float64))
    with pytest.raises(TimewarpError, match="NaN"):
        timewarp.soft_dtw(torch.full((2, 5), float("nan")), x)
    with pytest.raises(TimewarpError, match="complex"):
        timewarp.soft_dtw(x.to(torch.complex64), x.to(torch.complex64))
    with pytest.raises(TimewarpError, match="axes"):
        timewarp.soft_dtw(x[None, None], x[None, None])
    with pytest.raises(TimewarpError, match="tensors"):
        timewarp.soft_dtw(x, x.numpy())


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_half_precision_tensors_compute_in_float32(half):
    torch = need_torch()
    half = getattr(torch, half)
    x, y = tensors(torch, (3, 10), (3, 11), dtype=torch.float32)
    xh = x.detach().to(half).requires_grad_()
    yh = y.detach().to(half).requires_grad_()
    # The same values as the float32 tensors holding the rounded samples.
    x32, y32 = xh.detach().float().requires_grad_(), yh.detach().float().requires_grad_()
    values = timewarp.soft_dtw(xh, yh, gamma=0.5)
    exact = timewarp.soft_dtw(x32, y32, gamma=0.5)
    assert values.dtype == torch.float32
    np.testing.assert_array_equal(values.detach().numpy(), exact.detach().numpy())
    # Gradients come back in the inputs' own dtype.
    values.sum().backward()
    exact.sum().backward()
    assert xh.grad.dtype == half and yh.grad.dtype == half
    assert torch.equal(xh.grad, x32.grad.to(half)) and torch.equal(yh.grad, y32.grad.to(half))
    # cdist and distance: float32 results, as float32 inputs give.
    matrix = timewarp.cdist(xh.detach(), yh.detach(), device="cpu")
    assert matrix.dtype == torch.float32
    np.testing.assert_array_equal(
        matrix.numpy(), timewarp.cdist(x32.detach().numpy(), y32.detach().numpy(), device="cpu")
    )
    one = timewarp.distance(xh.detach()[0], yh.detach()[0], metric="twed")
    assert one == timewarp.distance(x32.detach()[0].numpy(), y32.detach()[0].numpy(), metric="twed")


def test_cdist_of_tensors_that_require_grad_is_an_error():
    torch = need_torch()
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    with pytest.raises(TimewarpError, match="soft_dtw"):
        timewarp.cdist(x, device="cpu")
    with pytest.raises(TimewarpError, match="soft_dtw"):
        timewarp.cdist(x.detach(), [x[0], x[1]], device="cpu")
    with pytest.raises(TimewarpError, match="soft_dtw"):
        timewarp.distance(x[0], x[1])
    # Detached, or with autograd off, it computes.
    expected = timewarp.cdist(x.detach(), device="cpu")
    with torch.no_grad():
        np.testing.assert_array_equal(timewarp.cdist(x, device="cpu"), expected)


# ---- CUDA tensors: read in place, gradients on the GPU --------------------


def gradient_bound(x, y, values, gamma, grads):
    """The f32 gradient's error bound of tests/suite/paired.rs:
    `64 u (scale / gamma + 2 (n + m))` of the largest entry, where the
    scale is the pair's DTW plus `gamma (n + m) ln 3` plus the value."""
    u = 2.0**-24
    bounds = []
    for k in range(len(x)):
        n, m = len(x[k]), len(y[k])
        dtw = timewarp.distance(x[k], y[k], metric="dtw", device="cpu")
        scale = dtw + gamma * 2 * (n + m) * np.log(3) + abs(values[k])
        largest = max(np.abs(g[k]).max() for g in grads)
        bounds.append(64 * u * (scale / gamma + 2 * (n + m)) * largest)
    return np.array(bounds)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize(
    "shape", [((6, 33, 1), (6, 20, 1)), ((3, 1, 2), (3, 9, 2)), ((2, 300, 3), (2, 257, 3))]
)
def test_cuda_tensors_match_the_cpu(normalize, precision, shape):
    """Float64: within 1e-10 relative of the CPU (the same recurrences,
    summed in another order). Float32: values within 1e-4 relative, the
    gradients within the bound of `gradient_bound`."""
    torch = need_cuda_torch()
    dtype = getattr(torch, precision)
    x, y = tensors(torch, shape[0], shape[1], dtype=dtype, device="cuda", seed=3)
    values = timewarp.soft_dtw(x, y, gamma=0.7, normalize=normalize)
    assert values.is_cuda and values.dtype == dtype
    values.sum().backward()
    assert x.grad.is_cuda and y.grad.is_cuda
    xc, yc = x.detach().cpu().double().numpy(), y.detach().cpu().double().numpy()
    expected, grad_x, grad_y = timewarp.soft_dtw_gradient(
        xc, yc, gamma=0.7, normalize=normalize, device="cpu"
    )
    got_x, got_y = x.grad.cpu().double().numpy(), y.grad.cpu().double().numpy()
    if precision == "float64":
        np.testing.assert_allclose(values.detach().cpu().numpy(), expected, rtol=1e-10)
        np.testing.assert_allclose(got_x, grad_x, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got_y, grad_y, rtol=1e-10, atol=1e-12)
        return
    np.testing.assert_allclose(values.detach().cpu().double().numpy(), expected, rtol=1e-4)
    # The divergence's gradient sums three pairs' (a bound each).
    bound = gradient_bound(xc, yc, expected, 0.7, (grad_x, grad_y)) * (3 if normalize else 1)
    for got, want in ((got_x, grad_x), (got_y, grad_y)):
        error = np.abs(got - want).reshape(len(got), -1).max(axis=1)
        assert np.all(error <= bound), (error, bound)


def test_cuda_sequences_longer_than_a_block():
    """Series past 1024 samples (a CUDA block's threads), where the
    gradient's rings leave shared memory: no launch failure, the CPU's
    values and gradients."""
    torch = need_cuda_torch()
    x, y = tensors(torch, (2, 1500, 1), (2, 1300, 1), device="cuda", seed=5)
    values = timewarp.soft_dtw(x, y, gamma=0.1)
    values.sum().backward()
    xc, yc = x.detach().cpu().numpy(), y.detach().cpu().numpy()
    expected, grad_x, grad_y = timewarp.soft_dtw_gradient(xc, yc, gamma=0.1, device="cpu")
    np.testing.assert_allclose(values.detach().cpu().numpy(), expected, rtol=1e-10)
    np.testing.assert_allclose(x.grad.cpu().numpy(), grad_x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(y.grad.cpu().numpy(), grad_y, rtol=1e-10, atol=1e-12)


def test_other_dlpack_gpu_arrays_go_through_torch():
    torch = need_cuda_torch()
    x = torch.randn(3, 20, device="cuda", dtype=torch.float64)

    class Foreign:
        """A GPU array of another framework, seen only through DLPack."""

        def __init__(self, tensor):
            self.tensor = tensor

        def __dlpack__(self, **kwargs):
            return self.tensor.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

    got = timewarp.cdist(Foreign(x))
    assert isinstance(got, torch.Tensor) and got.is_cuda
    np.testing.assert_allclose(
        got.cpu().numpy(), timewarp.cdist(x.cpu().numpy(), device="cpu"), rtol=1e-10
    )


def test_cuda_values_only_and_banded():
    torch = need_cuda_torch()
    x, y = tensors(torch, (64, 128), (64, 128), dtype=torch.float32, device="cuda")
    with torch.no_grad():
        values = timewarp.soft_dtw(x, y, gamma=0.1, band=10)
    expected = timewarp.soft_dtw(
        x.detach().cpu().numpy(), y.detach().cpu().numpy(), gamma=0.1, band=10, device="cpu"
    )
    np.testing.assert_allclose(values.cpu().numpy(), expected, rtol=1e-4)


def test_cuda_gradcheck():
    torch = need_cuda_torch()
    x, y = tensors(torch, (3, 7, 2), (3, 5, 2), device="cuda")
    assert torch.autograd.gradcheck(lambda a, b: timewarp.soft_dtw(a, b, gamma=0.5), (x, y))


def test_cuda_follows_the_current_stream():
    torch = need_cuda_torch()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = torch.randn(256, 200, device="cuda", dtype=torch.float64)
        # Queued on the side stream, after a long kernel: the computation
        # must wait for it.
        for _ in range(20):
            x = x * 1.0001
        y = x.flip(1).contiguous()
        values = timewarp.soft_dtw(x, y)
    stream.synchronize()
    expected = timewarp.soft_dtw(x.cpu().numpy(), y.cpu().numpy(), device="cpu")
    np.testing.assert_allclose(values.cpu().numpy(), expected, rtol=1e-10)


def test_cuda_cdist_and_errors():
    torch = need_cuda_torch()
    x = torch.randn(5, 16, device="cuda", dtype=torch.float64)
    got = timewarp.cdist(x, metric="dtw")
    assert got.is_cuda
    np.testing.assert_allclose(
        got.cpu().numpy(), timewarp.cdist(x.cpu().numpy(), device="cpu"), rtol=1e-10
    )
    with pytest.raises(TimewarpError, match="NaN|finite"):
        bad = x.clone()
        bad[0, 0] = float("nan")
        timewarp.soft_dtw(bad, x)


def test_cuda_overflow_raises():
    """Finite samples whose values overflow float32, and NaN samples: an
    error at once without a graph, in the backward pass with one (the
    forward pass does not wait for the GPU)."""
    torch = need_cuda_torch()
    x = torch.full((2, 8), 1e19, device="cuda", dtype=torch.float32, requires_grad=True)
    y = torch.zeros(2, 8, device="cuda", dtype=torch.float32)
    with torch.no_grad(), pytest.raises(TimewarpError, match="overflowed float32"):
        timewarp.soft_dtw(x, y)
    values = timewarp.soft_dtw(x, y)
    with pytest.raises(TimewarpError, match="overflowed float32"):
        values.sum().backward()
    # NaN samples likewise, named by their batch.
    bad = torch.zeros(2, 8, device="cuda", dtype=torch.float32)
    bad[1, 3] = float("nan")
    with torch.no_grad(), pytest.raises(TimewarpError, match="y holds NaN"):
        timewarp.soft_dtw(x, bad)
    values = timewarp.soft_dtw(x, bad)
    with pytest.raises(TimewarpError, match="y holds NaN"):
        values.sum().backward()
    # In float64 the same samples are fine.
    x64 = x.detach().double().requires_grad_()
    timewarp.soft_dtw(x64, y.double()).sum().backward()
    assert bool(torch.isfinite(x64.grad).all())
