"""Charm4py's Future: callable, ``num_vals`` values, ``ready()``/``waitReady``; and the
refusal of a wait where Charm4py would refuse it too, in Charm4py's words."""

from __future__ import annotations

from typing import Any, Callable

import shoal
from ... import Future
from ...errors import BlockingCallError
from ...lowlevel import Failure, may_block, running_element

__all__ = ["CompatFuture", "as_handle", "refuse_wait"]


def refuse_wait(what: str) -> None:
    """Raise BlockingCallError if the caller may not wait: a plain entry method (not
    ``@coro``/``@threaded``), which Charm4py refuses to suspend too."""
    if not may_block():
        el = running_element()
        where = f" (here: an entry method of {type(el).__qualname__})" if el is not None else ""
        raise BlockingCallError(
            f"{what} waits, which an entry method may do only if it is decorated with @coro "
            f"(or @threaded){where}; a plain one would stop PE {shoal.my_pe()}. Decorate the method with "
            "@coro, or pass the future on and let a @coro method or main() wait on it"
        )


def as_handle(fut: Any) -> Any:
    """``fut`` (a shoal Future, or None) with Charm4py's future methods."""
    if type(fut) is Future:
        fut.__class__ = _Handle
    return fut


class _Handle(Future):
    """Charm4py's future methods; a copy of a CompatFuture on another PE is one of these."""

    __slots__ = ()

    def __call__(self, value: Any = None) -> None:
        self.send(value)

    def get(self) -> Any:
        """The value, waiting for it (in main() or a @coro/@threaded method)."""
        if self.done():
            return self.result()  # a value already there: no wait (Charm4py's too)
        refuse_wait("Future.get()")
        return Future.get(self)

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
