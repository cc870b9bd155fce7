"""The pool's workers and scheduling, and ``map``/``map_async``.

One worker chare per PE (a Group made on first use) runs tasks. :class:`Slots`, a
state machine with no I/O, picks the PE of each task: the least busy, other PEs
first. Each other PE holds two tasks (one running, the next already there), so it
never idles while a reply travels. Under MPI the calling PE (PE 0 when ``main``
calls) holds one, because it runs its tasks between its polls and cannot read the
others' replies meanwhile; while many tasks wait the others hold three, to stay busy
for as long as it runs one. It takes its next task only after its next poll, so it
cannot keep the work to itself (its queue of same-PE messages is drained in batches).
"""
from __future__ import annotations

import concurrent.futures as cf
import inspect
import itertools
from functools import partial
from types import CoroutineType
from typing import Any, Callable, Iterable

from ..errors import BlockingCallError
from .._runtime.chare import Chare
from .._runtime.collections import Group
from .._runtime.context import current
from .._runtime.failures import Failure, annotate
from .._runtime.futures import Future
from .._runtime.message import encode
from .._runtime.threads import in_thread
from ._runner import run_task

__all__ = ["BrokenPool", "map", "map_async", "Slots", "workers", "send_error", "drop", "refuse_blocking", "task_name", "start_map"]

REMOTE_DEPTH = 2  # tasks in flight per other PE: one running, the next already there


class BrokenPool(cf.BrokenExecutor):
    """A pool task called ``sys.exit()``, or the job ended while tasks were pending:
    that task, every pending one and every later ``submit`` fail with this error."""


BrokenPool.__module__ = "shoal.pool"  # its public home (and how it pickles)


def task_name(fn: Any) -> str:
    """How a task's function is named in messages."""
    return getattr(fn, "__qualname__", None) or repr(fn)


def _failed(fn: Any, exc: BaseException) -> BaseException | None:
    """Note on a task's error that it was raised in the pool task (not in the worker);
    for ``sys.exit()``, the BrokenPool to raise instead. ``shoal.exit()`` stays
    SystemExit: it already asked every PE to end the job, as documented."""
    rt = current()
    if isinstance(exc, SystemExit):
        if rt.exit_requested:
            return None
        broken = BrokenPool(
            f"task {task_name(fn)} called sys.exit({exc.code!r}) on PE {rt.pe}, which breaks the pool; "
            "raise an exception to fail one task, or call shoal.exit(code) to end the whole job"
        )
        return annotate(broken, rt.pe, f"pool task {task_name(fn)}", with_traceback=False)
    annotate(exc, rt.pe, f"pool task {task_name(fn)}")
    return None


async def _guarded(fn: Any, coro: Any) -> Any:
    try:
        return await coro
    except (Exception, SystemExit) as exc:  # re-raised (not GeneratorExit: a coroutine closing)
        broken = _failed(fn, exc)
        if broken is None:
            raise
        raise broken from None


async def _chunk_async(fn: Any, items: list) -> list:
    out = []
    try:
        for x in items:
            out.append(await fn(x))
    except (Exception, SystemExit) as exc:  # re-raised (not GeneratorExit: a coroutine closing)
        broken = _failed(fn, exc)
        if broken is None:
            raise
        raise broken from None
    return out


def _call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    try:
        r = fn(*args, **kwargs)
    except (Exception, SystemExit) as exc:  # re-raised
        broken = _failed(fn, exc)
        if broken is None:
            raise
        raise broken from None
    return _guarded(fn, r) if type(r) is CoroutineType else r


def _chunk(fn: Callable[[Any], Any], items: list) -> Any:
    if inspect.iscoroutinefunction(fn):
        return _chunk_async(fn, items)
    try:
        return [fn(x) for x in items]
    except (Exception, SystemExit) as exc:  # re-raised
        broken = _failed(fn, exc)
        if broken is None:
            raise
        raise broken from None


class _Worker(Chare):
    """Runs pool tasks on its PE, each in a thread (a reused greenlet, ``_runner.py``),
    as ``@shoal.threaded`` entry methods run, so that a task may wait on other tasks
    (``map``, ``submit``'s futures) while its PE runs others; an ``async def`` task
    runs as a coroutine."""

    def __init__(self) -> None:
        self.rt = current("the pool's worker")
        self.runners: list = []  # parked runner threads, reused

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        return run_task(self, _call, (fn, args, kwargs))

    def chunk(self, fn: Callable[[Any], Any], items: list) -> Any:
        return run_task(self, _chunk, (fn, items))


