"""Charm4py's Future: callable, ``num_vals`` values, ``ready()``/``waitReady``."""

from __future__ import annotations

from typing import Any, Callable

from ..._runtime.futures import Failure, Future

__all__ = ["CompatFuture"]


class _Handle(Future):
    """Charm4py's future methods; a copy of a CompatFuture on another PE is one of these."""

    __slots__ = ()

    def __call__(self, value: Any = None) -> None:
        self.send(value)

    def ready(self) -> bool:
        return self.done()

    def waitReady(self, callback: Callable[[Any], None]) -> None:
        self.add_done_callback(callback)

    def __reduce__(self) -> tuple:
        fn, args = Future.__reduce__(self)
        return (_rebuild, (fn, args))


def _rebuild(fn: Callable, args: tuple) -> Future:
    fut = fn(*args)
    if type(fut) is Future:
        fut.__class__ = _Handle
    return fut


class CompatFuture(_Handle):
    """A shoal Future that Charm4py programs call to send (``fut(value)``) and that may
    collect ``num_vals`` values (then it resolves to their list, in arrival order)."""

    __slots__ = ("_wanted", "_got")

    def __init__(self, num_vals: int = 1):
        super().__init__(_depth=3)
        if num_vals < 1:
            raise ValueError(f"Future(num_vals={num_vals}): a future waits for at least one value")
        self._wanted = num_vals
        self._got: list | None = [] if num_vals > 1 else None

    def _resolve(self, value: Any) -> None:
        got = self._got
        if got is None or isinstance(value, Failure):
            Future._resolve(self, value)
            return
        got.append(value)
        if len(got) == self._wanted:
            self._got = None
            Future._resolve(self, got)
