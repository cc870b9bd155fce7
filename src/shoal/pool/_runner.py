"""The threads that run pool tasks: made once per PE and reused.

Every pool task runs in a thread (a greenlet), so that it may wait on other tasks
while its PE runs others, as a ``@shoal.threaded`` entry method may. Making a greenlet
costs several microseconds, switching into a parked one a fraction of one; so each
worker keeps the runners whose task ended and gives them the next tasks. A runner is a
:class:`~shoal._runtime.threads.Thread` (``Future.get()``, ``pool.map`` and the
deadlock report treat it as one) whose greenlet loops over tasks instead of ending.
"""

from __future__ import annotations

from typing import Any, Callable

import greenlet

from .._runtime.failures import Failure
from .._runtime.futures import Future
from .._runtime.threads import Thread, _root

__all__ = ["run_task"]

IDLE_KEPT = 32  # runners a worker keeps parked; more end with their task


class _Done:
    """What a runner hands back when its task ended without waiting: value or error."""

    __slots__ = ("ok", "value")

    def __init__(self, ok: bool, value: Any):
        self.ok, self.value = ok, value


class _Runner(Thread):
    """A thread that runs one pool task after another."""

    def __init__(self, rt: Any, worker: Any):
        greenlet.greenlet.__init__(self, self._loop, parent=_root())  # not Thread's: no single call
        self.rt, self.element, self.fn = rt, worker, self._loop
        self.where = "a pool task (threaded)"
        self.waiting: Future | None = None
        self.finished: Future | None = None  # type: ignore[assignment]  # made when a task waits
        self.report_to = None
        self.idle: list = worker.runners

    def _loop(self, job: tuple) -> Any:
        while True:
            task, args = job
            self.where = f"pool task {getattr(args[0], '__qualname__', args[0])!r} (threaded)"
            try:
                done: _Done | None = _Done(True, task(*args))
            except greenlet.GreenletExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for the task
                done = _Done(False, exc)
            fut = self.finished
            if fut is not None:  # the task waited: its caller waits on this future instead
                self.finished = None
                assert done is not None
                fut._resolve(done.value if done.ok else Failure(done.value))
                done = None
            if len(self.idle) >= IDLE_KEPT:
                return done  # enough parked: this greenlet ends
            self.idle.append(self)
            job = self.parent.switch(done)

    def _end(self, outcome: Any) -> None:
        """The greenlet ended (its loop returned): the task's outcome went out already."""


def run_task(worker: Any, task: Callable[..., Any], args: tuple) -> Any:
    """``task(*args)`` in a runner of ``worker``: its value (or its error raised) if it did
    not wait; else a coroutine of its value, which the runtime drives as an async
    entry method's (the PE runs other messages meanwhile)."""
    idle = worker.runners
    runner = idle.pop() if idle else _Runner(worker.rt, worker)
    out = runner.switch((task, args))
    if type(out) is _Done:
        if out.ok:
            return out.value
        raise out.value
    fut = runner.finished = Future.local(runner.rt, ("the end of", runner))
    return _finish(fut)


async def _finish(fut: Future) -> Any:
    return await fut
