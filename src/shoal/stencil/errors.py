"""Errors of the stencil DSL; each names the user's statement (file:line) that caused it."""

from __future__ import annotations

import linecache
import os
import sys

from ..errors import ShoalError

__all__ = [
    "StencilError", "ShapeError", "GridBoundsError", "GhostDepthError",
    "UnsupportedOperationError", "CompilerError", "DeviceError", "user_location",
]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


class StencilError(ShoalError):
    """Base of the stencil DSL's errors."""


class ShapeError(StencilError, ValueError):
    """Operands or the two sides of an assignment have different shapes."""


class GridBoundsError(StencilError, IndexError):
    """An index or slice reaches outside the grid."""


class GhostDepthError(StencilError):
    """A statement reads further from the written point than the ghost depth allows."""


class UnsupportedOperationError(StencilError, TypeError):
    """An operation the DSL cannot express as a stencil (named in the message)."""


class CompilerError(StencilError):
    """The C compiler rejected a generated kernel (its message and the saved source)."""


class DeviceError(StencilError):
    """``device="cuda"`` without a usable GPU, or a CUDA error in a generated kernel."""


def user_location(depth: int = 1) -> tuple[str, int, str]:
    """``(file, line, source text)`` of the innermost caller outside this package."""
    f = sys._getframe(depth)
    while f is not None:
        filename = os.path.abspath(f.f_code.co_filename)
        if not filename.startswith(_PACKAGE + os.sep):
            line = f.f_lineno
            return f.f_code.co_filename, line, linecache.getline(f.f_code.co_filename, line).strip()
        f = f.f_back  # type: ignore[assignment]
    return "<unknown>", 0, ""


def at_user(exc_type: type, message: str) -> StencilError:
    """An error of ``exc_type`` whose message starts with the user's ``file:line``."""
    filename, line, text = user_location(2)
    where = f"{filename}:{line}: "
    suffix = f"\n    in statement: {text}" if text else ""
    return exc_type(where + message + suffix)
