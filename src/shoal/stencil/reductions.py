"""Reductions over a stencil's grid, and the convergence conditions made from them.

``norm(u)``, ``u.sum()``, ``maximum_of(expr)`` build a :class:`Reduction`: nothing is
computed until ``.get()`` (or ``.future()``) sends it to the tiles. Comparing one with
a number makes a :class:`Condition`, which ``solve(until=...)`` evaluates on the
backend. The functions that build them live with the other field functions in
:mod:`.expr`.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

from .errors import UnsupportedOperationError, at_user

if TYPE_CHECKING:
    from .expr import Expr

__all__ = ["Condition", "Reduction"]


class Condition:
    """``reduction <op> threshold``: a convergence test evaluated on the backend."""

    __slots__ = ("reduction", "op", "threshold")

    def __init__(self, reduction: "Reduction", op: str, threshold: float):
        self.reduction, self.op, self.threshold = reduction, op, threshold

    def __bool__(self) -> bool:
        raise at_user(UnsupportedOperationError, "a convergence condition is evaluated on the backend; pass it as solve(until=...)")

    def __repr__(self) -> str:
        return f"<condition {self.reduction!r} {self.op} {self.threshold!r}>"


class Reduction:
    """A reduction of an expression over its box (all tiles): ``.get()`` its value, or
    compare it with a number to make a convergence condition for ``solve(until=...)``."""

    __slots__ = ("expr", "kind", "finish", "_pending")

    def __init__(self, expr: "Expr", kind: str, finish: str = "none"):
        self.expr, self.kind, self.finish = expr, kind, finish
        self._pending: Any = None

    def _compare(self, op: str, value: Any) -> Condition:
        if not isinstance(value, numbers.Real):
            raise at_user(UnsupportedOperationError, "a reduction can only be compared with a number")
        return Condition(self, op, float(value))

    def __lt__(self, v: Any) -> Condition:
        return self._compare("lt", v)

    def __le__(self, v: Any) -> Condition:
        return self._compare("le", v)

    def __gt__(self, v: Any) -> Condition:
        return self._compare("gt", v)

    def __ge__(self, v: Any) -> Condition:
        return self._compare("ge", v)

    def future(self) -> Any:
        """Send the reduction now; a future of its value (``.get()`` waits for it)."""
        if self._pending is None:
            st = self.expr._st
            assert st is not None
            self._pending = st._reduce(self)
        return self._pending

    def get(self) -> float:
        """The value (sends the reduction if needed and waits)."""
        return self.future().get()

    def __float__(self) -> float:
        return float(self.get())

    def __repr__(self) -> str:
        return f"<reduction {self.kind}{'+sqrt' if self.finish == 'sqrt' else ''} of {self.expr.node!r}>"
