"""NumPy basic indexing on a stencil's grid: which positions an index selects along each axis.

``field[1:-1, 2:]`` reads, for every grid axis, a start, a step and a count (or one
squeezed position); :func:`index_axes` turns an index made of integers, slices and
one ``...`` into those :class:`~.nodes.Axis` records, checked against the grid's
shape, and caches the answer for the handful of indices a step function repeats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import GridBoundsError, UnsupportedOperationError, at_user
from .nodes import Axis

__all__ = ["index_axes"]


def _axis(idx: Any, n: int, k: int, name: str) -> Axis:
    if isinstance(idx, slice):
        for part in (idx.start, idx.stop, idx.step):
            if part is not None and not isinstance(part, (int, np.integer)):
                raise at_user(UnsupportedOperationError, f"{name}: slice bounds must be integers, not {part!r}")
        if idx.step == 0:
            raise at_user(GridBoundsError, f"{name}: slice step cannot be zero")
        start, stop, step = idx.indices(n)
        return Axis(start, step, len(range(start, stop, step)))
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, (bool, np.bool_)):
        i = int(idx)
        if not -n <= i < n:
            raise at_user(GridBoundsError, f"{name}: index {i} is outside the grid along axis {k} (size {n})")
        return Axis(i % n, 1, 1, True)
    raise at_user(
        UnsupportedOperationError,
        f"{name}: index {idx!r} along axis {k} is not supported; use integers, slices and '...'",
    )


_INDEX_CACHE: dict[tuple, tuple[Axis, ...]] = {}


def _index_key(items: tuple) -> tuple | None:
    key = []
    for i in items:
        t = type(i)
        if t is slice:
            key.append((i.start, i.stop, i.step))
        elif t is int or i is Ellipsis:
            key.append(i)
        else:
            return None
    return tuple(key)


def index_axes(idx: Any, shape: tuple[int, ...], name: str) -> tuple[Axis, ...]:
    """Per-axis positions selected by a NumPy basic index (ints, slices, one ``...``)."""
    items = idx if isinstance(idx, tuple) else (idx,)
    key = _index_key(items)
    if key is not None:
        hit = _INDEX_CACHE.get((key, shape))
        if hit is not None:
            return hit
    axes = _index_axes(items, shape, name)
    if key is not None and len(_INDEX_CACHE) < 4096:
        _INDEX_CACHE[(key, shape)] = axes
    return axes


def _index_axes(items: tuple, shape: tuple[int, ...], name: str) -> tuple[Axis, ...]:
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise at_user(GridBoundsError, f"{name}: an index can only have a single ellipsis ('...')")
    if any(i is None for i in items):
        raise at_user(UnsupportedOperationError, f"{name}: np.newaxis/None is not supported in a stencil index")
    given = len(items) - (1 if Ellipsis in items else 0)
    if given > len(shape):
        raise at_user(GridBoundsError, f"{name}: too many indices for a {len(shape)}-d grid (got {given})")
    full = []
    for i in items:
        if i is Ellipsis:
            full.extend([slice(None)] * (len(shape) - given))
        else:
            full.append(i)
    full.extend([slice(None)] * (len(shape) - len(full)))
    return tuple(_axis(i, n, k, name) for k, (i, n) in enumerate(zip(full, shape)))
