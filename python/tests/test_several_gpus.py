"""CUDA tensors on any GPU of the host: `soft_dtw` (and its loss),
`cdist` and `KNeighborsClassifier` compute on the tensors' own GPU, and a
training step in the style of DDP (one process per GPU, each on
`cuda:rank`) gives what one process computes. Each GPU's results are
checked against the CPU backend. The cases need two GPUs and skip with the
reason printed on a host with fewer."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import timewarp
from conftest import need_cuda_torch


def need_two_gpus():
    torch = need_cuda_torch()
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two GPUs; torch sees {torch.cuda.device_count()}")
    return torch


def batch(torch, seed: int, count: int = 6, length: int = 40, dims: int = 2):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, length, dims, generator=generator, dtype=torch.float64)
    y = torch.randn(count, length - 7, dims, generator=generator, dtype=torch.float64)
    return x, y


def loss_and_gradients(torch, x, y):
    """The Soft-DTW loss of the pairs summed, and its gradients."""
    x = x.detach().clone().requires_grad_(True)
    y = y.detach().clone().requires_grad_(True)
    loss = timewarp.SoftDTWLoss(gamma=0.5, reduction="sum")(x, y)
    loss.backward()
    return loss.detach(), x.grad, y.grad


def test_tensors_on_each_gpu_compute_there():
    torch = need_two_gpus()
    x, y = batch(torch, 1)
    expected_loss, expected_dx, expected_dy = loss_and_gradients(torch, x, y)
    expected_matrix = timewarp.cdist(x.numpy(), y.numpy(), metric="dtw", device="cpu")
    for index in range(torch.cuda.device_count()):
        where = torch.device(f"cuda:{index}")
        loss, dx, dy = loss_and_gradients(torch, x.to(where), y.to(where))
        assert loss.device == where and dx.device == where and dy.device == where
        np.testing.assert_allclose(loss.cpu().numpy(), expected_loss.numpy(), rtol=1e-10)
        np.testing.assert_allclose(dx.cpu().numpy(), expected_dx.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(dy.cpu().numpy(), expected_dy.numpy(), rtol=1e-9, atol=1e-12)
        values = timewarp.soft_dtw(x.to(where), y.to(where), gamma=0.5)
        assert values.device == where
        matrix = timewarp.cdist(x.to(where), y.to(where), metric="dtw")
        assert matrix.device == where
        np.testing.assert_allclose(matrix.cpu().numpy(), expected_matrix, rtol=1e-10)


def test_a_tensor_on_one_gpu_and_a_device_naming_another_is_an_error():
    torch = need_two_gpus()
    x, y = batch(torch, 2)
    with pytest.raises(timewarp.TimewarpError, match="cuda:1"):
        timewarp.cdist(x.to("cuda:1"), y.to("cuda:1"), device="gpu:0")


def test_k_neighbors_on_the_second_gpu_predicts_as_on_the_cpu():
    torch = need_two_gpus()
    generator = torch.Generator().manual_seed(3)
    train = torch.randn(30, 25, generator=generator, dtype=torch.float64)
    labels = np.arange(30) % 3
    queries = torch.randn(12, 25, generator=generator, dtype=torch.float64)
    on_cpu = timewarp.KNeighborsClassifier(n_neighbors=3, metric="dtw", device="cpu")
    expected = on_cpu.fit(train.numpy(), labels).predict(queries.numpy())
    on_gpu = timewarp.KNeighborsClassifier(n_neighbors=3, metric="dtw")
    got = on_gpu.fit(train.to("cuda:1"), labels).predict(queries.to("cuda:1"))
    np.testing.assert_array_equal(np.asarray(got), expected)


def _rank_step(rank: int, folder: str) -> None:
    """One process of the DDP-style run: its own batch on `cuda:rank`,
    the loss and gradients saved for the parent."""
    import torch

    torch.cuda.set_device(rank)
    x, y = batch(torch, 10 + rank)
    loss, dx, dy = loss_and_gradients(torch, x.to(f"cuda:{rank}"), y.to(f"cuda:{rank}"))
    torch.save(
        {"loss": loss.cpu(), "dx": dx.cpu(), "dy": dy.cpu(), "device": str(dx.device)},
        os.path.join(folder, f"rank{rank}.pt"),
    )


def test_one_process_per_gpu_equals_one_process():
    torch = need_two_gpus()
    import torch.multiprocessing as multiprocessing

    ranks = 2
    with tempfile.TemporaryDirectory() as folder:
        multiprocessing.spawn(_rank_step, args=(folder,), nprocs=ranks, join=True)
        for rank in range(ranks):
            saved = torch.load(os.path.join(folder, f"rank{rank}.pt"))
            assert saved["device"] == f"cuda:{rank}"
            # The same batch in this process, on GPU 0.
            x, y = batch(torch, 10 + rank)
            loss, dx, dy = loss_and_gradients(torch, x.to("cuda:0"), y.to("cuda:0"))
            np.testing.assert_allclose(saved["loss"].numpy(), loss.cpu().numpy(), rtol=1e-12)
            np.testing.assert_allclose(saved["dx"].numpy(), dx.cpu().numpy(), rtol=1e-10, atol=1e-14)
            np.testing.assert_allclose(saved["dy"].numpy(), dy.cpu().numpy(), rtol=1e-10, atol=1e-14)
