"""Stage 2: analysis — shapes, grid axes, element types, read offsets, ghost needs.

The frontend calls :func:`combine` as it builds each operation (so a shape error is
raised at the user's statement) and :func:`analyze` on each finished statement. The
rules are NumPy's, restricted to what is a stencil:

* operands of an operation have equal shapes (or one is a scalar), and their axes are
  the same grid axes in the same order (no transposes, no broadcasting across axes);
* element types follow NEP 50: a Python number takes the type of the array it meets,
  NumPy scalars and arrays promote with ``np.result_type``;
* a read of a field is the written box shifted by a constant offset per axis, with the
  same step; the offset may be at most ``ghost_depth`` in each axis.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .errors import GhostDepthError, ShapeError, UnsupportedOperationError
from .nodes import COMPARE_OPS, Assign, Binary, Const, Node, Read, Unary, Where, reads, walk

__all__ = ["Meta", "combine", "promote", "dtype_of", "analyze", "StatementInfo", "numpy_only_reason"]

WEAK = "weak"
BOOL = "bool"


class Meta(NamedTuple):
    """What the frontend knows of an expression: NumPy shape, its grid axes, dtype."""

    shape: tuple[int, ...] | None  # None for a scalar
    axes: tuple[int, ...] | None  # grid axis of each shape axis
    dtype: str


_PROMOTED: dict[tuple[str, str], str] = {}


def promote(a: str, b: str) -> str:
    """The result type of an arithmetic operation on types ``a`` and ``b`` (NEP 50)."""
    if a == WEAK or a == b:
        return b
    if b == WEAK:
        return a
    r = _PROMOTED.get((a, b))
    if r is None:
        r = _PROMOTED[(a, b)] = np.result_type(np.dtype(a), np.dtype(b)).name
    return r


def _shape_text(m: Meta) -> str:
    return "a scalar" if m.shape is None else f"shape {m.shape}"


def combine(op: str, a: Meta, b: Meta, what: str) -> Meta:
    """The meta of ``a <op> b``; an error (raised at the caller) if they do not fit."""
    if a.dtype == BOOL or b.dtype == BOOL:
        raise UnsupportedOperationError(
            f"{what}: arithmetic or comparison on the result of a comparison is not supported; "
            "use where(condition, a, b) to choose between values"
        )
    shape, axes = _common(a, b, what)
    dtype = BOOL if op in COMPARE_OPS else promote(a.dtype, b.dtype)
    if dtype not in (BOOL, "float64", "float32"):
        raise UnsupportedOperationError(f"{what}: element type {dtype} is not supported (float64, float32)")
    return Meta(shape, axes, dtype)


def _common(a: Meta, b: Meta, what: str) -> tuple:
    if a.shape is None:
        return b.shape, b.axes
    if b.shape is None or (a.shape == b.shape and a.axes == b.axes):
        return a.shape, a.axes
    if a.shape != b.shape:
        raise ShapeError(
            f"shape mismatch in {what}: {_shape_text(a)} and {_shape_text(b)} "
            "(stencil operands must have equal shapes; broadcasting is not supported)"
        )
    raise UnsupportedOperationError(
        f"{what} combines grid axes {a.axes} with grid axes {b.axes}: operands of one shape "
        "must index the same grid axes in the same order (a transpose is not a stencil)"
    )


def where_type(a: str, b: str, na: Node, nb: Node) -> str:
    """The element type of ``where(c, a, b)`` with operands ``na``, ``nb`` of types ``a``,
    ``b``: as :func:`promote`, but a Python number (weak) meeting an integer type counts
    as what it is, as NumPy's NEP 50 rules say (``where(c, np.int64(3), 0.5)`` is float64,
    ``where(c, np.int64(3), 2)`` int64); two Python numbers give NumPy's default float."""
    dtype = promote(a, b)
    if dtype == WEAK:
        return "float64"
    weak = na if a == WEAK else nb if b == WEAK else None
    if isinstance(weak, Const) and dtype != BOOL and np.dtype(dtype).kind in "iu":
        dtype = np.result_type(np.dtype(dtype), weak.value).name
    return dtype


def where_meta(c: Meta, a: Meta, b: Meta, na: Node, nb: Node) -> Meta:
    if c.dtype != BOOL:
        raise UnsupportedOperationError("where(condition, a, b): the condition must be a comparison such as x > 0")
    ab_shape, ab_axes = _common(a, b, "where(...)")
    shape, axes = _common(c, Meta(ab_shape, ab_axes, WEAK), "where(...)")
    dtype = where_type(a.dtype, b.dtype, na, nb)
    if dtype == BOOL:
        raise UnsupportedOperationError("where(condition, a, b): a and b must be numbers or fields, not comparisons")
    return Meta(shape, axes, dtype)


