"""The exceptions timewarp raises, defined once for the Python layer and the
extension (which imports them from here).

Each is a `TimewarpError` and also the builtin exception that callers
already catch for its kind: `ValueError` for bad input and parameters,
`RuntimeError` for a failing GPU, `MemoryError` when memory runs out,
`OSError` for files. An interruption (Ctrl-C) raises `KeyboardInterrupt`
itself, which `except Exception` does not catch.

Their `__module__` is `timewarp`, where they are exported: tracebacks show
`timewarp.InputError`, and pickle finds each class again there, so an error
raised in another process (a Dask worker, multiprocessing) arrives as the
same class.
"""

from __future__ import annotations

__all__ = [
    "FileError",
    "GpuError",
    "GpuOutOfMemoryError",
    "InputError",
    "OutOfMemoryError",
    "TimewarpError",
]


# Each builtin base comes first: `MemoryError` and `OSError` have their own
# `__new__`, which Python lets make an instance only of a class whose first
# base leads to it. Unpicklers that call `cls.__new__(cls)` (tblib's, which
# Dask's workers use to send errors back) need it.


class TimewarpError(Exception):
    """The base of every error timewarp raises (but `KeyboardInterrupt`)."""


class InputError(ValueError, TimewarpError):
    """Bad input or parameters: NaN or infinite values, empty series or
    batches, different dimensions, a parameter outside its domain, an
    unknown metric or device, a result that overflowed its precision, a
    data file that does not parse."""


class GpuError(RuntimeError, TimewarpError):
    """No usable GPU where one was asked for, or the GPU failed: a driver
    call or kernel launch that failed, a device lost to the process, a wait
    for the device past its bound. The message names the call and the
    driver's code."""


class OutOfMemoryError(MemoryError, TimewarpError):
    """A result too large for the host's memory, refused before any work."""


class GpuOutOfMemoryError(OutOfMemoryError, GpuError):
    """The GPU's memory does not hold the computation: the driver refused an
    allocation, or the work needs more than the memory budget. A smaller
    batch or `device="cpu"` may succeed."""


class FileError(OSError, TimewarpError):
    """A file that cannot be read or written (`errno`, `strerror` and
    `filename` as for any `OSError`)."""


for _error in (
    TimewarpError,
    InputError,
    GpuError,
    OutOfMemoryError,
    GpuOutOfMemoryError,
    FileError,
):
    _error.__module__ = "timewarp"
del _error
