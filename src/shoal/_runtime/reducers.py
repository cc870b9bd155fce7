"""Reducers: how a list of contributions combines into one value.

``shoal.reducers.sum`` and the other built-ins fold NumPy arrays element-wise into one
fresh accumulator; any function ``f(list_of_values) -> value`` is a reducer too. The
built-ins travel by name (pickle finds each as a global of this module).
"""

from __future__ import annotations

import functools
import math
import operator

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

from ..errors import ReductionError
from ..numpy_types import ndarray

__all__ = ["Reducer", "reducers", "as_reducer", "BUILTINS", "BUILTIN_IDS", "BUILTIN_NAMES"]


class Reducer:
    """A named way to combine a list of values into one: what ``shoal.reducers.sum`` and
    the other built-ins are.

    Programs use the built-ins of :data:`shoal.reducers`, or pass any module-level
    function ``f(list_of_values) -> value`` where a reducer is expected (it is wrapped in
    a Reducer); they need not make one. ``combine`` receives partial results of its own
    as well as contributions, so it must accept its output as input and not depend on
    the order. ``ordered`` reducers get ``(index, value)`` pairs and finish by sorting;
    ``finish``, if given, is applied once to the combined value before it is delivered.
    """

    __slots__ = ("name", "combine", "ordered", "finish")

    def __init__(self, name: str, combine: Callable[[list], Any], ordered: bool = False,
                 finish: Callable[[Any], Any] | None = None):
        self.name = name
        self.combine = combine
        self.ordered = ordered  # values are (index, value) pairs, finished by sorting
        self.finish = finish  # applied once to the combined value before it is delivered

    def __reduce__(self) -> Any:
        if self.name in BUILTIN_NAMES:
            return self.name
        return (Reducer, (self.name, self.combine, self.ordered, self.finish))

    def __repr__(self) -> str:
        return f"<reducer {self.name}>"


_CLOSED = ("add", "multiply", "maximum", "minimum")  # same-dtype inputs give that dtype


def _fold(name: str, op: Callable[[Any, Any], Any]) -> Callable[[list], Any]:
    """Fold values pairwise; NumPy arrays element-wise (by NumPy's ``name`` ufunc) into
    one fresh accumulator."""
    closed = name in _CLOSED

    def combine(values: list) -> Any:
        array = ndarray()
        if len(values) == 2:
            a, b = values
            if closed and type(a) is array and type(b) is array and a.shape == b.shape and a.dtype == b.dtype:
                import numpy as np

                out = getattr(np, name)(a, b)  # a fresh array of the same dtype: the common case
                return out if a.ndim else np.asarray(out)  # 0-d in, 0-d out (a ufunc gives a scalar)
        arrays = [v for v in values if isinstance(v, array)]
        if not arrays:
            return functools.reduce(op, values)
        import numpy as np

        ufunc = getattr(np, name)
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


class _Exact:
    """An exact sum of floats: an integer count of 2**-1074 (the smallest step between
    doubles), so adding is exact, in any order; non-finite values are summed as floats."""

    __slots__ = ("total", "special")

    def __init__(self, total: Any, special: Any = None):
        self.total = total  # int, or an object array of ints for NumPy contributions
        self.special = special  # float sum of the non-finite values, if any (per element for arrays)

    def __reduce__(self) -> tuple:
        return _Exact, (self.total, self.special)


_SCALE = 1 << 1074


def _exact(value: Any) -> _Exact:
    if isinstance(value, _Exact):
        return value
    if isinstance(value, ndarray()):
        import numpy as np

        flat = value.astype(np.float64, copy=False).ravel()
        finite = np.isfinite(flat)
        total = np.array([_scaled(x) if ok else 0 for x, ok in zip(flat.tolist(), finite.tolist())], dtype=object)
        special = None if finite.all() else np.where(finite, 0.0, flat).reshape(value.shape)
        return _Exact(total.reshape(value.shape), special)
    x = float(value)
    return _Exact(_scaled(x), None) if math.isfinite(x) else _Exact(0, x)


def _scaled(x: float) -> int:
    n, d = x.as_integer_ratio()
    return n * (_SCALE // d)


def _exact_combine(values: list) -> _Exact:
    parts = [_exact(v) for v in values]
    total = parts[0].total
    for p in parts[1:]:
        total = total + p.total
    specials = [p.special for p in parts if p.special is not None]
    special = None
    if specials:
        special = specials[0]
        for s in specials[1:]:
            special = special + s
    return _Exact(total, special)


def _exact_finish(value: Any) -> Any:
    e = _exact(value)
    if isinstance(e.total, ndarray()):  # each element rounded once, correctly (int / int)
        import numpy as np

        out = np.array([t / _SCALE for t in e.total.ravel().tolist()], dtype=np.float64).reshape(e.total.shape)
        if e.special is not None:
            out = np.where(np.isfinite(e.special) & (e.special == 0.0), out, e.special)
        return out
    return float(e.special) if e.special is not None else e.total / _SCALE


class _Reducers:
    """The built-in reducers, ``shoal.reducers.<name>``; each is a :class:`Reducer`.

    * ``sum``, ``product``, ``max``, ``min``: of numbers, or element-wise of NumPy arrays
      of one shape (folded into one fresh accumulator);
    * ``logical_and``, ``logical_or``: of truth values, element-wise for arrays;
    * ``exact_sum``: a floating-point sum (of floats or float arrays) whose result does
      not depend on the PE count, the tree or the order contributions arrive in: exact,
      rounded once;
    * ``gather``: the list of all values, in element index order;
    * ``nop``: no value, just a signal (the result is None).

    Reproducibility: ``max``, ``min``, the logical reducers, ``gather``, ``exact_sum`` and
    ``sum``/``product`` of integers give the same bits on any number of PEs; ``sum`` and
    ``product`` of floats combine each PE's elements in index order, then its children's
    partials in PE order, up a tree whose shape depends on the PE count: the same bits on
    every run with the same PEs, whatever order messages arrive in, but the last bits
    may differ between PE counts.
    ``Chare.allreduce`` uses ``sum`` when no reducer is given.
    """

    sum = Reducer("sum", _fold("add", operator.add))
    product = Reducer("product", _fold("multiply", operator.mul))
    max = Reducer("max", _fold("maximum", max))
    min = Reducer("min", _fold("minimum", min))
    logical_and = Reducer("logical_and", _fold("logical_and", lambda a, b: bool(a) and bool(b)))
    logical_or = Reducer("logical_or", _fold("logical_or", lambda a, b: bool(a) or bool(b)))
    gather = Reducer("gather", _concat, ordered=True)
    nop = Reducer("nop", lambda values: None)
    #: a floating-point sum whose result does not depend on the PE count, the tree or the
    #: order contributions arrive in: exact, rounded once (floats and float arrays)
    exact_sum = Reducer("exact_sum", _exact_combine, finish=_exact_finish)


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
