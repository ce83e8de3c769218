"""The exception hierarchy: each error of the crate arrives in Python as a
`TimewarpError` and the builtin exception of its kind (`ValueError`,
`RuntimeError`, `MemoryError`, `OSError`), and an interruption as
`KeyboardInterrupt`. Errors reachable here are raised for real; the GPU's,
on machines without one, through examples the extension builds of each
variant of the crate's error."""

from __future__ import annotations

import errno
import pathlib

import numpy as np
import pytest

import timewarp
from timewarp import _timewarp

DATA = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data"


def test_the_hierarchy():
    for cls, builtin in [
        (timewarp.InputError, ValueError),
        (timewarp.GpuError, RuntimeError),
        (timewarp.OutOfMemoryError, MemoryError),
        (timewarp.GpuOutOfMemoryError, MemoryError),
        (timewarp.FileError, OSError),
    ]:
        assert issubclass(cls, timewarp.TimewarpError) and issubclass(cls, builtin), cls
    assert issubclass(timewarp.GpuOutOfMemoryError, timewarp.GpuError)
    assert issubclass(timewarp.GpuOutOfMemoryError, timewarp.OutOfMemoryError)
    assert issubclass(timewarp.TimewarpError, Exception)
    # Each builtin kind apart from the others.
    assert not issubclass(timewarp.InputError, (RuntimeError, MemoryError, OSError))
    assert not issubclass(timewarp.GpuError, (ValueError, MemoryError, OSError))
    assert not issubclass(timewarp.FileError, (ValueError, RuntimeError, MemoryError))
    assert not issubclass(timewarp.OutOfMemoryError, (ValueError, RuntimeError))


@pytest.mark.parametrize(
    "kind, cls, fragments",
    [
        ("invalid_parameter", timewarp.InputError, ["gamma"]),
        ("gpu_unavailable", timewarp.GpuError, ["no usable GPU"]),
        ("gpu", timewarp.GpuError, ["copying to the host", "CUDA_ERROR_INVALID_VALUE"]),
        (
            "gpu_out_of_memory",
            timewarp.GpuOutOfMemoryError,
            ["allocating device memory", "CUDA_ERROR_OUT_OF_MEMORY"],
        ),
        ("launch", timewarp.GpuError, ["launch", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"]),
        ("device_lost", timewarp.GpuError, ["lost", "CUDA_ERROR_ILLEGAL_ADDRESS"]),
        ("device_wait", timewarp.GpuError, ["past its bound"]),
        ("gpu_failure", timewarp.GpuError, ["unwritten"]),
    ],
)
def test_each_variant_maps_to_its_class(kind, cls, fragments):
    error = _timewarp._example_error(kind)
    assert type(error) is cls, (kind, type(error))
    for fragment in fragments:
        assert fragment in str(error), (kind, str(error))


def test_an_interruption_is_a_keyboard_interrupt():
    error = _timewarp._example_error("interrupted")
    assert type(error) is KeyboardInterrupt
    # Not caught by the handlers of ordinary errors.
    assert not isinstance(error, Exception)


def test_bad_parameters_are_input_errors():
    with pytest.raises(timewarp.InputError, match="gamma") as caught:
        timewarp.cdist(np.zeros((2, 3)), metric="soft_dtw", gamma=-1.0, device="cpu")
    assert isinstance(caught.value, ValueError)
    # Found by the Python layer too.
    with pytest.raises(timewarp.InputError, match="metric"):
        timewarp.cdist(np.zeros((2, 3)), metric="nope")
    with pytest.raises(timewarp.InputError, match="NaN or infinite|finite"):
        timewarp.cdist(np.array([[0.0, np.nan]]), device="cpu")


def test_a_missing_file_is_a_file_error(tmp_path):
    missing = tmp_path / "missing.ts"
    with pytest.raises(timewarp.FileError) as caught:
        timewarp.load(missing)
    error = caught.value
    assert isinstance(error, OSError) and isinstance(error, timewarp.TimewarpError)
    assert error.errno == errno.ENOENT
    assert error.filename == str(missing)
    assert error.strerror and "os error" not in error.strerror
    # The handler a caller writes for Python's own missing files catches it.
    with pytest.raises(OSError):
        timewarp.load(missing)


def test_a_file_that_does_not_parse_is_an_input_error(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2\n3,oops\n")
    with pytest.raises(timewarp.InputError, match="bad.csv:2"):
        timewarp.load(bad)
    assert timewarp.load(DATA / "GunPoint_TRAIN.ts")[0].shape == (50, 150, 1)


def test_a_result_too_large_is_out_of_memory():
    with pytest.raises(timewarp.OutOfMemoryError) as caught:
        timewarp.cdist(np.zeros((5_000_000, 1)), device="cpu")
    assert isinstance(caught.value, MemoryError)
    assert not isinstance(caught.value, timewarp.GpuError)


@pytest.mark.parametrize(
    "error",
    [
        timewarp.InputError("bad"),
        timewarp.GpuError("failed"),
        timewarp.OutOfMemoryError("too large"),
        timewarp.GpuOutOfMemoryError("too large"),
        timewarp.FileError(errno.ENOENT, "No such file or directory", "a.ts"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_errors_survive_tblibs_pickling(error):
    # Dask's workers send errors back through tblib, which makes the
    # instance with `cls.__new__(cls)`: a class whose first base does not
    # lead to MemoryError's or OSError's own `__new__` fails there.
    pickling = pytest.importorskip("tblib.pickling_support")
    function, arguments = pickling.pickle_exception(error)[:2]
    restored = function(*arguments)
    assert type(restored) is type(error)
    assert str(restored) == str(error)
