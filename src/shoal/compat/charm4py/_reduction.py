"""Charm4py's reducers: element-wise over lists, ``array.array`` and NumPy arrays,
``logical_xor``, ``gather``, and ``Reducer.addReducer`` for user functions."""

from __future__ import annotations

import array
import functools
import operator
from typing import Any, Callable

import numpy as np

import shoal

__all__ = ["Reducer", "as_reducer"]


def _elementwise(ufunc: Any, op: Callable[[Any, Any], Any]) -> Callable[[list], Any]:
    """Combine scalars with ``op``; lists, tuples and ``array.array`` element by element;
    NumPy arrays with ``ufunc.reduce`` (as Charm4py's reducers do)."""

    def combine(values: list) -> Any:
        first = values[0]
        if isinstance(first, (np.ndarray, np.generic)):
            return ufunc.reduce(values)
        if isinstance(first, array.array):
            out = array.array(first.typecode, first)
            for v in values[1:]:
                for j, x in enumerate(v):
                    out[j] = op(out[j], x)
            return out
        if isinstance(first, (list, tuple)):
            items = list(first)
            for v in values[1:]:
                for j, x in enumerate(v):
                    items[j] = op(items[j], x)
            return items
        return functools.reduce(op, values)

    return combine


class _Named(shoal.Reducer):
    """A Charm4py reducer: it travels by name (every PE registers the same ones)."""

    __slots__ = ("pre",)

    def __init__(self, name: str, combine: Callable[[list], Any], finish: Callable | None = None,
                 pre: Callable | None = None):
        super().__init__(name, combine, finish=finish)
        self.pre = pre  # pre(data, chare): what a chare contributes, prepared
        _BY_NAME[name] = self

    def __reduce__(self) -> Any:
        return (_named, (self.name,))


_BY_NAME: dict[str, _Named] = {}


def _named(name: str) -> _Named:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"reducer {name!r} is not registered on this PE: call Reducer.addReducer at "
                         "module level, so that every PE runs it") from None


class _Reducers:
    """``Reducer.sum`` and the rest; ``Reducer.addReducer(f)`` adds ``Reducer.f``. They are
    attributes of the instance, as Charm4py's are (programs look them up in
    ``Reducer.__dict__``)."""

    def __init__(self) -> None:
        self.sum = _Named("c4p_sum", _elementwise(np.add, operator.add))
        self.product = _Named("c4p_product", _elementwise(np.multiply, operator.mul))
        self.max = _Named("c4p_max", _elementwise(np.maximum, max))
        self.min = _Named("c4p_min", _elementwise(np.minimum, min))
        self.logical_and = _Named("c4p_and", _elementwise(np.logical_and, lambda a, b: bool(a) and bool(b)))
        self.logical_or = _Named("c4p_or", _elementwise(np.logical_or, lambda a, b: bool(a) or bool(b)))
        self.logical_xor = _Named("c4p_xor", _elementwise(np.logical_xor, lambda a, b: bool(a) ^ bool(b)))
        self.gather = shoal.reducers.gather
        self.nop = shoal.reducers.nop

    def addReducer(self, func: Callable[[list], Any], pre: Callable | None = None,
                   post: Callable | None = None) -> None:
        """Register ``func(contributions) -> value`` as ``Reducer.<its name>`` (on every
        PE: call it at module level); ``pre(data, chare)`` prepares each contribution,
        ``post(value)`` the result."""
        name = func.__name__
        if hasattr(self, name):
            raise ValueError(f"a reducer named {name!r} is registered already")
        setattr(self, name, _Named(f"c4p.{name}", func, finish=post, pre=pre))


Reducer = _Reducers()


def as_reducer(reducer: Any) -> Any:
    """A shoal reducer for what a Charm4py program passes (a Reducer.x, or a plain function)."""
    if isinstance(reducer, shoal.Reducer):
        return reducer
    if callable(reducer):
        return shoal.Reducer(getattr(reducer, "__name__", "custom"), reducer)
    raise TypeError(f"{reducer!r} is not a reducer: use Reducer.sum, Reducer.gather, ... or "
                    "a function registered with Reducer.addReducer")
