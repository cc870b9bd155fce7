"""The NumPy evaluator: runs a statement on a tile's arrays with NumPy itself.

It is the reference the C kernels are tested against, and the fallback where no C
compiler exists or where only NumPy's own function gives NumPy's bits (``exp`` on
x86-64, for one). It evaluates the recorded tree with the very operations the user
wrote (``a ** b`` through the operator, Python numbers left as Python numbers), on
views of the tile's part of the box, so every element is computed exactly as the same
statement on whole arrays computes it.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

import numpy as np

from .nodes import Assign, Axis, Binary, Const, Node, Read, Unary, Where, walk

__all__ = ["evaluate", "run_statement", "run_reduction", "views"]

_UNARY: dict[str, Callable] = {
    "neg": operator.neg, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "sin": np.sin, "cos": np.cos,
}
_BINARY: dict[str, Callable] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "pow": operator.pow, "minimum": np.minimum, "maximum": np.maximum,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}


def const_value(node: Const) -> Any:
    """The scalar as the user gave it: a Python number, or a NumPy scalar of its type."""
    return node.value if node.dtype is None else np.dtype(node.dtype).type(node.value)


def evaluate(node: Node, load: Callable[[Read], np.ndarray]) -> Any:
    """The value of ``node``; ``load(read)`` gives the array of each read, called in
    the order of :func:`shoal.stencil.nodes.reads`."""
    if isinstance(node, Read):
        return load(node)
    if isinstance(node, Const):
        return const_value(node)
    if isinstance(node, Unary):
        return _UNARY[node.op](evaluate(node.operand, load))
    if isinstance(node, Binary):
        left = evaluate(node.left, load)
        return _BINARY[node.op](left, evaluate(node.right, load))
    if isinstance(node, Where):
        c = evaluate(node.cond, load)
        a = evaluate(node.a, load)
        return np.where(c, a, evaluate(node.b, load))
    raise TypeError(f"cannot evaluate {node!r}")


def views(tb: Sequence[tuple[int, int]], steps: Sequence[int], offsets: Sequence[int],
          reverse: Sequence[bool] = ()) -> tuple[slice, ...]:
    """Slices of a tile's local array: the tile's box ``tb`` shifted by ``offsets``;
    axes in ``reverse`` run backwards, as the user's slice did."""
    out = []
    for k, ((b, n), st, o) in enumerate(zip(tb, steps, offsets)):
        first, last = b + o, b + o + st * (n - 1)
        if reverse and reverse[k]:
            out.append(slice(last, first - 1 if first > 0 else None, -st))
        else:
            out.append(slice(first, last + 1, st))
    return tuple(out)


def reversed_axes(axes: Sequence[Axis]) -> tuple[bool, ...]:
    """Which axes the user sliced with a negative step. NumPy takes another code path on
    negative strides for some functions (``**``, ``exp``), even for one element: the
    views must have the user's strides too."""
    return tuple(a.step < 0 and not a.squeezed for a in axes)


def user_steps(axes: Sequence[Axis]) -> tuple[int, ...]:
    """The magnitude of the user's step per axis (the stride of a one-element view too)."""
    return tuple(abs(a.step) or 1 for a in axes)


def _loader(arrays: Sequence[np.ndarray], tb: Sequence[tuple[int, int]], steps: Sequence[int],
            offsets: Sequence[tuple[int, ...]], point: bool = False,
            reverse: Sequence[bool] = ()) -> Callable[[Read], Any]:
    it = iter(offsets)
    if point:  # every axis indexed by an integer: NumPy computes on scalars (its scalar math)
        return lambda r: arrays[r.field][tuple(b + o for (b, _), o in zip(tb, next(it)))]
    return lambda r: arrays[r.field][views(tb, steps, next(it), reverse)]


def run_statement(stmt: Assign, offsets: Sequence[tuple[int, ...]], steps: Sequence[int],
                  arrays: Sequence[np.ndarray], tb: Sequence[tuple[int, int]]) -> None:
    """``stmt`` on one tile: ``arrays[f]`` is field f's local array, ``tb`` the tile's box."""
    point = all(a.squeezed for a in stmt.target.axes)
    reverse = reversed_axes(stmt.target.axes)
    steps = user_steps(stmt.target.axes)
    with np.errstate(all="ignore"):  # the compiled kernels do not warn either
        value = evaluate(stmt.value, _loader(arrays, tb, steps, offsets, point, reverse))
    arrays[stmt.target.field][views(tb, steps, (0,) * len(tb), reverse)] = value


def run_reduction(kind: str, expr: Node, offsets: Sequence[tuple[int, ...]], steps: Sequence[int],
                  arrays: Sequence[np.ndarray], tb: Sequence[tuple[int, int]]) -> float:
    """This tile's partial of a reduction (combined across tiles by the backend)."""
    rs = [n for n in walk(expr) if isinstance(n, Read)]
    reverse = reversed_axes(rs[0].axes) if rs else ()
    steps = user_steps(rs[0].axes) if rs else steps
    with np.errstate(all="ignore"):
        v = np.asarray(evaluate(expr, _loader(arrays, tb, steps, offsets, False, reverse)))
    if kind == "max":
        return float(np.max(v))
    if kind == "min":
        return float(np.min(v))
    if kind == "maxabs":
        return float(np.max(np.abs(v)))
    if kind == "sum":
        return float(np.sum(v, dtype=np.float64))
    if kind == "sumsq":
        d = v.astype(np.float64)
        return float(np.sum(d * d))
    raise ValueError(kind)
