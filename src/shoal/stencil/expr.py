"""Stage 0: the user-facing values — fields, slices of them, and operations on them.

Slicing a :class:`Field` and doing arithmetic builds expression nodes; nothing is
computed. Each operation is checked as it is built (shapes, grid axes, types), so a
mistake raises at the user's own line. The functions here (``sqrt``, ``where``, ...)
also accept plain NumPy arrays and then just call NumPy, so one step function can run
on NumPy arrays (the reference) and on fields alike; ``np.sqrt(field_expr)`` works too.

Two neighbours hold what a field builds on: :mod:`.indexing` (which positions an index
selects) and :mod:`.reductions` (the :class:`Reduction` and :class:`Condition` values
that ``norm``, ``total``, ``maximum_of`` and ``minimum_of`` here return). Their names
are importable from this module too, where the frontend and the package import them.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from .analysis import Meta, combine, where_meta
from .errors import UnsupportedOperationError, at_user
from .indexing import index_axes
from .nodes import Binary, Const, Node, Read, Unary, Where
from .reductions import Condition, Reduction

if TYPE_CHECKING:
    from .frontend import Stencil

__all__ = ["Expr", "Field", "Reduction", "Condition", "sqrt", "exp", "sin", "cos", "absolute",
           "minimum", "maximum", "where", "norm", "total", "maximum_of", "minimum_of"]


def _raise(exc: Exception) -> Any:
    """Re-raise a checking error with the user's file:line in front."""
    raise at_user(type(exc), str(exc)) from None


def _operand(x: Any, what: str) -> tuple[Node, Meta]:
    if isinstance(x, Expr):
        return x.node, x.meta
    if isinstance(x, Field):
        e = x[...]
        return e.node, e.meta
    if isinstance(x, (bool, np.bool_)):
        raise at_user(UnsupportedOperationError, f"{what}: a boolean scalar is not a stencil operand")
    if isinstance(x, np.generic) and np.ndim(x) == 0:
        if x.dtype.kind not in "fiu":
            raise at_user(UnsupportedOperationError, f"{what}: NumPy scalar of type {x.dtype} is not supported")
        value = float(x) if x.dtype.kind == "f" else int(x)
        return Const(value, x.dtype.name), Meta(None, None, x.dtype.name)
    if isinstance(x, numbers.Real):
        return Const(float(x) if not isinstance(x, int) else int(x)), Meta(None, None, "weak")
    if isinstance(x, np.ndarray):
        raise at_user(
            UnsupportedOperationError,
            f"{what}: a NumPy array cannot be mixed into a stencil expression; "
            "store it into a field first with field.from_numpy(array)",
        )
    raise at_user(UnsupportedOperationError, f"{what}: operand of type {type(x).__name__} is not supported")


def _binary(op: str, a: Any, b: Any, sym: str) -> "Expr":
    what = f"'{sym}'"
    na, ma = _operand(a, what)
    nb, mb = _operand(b, what)
    try:
        meta = combine(op, ma, mb, what)
    except Exception as exc:  # a checking error: raise it at the user's line
        _raise(exc)
    st = _stencil_of(a, b)
    return Expr(st, Binary(op, na, nb), meta)


def _unary(op: str, a: Any) -> "Expr":
    na, ma = _operand(a, op)
    if ma.dtype == "bool":
        raise at_user(UnsupportedOperationError, f"{op} of a comparison is not supported")
    return Expr(_stencil_of(a), Unary(op, na), ma)


def _stencil_of(*xs: Any) -> "Stencil | None":
    found = None
    for x in xs:
        st = getattr(x, "_st", None)
        if st is not None:
            if found is not None and st is not found:
                raise at_user(UnsupportedOperationError, "an expression mixes fields of two different stencils")
            found = st
    return found


_UFUNCS = {
    np.add: "add", np.subtract: "sub", np.multiply: "mul", np.true_divide: "div", np.power: "pow",
    np.minimum: "minimum", np.maximum: "maximum", np.less: "lt", np.less_equal: "le", np.greater: "gt",
    np.greater_equal: "ge", np.equal: "eq", np.not_equal: "ne",
}
_UNARY_UFUNCS = {np.negative: "neg", np.absolute: "abs", np.sqrt: "sqrt", np.exp: "exp", np.sin: "sin", np.cos: "cos"}


