"""Futures and the coroutine driver of ``async`` entry methods.

A :class:`Future` lives on the PE that created it (its *owner*). It can travel in
messages; a copy on another PE is a handle whose ``send`` messages the owner. The
owner awaits it (``await fut`` in async code) or blocks on it (``fut.get()`` in the
main program only). Coroutines are driven by the PE's scheduler, no asyncio loop.
"""

from __future__ import annotations

import sys
from time import perf_counter as _clock

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Generator

from ..errors import BlockingCallError, ShoalError
from . import context
from .context import current
from .failures import Failure, Outcomes
from .unretrieved import Unretrieved

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["Future", "gather", "Task", "each_outcome", "future_handle", "new_future"]

_PENDING, _DONE, _FAILED = 0, 1, 2
_PENDING_VALUE: Any = object()  # "no value travelled with this future"

_getframe = sys._getframe


def _thread_wait() -> Any:
    """The ``wait_for`` of the threaded entry method (a greenlet of :mod:`.threads`, or a
    pool task's) the caller runs in, else None: a greenlet that can block has that method,
    and until a program uses threads greenlet is not even imported."""
    g = sys.modules.get("greenlet")
    return None if g is None else getattr(g.getcurrent(), "wait_for", None)


class Future:
    """A value that will be available later; resolve it once with :meth:`send`."""

    __slots__ = ("_rt", "owner", "fid", "_state", "_value", "_callbacks", "_origin", "_unretrieved", "__weakref__")
    # `_unretrieved` is set only when the future fails (and read only then): it reports
    # the error if nothing ever retrieves it, as asyncio does
    #: a coroutine awaiting this future resumes the moment it resolves, not at the next
    #: step (for futures resolved mostly while messages are delivered: channel receives,
    #: all-reduce results; resolved inside an entry method, the waiter is queued anyway)
    _resume_now = False

    def __init__(self, *, _depth: int = 2) -> None:
        rt = current("shoal.Future()")
        self._rt: "Runtime | None" = rt
        self.owner = rt.pe
        self.fid = rt.future_table.register(self)
        self._state = _PENDING
        self._value: Any = None
        self._callbacks: list | None = None
        f = _getframe(_depth - 1)
        self._origin: Any = (f.f_code, f.f_lineno)  # formatted only when reported

    @classmethod
    def local(cls, rt: "Runtime", what: Any) -> "Future":
        """A future only this PE resolves (a channel receive): not registered for
        remote resolution; ``what`` describes it in reports."""
        fut = cls.__new__(cls)
        fut._rt, fut.owner, fut.fid = rt, rt.pe, 0
        fut._state, fut._value, fut._callbacks, fut._origin = _PENDING, None, None, what
        return fut

    @property
    def origin(self) -> str:
        """Where the future was created: ``file:line in function``."""
        o = self._origin
        if isinstance(o, str):
            return o
        if isinstance(o, tuple):
            if isinstance(o[0], str):  # (what, object): e.g. ("an allreduce of", element)
                return f"{o[0]} {o[1]!r}"
            code, line = o
            return f"{code.co_filename}:{line} in {code.co_name}"
        return f"a receive on {o!r}"

    # -- resolving ---------------------------------------------------------------
    def send(self, value: Any = None) -> None:
        """Resolve the future with ``value`` (from any PE, once)."""
        rt = current("Future.send()")
        if rt.pe != self.owner or self._rt is None:
            rt.send_future(self.owner, self.fid, value)
        else:
            self._resolve(value)

    def _resolve(self, value: Any) -> None:
        if self._state != _PENDING:
            if isinstance(value, Failure):
                return  # the first error wins; later ones add nothing
            raise ShoalError(f"future created at {self.origin} was already resolved; a future resolves once")
        if isinstance(value, Failure):
            self._state, self._value = _FAILED, value.exc
            if self._rt is not None:  # the owner's future (a handle's owner reports for it)
                self._unretrieved = Unretrieved(value.exc, self._rt, self)
        else:
            self._state, self._value = _DONE, value
        rt = self._rt
        if rt is not None and self.fid:
            rt.future_table.forget(self.fid)
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = None
            for cb in callbacks:
                cb(self)

    # -- waiting -----------------------------------------------------------------
    def done(self) -> bool:
        """Whether the future has a value (or an error)."""
        return self._state != _PENDING

    def result(self) -> Any:
        """The value of a resolved future (re-raising a remote error)."""
        if self._state == _DONE:
            return self._value
        if self._state == _FAILED:
            raise self._error()
        raise ShoalError(f"future created at {self.origin} is not resolved yet")

    def _outcome(self) -> Any:
        """What a resolved future resolved with, to pass on: its value, or its (now
        retrieved) error as a :class:`Failure`."""
        return self._value if self._state == _DONE else Failure(self._error())

    def _error(self) -> BaseException:
        """The exception of a failed future, now retrieved (so it is not reported)."""
        log = getattr(self, "_unretrieved", None)
        if log is not None:
            log.exc = None
        return self._value

    def get(self) -> Any:
        """Block until the value arrives, and return it: in the main program, or in an
        entry method decorated with :func:`shoal.threaded` (the PE serves other messages
        meanwhile)."""
        rt = current("Future.get()")
        if rt.counts.depth:
            wait = _thread_wait()
            if wait is not None:
                return wait(self)
            raise BlockingCallError(
                f"Future.get() called inside an entry method or async main (future created at "
                f"{self.origin}); blocking would stop this PE. Make the method `async def` and use "
                "`await fut`, or decorate it with @shoal.threaded."
            )
        if self._state == _PENDING:
            if self._rt is None:
                rt.await_remote(self)
            rt.engine.wait_main(self)
        if self._state == _DONE:
            return self._value
        return self.result()

    def add_done_callback(self, fn: Callable[["Future"], None]) -> None:
        """Call ``fn(self)`` when the future resolves (at once if it already has)."""
        if self._state != _PENDING:
            fn(self)
        elif self._callbacks is None:
            self._callbacks = [fn]
        else:
            self._callbacks.append(fn)

    def __await__(self) -> Generator["Future", None, Any]:
        if self._state == _PENDING:
            if self._rt is not context._current:
                if self._rt is None:  # a handle to another PE's future: ask for its value
                    current("await future").await_remote(self)
                else:
                    raise ShoalError(f"future created at {self.origin} on PE {self.owner} is awaited by another PE's code")
            yield self
        if self._state == _DONE:
            return self._value
        return self.result()

    # -- travelling --------------------------------------------------------------
    def __reduce__(self) -> tuple:
        rt = self._rt
        if rt is not None and self.fid:
            rt.future_table.travelled(self)  # its owner can answer waiters elsewhere while it lives
        origin = self._origin
        if type(origin) is not str:  # formatted once, for the first send
            origin = self._origin = self.origin
        if self._state == _PENDING:
            return (_rebuild_future, (self.owner, self.fid, origin))
        value = self._value if self._state == _DONE else Failure(self._value)
        return (_rebuild_future, (self.owner, self.fid, origin, value))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Future) and (self.owner, self.fid) == (other.owner, other.fid)

    def __hash__(self) -> int:
        return hash((self.owner, self.fid))

    def __repr__(self) -> str:
        state = ("pending", "done", "failed")[self._state]
        return f"<shoal.Future {state} owner=PE {self.owner} created at {self.origin}>"


