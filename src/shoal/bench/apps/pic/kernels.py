"""The per-step work of every PIC target: move the particles and split off the leavers.

:func:`move_split` is one compiled pass (Numba) over an owner's particles: the force of
the four charges at each particle's cell corners, the move (periodic), the new velocity,
and the block that owns the new cell; then, in a second loop of the same call, the
particles that stay are packed to the front of the array and the ones that leave are
copied into one buffer, a contiguous ``(NFIELDS, count)`` block per neighbour, ready to
send. If Numba cannot be imported, :func:`move_split` is a NumPy version of the same
arithmetic (``NUMBA`` says which one runs). The sequential, mpi4py and shoal targets all
call this module, so they compute the same numbers bit for bit.

:class:`Particles` is one owner's particles: a ``(NFIELDS, capacity)`` float64 array
whose first ``n`` columns are live, growing as particles arrive.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .physics import DT, MASS_INV, NFIELDS, QQ, VX, VY, X, Y, Q

__all__ = ["NUMBA", "move_split", "Particles", "MoveError"]


class MoveError(RuntimeError):
    """A particle landed in a block that is not a neighbour of its owner."""


def _move_split_source(buf: np.ndarray, n: int, L: int, owner_x: np.ndarray, owner_y: np.ndarray, ny: int,
                       slot_of: np.ndarray, nslots: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, int]:
    """Move ``buf[:, :n]`` one step; returns ``(stay, out, counts, starts, bad)``.

    ``owner_x``/``owner_y`` map a cell column/row to its block column/row; block
    ``bx * ny + by`` is slot ``slot_of[...]`` of this owner (0: itself, 1.. its
    neighbours). After the call ``buf[:, :stay]`` holds the particles that stay;
    ``out[starts[s] : starts[s] + NFIELDS * counts[s]]`` is slot s's block, shape
    ``(NFIELDS, counts[s])``; ``bad`` is the index of a particle whose block is not a
    neighbour (-1 if none; it is kept as staying)."""
    xs, ys, vxs, vys, qs = buf[X], buf[Y], buf[VX], buf[VY], buf[QQ]
    dest = np.empty(n, dtype=np.int64)
    counts = np.zeros(nslots, dtype=np.int64)
    Lf = float(L)
    bad = -1
    for i in range(n):
        x = xs[i]
        y = ys[i]
        q = qs[i]
        cx = int(math.floor(x))
        cy = int(math.floor(y))
        rx = x - cx
        ry = y - cy
        qleft = Q if cx % 2 == 0 else -Q  # left corners' column; the right one (cx+1) has the other sign
        # lower-left corner: pushes along +(rx, ry)
        r2 = rx * rx + ry * ry
        r = math.sqrt(r2)
        f = q * qleft / r2
        ax = f * rx / r
        ay = f * ry / r
        # upper-left corner
        dy = 1.0 - ry
        r2 = rx * rx + dy * dy
        r = math.sqrt(r2)
        f = q * qleft / r2
        ax += f * rx / r
        ay -= f * dy / r
        # lower-right corner
        dx = 1.0 - rx
        r2 = dx * dx + ry * ry
        r = math.sqrt(r2)
        f = q * -qleft / r2
        ax -= f * dx / r
        ay += f * ry / r
        # upper-right corner
        r2 = dx * dx + dy * dy
        r = math.sqrt(r2)
        f = q * -qleft / r2
        ax -= f * dx / r
        ay -= f * dy / r
        ax *= MASS_INV
        ay *= MASS_INV
        nx_ = np.fmod(x + vxs[i] * DT + 0.5 * ax * DT * DT + Lf, Lf)
        ny_ = np.fmod(y + vys[i] * DT + 0.5 * ay * DT * DT + Lf, Lf)
        xs[i] = nx_
        ys[i] = ny_
        vxs[i] += ax * DT
        vys[i] += ay * DT
        s = slot_of[owner_x[int(nx_)] * ny + owner_y[int(ny_)]]
        if s < 0:
            bad = i
            s = 0
        dest[i] = s
        counts[s] += 1
    starts = np.zeros(nslots, dtype=np.int64)
    total = 0
    for s in range(1, nslots):
        starts[s] = total
        total += NFIELDS * counts[s]
    out = np.empty(total, dtype=np.float64)
    fill = np.zeros(nslots, dtype=np.int64)
    stay = 0
    for i in range(n):
        s = dest[i]
        if s == 0:
            if stay != i:
                for f_ in range(NFIELDS):
                    buf[f_, stay] = buf[f_, i]
            stay += 1
        else:
            c = counts[s]
            b = starts[s] + fill[s]
            for f_ in range(NFIELDS):
                out[b + f_ * c] = buf[f_, i]
            fill[s] += 1
    return stay, out, counts, starts, bad


def _move_split_numpy(buf: np.ndarray, n: int, L: int, owner_x: np.ndarray, owner_y: np.ndarray, ny: int,
                      slot_of: np.ndarray, nslots: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, int]:
    """The same as the compiled kernel, in whole-array NumPy (the fallback without Numba)."""
    live = buf[:, :n]
    x, y, q = live[X], live[Y], live[QQ]
    cx = np.floor(x).astype(np.int64)
    cy = np.floor(y).astype(np.int64)
    rx, ry = x - cx, y - cy
    dx, dy = 1.0 - rx, 1.0 - ry
    qleft = np.where(cx % 2 == 0, Q, -Q)
    ax = np.zeros(n)
    ay = np.zeros(n)
    for ux, uy, qc, sx, sy in ((rx, ry, qleft, 1.0, 1.0), (rx, dy, qleft, 1.0, -1.0),
                               (dx, ry, -qleft, -1.0, 1.0), (dx, dy, -qleft, -1.0, -1.0)):
        r2 = ux * ux + uy * uy
        r = np.sqrt(r2)
        f = q * qc / r2
        ax = ax + sx * (f * ux / r)
        ay = ay + sy * (f * uy / r)
    ax = ax * MASS_INV
    ay = ay * MASS_INV
    Lf = float(L)
    x[:] = np.fmod(x + live[VX] * DT + 0.5 * ax * DT * DT + Lf, Lf)
    y[:] = np.fmod(y + live[VY] * DT + 0.5 * ay * DT * DT + Lf, Lf)
    live[VX] += ax * DT
    live[VY] += ay * DT
    dest = slot_of[owner_x[x.astype(np.int64)] * ny + owner_y[y.astype(np.int64)]]
    wrong = np.flatnonzero(dest < 0)
    bad = int(wrong[0]) if wrong.size else -1
    dest[wrong] = 0
    counts = np.bincount(dest, minlength=nslots).astype(np.int64)
    starts = np.zeros(nslots, dtype=np.int64)
    starts[1:] = NFIELDS * np.concatenate(([0], np.cumsum(counts[1:-1])))
    order = np.argsort(dest, kind="stable")  # stayers first, then slot by slot, each in order
    ranked = live[:, order]
    stay = int(counts[0])
    blocks, pos = [], stay
    for s in range(1, nslots):
        blocks.append(ranked[:, pos: pos + int(counts[s])].ravel())
        pos += int(counts[s])
    out = np.concatenate(blocks) if blocks else np.empty(0)
    buf[:, :stay] = ranked[:, :stay]
    return stay, out, counts, starts, bad


def _compiled() -> Callable[..., tuple[int, np.ndarray, np.ndarray, np.ndarray, int]] | None:
    """The kernel compiled by Numba (cached on disk), or None where Numba is not installed."""
    try:
        import numba
    except ImportError:  # the NumPy version keeps every target working, slower
        return None
    return numba.njit(cache=True, nogil=True, error_model="numpy")(_move_split_source)


_COMPILED = _compiled()
#: whether :func:`move_split` is the Numba kernel (else the NumPy fallback)
NUMBA: bool = _COMPILED is not None
move_split: Callable[..., tuple[int, np.ndarray, np.ndarray, np.ndarray, int]] = _COMPILED or _move_split_numpy


class Particles:
    """One owner's particles: ``buf[:, :n]`` of a ``(NFIELDS, capacity)`` float64 array."""

    __slots__ = ("buf", "n")

    def __init__(self, initial: np.ndarray):
        n = initial.shape[1]
        self.buf = np.empty((NFIELDS, max(16, n + n // 4)), dtype=np.float64)
        self.buf[:, :n] = initial
        self.n = n

    @property
    def live(self) -> np.ndarray:
        """The live particles, a ``(NFIELDS, n)`` view."""
        return self.buf[:, : self.n]

    def move(self, L: int, owner_x: np.ndarray, owner_y: np.ndarray, ny: int, slot_of: np.ndarray,
             nslots: int) -> list[np.ndarray]:
        """One step: move every particle, keep the stayers; the ``(NFIELDS, c)`` block
        leaving to each neighbour slot 1..nslots-1, in slot order (empty blocks included)."""
        stay, out, counts, starts, bad = move_split(self.buf, self.n, L, owner_x, owner_y, ny, slot_of, nslots)
        if bad >= 0:
            raise MoveError(
                f"a particle moved to cell ({self.buf[X, bad]:.3f}, {self.buf[Y, bad]:.3f}), outside this block "
                "and its neighbours: blocks must be at least 2k+1 cells wide and |m| cells high"
            )
        self.n = stay
        return [out[starts[s]: starts[s] + NFIELDS * counts[s]].reshape(NFIELDS, counts[s]) for s in range(1, nslots)]

    def extend(self, blocks: list[Any]) -> None:
        """Append arriving ``(NFIELDS, c)`` blocks."""
        total = self.n + sum(b.shape[1] for b in blocks)
        if total > self.buf.shape[1]:
            grown = np.empty((NFIELDS, total + total // 2), dtype=np.float64)
            grown[:, : self.n] = self.live
            self.buf = grown
        n = self.n
        for b in blocks:
            c = b.shape[1]
            if c:
                self.buf[:, n: n + c] = b
                n += c
        self.n = n

    def __getstate__(self) -> tuple[np.ndarray]:
        return (self.live.copy(),)  # a migrating owner carries its live particles only

    def __setstate__(self, state: tuple[np.ndarray]) -> None:
        Particles.__init__(self, state[0])
