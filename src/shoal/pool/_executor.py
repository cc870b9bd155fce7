"""``shoal.Executor``: a ``concurrent.futures.Executor`` over the pool's workers.

The main program is the PE's only thread, so whatever waits on an Executor future
must serve the PE meanwhile. ``result()``, ``exception()`` and ``shutdown(wait=True)``
do; ``concurrent.futures.wait`` and ``as_completed`` block on the ``threading.Event``
of a waiter they add to each future's ``_waiters``: those lists give every waiter a
:class:`_ServingEvent`, whose ``wait(timeout)`` serves the PE until it is set.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections import deque
from functools import partial
from typing import Any, Callable, Iterable

from .._runtime.context import current
from .._runtime.futures import Future
from .._runtime.threads import in_thread, wait
from ._tasks import BrokenPool, Slots, drop, refuse_blocking, send_error, task_name, workers

__all__ = ["Executor"]

_INSTEAD = "`await` on shoal futures (shoal.pool.map_async, or ret=True calls)"


class _PoolFuture(cf.Future):
    """A concurrent.futures.Future of one task; its blocking waits serve the PE."""

    def __init__(self, executor: "Executor", fn: Callable[..., Any], args: tuple, kwargs: dict):
        super().__init__()
        self._waiters = _Waiters(self)
        self._executor = executor
        self._call: tuple | None = (fn, args, kwargs)  # dropped once sent
        self._name = task_name(fn)
        self._inner: Future | None = None  # the worker's reply, once sent

    def result(self, timeout: float | None = None) -> Any:
        """The task's value; raises its error, or TimeoutError after ``timeout`` seconds."""
        if not self.done():
            _block("a shoal.Executor future's result()", self.done, timeout, (self,))
        return super().result(0)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The task's error (None if it succeeded), or TimeoutError after ``timeout`` seconds."""
        if not self.done():
            _block("a shoal.Executor future's exception()", self.done, timeout, (self,))
        return super().exception(0)


class _ServingEvent(threading.Event):
    """A waiter's event whose ``wait`` serves the PE (the futures it is set by are here)."""

    def __init__(self, is_set: bool):
        super().__init__()
        self.futures: list[_PoolFuture] = []
        if is_set:
            self.set()

    def wait(self, timeout: float | None = None) -> bool:
        if not self.is_set():
            _block("concurrent.futures.wait()/as_completed() of shoal.Executor futures", self.is_set, timeout, self.futures)
        return self.is_set()


class _Waiters(list):
    """A future's ``_waiters``: swaps each added waiter's event for a :class:`_ServingEvent`."""

    def __init__(self, future: _PoolFuture):
        super().__init__()
        self.future = future

    def append(self, waiter: Any) -> None:
        event = waiter.event
        if type(event) is not _ServingEvent:
            event = waiter.event = _ServingEvent(event.is_set())
        event.futures.append(self.future)
        super().append(waiter)


def _block(what: str, done: Callable[[], bool], timeout: float | None, futures: Iterable[_PoolFuture]) -> bool:
    """Serve this PE until ``done()`` or ``timeout`` seconds pass; False on timeout.

    If the job ends meanwhile (``shoal.exit`` on some PE), the executors of ``futures``
    break and the main program ends with the job's exit code.
    """
    rt = current(what)
    if rt.counts.depth and in_thread() is not None:
        return _block_thread(rt, done, timeout, futures)
    refuse_blocking(rt, what, _INSTEAD)
    deadline = None if timeout is None else rt.engine.clock() + max(timeout, 0.0)

    def waiting() -> Future | None:
        for f in futures:
            inner = f._inner
            if inner is not None and not inner.done():
                return inner
        return None

    try:
        return rt.engine.wait_main_until(done, deadline, waiting)
    except SystemExit as exc:
        for ex in {id(f._executor): f._executor for f in futures}.values():
            ex._break(f"the job ended with exit code {exc.code} (shoal.exit() was called)")
        raise


def _block_thread(rt: Any, done: Callable[[], bool], timeout: float | None, futures: Iterable[_PoolFuture]) -> bool:
    """:func:`_block` in a thread (a pool task, a threaded method): the thread waits, its
    PE runs other messages; False on timeout."""
    futures = list(futures)
    deadline = None if timeout is None else rt.engine.clock() + max(timeout, 0.0)
    while not done():
        left = None if deadline is None else deadline - rt.engine.clock()
        if left is not None and left <= 0:
            return False
        wake = Future.local(rt, "a wait on shoal.Executor futures")

        def ring(_: Any, wake: Future = wake) -> None:
            if not wake.done():
                wake._resolve(None)

        pending = [f for f in futures if not f.done()]
        if not pending:
            return done()
        for f in pending:
            f.add_done_callback(ring)
        if left is not None:
            rt.call_later(left, partial(ring, None))
        wait(wake)
    return True


