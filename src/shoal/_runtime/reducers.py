"""Reducers: how a list of contributions combines into one value.

``shoal.reducers.sum`` and the other built-ins fold NumPy arrays element-wise into one
fresh accumulator; any function ``f(list_of_values) -> value`` is a reducer too. The
built-ins travel by name (pickle finds each as a global of this module).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import numpy as np

from ..errors import ReductionError

__all__ = ["Reducer", "reducers", "as_reducer", "BUILTINS", "BUILTIN_IDS", "BUILTIN_NAMES"]


class Reducer:
    """Combines a list of values into one; ``lift``/``finish`` wrap values for ``gather``."""

    __slots__ = ("name", "combine", "ordered")

    def __init__(self, name: str, combine: Callable[[list], Any], ordered: bool = False):
        self.name = name
        self.combine = combine
        self.ordered = ordered  # values are (index, value) pairs, finished by sorting

    def __reduce__(self) -> Any:
        return self.name if self.name in BUILTIN_NAMES else (Reducer, (self.name, self.combine, self.ordered))

    def __repr__(self) -> str:
        return f"<reducer {self.name}>"


_CLOSED = {np.add, np.multiply, np.maximum, np.minimum}  # same-dtype inputs give that dtype


def _fold(ufunc: Any, op: Callable[[Any, Any], Any]) -> Callable[[list], Any]:
    """Fold values pairwise; NumPy arrays element-wise into one fresh accumulator."""

    def combine(values: list) -> Any:
        if len(values) == 2:
            a, b = values
            if type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape and a.dtype == b.dtype and ufunc in _CLOSED:
                return ufunc(a, b)  # a fresh array of the same dtype: the common case
        arrays = [v for v in values if isinstance(v, np.ndarray)]
        if not arrays:
            return functools.reduce(op, values)
        shape = arrays[0].shape
        if len(arrays) != len(values) or any(a.shape != shape for a in arrays):
            shapes = sorted({str(getattr(v, "shape", type(v).__name__)) for v in values})
            raise ReductionError(f"contributions of shapes {' and '.join(shapes)} cannot be combined element-wise")
        acc = np.array(arrays[0], dtype=np.result_type(*arrays), copy=True)
        for v in arrays[1:]:
            ufunc(acc, v, out=acc)
        return acc

    return combine


def _concat(values: list) -> list:
    out: list = []
    for v in values:
        out.extend(v)
    return out


class _Reducers:
    """The built-in reducers: ``shoal.reducers.sum`` and friends."""

    sum = Reducer("sum", _fold(np.add, operator.add))
    product = Reducer("product", _fold(np.multiply, operator.mul))
    max = Reducer("max", _fold(np.maximum, max))
    min = Reducer("min", _fold(np.minimum, min))
    logical_and = Reducer("logical_and", _fold(np.logical_and, lambda a, b: bool(a) and bool(b)))
    logical_or = Reducer("logical_or", _fold(np.logical_or, lambda a, b: bool(a) or bool(b)))
    gather = Reducer("gather", _concat, ordered=True)
    nop = Reducer("nop", lambda values: None)


reducers = _Reducers()
BUILTIN_NAMES = {n for n in vars(_Reducers) if not n.startswith("_")}
#: built-in reducers by number: a compact REDUCE message names its reducer by 1 + this index
BUILTIN_IDS: dict[str, int] = {n: i for i, n in enumerate(sorted(BUILTIN_NAMES))}
BUILTINS: list[Reducer] = [getattr(reducers, n) for n in sorted(BUILTIN_NAMES)]
for _name in BUILTIN_NAMES:
    # pickle finds each built-in reducer as a module global under its own name
    globals()[_name] = getattr(reducers, _name)


def as_reducer(reducer: Any) -> Reducer:
    """A Reducer from a built-in or any callable ``f(list_of_values) -> value``."""
    if isinstance(reducer, Reducer):
        return reducer
    if callable(reducer):
        name = f"{getattr(reducer, '__module__', '?')}.{getattr(reducer, '__qualname__', repr(reducer))}"
        return Reducer(name, reducer)
    raise TypeError(f"{reducer!r} is not a reducer; use shoal.reducers.<name> or a function f(list) -> value")