def workers(rt: Any) -> Any:
    """The pool's worker Group of runtime ``rt`` (made on first use)."""
    group = rt.pool_workers
    if group is None:
        group = rt.pool_workers = Group(_Worker)
    return group


class Slots:
    """Which PE gets the next task: a pure state machine over the tasks in flight per PE.

    ``take(backlog)`` picks the other PE with the fewest tasks in flight (at most two;
    three while more than ``npes`` tasks wait and this PE's tasks run between its polls,
    so a PE has work queued for as long as this PE runs one of its own), or this PE
    when it has strictly fewer (at most one under MPI; two in-process, where every PE
    runs between the others' steps). ``give(pe)`` when a task on ``pe`` finished.
    """

    __slots__ = ("_npes", "_me", "_own", "_deep", "_count", "_levels")

    def __init__(self, npes: int, me: int, shared_thread: bool):
        self._npes, self._me = npes, me
        self._own = REMOTE_DEPTH if shared_thread else 1
        self._deep = not shared_thread
        self._count = [0] * npes
        # the other PEs by tasks in flight (dicts as ordered sets: O(1) moves, in turn)
        self._levels: list[dict[int, None]] = [dict.fromkeys(p for p in range(npes) if p != me)]
        self._levels += [{} for _ in range(REMOTE_DEPTH + 1)]

    def release(self, pe: int, rt: Any, then: Callable[[], None]) -> None:
        """A task on ``pe`` finished: free its slot and call ``then`` — at once for another
        PE, after this PE's next poll for its own (so replies from the others come first)."""
        if pe == rt.pe:
            rt.ready.append(partial(self._release_now, pe, then))
        else:
            self._release_now(pe, then)

    def _release_now(self, pe: int, then: Callable[[], None]) -> None:
        self.give(pe)
        then()

    def take(self, backlog: int) -> int | None:
        """The PE for the next of ``backlog`` waiting tasks (None: every PE is full)."""
        depth = REMOTE_DEPTH + 1 if self._deep and backlog > self._npes else REMOTE_DEPTH
        levels, k = self._levels, -1
        for level in range(depth):
            if levels[level]:
                k = level
                break
        own = self._count[self._me]
        if own < self._own and (k < 0 or own < k):
            self._count[self._me] = own + 1
            return self._me
        if k < 0:
            return None
        pe = next(iter(levels[k]))
        del levels[k][pe]
        levels[k + 1][pe] = None
        self._count[pe] = k + 1
        return pe

    def give(self, pe: int) -> None:
        """A task on ``pe`` finished."""
        k = self._count[pe]
        self._count[pe] = k - 1
        if pe != self._me:
            del self._levels[k][pe]
            self._levels[k - 1][pe] = None


def send_error(call: str, fn: Any, parts: list[tuple[str, Any]], exc: Exception) -> Exception:
    """The error of a task that cannot be sent, naming the user's call and the part
    that does not pickle (``exc`` itself if every part pickles alone)."""
    for label, obj in [(f"the function {task_name(fn)}", fn), *parts]:
        try:
            encode(obj)
        except Exception as err:  # noqa: BLE001 - its text goes into the message
            fix = (
                "define the function at module level, where it pickles by name"
                if obj is fn
                else "pass values that pickle (make locks, files and connections inside the task)"
            )
            return TypeError(
                f"{call}: cannot send {label} ({type(obj).__name__}) to the PEs: {err}; "
                f"tasks travel pickled, so {fix}"
            )
    return exc


def drop(f: Future) -> None:
    """Mark the error of a task as handled: its call already failed with an earlier one."""
    try:
        f.result()
    except BaseException:  # noqa: BLE001 - a call raises its first error only
        pass


def refuse_blocking(rt: Any, what: str, instead: str, threads_ok: bool = False) -> None:
    """Raise BlockingCallError when called inside an entry method or async code (but
    not, with ``threads_ok``, in a threaded method or a pool task, which may block)."""
    if rt.counts.depth and not (threads_ok and in_thread() is not None):
        where = "a synchronous main program, a @shoal.threaded method or a pool task" if threads_ok else (
            "a synchronous main program")
        raise BlockingCallError(
            f"{what} blocks, which only {where} may do; in async code "
            f"(an async main or entry method) use {instead}"
            + ("; or decorate the entry method with @shoal.threaded" if threads_ok else "")
        )