class Executor(cf.Executor):
    """A ``concurrent.futures.Executor`` that runs calls on the PEs of the job.

    ``shoal.Executor()`` takes no options: its workers are the PEs of the running job
    (it raises :class:`~shoal.NotRunningError` outside one). Use it from the main
    program, as a context manager (``with shoal.Executor() as ex:``, which calls
    ``shutdown(wait=True)`` at the end) or by itself. The methods are those of
    ``concurrent.futures.Executor``:

    * ``submit(fn, /, *args, **kwargs)``: a ``concurrent.futures.Future`` of
      ``fn(*args, **kwargs)`` run on some PE;
    * ``map(fn, *iterables, timeout=None, chunksize=1)``: an iterator of the results in
      input order, each item submitted as its own task (``chunksize`` is accepted and
      ignored, as by ``ThreadPoolExecutor``; :func:`shoal.pool.map` batches items);
      ``timeout`` seconds count from the call;
    * ``shutdown(wait=True, *, cancel_futures=False)``.

    Each call goes to the least busy PE (two tasks per PE, one on the main program's
    PE, which runs its tasks while the main program waits); the rest wait here, and
    ``cancel()`` works until a task is sent. Functions, arguments and results travel
    pickled (a part that does not pickle fails the future with a ``TypeError`` naming
    it). ``result()``, ``exception()``, ``concurrent.futures.wait`` and ``as_completed``
    serve this PE while they wait and honour timeouts between tasks: a task that runs
    in this process (on this PE; in-process, on any PE) is not interrupted. In a pool
    task or a ``@shoal.threaded`` method they wait in its thread. In async
    code they raise :class:`~shoal.BlockingCallError` (use
    :func:`shoal.pool.map_async` there). A task may be an ``async def`` function. A
    task calling ``sys.exit()`` breaks the executor (:class:`BrokenPool`).
    """

    def __init__(self) -> None:
        rt = current("shoal.Executor()")
        self._rt = rt
        self._workers = workers(rt)
        self._slots = Slots(rt.npes, rt.pe, len(rt.engine.runtimes) > 1)
        self._queue: deque[_PoolFuture] = deque()  # submitted, not sent yet
        self._running: set[_PoolFuture] = set()  # sent, not finished
        self._shutdown = False
        self._broken: str | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:  # type: ignore[override]
        """Schedule ``fn(*args, **kwargs)`` on some PE; a ``concurrent.futures.Future`` of it.

        Raises :class:`BrokenPool` once the executor is broken, and ``RuntimeError``
        after :meth:`shutdown`.
        """
        if self._broken is not None:
            raise BrokenPool(f"cannot submit {task_name(fn)} to a broken shoal.Executor: {self._broken}")
        if self._shutdown:
            raise RuntimeError("cannot submit to a shoal.Executor after shutdown()")
        fut = _PoolFuture(self, fn, args, kwargs)
        self._queue.append(fut)
        self._pump()
        return fut

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submits. ``cancel_futures`` (default False) cancels the tasks not sent
        to a PE yet; ``wait`` (default True) waits for the rest, serving this PE."""
        self._shutdown = True
        if cancel_futures:
            while self._queue:
                self._queue.popleft().cancel()
        if wait and (self._queue or self._running):
            pending = [*self._queue, *self._running]
            _block("shoal.Executor.shutdown(wait=True)", lambda: not (self._queue or self._running), None, pending)

    # -- sending and finishing -----------------------------------------------------
    def _pump(self) -> None:
        queue, slots = self._queue, self._slots
        while queue:
            pe = slots.take(len(queue))
            if pe is None:
                return
            fut = queue.popleft()
            if not fut.set_running_or_notify_cancel():
                slots.give(pe)  # cancelled before it was sent
                continue
            fn, args, kwargs = fut._call  # type: ignore[misc]
            fut._call = None
            try:
                inner = self._workers[pe].call(fn, args, kwargs, ret=True)
            except Exception as exc:  # noqa: BLE001 - the future carries it, in the user's words
                slots.give(pe)
                parts = [(f"argument {i}", a) for i, a in enumerate(args)]
                parts += [(f"keyword argument {k!r}", v) for k, v in kwargs.items()]
                fut.set_exception(send_error("shoal.Executor.submit()", fn, parts, exc))
                continue
            fut._inner = inner
            self._running.add(fut)
            inner.add_done_callback(partial(self._finished, fut, pe))

    def _finished(self, fut: _PoolFuture, pe: int, inner: Future) -> None:
        self._running.discard(fut)
        if not fut.done():  # not already failed by a broken pool
            try:
                value = inner.result()
            except BrokenPool as exc:
                fut.set_exception(exc)
                self._break(str(exc))
            except BaseException as exc:  # noqa: BLE001 - the future carries it
                fut.set_exception(exc)
            else:
                fut.set_result(value)
        else:
            drop(inner)
        self._slots.release(pe, self._rt, self._pump)

    def _break(self, reason: str) -> None:
        """Fail every pending future with BrokenPool; refuse later submits."""
        if self._broken is None:
            self._broken = reason
        pending = [*self._queue, *self._running]
        self._queue.clear()
        self._running.clear()
        for fut in pending:
            if not fut.done():
                state = "was running" if fut.running() else "had not started"
                fut.set_exception(BrokenPool(f"the shoal.Executor broke while task {fut._name} {state}: {reason}"))
