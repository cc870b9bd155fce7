"""Exceptions raised by shoal, each naming what went wrong and how to fix it."""

from __future__ import annotations

import sys

__all__ = [
    "ShoalError",
    "NotRunningError",
    "BlockingCallError",
    "DeadlockError",
    "RemoteError",
    "ReductionError",
    "ChannelError",
    "MigrationError",
    "CheckpointError",
    "GPUError",
    "exit_code",
]


class ShoalError(Exception):
    """Base class of shoal's own errors."""


class NotRunningError(ShoalError):
    """A runtime accessor was called outside a running shoal program.

    Call it from the main function given to ``shoal.start()``/``shoal.run()``, from a
    chare, or, in a script or a notebook, after ``shoal.attach()``.
    """


class BlockingCallError(ShoalError):
    """A blocking wait was attempted inside an entry method or async code.

    ``Future.get()``, ``shoal.pool.map()`` and the waits of ``shoal.Executor`` futures
    would stop the PE there. Make the method ``async def`` and ``await`` (``await fut``,
    ``await shoal.pool.map_async(...)``), or decorate a plain entry method with
    ``shoal.threaded``.
    """


class DeadlockError(ShoalError):
    """The program is quiescent while something still waits on a future.

    Raised in the main program after ``SHOAL_DEADLOCK_TIMEOUT`` seconds of waiting, when
    no message is in flight on any PE and nothing can run; its text lists what waits
    on what.
    """


class RemoteError(ShoalError):
    """An exception raised on another PE that could not be sent back as itself (it does
    not pickle); its text is the original's type and message."""


class ReductionError(ShoalError):
    """Contributions to one reduction disagree (reducer, target or shape)."""


class ChannelError(ShoalError):
    """A channel was misused: wrong receive buffer, or a receive nothing can satisfy."""


class MigrationError(ShoalError):
    """An element cannot move: its state cannot be pickled, or it is in the middle of a
    coroutine or a receive."""


class CheckpointError(ShoalError):
    """A checkpoint cannot be written, or a checkpoint directory cannot be restored
    (missing, truncated or changed files, another version, classes that changed)."""


class GPUError(ShoalError):
    """A device array cannot be sent or received as asked: no CuPy, a buffer on a device
    this PE does not use, a posted buffer that does not match, a GPU path this job cannot take."""


def exit_code(exc: SystemExit) -> int:
    """The exit status ``exc`` asks for, as Python's own exit does: an int as it is, None
    as 0, anything else (``sys.exit("message")``) printed to stderr and 1."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr, flush=True)
    return 1