class _Ops:
    """Arithmetic shared by expressions and whole fields."""

    __array_priority__ = 1000

    def __add__(self, o: Any) -> "Expr":
        return _binary("add", self, o, "+")

    def __radd__(self, o: Any) -> "Expr":
        return _binary("add", o, self, "+")

    def __sub__(self, o: Any) -> "Expr":
        return _binary("sub", self, o, "-")

    def __rsub__(self, o: Any) -> "Expr":
        return _binary("sub", o, self, "-")

    def __mul__(self, o: Any) -> "Expr":
        return _binary("mul", self, o, "*")

    def __rmul__(self, o: Any) -> "Expr":
        return _binary("mul", o, self, "*")

    def __truediv__(self, o: Any) -> "Expr":
        return _binary("div", self, o, "/")

    def __rtruediv__(self, o: Any) -> "Expr":
        return _binary("div", o, self, "/")

    def __pow__(self, o: Any) -> "Expr":
        return _binary("pow", self, o, "**")

    def __rpow__(self, o: Any) -> "Expr":
        return _binary("pow", o, self, "**")

    def __lt__(self, o: Any) -> "Expr":
        return _binary("lt", self, o, "<")

    def __le__(self, o: Any) -> "Expr":
        return _binary("le", self, o, "<=")

    def __gt__(self, o: Any) -> "Expr":
        return _binary("gt", self, o, ">")

    def __ge__(self, o: Any) -> "Expr":
        return _binary("ge", self, o, ">=")

    def __eq__(self, o: Any) -> "Expr":  # type: ignore[override]
        return _binary("eq", self, o, "==")

    def __ne__(self, o: Any) -> "Expr":  # type: ignore[override]
        return _binary("ne", self, o, "!=")

    def __neg__(self) -> "Expr":
        return _unary("neg", self)

    def __pos__(self) -> "Expr":
        return self if isinstance(self, Expr) else self[...]  # type: ignore[index]

    def __abs__(self) -> "Expr":
        return _unary("abs", self)

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise at_user(
            UnsupportedOperationError,
            "a stencil expression has no truth value on the frontend (nothing is computed there); "
            "use where(condition, a, b) in a statement, or solve(until=...) to stop on a condition",
        )

    def __floordiv__(self, o: Any) -> "Expr":
        raise at_user(UnsupportedOperationError, "operation '//' (floor division) is not supported; use '/'")

    __rfloordiv__ = __floordiv__

    def __mod__(self, o: Any) -> "Expr":
        raise at_user(UnsupportedOperationError, "operation '%' (remainder) is not supported")

    __rmod__ = __mod__

    def __matmul__(self, o: Any) -> "Expr":
        raise at_user(UnsupportedOperationError, "operation '@' (matrix product) is not supported in a stencil")

    __rmatmul__ = __matmul__

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            raise at_user(UnsupportedOperationError, f"NumPy {ufunc.__name__}.{method} with {sorted(kwargs)} is not supported on stencil fields")
        if ufunc in _UNARY_UFUNCS and len(inputs) == 1:
            return _unary(_UNARY_UFUNCS[ufunc], inputs[0])
        if ufunc in _UFUNCS and len(inputs) == 2:
            sym = {"pow": "**", "add": "+", "sub": "-", "mul": "*", "div": "/"}.get(_UFUNCS[ufunc], ufunc.__name__)
            return _binary(_UFUNCS[ufunc], inputs[0], inputs[1], sym)
        hint = _SPELLINGS.get(ufunc.__name__)
        raise at_user(
            UnsupportedOperationError,
            f"operation np.{ufunc.__name__} is not supported on stencil fields; "
            + (f"write {hint}" if hint else "supported: + - * / **, unary -, abs, sqrt, exp, sin, cos, "
               "minimum, maximum, where and comparisons"),
        )

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.where and not kwargs and len(args) == 3:
            return where(*args)
        hint = _SPELLINGS.get(getattr(func, "__name__", ""))
        raise at_user(
            UnsupportedOperationError,
            f"operation np.{func.__name__} is not supported on stencil fields"
            + (f"; write {hint}" if hint else "; element-wise: + - * / **, abs, sqrt, exp, sin, cos, "
               "np.minimum, np.maximum, np.where; over the grid: norm, total, maximum_of, minimum_of"),
        )