class _OutcomesFuture(Future):
    """The future of a broadcast or multicast that resolves to every element's outcome."""

    __slots__ = ()

    def _resolve(self, value: Any) -> None:
        if isinstance(value, Failure):
            if type(value) is not Outcomes:
                return  # one element's error: it comes again in its place among the outcomes
            value = [o.exc if isinstance(o, Failure) else o for o in value.outcomes]
        Future._resolve(self, value)


def each_outcome(fut: Future) -> Future:
    """Make ``fut`` — the future a ``ret=True`` broadcast or multicast has just returned,
    before anything resolved it — resolve to every element's outcome, in index order:
    the value it returned, or the exception it raised. A plain ``ret=True`` future fails
    with the first error instead. (Only the futures of broadcasts and multicasts: the
    error of one element's call comes alone.)"""
    if type(fut) is not Future or fut._state != _PENDING or fut._rt is None:
        raise ShoalError(f"each_outcome() takes the pending future of a ret=True broadcast on this PE, not {fut!r}")
    fut.__class__ = _OutcomesFuture
    return fut


def new_future(back: int) -> Future:
    """A pending, registered Future, made as ``Future()`` in the frame ``back`` above the
    caller's: the Python reference of the compiled core's ``Core.new_future``."""
    return Future(_depth=back + 3)


def _rebuild_future(owner: int, fid: int, origin: str, value: Any = _PENDING_VALUE) -> Future:
    """A future that arrived in a message: the original on its owner, else this PE's
    handle of it (one per future), resolved at once if its value travelled with it."""
    rt = current("unpickling a Future")
    table = rt.future_table
    if rt.pe == owner:
        local = table.owned(fid)
        if local is not None:
            return local
    handle = table.handle(owner, fid)
    if handle is None:
        handle = _handle(owner, fid, origin)
        table.keep_handle(handle)
    if value is not _PENDING_VALUE and handle._state == _PENDING:
        handle._resolve(value)
    return handle


