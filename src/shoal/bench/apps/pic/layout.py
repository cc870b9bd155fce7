"""How the mesh is cut into blocks: the PRK's 2-D block decomposition, over ranks or tiles.

A :class:`Layout` cuts the ``L x L`` mesh into ``nx x ny`` blocks as the PRK MPI code
does: ``L // nx`` columns per block, the first ``L % nx`` blocks one wider (rows the
same). Block ``(bx, by)`` is numbered ``bx * ny + by``. Its neighbours are the 8 blocks
around it on the periodic block grid, listed once each and without itself (with 1 or 2
blocks in a direction several directions name the same block). A particle moves at most
``2k+1`` cells in x and ``|m|`` in y per step, so while no block is narrower or lower
than that, every particle leaving a block lands in one of those neighbours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Layout", "prk_grid", "squarest_split", "block_bounds"]


def prk_grid(p: int) -> tuple[int, int]:
    """The PRK's rank grid for ``p`` ranks: ``px`` the largest divisor of p that is at
    most ``int(sqrt(p + 1))``; ``(px, p // px)``."""
    px = int(math.sqrt(p + 1))
    while p % px:
        px -= 1
    return px, p // px


def squarest_split(n: int, px: int, py: int) -> tuple[int, int]:
    """``(ax, ay)`` with ``ax * ay == n`` making the ``px*ax x py*ay`` grid closest to square."""
    pairs = [(a, n // a) for a in range(1, n + 1) if n % a == 0]
    return min(pairs, key=lambda ab: (abs(math.log((px * ab[0]) / (py * ab[1]))), -ab[0]))


def block_bounds(L: int, parts: int) -> np.ndarray:
    """int64[parts+1]: block ``i`` covers cells ``[b[i], b[i+1])``; the first ``L % parts`` are one wider."""
    width, extra = divmod(L, parts)
    sizes = np.full(parts, width, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)


@dataclass(frozen=True)
class Layout:
    """An ``nx x ny`` grid of blocks over an ``L x L`` mesh, and who owns which cell."""

    size: int
    nx: int
    ny: int
    xb: np.ndarray = field(repr=False)  # block_bounds(size, nx)
    yb: np.ndarray = field(repr=False)
    owner_x: np.ndarray = field(repr=False)  # int64[size]: column -> block column
    owner_y: np.ndarray = field(repr=False)

    @classmethod
    def grid(cls, size: int, nx: int, ny: int) -> "Layout":
        xb, yb = block_bounds(size, nx), block_bounds(size, ny)
        owner_x = np.repeat(np.arange(nx, dtype=np.int64), np.diff(xb))
        owner_y = np.repeat(np.arange(ny, dtype=np.int64), np.diff(yb))
        return cls(size, nx, ny, xb, yb, owner_x, owner_y)

    @property
    def blocks(self) -> int:
        return self.nx * self.ny

    def bounds(self, bx: int, by: int) -> tuple[int, int, int, int]:
        """Cells ``[x0, x1) x [y0, y1)`` of block ``(bx, by)``."""
        return int(self.xb[bx]), int(self.xb[bx + 1]), int(self.yb[by]), int(self.yb[by + 1])

    def check(self, k: int, m: int, what: str) -> None:
        """Raise ValueError if a block is too narrow for a particle to stay among neighbours."""
        width = int(np.diff(self.xb).min())
        height = int(np.diff(self.yb).min())
        if width < 2 * k + 1 and self.nx > 1:
            raise ValueError(f"--k {k}: particles move 2k+1 = {2 * k + 1} cells in x per step, but {what} "
                             f"({self.nx} x {self.ny} blocks of a {self.size}-cell mesh) has blocks {width} cells "
                             f"wide; use a smaller k, a larger --size or fewer blocks")
        if height < abs(m) and self.ny > 1:
            raise ValueError(f"--m {m}: particles move |m| = {abs(m)} cells in y per step, but {what} "
                             f"({self.nx} x {self.ny} blocks of a {self.size}-cell mesh) has blocks {height} cells "
                             f"high; use a smaller |m|, a larger --size or fewer blocks")

    def neighbours(self, bx: int, by: int) -> list[tuple[int, int]]:
        """The distinct blocks around ``(bx, by)`` (periodic), itself excluded, in the PRK's
        order: left, right, below, above, then the four diagonals."""
        out: list[tuple[int, int]] = []
        for dx, dy in ((-1, 0), (1, 0), (0, -1), (0, 1), (-1, -1), (1, -1), (-1, 1), (1, 1)):
            nb = ((bx + dx) % self.nx, (by + dy) % self.ny)
            if nb != (bx, by) and nb not in out:
                out.append(nb)
        return out

    def slot_table(self, bx: int, by: int, neighbours: list[tuple[int, int]]) -> np.ndarray:
        """int64[blocks]: 0 for the block itself, ``1 + i`` for ``neighbours[i]``, -1 elsewhere."""
        table = np.full(self.blocks, -1, dtype=np.int64)
        table[bx * self.ny + by] = 0
        for i, (nx_, ny_) in enumerate(neighbours):
            table[nx_ * self.ny + ny_] = 1 + i
        return table
