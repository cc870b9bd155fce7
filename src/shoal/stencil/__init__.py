"""shoal.stencil: NumPy slicing in, fused compiled kernels on distributed tiles out.

Subclass :class:`Stencil`, write each time step with NumPy slicing and arithmetic on
its fields, and ``solve``; the statements are recorded as expression trees, compiled
to C once each, and run on the tiles of a chare Array, with ghost exchanges inferred
from what each statement reads. Results equal the same NumPy statements on whole
arrays, bit for bit. See docs/stencil.md.
"""

from __future__ import annotations

from .errors import (
    CompilerError,
    DeviceError,
    GhostDepthError,
    GridBoundsError,
    ShapeError,
    StencilError,
    UnsupportedOperationError,
)
from .expr import (
    Condition,
    Expr,
    Field,
    Reduction,
    absolute,
    cos,
    exp,
    maximum,
    maximum_of,
    minimum,
    minimum_of,
    norm,
    sin,
    sqrt,
    total,
    where,
)
from .frontend import Stencil
from .interface import Interface, LocalInterface, Pending

__all__ = [
    "Stencil",
    "Field",
    "Expr",
    "Reduction",
    "Condition",
    "sqrt",
    "exp",
    "sin",
    "cos",
    "absolute",
    "minimum",
    "maximum",
    "where",
    "norm",
    "total",
    "maximum_of",
    "minimum_of",
    "Interface",
    "LocalInterface",
    "Pending",
    "StencilError",
    "ShapeError",
    "GridBoundsError",
    "GhostDepthError",
    "UnsupportedOperationError",
    "CompilerError",
    "DeviceError",
]