class _MapRun:
    """One ``map_async``: sends chunks to free slots, collects their results in order."""

    __slots__ = ("rt", "group", "call", "fn", "chunks", "chunksize", "results", "next", "left", "slots", "out")

    def __init__(self, rt: Any, call: str, fn: Any, chunks: list, chunksize: int, out: Future):
        self.rt, self.call, self.fn, self.chunks, self.chunksize, self.out = rt, call, fn, chunks, chunksize, out
        self.group = workers(rt)
        self.results: list = [None] * len(chunks)
        self.next = 0
        self.left = len(chunks)
        self.slots = Slots(rt.npes, rt.pe, len(rt.engine.runtimes) > 1)

    def pump(self) -> None:
        chunks, out = self.chunks, self.out
        while self.next < len(chunks) and not out.done():
            pe = self.slots.take(len(chunks) - self.next)
            if pe is None:
                return
            i = self.next
            self.next = i + 1
            try:
                fut = self.group[pe].chunk(self.fn, chunks[i], ret=True)
            except Exception as exc:  # noqa: BLE001 - reported at the waiter, in the user's words
                parts = [(f"item {i * self.chunksize + j}", x) for j, x in enumerate(chunks[i])]
                out._resolve(Failure(send_error(self.call, self.fn, parts, exc)))
                return
            fut.add_done_callback(partial(self.finished, i, pe))

    def finished(self, i: int, pe: int, f: Future) -> None:
        out = self.out
        if out.done():
            drop(f)
            return
        try:
            self.results[i] = f.result()
        except BaseException as exc:  # noqa: BLE001 - re-raised at the waiter
            out._resolve(Failure(exc))
            return
        self.left -= 1
        if self.left == 0:
            out._resolve(list(itertools.chain.from_iterable(self.results)))
        else:
            self.slots.release(pe, self.rt, self.pump)


def start_map(call: str, fn: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int) -> Future:
    if not callable(fn):
        raise TypeError(f"{call}: the function to map must be callable, not {type(fn).__name__}")
    if not isinstance(chunksize, int) or chunksize < 1:
        raise ValueError(f"{call}: chunksize must be an int of at least 1, not {chunksize!r}")
    rt = current(call)
    items = list(iterable)
    chunks = [items[i : i + chunksize] for i in range(0, len(items), chunksize)]
    out = Future(_depth=4)
    if not chunks:
        out.send([])
        return out
    _MapRun(rt, call, fn, chunks, chunksize, out).pump()
    return out


def map_async(fn: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int = 1) -> Future:
    """A :class:`shoal.Future` of ``[fn(x) for x in iterable]``, computed on all PEs.

    ``await shoal.pool.map_async(fn, items)`` in async code (an ``async`` main or entry
    method), where :func:`map` would raise :class:`~shoal.BlockingCallError`; from a
    synchronous main, ``.get()`` waits as :func:`map` does. The options, the scheduling
    and the errors are those of :func:`map`: ``chunksize`` (default 1) items travel as
    one task, and the future fails with the first error of a task.
    """
    return start_map("shoal.pool.map_async()", fn, iterable, chunksize)


def map(fn: Callable[[Any], Any], iterable: Iterable[Any], chunksize: int = 1) -> list:
    """``[fn(x) for x in iterable]`` computed on all PEs, in input order.

    * ``fn``: a function of one item; it and the items travel pickled, so define it at
      module level (where it pickles by name). It may be an ``async def`` function.
    * ``iterable``: the items; it is read to the end before the first task is sent.
    * ``chunksize`` (default 1): items per task. The default sends each item alone,
      which balances best; for many items of well under a millisecond each, pass more
      (e.g. ``len(items) // (4 * shoal.num_pes())``). An int of at least 1.

    Each task goes to the least busy PE, so uneven tasks balance; the PE that calls
    ``map`` (PE 0, which runs ``main``) runs tasks too. While it waits, ``map`` keeps
    this PE serving messages. The first error of a task is raised here; a task that
    calls ``sys.exit()`` raises :class:`BrokenPool`; an item that does not pickle raises
    a ``TypeError`` naming it.

    Call it from a synchronous main program, a ``@shoal.threaded`` entry method or a
    pool task: tasks may call ``map`` (and wait on :func:`submit`'s futures) however
    deep the recursion, since a waiting task lets its PE run others. In async code
    (where ``map`` raises :class:`~shoal.BlockingCallError`) use :func:`map_async`.
    """
    refuse_blocking(current("shoal.pool.map()"), "shoal.pool.map()", "`await shoal.pool.map_async(...)`", True)
    return start_map("shoal.pool.map()", fn, iterable, chunksize).get()
