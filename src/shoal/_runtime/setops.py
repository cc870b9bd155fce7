"""``np.unique`` without its import of ``numpy.ma``.

In NumPy 2.4 (the version installed here) the first call of ``np.unique`` imports ``numpy.ma`` (17-27 ms on the
development machine), and the strategies call it: a job's first balancing round paid
that import between the last ``at_sync()`` and the round's start (issue 37). Importing
``numpy.ma`` at start-up instead would cost every job that balances as much, so the
strategies sort for themselves.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["unique"]


def unique(values: Any, *, return_inverse: bool = False, return_counts: bool = False) -> Any:
    """The sorted distinct values of the 1-D array ``values``, as ``np.unique`` returns
    them; with ``return_inverse`` also each value's position among them, with
    ``return_counts`` how often each occurs (in that order, as a tuple)."""
    import numpy as np

    a = np.asarray(values).ravel()
    order = np.argsort(a, kind="stable")
    s = a[order]
    first = np.empty(s.size, dtype=bool)
    first[:1] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    keys = s[first]
    if not (return_inverse or return_counts):
        return keys
    out = [keys]
    if return_inverse:
        inverse = np.empty(a.size, dtype=np.intp)
        inverse[order] = np.cumsum(first) - 1
        out.append(inverse)
    if return_counts:
        out.append(np.diff(np.append(np.flatnonzero(first), s.size)))
    return tuple(out)
