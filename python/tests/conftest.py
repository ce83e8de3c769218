"""Shared helpers: optional dependencies and the GPU skip or fail like the
Rust suite (skip with the reason printed; fail under REQUIRE_GPU=1)."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import timewarp

REQUIRE_GPU = os.environ.get("REQUIRE_GPU") == "1"

# The GPU k-NN's lower bounds are not the default (the brute force is
# faster there today); this suite runs them, so that they are checked
# against the brute force (test_gpu.py).
os.environ.setdefault("TIMEWARP_GPU_KNN_BOUNDS", "1")


def _skip_or_fail(reason: str) -> None:
    if REQUIRE_GPU:
        pytest.fail(f"REQUIRE_GPU=1 but {reason}")
    print(f"skipped: {reason}", file=sys.stderr)
    pytest.skip(reason)


def need_gpu() -> None:
    if not timewarp.gpu_available():
        info = timewarp.info()
        reason = info.get("gpu_error") or "no usable GPU"
        for gpu in info["gpus"]:
            if gpu["reason"]:
                reason = gpu["reason"]
        _skip_or_fail(f"no usable GPU ({reason})")


def need_torch():
    try:
        import torch
    except ImportError:
        if REQUIRE_GPU:
            pytest.fail("REQUIRE_GPU=1 but torch is not installed")
        pytest.skip("torch is not installed")
    return torch


def need_cuda_torch():
    torch = need_torch()
    need_gpu()
    if not torch.cuda.is_available():
        _skip_or_fail("torch sees no CUDA device")
    return torch


@pytest.fixture
def gpu() -> None:
    need_gpu()


def assert_ctrl_c_stops(call, within: float = 2.0) -> None:
    """`call` (many seconds of work) raises KeyboardInterrupt within
    `within` seconds of a SIGINT sent 0.3 s after it starts; the SIGINT
    handler is Python's default meanwhile, and restored after."""
    import signal
    import threading
    import time

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        sent = []

        def interrupt():
            sent.append(time.perf_counter())
            os.kill(os.getpid(), signal.SIGINT)

        threading.Timer(0.3, interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            call()
        # Seconds to spare on a busy machine: the call alone takes many.
        assert time.perf_counter() - sent[0] < within
    finally:
        signal.signal(signal.SIGINT, previous)
