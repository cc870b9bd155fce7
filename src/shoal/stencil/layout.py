"""How a tile's arrays are laid out in memory for the compiled kernels.

Rows start where the kernels' stores start, on a cache line, and are padded to whole
lines, so every vector store is aligned; the measurements that chose this are in the
docstrings below.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["aligned", "whole_rows", "first_written"]

_LINE = 64  # bytes: a cache line, and an AVX-512 vector


def _host_address(arr: np.ndarray) -> int:
    return int(arr.ctypes.data)


def aligned(local: tuple[int, ...], dtype: str, column: int, zeros: Callable[[int, str], Any] = np.zeros,
            address: Callable[[Any], int] = _host_address) -> tuple[Any, Any]:
    """Zeros of shape ``local`` laid out for the kernels: local index ``column`` of every
    row (on the last axis) starts a cache line, and rows are padded to whole lines (all
    dtypes get the same row length in elements, so the kernels share one set of
    strides). Returns the padded array and the view of shape ``local``.
    ``zeros(count, dtype)`` allocates and ``address(array)`` says where an array starts:
    a tile's :class:`~shoal.stencil.memory.Memory` (device memory for GPU tiles).

    Unaligned rows cost the vectorized kernels a split store on every vector: the
    Burgers kernel took 131 ms on rows of 8194 doubles, 105 ms aligned (8192² grid)."""
    dt = np.dtype(dtype)
    per = _LINE // dt.itemsize
    lead = (-column) % per
    width = local[-1]
    padded = width + lead if len(local) == 1 else -(-(width + 15) // 16) * 16
    rows = int(np.prod(local[:-1], dtype=np.int64))
    flat = zeros(rows * padded + per, dt.name)
    start = (-address(flat) % _LINE) // dt.itemsize
    raw = flat[start:start + rows * padded].reshape(*local[:-1], padded)
    return raw, raw[..., lead:lead + width]


def whole_rows(local: tuple[int, ...], dtype: str, column: int, ghost: int) -> tuple[np.ndarray, np.ndarray]:
    """Like :func:`aligned`, for a tile that spans the whole last axis: rows hold the
    owned points only (padded to 16 elements), and the view's ghost columns alias the
    ends of the neighbouring rows.

    Those ghost columns lie outside the grid, and nothing reads or writes outside the
    grid (slices cannot reach there, there is no neighbour to exchange with along that
    axis, and faces of the other axes span only the owned columns:
    ``halo.Halos._face_box``), so they need no memory of their own. What this buys: a
    row of 8192 doubles is 64 KiB, not 65 664 bytes; the Burgers kernel took 96 ms per
    step on such rows and 100 ms on padded ones (8192², standalone, medians of 10), as
    the hand-written loop on plain 8192-wide arrays does. Host memory only: a device's
    parallel copy into the aliased columns would write one place twice."""
    dt = np.dtype(dtype)
    per = _LINE // dt.itemsize
    width = local[-1] - 2 * ghost
    stride = -(-width // 16) * 16
    rows = int(np.prod(local[:-1], dtype=np.int64))
    flat = np.zeros(rows * stride + 2 * ghost + 2 * per, dt.name)
    first = (-flat.ctypes.data % _LINE) // dt.itemsize + (-(column - ghost)) % per  # owned column 0 of row 0
    while first < ghost:
        first += per
    raw = flat[first:first + rows * stride].reshape(*local[:-1], stride)
    inner = [stride * dt.itemsize]
    for n in reversed(local[1:-1]):
        inner.insert(0, inner[0] * n)
    view = np.lib.stride_tricks.as_strided(flat[first - ghost:], shape=local, strides=(*inner, dt.itemsize))
    return raw, view


def first_written(lo: int, hi: int, ghost: int, held: int | None = None) -> int:
    """The local column to align: where a row of the usual stencil statement starts.

    Statements that read ``ghost`` points around them write the interior
    ``[ghost:-ghost]``; in the tile that holds global column ``ghost`` their rows start
    there (local ``ghost + held``), elsewhere at the first owned point (local ``held``),
    where ``held`` is the ghost layers the tile holds on the last axis (``ghost``
    unless deep passes made them deeper).
    Aligning where stores start rather than the first owned point: Jacobi kernel on
    8192² 31.3 → 28.7 ms, Burgers 101.8 → 99.4 ms (standalone, medians of 10)."""
    held = ghost if held is None else held
    return ghost - lo + held if lo <= ghost < hi else held