#: NumPy functions a stencil cannot run, and the spelling that does what was meant
_SPELLINGS = {
    "max": "shoal.stencil.maximum_of(x) (or x.max()) for the largest value over the grid, "
           "or np.maximum(a, b) for the element-wise maximum of two operands",
    "amax": "shoal.stencil.maximum_of(x) (or x.max()) for the largest value over the grid, "
            "or np.maximum(a, b) for the element-wise maximum of two operands",
    "min": "shoal.stencil.minimum_of(x) (or x.min()) for the smallest value over the grid, "
           "or np.minimum(a, b) for the element-wise minimum of two operands",
    "amin": "shoal.stencil.minimum_of(x) (or x.min()) for the smallest value over the grid, "
            "or np.minimum(a, b) for the element-wise minimum of two operands",
    "sum": "shoal.stencil.total(x) (or x.sum()) for the sum over the grid",
    "norm": "shoal.stencil.norm(x) (L2) or shoal.stencil.norm(x, np.inf) (max norm)",
    "clip": "np.minimum(np.maximum(x, low), high)",
    "square": "x * x",
    "fmax": "np.maximum(a, b)",
    "fmin": "np.minimum(a, b)",
}


class Expr(_Ops):
    """A recorded expression over fields (the value of a slice or an operation)."""

    __slots__ = ("_st", "node", "meta")

    def __init__(self, st: "Stencil | None", node: Node, meta: Meta):
        self._st = st
        self.node = node
        self.meta = meta

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of the expression's box (``()`` for a scalar)."""
        return self.meta.shape or ()

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype of the values (``bool`` for a comparison)."""
        return np.dtype("bool" if self.meta.dtype == "bool" else self.meta.dtype)

    def __getitem__(self, idx: Any) -> "Expr":
        raise at_user(UnsupportedOperationError, "slicing the result of an operation is not supported; slice the fields")

    def __repr__(self) -> str:
        return f"<stencil expression {self.node!r} shape={self.shape}>"


class Field(_Ops):
    """A named field of a stencil's grid; slice it to read, assign to a slice to write.

    ``self.x`` is a handle: ``self.x, self.y = self.y, self.x`` swaps which data the
    names refer to (no data moves). ``field.name`` is its name, ``field.dtype`` its NumPy
    dtype. Fields start as zeros; indices are global grid coordinates.
    """

    __slots__ = ("_st", "id", "name", "dtype", "_dname")

    def __init__(self, st: "Stencil", id: int, name: str, dtype: str):
        self._st = st
        self.id = id
        self.name = name
        self.dtype = np.dtype(dtype)
        self._dname = self.dtype.name

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid shape (without ghost layers)."""
        return self._st.shape

    @property
    def ndim(self) -> int:
        """The number of grid axes (1 to 3)."""
        return len(self._st.shape)

    def __getitem__(self, idx: Any) -> Expr:
        axes = index_axes(idx, self._st.shape, self.name)
        read = Read(self.id, axes)
        meta = Meta(read.shape, tuple(k for k, a in enumerate(axes) if not a.squeezed), self._dname)
        return Expr(self._st, read, meta)

    def __setitem__(self, idx: Any, value: Any) -> None:
        self._st._assign(self, idx, value)

    def _inplace(self, op: str, other: Any, sym: str) -> "Field":
        self._st._assign(self, Ellipsis, _binary(op, self, other, sym))
        return self

    def __iadd__(self, o: Any) -> "Field":  # type: ignore[override]
        return self._inplace("add", o, "+=")

    def __isub__(self, o: Any) -> "Field":  # type: ignore[override]
        return self._inplace("sub", o, "-=")

    def __imul__(self, o: Any) -> "Field":  # type: ignore[override]
        return self._inplace("mul", o, "*=")

    def __itruediv__(self, o: Any) -> "Field":  # type: ignore[override]
        return self._inplace("div", o, "/=")

    # -- values to and from the frontend ----------------------------------------------
    def to_numpy(self) -> np.ndarray:
        """The whole field, gathered from the tiles (waits for the work sent so far)."""
        return self._st._gather(self)

    def from_numpy(self, array: Any) -> None:
        """Set the whole field from an array of the grid's shape (ordered after earlier steps)."""
        self._st._scatter(self, array)

    def sum(self) -> "Reduction":
        """:func:`total` of this field: a :class:`Reduction` of its sum."""
        return total(self)

    def max(self) -> "Reduction":
        """:func:`maximum_of` this field: a :class:`Reduction` of its largest value."""
        return maximum_of(self)

    def min(self) -> "Reduction":
        """:func:`minimum_of` this field: a :class:`Reduction` of its smallest value."""
        return minimum_of(self)

    def norm(self, ord: Any = 2) -> "Reduction":
        """:func:`norm` of this field: a :class:`Reduction` of its L2 (``ord=2``) or max
        (``ord=np.inf``) norm."""
        return norm(self, ord)

    def __repr__(self) -> str:
        return f"<stencil field {self.name!r} (slot {self.id}) {self.dtype} {self.shape}>"


