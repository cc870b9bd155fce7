"""Where code may wait: blocking waits run in shoal's threads (greenlets of threaded
entry methods and pool tasks), never in a plain or ``async`` entry method, which would
stop the PE. A layer asks before it waits, to refuse in its own words."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from .._runtime import context, threads
from .._runtime.context import current

if TYPE_CHECKING:
    from typing import Any

__all__ = ["in_thread", "may_block", "running_element", "threads_waiting_in"]


def in_thread() -> bool:
    """Whether the caller runs in one of shoal's threads (a threaded entry method or a
    pool task), where it may block."""
    return threads.in_thread() is not None


def may_block() -> bool:
    """Whether the caller may wait here (``Future.get()``): outside every entry method
    (the main program, or no job at all) or in a thread; not in a plain or ``async`` entry
    method."""
    rt = context._current
    return rt is None or not rt.counts.depth or threads.in_thread() is not None


def running_element() -> Any:
    """The element whose entry method runs now on this PE; None in the main program or
    outside a job."""
    rt = context._current
    return None if rt is None else rt.current_element


def threads_waiting_in(element: Any, what: str = "this call") -> int:
    """How many threaded entry methods of ``element`` (on this PE) are suspended now."""
    rt = current(what)
    return sum(1 for t in rt.suspended if isinstance(t, threads.Thread) and t.element is element)
