"""Task pool: run plain functions on the PEs — ``map``, ``map_async`` and an Executor.

Work goes to one worker chare per PE (a Group created on first use). ``map`` keeps
two chunks in flight per PE and hands out the next chunk to whichever PE finishes,
so uneven tasks balance themselves. Functions and items must be picklable (define
functions at module level).
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
from typing import Any, Callable, Iterable, Iterator

from .errors import BlockingCallError
from .runtime.chare import Chare
from .runtime.collections import Group
from .runtime.context import current
from .runtime.futures import Failure, Future

__all__ = ["map", "map_async", "Executor"]

_IN_FLIGHT_PER_PE = 2


class _Worker(Chare):
    """Runs pool work on its PE."""

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        return fn(*args, **kwargs)

    def chunk(self, fn: Callable[[Any], Any], items: list) -> list:
        return [fn(x) for x in items]


def _workers() -> Any:
    rt = current("shoal.pool")
    group = rt.pool_workers
    if group is None:
        group = rt.pool_workers = Group(_Worker)
    return group


def map_async(fn: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int = 1) -> Future:
    """A future of ``[fn(x) for x in iterable]``, computed on all PEs; ``await`` it."""
    if chunksize < 1:
        raise ValueError(f"chunksize must be at least 1, not {chunksize}")
    workers = _workers()
    items = list(iterable)
    chunks = [items[i : i + chunksize] for i in range(0, len(items), chunksize)]
    out = Future(_depth=3)
    if not chunks:
        out.send([])
        return out
    results: list = [None] * len(chunks)
    state = {"next": 0, "left": len(chunks)}

    def submit(pe: int) -> None:
        i = state["next"]
        if i >= len(chunks) or out.done():
            return
        state["next"] = i + 1
        fut = workers[pe].chunk(fn, chunks[i], ret=True)
        fut.add_done_callback(lambda f: finished(i, pe, f))

    def finished(i: int, pe: int, f: Future) -> None:
        if out.done():
            return
        try:
            results[i] = f.result()
        except BaseException as exc:  # noqa: BLE001 - re-raised at the waiter
            out._resolve(Failure(exc))
            return
        state["left"] -= 1
        if state["left"] == 0:
            out._resolve(list(itertools.chain.from_iterable(results)))
        else:
            submit(pe)

    npes = current().npes
    for _ in range(_IN_FLIGHT_PER_PE):
        for pe in range(npes):
            submit(pe)
    return out


def map(fn: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int = 1) -> list:
    """``[fn(x) for x in iterable]`` computed on all PEs (from the main program)."""
    _no_blocking("shoal.pool.map()", "`await shoal.pool.map_async(...)`")
    return map_async(fn, iterable, chunksize).get()


class _PoolFuture(cf.Future):
    """A concurrent.futures.Future whose blocking waits keep the shoal PE serving."""

    def __init__(self, inner: Future):
        super().__init__()
        self._inner = inner
        self.set_running_or_notify_cancel()
        inner.add_done_callback(self._copy)

    def _copy(self, inner: Future) -> None:
        try:
            self.set_result(inner.result())
        except BaseException as exc:  # noqa: BLE001
            self.set_exception(exc)

    def result(self, timeout: float | None = None) -> Any:
        if not self.done():
            _drive(self._inner)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.done():
            _drive(self._inner)
        return super().exception(timeout)


def _drive(fut: Future) -> None:
    """Serve messages until ``fut`` resolves; its error is read from the copy."""
    _no_blocking("a shoal.Executor future's result()/exception()/shutdown(wait=True)", "await shoal.gather(...) of shoal futures")
    try:
        fut.get()
    except BaseException:  # noqa: BLE001 - copied into the concurrent.futures.Future
        pass


def _no_blocking(what: str, instead: str) -> None:
    if current(what).counts.depth:
        raise BlockingCallError(
            f"{what} blocks, which only a synchronous main program may do; in async code "
            f"(an async main or entry method) use {instead}"
        )


class Executor(cf.Executor):
    """A ``concurrent.futures.Executor`` that runs calls on the PEs of the job.

    Use it from the main program: ``result()`` and ``exception()`` keep this PE
    serving messages while they wait. Calls go to the PEs round-robin.
    """

    def __init__(self) -> None:
        self._workers = _workers()
        self._npes = current().npes
        self._next: Iterator[int] = itertools.cycle(range(self._npes))
        self._pending: list[Future] = []
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:  # type: ignore[override]
        if self._shutdown:
            raise RuntimeError("cannot submit to a shoal.Executor after shutdown()")
        inner = self._workers[next(self._next)].call(fn, args, kwargs, ret=True)
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(inner)
        return _PoolFuture(inner)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True
        if wait:
            for f in self._pending:
                _drive(f)
        self._pending = []
