"""NumPy's types for shoal's type tests, without importing NumPy.

A PE whose program never touches an array should not pay NumPy's import (about 0.1 s, as
long as MPI's own start-up). No array or NumPy scalar can exist before the process imports
NumPy, so "is this an array?" looks at ``sys.modules``: until ``numpy`` is there, these
functions return :class:`Never`, a class nothing is an instance of, and import nothing.
Shoal's modules that call NumPy's functions import NumPy inside those functions; the
compiled core loads NumPy's C API at its first array test once NumPy is imported
(``numpy_api_ready`` in ``_native/core.h``).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    import numpy as np

__all__ = ["Never", "ndarray", "integer"]

_modules = sys.modules


class Never:
    """Nothing is an instance of it: NumPy's types in a process that has not imported NumPy."""


# Type checkers are told NumPy's own types (an object that passes a test is one). getattr:
# a NumPy that another thread is still importing is in sys.modules without its types yet.


def ndarray() -> type[np.ndarray]:
    """``numpy.ndarray``, or :class:`Never` while this process has not imported NumPy."""
    numpy = _modules.get("numpy")
    return Never if numpy is None else getattr(numpy, "ndarray", Never)  # type: ignore[arg-type, return-value]


def integer() -> type[np.integer]:
    """``numpy.integer``, or :class:`Never` while this process has not imported NumPy."""
    numpy = _modules.get("numpy")
    return Never if numpy is None else getattr(numpy, "integer", Never)  # type: ignore[arg-type, return-value]
