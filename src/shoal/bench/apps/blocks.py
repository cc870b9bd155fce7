"""Cutting an N-dimensional grid into a grid of blocks, for every block-decomposed app.

:func:`split` picks the factorisation of a block count that cuts the least: the least
halo per step, ``sum over axes d of (p_d - 1) * (points of a cross-section normal to
d)``, so the most cube-like blocks, the lowest surface to volume. On a tie it takes the
grid with the most blocks along the first axes (lexicographically largest), whose halos
are the most contiguous in C order. Sizes need not divide: along each axis the blocks
differ by at most one point, the first ones taking the extra (:func:`edges`). A grid
too small for the blocks (fewer points than blocks along an axis) is refused with a
ValueError. :class:`BlockGrid` gives each block's bounds, :class:`Placement` the PE of
each block when every PE's share of the grid is cut again into blocks
(over-decomposition).

jacobi2d (:mod:`.jacobi2d.layout`, its 2-D names) and jacobi3d use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

__all__ = ["split", "edges", "BlockGrid", "Placement"]


def _factorisations(parts: int, dims: int) -> Iterator[tuple[int, ...]]:
    """Every ``(p_1, ..., p_dims)`` with product ``parts``, in lexicographic order."""
    if dims == 1:
        yield (parts,)
        return
    for p in range(1, parts + 1):
        if parts % p == 0:
            for rest in _factorisations(parts // p, dims - 1):
                yield (p, *rest)


def split(parts: int, shape: Sequence[int]) -> tuple[int, ...]:
    """The block grid ``p`` with ``prod(p) == parts`` and ``p[d] <= shape[d]`` that cuts least.

    ValueError (naming the grid and the count) when no such grid exists."""
    shape = tuple(int(n) for n in shape)
    volume = math.prod(shape)
    best: tuple[int, tuple[int, ...]] | None = None
    for p in _factorisations(parts, len(shape)):
        if any(pd > n for pd, n in zip(p, shape)):
            continue
        cut = sum((pd - 1) * (volume // n) for pd, n in zip(p, shape))
        if best is None or cut <= best[0]:  # ties: the later (more blocks along the first axes)
            best = (cut, p)
    if best is None:
        raise ValueError(f"a {'x'.join(map(str, shape))} grid cannot be cut into {parts} non-empty blocks")
    return best[1]


def edges(n: int, p: int) -> np.ndarray:
    """The ``p + 1`` cut points of ``n`` points into ``p`` parts (the first ones one larger)."""
    q, r = divmod(n, p)
    sizes = [q + 1 if k < r else q for k in range(p)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@dataclass(frozen=True)
class BlockGrid:
    """A grid of ``shape`` points cut into ``grid`` blocks (one count per axis)."""

    shape: tuple[int, ...]
    grid: tuple[int, ...]

    def bounds(self, index: Sequence[int]) -> tuple[tuple[int, int], ...]:
        """``((lo, hi), ...)``: block ``index`` holds points ``lo:hi`` along each axis."""
        out = []
        for n, p, i in zip(self.shape, self.grid, index):
            e = edges(n, p)
            out.append((int(e[i]), int(e[i + 1])))
        return tuple(out)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    def describe(self) -> str:
        sizes = [hi - lo for lo, hi in self.bounds((0,) * len(self.grid))]
        return f"{' x '.join(map(str, self.grid))} blocks of up to {' x '.join(map(str, sizes))} points"


@dataclass(frozen=True)
class Placement:
    """Block ``index`` -> the PE of PE-grid cell ``index[d] // per_pe[d]``, PEs in C order.

    ``per_pe`` is how many blocks each PE's share holds along each axis, ``pes`` the
    PE grid (how many PEs along each axis). A ``shoal.Array`` placement."""

    per_pe: tuple[int, ...]
    pes: tuple[int, ...]

    def __call__(self, index: Any, npes: int) -> int:
        pe = 0
        for i, a, q in zip(index, self.per_pe, self.pes):
            pe = pe * q + i // a
        return pe
