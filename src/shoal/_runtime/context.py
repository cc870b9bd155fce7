"""Which PE's runtime is running now: the context every accessor reads.

There is no runtime at import time. The engine sets the current one before it runs
anything on a PE (several in-process PEs take turns in one thread).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from ..errors import NotRunningError

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["current", "set_current", "my_pe", "num_pes", "RunningState"]

_current: "Runtime | None" = None


class RunningState:
    """What the compiled core reads and writes of a PE's runtime at every coroutine step,
    kept in slots (a fixed offset rather than a dictionary look-up): the element whose
    code runs now, and the coroutines suspended on a future."""

    __slots__ = ("current_element", "suspended")


def current(what: str = "this call") -> "Runtime":
    """The running PE's runtime; a clear error outside a running program."""
    rt = _current
    if rt is None:
        raise NotRunningError(
            f"{what} was called outside a running shoal program; "
            "call it from the main function passed to shoal.start() or from a chare, "
            "or, in a script or a notebook, call shoal.attach() first (the job starts there)"
        )
    return rt


def set_current(rt: "Runtime | None") -> "Runtime | None":
    """Make ``rt`` the running PE's runtime; return the previous one."""
    global _current
    previous, _current = _current, rt
    return previous


def my_pe() -> int:
    """The number of the PE this code runs on (0 … ``num_pes() - 1``)."""
    return current("shoal.my_pe()").pe


def num_pes() -> int:
    """How many PEs the job has."""
    return current("shoal.num_pes()").npes
