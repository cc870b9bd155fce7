"""Stage 3: lowering — a checked statement becomes a loop-nest kernel and a binding.

A :class:`Kernel` is what a printer turns into code: the number of axes, the element
type of each field *slot* (fields renamed in order of first appearance, so
``y = f(x)`` and ``x = f(y)`` share one kernel), the step of each loop, and the body:
a tree of typed operations whose loads are ``(slot, offset per axis)`` relative to the
written point. Every implicit conversion NumPy would make is an explicit ``cast`` here,
so a printer never has to know promotion rules. The per-tile part (which points of the
box a tile owns) is decided at run time by :func:`tile_box`.

Lowered expressions are tuples:
``("load", dtype, slot, offsets)``, ``("const", dtype, value)``, ``("cast", dtype, e)``,
``(unary_op, dtype, e)`` for neg/abs/sqrt/exp/sin/cos/square/recip,
``("one", dtype)``, ``(binary_op, dtype, l, r)`` (comparisons carry the type they
compare in), ``("where", dtype, c, a, b)``.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .analysis import BOOL, WEAK, StatementInfo, dtype_of, promote
from .nodes import COMPARE_OPS, Assign, Axis, Binary, Const, Node, Read, Unary, Where, digest

__all__ = ["Kernel", "Lowered", "lower_statement", "lower_group", "lower_reduction", "tile_box", "normalize_axes"]

REDUCTIONS = ("max", "min", "sum", "sumsq", "maxabs")


class Kernel(NamedTuple):
    """A loop nest over a box: ``target = body`` (or a reduction of ``body``)."""

    ndim: int
    slots: tuple[str, ...]  # dtype of each slot; slot 0 is the target of a statement
    steps: tuple[int, ...]  # loop step per axis (positive)
    body: tuple
    target_dtype: str | None  # None for a reduction
    scratch: bool  # compute into a scratch box first (the target is read at offsets)
    reduce: str | None  # one of REDUCTIONS for a reduction kernel
    fast_math: bool
    more: tuple = ()  # a statement group: further stores (slot, dtype, expr) at each point, in order

    def text(self) -> str:
        return repr(self)

    @property
    def key(self) -> str:
        return digest(self.text())


class Lowered(NamedTuple):
    kernel: Kernel
    binding: tuple[int, ...]  # field id of each slot
    box: tuple[tuple[int, int, int], ...]  # written box: (first position, step, count) per axis


def normalize_axes(axes: Sequence[Axis]) -> tuple[tuple[int, int, int], ...]:
    """The box of ``axes`` as ascending ``(first, step, count)`` per axis."""
    out = []
    for a in axes:
        if a.count <= 1:
            out.append((a.start, 1, a.count))
        elif a.step > 0:
            out.append((a.start, a.step, a.count))
        else:
            out.append((a.start + a.step * (a.count - 1), -a.step, a.count))
    return tuple(out)


def tile_box(box: Sequence[tuple[int, int, int]], lo: Sequence[int], hi: Sequence[int], ghost: Sequence[int],
             margins: Sequence[tuple[int, int]] | None = None) -> tuple[tuple[int, int], ...] | None:
    """The part of ``box`` in the tile that owns ``[lo, hi)`` and holds ``ghost[a]``
    layers on each side of axis ``a``: per axis ``(local first index, count)`` (local
    indices count the ghost layers), or None if it is empty. ``margins`` ((low, high)
    layers per axis) grows the tile's part into its ghosts (a deep pass computes
    there what its neighbour owns); what lies outside ``box`` stays out."""
    out = []
    for a, ((first, step, count), l, h, g) in enumerate(zip(box, lo, hi, ghost)):
        l0, h0 = (l - margins[a][0], h + margins[a][1]) if margins else (l, h)
        i0 = max(0, -((first - l0) // step))  # ceil((l0 - first) / step)
        i1 = min(count, -((first - h0) // step))
        if i1 <= i0:
            return None
        out.append((first + step * i0 - l + g, i1 - i0))
    return tuple(out)


class _Lowerer:
    def __init__(self, field_dtypes: Sequence[str], fast_math: bool):
        self.field_dtypes = field_dtypes
        self.fast_math = fast_math
        self.binding: list[int] = []
        self.offsets: list[tuple[int, ...]] = []
        self.read_index = 0

    def slot(self, field: int) -> int:
        if field not in self.binding:
            self.binding.append(field)
        return self.binding.index(field)

    def expr(self, node: Node, want: str) -> tuple:
        """``node`` lowered and converted to type ``want``."""
        e, dt = self._expr(node, want)
        return e if dt == want else ("cast", want, e)

    def _expr(self, node: Node, context: str) -> tuple[tuple, str]:
        if isinstance(node, Read):
            off = self.offsets[self.read_index]
            self.read_index += 1
            dt = self.field_dtypes[node.field]
            return ("load", dt, self.slot(node.field), off), dt
        if isinstance(node, Const):
            dt = node.dtype or context
            if dt not in ("float64", "float32"):  # Python numbers, NumPy integer scalars
                dt = context if context in ("float64", "float32") else "float64"
            return ("const", dt, _exact(node.value, dt)), dt
        if isinstance(node, Unary):
            dt = self._dtype(node)
            return (node.op, dt, self.expr(node.operand, dt)), dt
        if isinstance(node, Where):
            dt = self._dtype(node)
            cond = self.expr(node.cond, BOOL)
            return ("where", dt, cond, self.expr(node.a, dt), self.expr(node.b, dt)), dt
        if isinstance(node, Binary):
            ldt = dtype_of(node.left, self.field_dtypes)
            rdt = dtype_of(node.right, self.field_dtypes)
            dt = promote(ldt, rdt)
            if dt == WEAK:
                dt = "float64"
            if node.op == "pow" and isinstance(node.right, Const) and float(node.right.value) in (2.0, 0.5, -1.0, 1.0, 0.0):
                # NumPy's ``array ** scalar`` fast paths: square, sqrt, reciprocal, copy, ones
                base = self.expr(node.left, dt)
                e = float(node.right.value)
                lowered = {2.0: ("square", dt, base), 0.5: ("sqrt", dt, base), -1.0: ("recip", dt, base),
                           1.0: base, 0.0: ("one", dt)}[e]
                return lowered, dt
            left, right = self.expr(node.left, dt), self.expr(node.right, dt)
            if node.op in COMPARE_OPS:
                return (node.op, dt, left, right), BOOL
            return (node.op, dt, left, right), dt
        raise TypeError(f"cannot lower {node!r}")

    def _dtype(self, node: Node) -> str:
        dt = dtype_of(node, self.field_dtypes)
        # a where() of integer scalars (where(c, np.int64(3), 2)) is an integer in NumPy,
        # converted to the field's type when stored: its values go in as float64 literals
        # (exact below 2**53), since kernels compute in floating point only
        return "float64" if dt == WEAK or (dt != BOOL and np.dtype(dt).kind in "iu") else dt


def _exact(value: float | int | bool, dtype: str) -> float:
    """``value`` converted to ``dtype`` as NumPy converts it (as a Python float)."""
    return float(np.dtype(dtype).type(value))


def lower_statement(stmt: Assign, info: StatementInfo, field_dtypes: Sequence[str], fast_math: bool = False) -> Lowered:
    """The kernel and binding of a checked statement."""
    lw = _Lowerer(field_dtypes, fast_math)
    lw.offsets = list(info.offsets)
    lw.slot(stmt.target.field)
    target_dtype = field_dtypes[stmt.target.field]
    body = lw.expr(stmt.value, target_dtype)
    box = normalize_axes(stmt.target.axes)
    kernel = Kernel(
        ndim=len(box),
        slots=tuple(field_dtypes[f] for f in lw.binding),
        steps=tuple(s for _, s, _ in box),
        body=body,
        target_dtype=target_dtype,
        scratch=info.aliased,
        reduce=None,
        fast_math=fast_math,
    )
    return Lowered(kernel, tuple(lw.binding), box)


def lower_group(stmts: Sequence[Assign], infos: Sequence[StatementInfo], field_dtypes: Sequence[str],
                fast_math: bool = False) -> Lowered:
    """One loop nest for consecutive statements over the same box (a statement group).

    The caller checked that fusing keeps NumPy's meaning: no statement reads, at an
    offset, a field an earlier one of the group writes, or writes a field an earlier one
    reads at an offset. At each point the statements then run in order."""
    first = lower_statement(stmts[0], infos[0], field_dtypes, fast_math)
    lw = _Lowerer(field_dtypes, fast_math)
    lw.binding = list(first.binding)
    more = []
    for stmt, info in zip(stmts[1:], infos[1:]):
        lw.offsets, lw.read_index = list(info.offsets), 0
        dt = field_dtypes[stmt.target.field]
        slot = lw.slot(stmt.target.field)
        more.append((slot, dt, lw.expr(stmt.value, dt)))
    kernel = first.kernel._replace(slots=tuple(field_dtypes[f] for f in lw.binding), more=tuple(more))
    return Lowered(kernel, tuple(lw.binding), first.box)


def lower_reduction(kind: str, expr: Node, box_axes: Sequence[Axis], offsets: Sequence[tuple[int, ...]],
                    field_dtypes: Sequence[str], fast_math: bool = False) -> Lowered:
    """A kernel reducing ``expr`` over the box ``box_axes`` (reads at ``offsets`` from it)."""
    assert kind in REDUCTIONS, kind
    lw = _Lowerer(field_dtypes, fast_math)
    lw.offsets = list(offsets)
    dt = lw._dtype(expr)
    body = lw.expr(expr, dt)
    box = normalize_axes(box_axes)
    kernel = Kernel(len(box), tuple(field_dtypes[f] for f in lw.binding), tuple(s for _, s, _ in box),
                    body, None, False, kind, fast_math)
    return Lowered(kernel, tuple(lw.binding), box)