def future_handle(owner: int, fid: int) -> Future:
    """A handle to future ``fid`` of PE ``owner`` (for the reply of a ``ret=True`` call)."""
    rt = current("future_handle")
    if rt.pe == owner:
        local = rt.future_table.futures.get(fid)
        if local is not None:
            return local
    return _handle(owner, fid, "a ret=True call")


def _handle(owner: int, fid: int, origin: str) -> Future:
    """A pending stand-in on this PE for future ``fid`` of PE ``owner``."""
    handle = Future.__new__(Future)
    handle._rt, handle.owner, handle.fid = None, owner, fid
    handle._state, handle._value, handle._callbacks, handle._origin = _PENDING, None, None, origin
    return handle


def gather(*futures: Future) -> Future:
    """A future of the list of the values of ``futures``, in order."""
    out = Future(_depth=3)
    n = len(futures)
    if n == 0:
        out.send([])
        return out
    values: list = [None] * n
    left = [n]

    def collect(i: int) -> Callable[[Future], None]:
        def cb(f: Future) -> None:
            if out.done():
                return
            if f._state == _FAILED:
                out._resolve(Failure(f._error()))
                return
            values[i] = f._value
            left[0] -= 1
            if left[0] == 0:
                out._resolve(values)

        return cb

    for i, f in enumerate(futures):
        f.add_done_callback(collect(i))
    return out


class Task:
    """Drives one coroutine (an ``async`` entry method or main) on its PE."""

    __slots__ = ("rt", "coro", "on_done", "where", "waiting", "resume", "wake", "wake_now", "_counts", "load", "element")

    def __init__(self, rt: "Runtime", coro: Any, on_done: Callable[[Any, BaseException | None], None], where: str,
                 element: Any = None):
        self.rt = rt
        self.element = element  # the element whose async entry method this is (None for main)
        self.load = element._shoal_load if element is not None else None  # each resumption is timed into it
        self.coro = coro
        self.on_done = on_done
        self.where = where
        self.waiting: Future | None = None
        self.resume = self.step  # bound once: a coroutine waits and resumes many times
        self.wake = self._wake
        self.wake_now = self._wake_now
        self._counts = rt.counts
        core = getattr(rt, "_core", None)
        if core is not None:  # the compiled step and wake-up (_native/tasks.c); these are their reference
            self.resume = core.task_resume(self, Task.step)
            self.wake_now = core.task_wake_now(self, Task._wake_now)

    def step(self, _: Any = None, throw: BaseException | None = None) -> None:
        counts = self._counts
        counts.depth += 1
        load, rt = self.load, self.rt
        caller, rt.current_element = rt.current_element, self.element
        t0 = _clock() if load is not None else 0.0
        try:
            awaited = self.coro.send(None) if throw is None else self.coro.throw(throw)
        except StopIteration as stop:
            if load is not None:
                load[0] += _clock() - t0
            rt.current_element = caller
            counts.depth -= 1
            self.on_done(stop.value, None)
            return
        except BaseException as exc:  # noqa: BLE001 - every error is reported by on_done
            if load is not None:
                load[0] += _clock() - t0
            rt.current_element = caller
            counts.depth -= 1
            self.on_done(None, exc)
            return
        if load is not None:
            t1 = _clock()
            load[0] += t1 - t0
            if counts.depth == 1:
                rt.busy_time += t1 - t0
        rt.current_element = caller
        counts.depth -= 1
        if type(awaited) is not Future and not isinstance(awaited, Future):
            self._refuse(awaited)
            return
        self.waiting = awaited
        self.rt.suspended.add(self)
        wake = self.wake_now if awaited._resume_now else self.wake
        if awaited._state == _PENDING and awaited._callbacks is None:
            awaited._callbacks = [wake]  # add_done_callback, inlined
        else:
            awaited.add_done_callback(wake)

    def _refuse(self, awaited: Any) -> None:
        """End the coroutine, which awaited something that is not a shoal future."""
        self.coro.close()
        self.on_done(
            None,
            TypeError(
                f"{self.where} awaited {awaited!r}; shoal coroutines can await only shoal "
                "futures, channel receives, reductions and shoal.gather()/quiescence()"
            ),
        )

    def _wake(self, fut: Future) -> None:
        self.waiting = None
        rt = self.rt
        rt.suspended.discard(self)
        rt.ready.append(self.resume)

    def _wake_now(self, fut: Future) -> None:
        if self._counts.depth:  # resolved inside an entry method or coroutine: not nested in it
            self._wake(fut)
            return
        self.waiting = None
        self.rt.suspended.discard(self)
        self.step()

    def throw(self, exc: BaseException) -> None:
        """Resume the coroutine by raising ``exc`` at its ``await``."""
        self.rt.suspended.discard(self)
        self.step(throw=exc)
