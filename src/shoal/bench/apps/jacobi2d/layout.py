"""How jacobi2d cuts the ``N x M`` grid into a ``p1 x p2`` grid of blocks.

:func:`split` picks the factorisation of a block count that cuts the least (the least
halo per step: ``(p1 - 1) M + (p2 - 1) N``, so the most square blocks, lowest surface to
volume; on a tie, more block rows, whose halos are contiguous rows). Sizes need not divide: block rows (and columns) differ by at most one point,
the first ones taking the extra. A grid too small for the blocks (fewer rows than block
rows, say) is refused with a ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["split", "Layout"]


def split(parts: int, rows: int, cols: int) -> tuple[int, int]:
    """``(p1, p2)`` with ``p1 * p2 == parts``, ``p1 <= rows``, ``p2 <= cols``, cutting least."""
    best: tuple[int, int, int] | None = None
    for p1 in range(1, parts + 1):
        if parts % p1:
            continue
        p2 = parts // p1
        if p1 > rows or p2 > cols:
            continue
        cut = (p1 - 1) * cols + (p2 - 1) * rows
        if best is None or cut <= best[0]:  # ties: more block rows (contiguous row halos)
            best = (cut, p1, p2)
    if best is None:
        raise ValueError(f"a {rows}x{cols} grid cannot be cut into {parts} non-empty blocks")
    return best[1], best[2]


def _edges(n: int, p: int) -> np.ndarray:
    q, r = divmod(n, p)
    sizes = [q + 1 if k < r else q for k in range(p)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


@dataclass(frozen=True)
class Layout:
    """``p1 x p2`` blocks of an ``N x M`` grid; block ``(bi, bj)`` is row ``bi``, column ``bj``."""

    N: int
    M: int
    p1: int
    p2: int

    def bounds(self, bi: int, bj: int) -> tuple[int, int, int, int]:
        """``(r0, r1, c0, c1)``: the block's rows ``r0:r1`` and columns ``c0:c1``."""
        re, ce = _edges(self.N, self.p1), _edges(self.M, self.p2)
        return int(re[bi]), int(re[bi + 1]), int(ce[bj]), int(ce[bj + 1])

    @property
    def blocks(self) -> int:
        return self.p1 * self.p2

    def describe(self) -> str:
        r0, r1, c0, c1 = self.bounds(0, 0)
        return f"{self.p1} x {self.p2} blocks of up to {r1 - r0} x {c1 - c0} points"
