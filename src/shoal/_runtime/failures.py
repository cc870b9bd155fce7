"""Exceptions travelling as values: a :class:`Failure` (one error) and :class:`Outcomes`
(a broadcast's, with every element's outcome), and the note of the PE and place each
was raised in (:func:`annotate`), so that a waiter on another PE sees where."""

from __future__ import annotations

__all__ = ["Failure", "Outcomes", "annotate"]


class Failure:
    """An exception travelling as a value, with where it was raised."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException):
        self.exc = exc

    def __reduce__(self) -> tuple:
        return (Failure, (_portable(self.exc),))


class Outcomes(Failure):
    """How a ``ret=True`` broadcast or multicast in which elements raised ends: its
    first error (``exc``: what a plain waiter gets, if no element's own error reached it
    first) and every element's outcome in index order (a value, or a :class:`Failure`).
    A future made by :func:`each_outcome` resolves to the outcomes instead."""

    __slots__ = ("outcomes",)

    def __init__(self, exc: BaseException, outcomes: list):
        super().__init__(exc)
        self.outcomes = outcomes

    def __reduce__(self) -> tuple:
        return (Outcomes, (_portable(self.exc), self.outcomes))


def _portable(exc: BaseException) -> BaseException:
    """``exc`` itself if it survives pickling, else a RemoteError carrying its text."""
    import pickle

    from ..errors import RemoteError

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        err = RemoteError(f"{type(exc).__qualname__}: {exc}")
        for note in getattr(exc, "__notes__", ()):
            err.add_note(note)
        return err


def annotate(exc: BaseException, pe: int, where: str, with_traceback: bool = True) -> BaseException:
    """Note on ``exc`` the PE and place it was raised (and its traceback, for waiters elsewhere)."""
    if getattr(exc, "_shoal_annotated", False):
        return exc
    note = f"[shoal] raised on PE {pe} in {where}"
    if with_traceback:
        from .tracebacks import format_user

        note += ":\n" + format_user(exc).rstrip()  # without shoal's frames (SHOAL_DEBUG=1 keeps them)
    exc.add_note(note)
    try:
        exc._shoal_annotated = True  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return exc
