"""Conditional entry methods and waits on an element's own state.

``@shoal.when(cond)`` holds a call back until ``cond(self, *args)`` is true; a
threaded method may block until ``cond(self)`` is true with :func:`wait_until`.
Held calls and waits are looked at again after every entry method of their element
runs, and after each resumption of one of its threads. That costs nothing for a class until one of its calls or waits is first held:
only then are its entry methods wrapped with the re-check (``_shoal_funcs`` swapped).
"""

from __future__ import annotations

import functools
from types import CoroutineType
from typing import Any, Callable, TypeVar

from .chare import entry_table
from .context import current
from .failures import Failure
from .futures import Future, Task

__all__ = ["when", "wait_until"]

F = TypeVar("F", bound=Callable[..., Any])


def when(condition: Callable[..., bool]) -> Callable[[F], F]:
    """Run the decorated entry method only once ``condition(self, *args, **kwargs)``
    is true; until then the call waits on its element (later calls may overtake it).
    A caller's ``ret=True`` future resolves when the call finally runs."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if condition(self, *args, **kwargs):
                return fn(self, *args, **kwargs)
            fut = Future.local(current("a conditional entry method"), ("a held call of", fn.__qualname__))
            _hold(self, (condition, fn, args, kwargs, fut))
            return _finish(fut)

        run._shoal_when = condition  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def wait_until(el: Any, condition: Callable[[Any], bool]) -> None:
    """Block the calling threaded method until ``condition(el)`` is true."""
    if condition(el):
        return
    fut = Future.local(current("waiting on a condition"), ("a wait of", el))
    _hold(el, (condition, None, (), {}, fut))
    fut.get()


async def _finish(fut: Future) -> Any:
    return await fut


def _hold(el: Any, held: tuple) -> None:
    pending = el._shoal_pending
    if pending is None:
        pending = el._shoal_pending = []
        _recheck_after_calls(type(el))
    pending.append(held)


_WRAPPED: set[type] = set()


def _recheck_after_calls(cls: type) -> None:
    """From now on, every entry method of ``cls`` looks at its element's held calls after it runs."""
    if cls in _WRAPPED:
        return
    _WRAPPED.add(cls)
    cls._shoal_funcs = tuple(_rechecking(f) for f in entry_table(cls).funcs)  # type: ignore[attr-defined]


def _rechecking(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        finally:
            if self._shoal_pending:
                recheck(self)

    return run


def recheck(el: Any) -> None:
    """Run the held calls of ``el`` whose condition is now true, and wake its waits,
    until none is ready (one that runs may make another one ready, or recheck in turn)."""
    pending = el._shoal_pending
    progress = True
    while progress and pending:
        progress = False
        for held in list(pending):
            condition, fn, args, kwargs, fut = held
            if not any(h is held for h in pending):
                continue  # a recheck that a call of this loop set off ran it already
            try:
                ready = condition(el) if fn is None else condition(el, *args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - the condition's error is the call's
                _remove(pending, held)
                fut._resolve(Failure(exc))
                continue
            if not ready:
                continue
            _remove(pending, held)
            progress = True
            if fn is None:
                fut._resolve(None)
            else:
                _run(el, fn, args, kwargs, fut)


def _remove(pending: list, held: tuple) -> None:
    """Take ``held`` itself out of ``pending``: by identity, since two held calls with
    equal arguments compare equal (as their local futures do)."""
    for i, h in enumerate(pending):
        if h is held:
            del pending[i]
            return


def _run(el: Any, fn: Callable[..., Any], args: tuple, kwargs: dict, fut: Future) -> None:
    try:
        r = fn(el, *args, **kwargs)
    except BaseException as exc:  # noqa: BLE001
        fut._resolve(Failure(exc))
        return
    if type(r) is CoroutineType:
        rt = current("a conditional entry method")
        Task(rt, r, lambda value, exc: fut._resolve(value if exc is None else Failure(exc)),
             f"{type(el).__qualname__}.{fn.__name__}", el).step()
    else:
        fut._resolve(r)
