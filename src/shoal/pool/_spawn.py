"""Tasks started one at a time: ``submit`` (a future of the value) and ``spawn`` (none).

Any code may start them, pool tasks included, so a search tree can grow as it runs.
Each PE spreads the tasks it starts with :class:`Spread`, a state machine with no I/O:
the next goes to the PE with the fewest of this PE's tasks still running. Nothing
waits for a free slot, so a task that blocks on its children (threaded, as every
pool task is) can never hold back the tasks it waits for: no deadlock at any depth.
"""

from __future__ import annotations

import weakref
from functools import partial
from typing import Any, Callable

from .._runtime.context import current
from .._runtime.failures import Failure
from .._runtime.futures import Future
from ._tasks import send_error, task_name, workers

__all__ = ["submit", "spawn", "start_submit", "start_spawn", "Spread"]


class Spread:
    """Which PE runs the next task started on this PE: the fewest of ours in flight,
    ties taken in turn starting after the last PE picked (other PEs first)."""

    __slots__ = ("_count", "_next")

    def __init__(self, npes: int, me: int):
        self._count = [0] * npes
        self._next = (me + 1) % npes

    def take(self) -> int:
        """The PE for the next task (counted in flight until :meth:`give`)."""
        count, n = self._count, len(self._count)
        order = [(self._next + k) % n for k in range(n)]
        pe = min(order, key=count.__getitem__)
        count[pe] += 1
        self._next = (pe + 1) % n
        return pe

    def give(self, pe: int) -> None:
        """A task on ``pe`` finished."""
        self._count[pe] -= 1


_spreads: "weakref.WeakKeyDictionary[Any, Spread]" = weakref.WeakKeyDictionary()


def _start(call: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> tuple[Any, Future]:
    if not callable(fn):
        raise TypeError(f"{call}: the task must be a callable, not {type(fn).__name__}")
    rt = current(call)
    spread = _spreads.get(rt)
    if spread is None:
        spread = _spreads[rt] = Spread(rt.npes, rt.pe)
    pe = spread.take()
    try:
        inner = workers(rt)[pe].call(fn, args, kwargs, ret=True)
    except Exception as exc:  # noqa: BLE001 - raised again in the caller's words
        spread.give(pe)
        parts = [(f"argument {i}", a) for i, a in enumerate(args)]
        parts += [(f"keyword argument {k!r}", v) for k, v in kwargs.items()]
        raise send_error(call, fn, parts, exc) from None
    inner.add_done_callback(lambda _: spread.give(pe))
    return rt, inner


def submit(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
    """Start ``fn(*args, **kwargs)`` as a pool task on some PE; a :class:`shoal.Future` of its value.

    Callable anywhere in a running job: the main program, entry methods, pool tasks
    (a task may start tasks and wait on them with ``.get()``; a search tree may grow
    as it runs). The task goes to the PE with the fewest of this PE's tasks running.
    Its error is raised by the future's ``get()``/``await``; the function and the
    arguments travel pickled (a part that does not pickle raises ``TypeError`` here).
    """
    return start_submit("shoal.pool.submit()", fn, args, kwargs, depth=4)


def spawn(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Start ``fn(*args, **kwargs)`` as a pool task on some PE, with no future (fire and forget).

    As :func:`submit`, but nothing waits for it: the task reports its results itself
    (to a future or an entry method it was given), ``shoal.quiescence()`` tells when
    all such work is done, and an error in it ends the job, as an error in an entry
    method that nobody waits for does.
    """
    start_spawn("shoal.pool.spawn()", fn, args, kwargs)


def start_submit(call: str, fn: Callable[..., Any], args: tuple, kwargs: dict, depth: int = 3) -> Future:
    """:func:`submit` as ``call`` (the name errors give); the future's origin is ``depth``
    frames up (2: the caller of this function)."""
    out = Future(_depth=depth)
    _, inner = _start(call, fn, args, kwargs)
    inner.add_done_callback(lambda f: out._resolve(f._outcome()))
    return out


def start_spawn(call: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    """:func:`spawn` as ``call`` (the name errors give)."""
    rt, inner = _start(call, fn, args, kwargs)
    inner.add_done_callback(partial(_report, rt, fn, call))


def _report(rt: Any, fn: Any, call: str, f: Future) -> None:
    outcome = f._outcome()
    if isinstance(outcome, Failure):
        rt.fail(outcome.exc, f"pool task {task_name(fn)} (started by {call})")