# -- functions -----------------------------------------------------------------------------
def _is_stencil(*xs: Any) -> bool:
    return any(isinstance(x, (Expr, Field)) for x in xs)


def sqrt(x: Any) -> Any:
    """The square root of each value (``np.sqrt``), of a field expression or an array."""
    return _unary("sqrt", x) if _is_stencil(x) else np.sqrt(x)


def exp(x: Any) -> Any:
    """``e`` to the power of each value (``np.exp``), of a field expression or an array."""
    return _unary("exp", x) if _is_stencil(x) else np.exp(x)


def sin(x: Any) -> Any:
    """The sine of each value, in radians (``np.sin``), of a field expression or an array."""
    return _unary("sin", x) if _is_stencil(x) else np.sin(x)


def cos(x: Any) -> Any:
    """The cosine of each value, in radians (``np.cos``), of a field expression or an array."""
    return _unary("cos", x) if _is_stencil(x) else np.cos(x)


def absolute(x: Any) -> Any:
    """The absolute value of each value (``np.abs``; ``abs(expr)`` is the same)."""
    return _unary("abs", x) if _is_stencil(x) else np.abs(x)


def minimum(a: Any, b: Any) -> Any:
    """The element-wise minimum of ``a`` and ``b`` (``np.minimum``: NaN wins; on ties,
    the second operand); either may be a number."""
    return _binary("minimum", a, b, "minimum") if _is_stencil(a, b) else np.minimum(a, b)


def maximum(a: Any, b: Any) -> Any:
    """The element-wise maximum of ``a`` and ``b`` (``np.maximum``: NaN wins; on ties,
    the second operand); either may be a number."""
    return _binary("maximum", a, b, "maximum") if _is_stencil(a, b) else np.maximum(a, b)


def where(cond: Any, a: Any, b: Any) -> Any:
    """``np.where(cond, a, b)`` on fields (``cond`` a comparison) or on NumPy arrays."""
    if not _is_stencil(cond, a, b):
        return np.where(cond, a, b)
    nc, mc = _operand(cond, "where")
    na, ma = _operand(a, "where")
    nb, mb = _operand(b, "where")
    try:
        meta = where_meta(mc, ma, mb, na, nb)
    except Exception as exc:
        _raise(exc)
    return Expr(_stencil_of(cond, a, b), Where(nc, na, nb), meta)


def _reduce_arg(x: Any, what: str) -> Expr:
    if isinstance(x, Field):
        return x[...]
    if isinstance(x, Expr) and x.meta.shape is not None and x.meta.dtype != "bool":
        return x
    raise at_user(UnsupportedOperationError, f"{what}() needs a field or an expression over fields")


def norm(x: Any, ord: Any = 2) -> Any:
    """The L2 (``ord=2``, the default) or max (``ord=np.inf``) norm of a field or
    expression, as a :class:`Reduction`; for NumPy arrays, ``np.linalg.norm`` of the
    flattened array. The max norm is exact; the L2 norm adds per-tile partial sums."""
    if not _is_stencil(x):
        return np.linalg.norm(np.ravel(x), ord)
    e = _reduce_arg(x, "norm")
    if ord in (np.inf, float("inf"), "inf"):
        return Reduction(e, "maxabs")
    if ord == 2:
        return Reduction(e, "sumsq", "sqrt")
    raise at_user(UnsupportedOperationError, f"norm(ord={ord!r}) is not supported; use ord=2 or ord=np.inf")


def total(x: Any) -> Any:
    """The sum of all values of a field or expression, as a :class:`Reduction`; for a
    NumPy array, ``np.sum``. Per-tile partial sums are added in float64, so the last bits
    can differ from NumPy's pairwise summation. ``field.sum()`` is the same."""
    return Reduction(_reduce_arg(x, "sum"), "sum") if _is_stencil(x) else np.sum(x)


def maximum_of(x: Any) -> Any:
    """The largest value of a field or expression over the grid, as a :class:`Reduction`
    (exact); for a NumPy array, ``np.max``. ``field.max()`` is the same."""
    return Reduction(_reduce_arg(x, "max"), "max") if _is_stencil(x) else np.max(x)


def minimum_of(x: Any) -> Any:
    """The smallest value of a field or expression over the grid, as a :class:`Reduction`
    (exact); for a NumPy array, ``np.min``. ``field.min()`` is the same."""
    return Reduction(_reduce_arg(x, "min"), "min") if _is_stencil(x) else np.min(x)