def dtype_of(node: Node, field_dtypes: Sequence[str]) -> str:
    """Element type of ``node`` (fields ``i`` have ``field_dtypes[i]``)."""
    if isinstance(node, Read):
        return field_dtypes[node.field]
    if isinstance(node, Const):
        return node.dtype or WEAK
    if isinstance(node, Unary):
        return dtype_of(node.operand, field_dtypes)
    if isinstance(node, Binary):
        if node.op in COMPARE_OPS:
            return BOOL
        return promote(dtype_of(node.left, field_dtypes), dtype_of(node.right, field_dtypes))
    if isinstance(node, Where):
        return where_type(dtype_of(node.a, field_dtypes), dtype_of(node.b, field_dtypes), node.a, node.b)
    raise TypeError(f"not an expression: {node!r}")


#: (op, dtype) pairs compiled to C only under fast_math, because NumPy does not use the
#: C library's function for them (on x86-64 it has its own SIMD versions, which differ
#: from libm in the last bit); without fast_math such statements run with NumPy.
_NUMPY_ONLY = {("exp", "float64"), ("exp", "float32"), ("sin", "float32"), ("cos", "float32")}
#: on a GPU, CUDA's double sin/cos are not glibc's either (up to 2 ulp apart)
_NUMPY_ONLY_CUDA = _NUMPY_ONLY | {("sin", "float64"), ("cos", "float64")}
#: exponents NumPy's ``**`` turns into exact operations (square, sqrt, reciprocal, ...)
EXACT_POWERS = (2.0, 0.5, -1.0, 1.0, 0.0)


def numpy_only_reason(node: Node, field_dtypes: Sequence[str], point: bool = False, device: str = "cpu") -> str | None:
    """Why ``node`` cannot be compiled bit-exactly (for ``device``), or None. ``point``:
    every axis is indexed by an integer, so NumPy computes on scalars, and its scalar
    ``**`` is the C library's pow (not the array fast paths: ``(-0.0) ** 0.5`` is +0.0
    there)."""
    only = _NUMPY_ONLY_CUDA if device == "cuda" else _NUMPY_ONLY
    for n in walk(node):
        if isinstance(n, Unary):
            dt = dtype_of(n, field_dtypes)
            if (n.op, dt) in only:
                return f"{n.op} on {dt}"
        elif isinstance(n, Binary) and n.op == "pow":
            r = n.right
            if point or not (isinstance(r, Const) and float(r.value) in EXACT_POWERS):
                return f"** with exponent {dumps_short(r)} on {dtype_of(n, field_dtypes)}"
    return None


def dumps_short(node: Node) -> str:
    return repr(node.value) if isinstance(node, Const) else "an array"


class StatementInfo(NamedTuple):
    """What the backend needs to know about one statement, besides the statement."""

    offsets: tuple[tuple[int, ...], ...]  # per read (in `reads` order): offset per axis
    ghost_lo: dict[int, tuple[int, ...]]  # field -> depth needed below the box, per axis
    ghost_hi: dict[int, tuple[int, ...]]  # field -> depth needed above the box, per axis
    diagonal: bool  # some read is offset along two or more axes (corners needed)
    aliased: bool  # the written field is read at another point (needs a scratch copy)
    empty: bool  # the written box is empty: nothing to do
    value_dtype: str


def analyze(stmt: Assign, field_dtypes: Sequence[str], field_names: Sequence[str], ghost_depth: int,
            made_by: str = "initialize()") -> StatementInfo:
    """Check a statement's reads against its written box; errors name the field."""
    target = stmt.target
    empty = any(a.count == 0 for a in target.axes)
    offsets = []
    lo: dict[int, list[int]] = {}
    hi: dict[int, list[int]] = {}
    diagonal = aliased = False
    ndim = len(target.axes)
    for r in reads(stmt.value):
        off = []
        for k, (ta, ra) in enumerate(zip(target.axes, r.axes)):
            if ta.count > 1 and ra.step != ta.step:
                raise UnsupportedOperationError(
                    f"reading {field_names[r.field]} with step {ra.step} along axis {k} while writing "
                    f"{field_names[target.field]} with step {ta.step}: a stencil reads with the step it writes"
                )
            d = ra.start - ta.start
            if abs(d) > ghost_depth and not empty:
                raise GhostDepthError(
                    f"reading {field_names[r.field]} at offset {d:+d} along axis {k} from the written point "
                    f"needs ghost depth {abs(d)}, but ghost_depth is {ghost_depth}; pass ghost_depth={abs(d)} "
                    f"to {made_by}, which made this stencil (reads far across the grid, such as periodic "
                    "copies, are not stencils)"
                )
            off.append(d)
        offsets.append(tuple(off))
        if any(off):
            if r.field == target.field:
                aliased = True
            if sum(1 for d in off if d) > 1:
                diagonal = True
            lo_f = lo.setdefault(r.field, [0] * ndim)
            hi_f = hi.setdefault(r.field, [0] * ndim)
            for k, d in enumerate(off):
                lo_f[k] = max(lo_f[k], -d)
                hi_f[k] = max(hi_f[k], d)
    return StatementInfo(
        offsets=tuple(offsets),
        ghost_lo={f: tuple(v) for f, v in lo.items()},
        ghost_hi={f: tuple(v) for f, v in hi.items()},
        diagonal=diagonal,
        aliased=aliased,
        empty=empty,
        value_dtype=dtype_of(stmt.value, field_dtypes),
    )
