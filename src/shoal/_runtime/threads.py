"""Threaded entry methods: blocking waits that do not block the PE.

An entry method decorated with :func:`threaded` runs in a greenlet of its own. When
it blocks (``Future.get()`` on a pending future), the greenlet switches back to the
scheduler, which goes on serving messages; when the future resolves, the greenlet
resumes where it stopped, at the next step. Only code that runs in such a greenlet
may block inside an entry method; plain and ``async`` entry methods may not.

A threaded method that never blocks costs one greenlet switch in and out. One that
blocks returns, to the runtime, a coroutine that waits for the greenlet to end, so
its value and its errors take the path of an ``async`` entry method's.
"""

from __future__ import annotations

import functools
import inspect
from time import perf_counter as _clock
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import greenlet

from .context import current
from .failures import Failure
from .futures import Future

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["threaded", "Thread", "in_thread", "wait"]

F = TypeVar("F", bound=Callable[..., Any])


def threaded(fn: F) -> F:
    """Run entry method ``fn`` in a thread of its own (a greenlet), so that it may call
    ``Future.get()`` and other blocking waits: while it waits, the PE serves other
    messages, and other entry methods of the same element may run.

    A constructor may be threaded too; the element exists from the moment its
    ``__init__`` first blocks. Called directly by code that may block already (the
    main program, or another threaded method or pool task), it runs in the caller's
    thread, as a plain call.
    """
    if inspect.iscoroutinefunction(fn):
        raise TypeError(f"{fn.__qualname__} is `async def`: it awaits already; shoal.threaded is for plain methods")
    ctor = fn.__name__ == "__init__"

    @functools.wraps(fn)
    def start(self: Any, *args: Any, **kwargs: Any) -> Any:
        rt = current(f"threaded method {fn.__qualname__}")
        if not rt.counts.depth or in_thread() is not None:  # called by the main program or a thread:
            return fn(self, *args, **kwargs)  # it may block where it is (and return its own value)
        th = Thread(rt, self, fn, args, kwargs)
        value = th.switch()  # runs until it returns or first blocks
        if th.dead:
            return value
        if ctor:
            th.report_to = rt  # nobody waits for a constructor: its error ends the job
            return None
        return _finish(th.finished)

    start._shoal_threaded = True  # type: ignore[attr-defined]
    return start  # type: ignore[return-value]


async def _finish(fut: Future) -> Any:
    return await fut


class Thread(greenlet.greenlet):
    """One run of a threaded entry method."""

    def __init__(self, rt: "Runtime", el: Any, fn: Callable[..., Any], args: tuple, kwargs: dict):
        super().__init__(lambda: fn(el, *args, **kwargs), parent=_root())
        self.rt = rt
        self.element = el
        self.fn = fn
        self.where = f"{type(el).__qualname__}.{fn.__name__} of {_describe(el)} (threaded)"
        self.waiting: Future | None = None
        self.finished = Future.local(rt, ("the end of", self))
        self.report_to: "Runtime | None" = None

    def wait_for(self, fut: Future) -> Any:
        """Block this thread (the caller) until ``fut`` resolves; its value (or its error
        raised). ``Future.get()`` finds this method on the current greenlet."""
        if not fut.done():
            if fut._rt is None:  # a handle of another PE's future: ask for its value
                self.rt.await_remote(fut)
            return self.block(fut)
        return fut.result()

    def block(self, fut: Future) -> Any:
        """Suspend this thread until ``fut`` resolves (called in the thread); its value."""
        rt = self.rt
        self.waiting = fut
        rt.suspended.add(self)  # type: ignore[arg-type]  # a Task's duck: where, waiting, element
        fut.add_done_callback(self._wake)
        self.parent.switch()
        return fut.result()

    def _wake(self, fut: Future) -> None:
        if self.waiting is not fut:
            return  # a wait that interrupt() ended
        self.waiting = None
        rt = self.rt
        if rt.counts.depth == 0 and greenlet.getcurrent().parent is None:
            self.resume()  # a message resolved it: resume before the next message runs
        else:
            rt.ready.append(self.resume)

    def interrupt(self, exc: BaseException) -> None:
        """End this thread's wait, if it waits, by raising ``exc`` where it blocked
        (shoal serve: a client interrupted its request)."""
        if self.waiting is not None:
            self.waiting = None
            self.resume(exc)

    def resume(self, throw: BaseException | None = None) -> None:
        """Go on from the last block, as an entry method runs: counted, timed, current
        (``throw``: raise it there instead)."""
        rt, el = self.rt, self.element
        self.waiting = None
        rt.suspended.discard(self)  # type: ignore[arg-type]
        counts = rt.counts
        counts.depth += 1
        caller, rt.current_element = rt.current_element, el
        t0 = _clock()
        try:
            value = self.switch() if throw is None else self.throw(throw)
        except BaseException as exc:  # noqa: BLE001 - the entry method's error: its waiter hears
            self._end(Failure(exc))
        else:
            if self.dead:
                self._end(value)
        finally:
            t1 = _clock()
            if el._shoal_load is not None:
                el._shoal_load[0] += t1 - t0
            rt.current_element = caller
            counts.depth -= 1
            if not counts.depth:
                rt.busy_time += t1 - t0
        if el._shoal_pending:  # what it did may let held calls of its element run (conditions.py),
            from .conditions import recheck  # as entry methods: inside the count, so that a plain one

            counts.depth += 1  # may not block the PE, nor a threaded one run the main program's loop
            caller, rt.current_element = rt.current_element, el
            try:
                recheck(el)
            finally:
                rt.current_element = caller
                counts.depth -= 1

    def _end(self, outcome: Any) -> None:
        if self.report_to is None:
            self.finished._resolve(outcome)
        elif isinstance(outcome, Failure):
            self.report_to._entry_failed(self.element, self.fn, outcome.exc, None)

    def __repr__(self) -> str:
        return f"<thread of {self.where}>"


def _describe(el: Any) -> str:
    index = getattr(el, "index", "?")
    return f"element {index!r}"


def _root() -> greenlet.greenlet:
    """The greenlet that runs the scheduler of this OS thread (where blocked threads return)."""
    g = greenlet.getcurrent()
    while g.parent is not None:
        g = g.parent
    return g


def in_thread() -> Thread | None:
    """The thread the caller runs in, if it runs in one."""
    g = greenlet.getcurrent()
    return g if isinstance(g, Thread) else None


def wait(fut: Future) -> Any:
    """Block the calling thread until ``fut`` resolves; its value (or its error raised)."""
    th = in_thread()
    assert th is not None
    return th.wait_for(fut)
