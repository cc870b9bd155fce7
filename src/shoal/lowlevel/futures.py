"""Futures as a layer builds on them: made on behalf of its caller, resolved here without
a message, their outcome passed on to another future, and handles of other PEs' futures.

A :class:`shoal.Future` is owned by the PE that made it; a copy that arrives in a message
on another PE is a *handle*. Resolving with a :class:`~shoal.lowlevel.Failure` fails a future. A layer may
subclass :class:`shoal.Future` (the Charm4py layer's futures collect several values): every
resolution, the compiled core's included, calls the subclass's ``_resolve(value)`` (one of
the names ``_runtime/core_contract.py`` declares), so overriding it changes what resolving
means; the override ends with ``shoal.Future._resolve(self, value)``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from .._runtime.context import current
from .._runtime.failures import Failure
from .._runtime.futures import _DONE, Future

if TYPE_CHECKING:
    from typing import Any

__all__ = ["Failure", "new_future", "local_future", "resolve", "has_value", "outcome", "owner_key", "ask_owner"]


def new_future(back: int = 0) -> Future:
    """A pending :class:`shoal.Future` that any PE may resolve (``send``), made by the
    caller; reports name the caller's place, or ``back`` frames above it (a layer's
    helper that makes a future for its own caller passes 1)."""
    return Future(_depth=back + 3)


def local_future(description: Any, what: str = "this call") -> Future:
    """A pending future that only this PE resolves (with :func:`resolve`): not registered,
    so no other PE can send to it; ``description`` (a string, or a pair ``(words,
    object)``) says in reports what it waits for."""
    return Future.local(current(what), description)


def resolve(fut: Future, value: Any) -> None:
    """Resolve ``fut``, a future this PE owns, with ``value`` now (a :class:`Failure` fails
    it): its callbacks run and its waiters wake. Unlike ``fut.send(value)`` it never sends
    a message; resolving a future twice is an error, except with a later Failure."""
    fut._resolve(value)


def has_value(fut: Future) -> bool:
    """Whether ``fut`` resolved with a value (not pending, not failed)."""
    return fut._state == _DONE


def outcome(fut: Future) -> Any:
    """What the resolved ``fut`` resolved with, to pass on to another future: its value,
    or its error as a :class:`Failure` (the error counts as retrieved: it is not reported
    as lost)."""
    return fut._outcome()


def owner_key(fut: Future) -> object | None:
    """The :func:`job_key` of the PE that owns ``fut`` if ``fut`` is that original; None if
    it is a handle, a copy of another PE's future."""
    return fut._rt


def ask_owner(fut: Future, what: str = "this call") -> None:
    """Make the handle ``fut`` resolve on this PE: ask its owner to send the value once it
    has one (one request per handle, however often asked); nothing for an original."""
    if fut._rt is None:
        current(what).await_remote(fut)
