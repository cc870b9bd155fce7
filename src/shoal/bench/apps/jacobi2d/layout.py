"""How jacobi2d cuts the ``N x M`` grid into a ``p1 x p2`` grid of blocks.

The 2-D names of the shared N-d decomposition (:mod:`..blocks`): :func:`split` picks the
factorisation of a block count that cuts the least (the least halo per step: ``(p1 - 1)
M + (p2 - 1) N``, so the most square blocks, lowest surface to volume; on a tie, more
block rows, whose halos are contiguous rows). Sizes need not divide: block rows (and
columns) differ by at most one point, the first ones taking the extra. A grid too small
for the blocks (fewer rows than block rows, say) is refused with a ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..blocks import BlockGrid
from ..blocks import split as split_nd

__all__ = ["split", "Layout", "send_edges"]


def split(parts: int, rows: int, cols: int) -> tuple[int, int]:
    """``(p1, p2)`` with ``p1 * p2 == parts``, ``p1 <= rows``, ``p2 <= cols``, cutting least."""
    p1, p2 = split_nd(parts, (rows, cols))
    return p1, p2


@dataclass(frozen=True)
class Layout:
    """``p1 x p2`` blocks of an ``N x M`` grid; block ``(bi, bj)`` is row ``bi``, column ``bj``."""

    N: int
    M: int
    p1: int
    p2: int

    @property
    def grid(self) -> BlockGrid:
        return BlockGrid((self.N, self.M), (self.p1, self.p2))

    def bounds(self, bi: int, bj: int) -> tuple[int, int, int, int]:
        """``(r0, r1, c0, c1)``: the block's rows ``r0:r1`` and columns ``c0:c1``."""
        (r0, r1), (c0, c1) = self.grid.bounds((bi, bj))
        return r0, r1, c0, c1

    @property
    def blocks(self) -> int:
        return self.p1 * self.p2

    def describe(self) -> str:
        return self.grid.describe()


def send_edges(u: Any, links: dict) -> None:
    """Send block ``u``'s outermost interior rows and columns (no corners) to the
    neighbours in ``links`` (``"n"``, ``"s"``, ``"w"``, ``"e"``: anything with ``send``),
    columns packed contiguous first. Every target's exchange starts with this."""
    if "n" in links:
        links["n"].send(u[1, 1:-1])
    if "s" in links:
        links["s"].send(u[-2, 1:-1])
    if "w" in links:
        links["w"].send(np.ascontiguousarray(u[1:-1, 1]))
    if "e" in links:
        links["e"].send(np.ascontiguousarray(u[1:-1, -2]))
