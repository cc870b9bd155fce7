"""``--target shoal``: PIC over-decomposed into a 2-D Array of tile chares.

The mesh is cut into ``odf`` tiles per PE (:func:`.app.layout`): the PRK's grid of PEs,
each PE's block cut again as squarely as possible, and tile ``(tx, ty)`` starts on the
PE whose block holds it, so before any balancing every PE owns what the same rank owns
in the mpi4py target. Each tile keeps its particles in a NumPy structure of arrays and
runs a step as: move them all in one compiled pass (:mod:`.kernels`), which also splits
off the leavers per neighbour tile; send each neighbour its block as an entry-method
call ``take(step, block)`` (one per distinct neighbour per step, empty ones too: a block
is an array, which shoal sends out of band, zero-copy when large); append the blocks of
this step once every neighbour's has come. The tile is event-driven, so a tile whose
neighbours are slow never blocks the other tiles of its PE, and between steps nothing
of a tile lives on a stack: it can migrate.

Load balancing: with ``--lb-period K`` every tile calls ``self.at_sync()`` after each
K-th timed step; the runtime balances once every tile has (strategy ``--lb``), moving
tiles between PEs, then calls each tile's ``resume_from_sync()`` and the tile goes on
with the next step wherever it is. With ``--lb-period auto`` the tiles call it after every
step and the runtime balances at the at_sync calls it chooses (``SHOAL_LB_PERIOD=auto``).

Main (PE 0) runs the warm-up step (step 0), then the timed steps, then asks every tile
for its verification sums and the compute seconds it spent on each PE.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import shoal

from .app import Config, layout, make_report
from .kernels import Particles
from .layout import Layout, prk_grid, squarest_split
from .physics import Problem, Verification, column_prefix, init_particles, verify

__all__ = ["Tile", "TilePlacement", "program", "run"]

#: steps main runs at a time; between chunks it may checkpoint (SHOAL_CHECKPOINT_EVERY)
_CHUNK = 100


@dataclass(frozen=True)
class TilePlacement:
    """Tile ``(tx, ty)`` -> the PE whose block of the PRK's PE grid holds it."""

    ax: int  # tiles per PE block in x
    ay: int
    px: int  # PEs in x

    def __call__(self, index: Any, npes: int) -> int:
        tx, ty = index
        return (ty // self.ay) * self.px + tx // self.ax


class Tile(shoal.Chare):
    """One tile of the mesh and the particles in it."""

    def __init__(self, p: Problem, grid: Layout, prefix: np.ndarray, lb_period: int):
        tx, ty = self.index
        x0, x1, y0, y1 = grid.bounds(tx, ty)
        self.problem = p
        self.L = p.size
        self.owner_x, self.owner_y, self.ny = grid.owner_x, grid.owner_y, grid.ny
        self.parts = Particles(init_particles(p, x0, x1, y0, y1, prefix))
        nbrs = grid.neighbours(tx, ty)
        self.peers = [self.collection[nb] for nb in nbrs]
        self.slot_of = grid.slot_table(tx, ty, nbrs)
        self.nslots = len(nbrs) + 1
        self.expect = len(nbrs)
        self.inbox: dict[int, list[np.ndarray]] = {}
        self.t = 0  # the step under way
        self.last = 0  # the phase ends before this step
        self.moved = False  # whether step t's move is done (then it waits for its neighbours' blocks)
        self.done: Any = None
        self.lb_period = 1 if lb_period < 0 else lb_period  # auto: at_sync every step
        self.syncs = 0
        self.pe = shoal.my_pe()
        self.compute: dict[int, float] = {}

    # -- entry methods ---------------------------------------------------------------
    def start(self, first: int, last: int, done: Any) -> None:
        """Run steps ``first .. last-1``; contribute to ``done`` when they are over."""
        self.t, self.last, self.done = first, last, done
        self.pe = shoal.my_pe()
        if first <= 1:  # the timed steps begin: forget the warm-up's compute time
            self.compute = {}
        self._advance()

    def take(self, step: int, block: np.ndarray) -> None:
        """A neighbour's particles that entered this tile in ``step``."""
        box = self.inbox.get(step)
        if box is None:
            box = self.inbox[step] = []
        box.append(block)
        if step == self.t and self.moved and len(box) == self.expect:
            self._advance()

    def resume_from_sync(self) -> None:
        """Called by the runtime after balancing: go on with the next step (maybe on a new PE)."""
        self.pe = shoal.my_pe()
        self._advance()

    def report(self) -> tuple[np.ndarray, dict[int, float], int, int]:
        """(verification sums, compute seconds per PE, at_sync calls, this PE)."""
        return verify(self.parts.live, self.problem).as_array(), self.compute, self.syncs, shoal.my_pe()

    # -- the step ----------------------------------------------------------------------
    def _advance(self) -> None:
        """Run as far as the blocks that have come allow."""
        parts = self.parts
        while True:
            if not self.moved:
                if self.t == self.last:
                    self.contribute(None, shoal.reducers.nop, self.done)
                    return
                started = time.perf_counter()
                blocks = parts.move(self.L, self.owner_x, self.owner_y, self.ny, self.slot_of, self.nslots)
                self._count(time.perf_counter() - started)
                step = self.t
                for peer, block in zip(self.peers, blocks):
                    peer.take(step, block)
                self.moved = True
            box = self.inbox.get(self.t, ())
            if len(box) < self.expect:
                return  # take() resumes when the last block comes
            if box:
                started = time.perf_counter()
                parts.extend(self.inbox.pop(self.t))
                self._count(time.perf_counter() - started)
            finished = self.t
            self.t += 1
            self.moved = False
            if self.lb_period and finished % self.lb_period == 0 and self.t < self.last and finished > 0:
                self.syncs += 1
                self.at_sync()  # the runtime calls resume_from_sync(), maybe on another PE
                return

    def _count(self, seconds: float) -> None:
        self.compute[self.pe] = self.compute.get(self.pe, 0.0) + seconds


def program(cfg: Config, tile: type[Tile] = Tile) -> Callable[[list], None]:
    """The shoal main program (PE 0) of a run of ``cfg`` with tiles of class ``tile``."""
    p = cfg.problem
    wanted = cfg.lb_period != 0

    def main(_args: list) -> None:
        npes = shoal.num_pes()
        c = cfg.with_pes(npes)
        grid, _ = layout(c)
        px, py = prk_grid(npes)
        ax, ay = squarest_split(c.odf, px, py)
        lines: list[tuple[str, str]] = []
        if wanted:
            every = "every step, rounds chosen by the runtime (--lb-period auto)" if c.lb_period < 0 else \
                f"every {c.lb_period} steps"
            lines.append(("load balancing", f"at_sync {every}, strategy {c.lb}"))
        else:
            lines.append(("load balancing", "off (--lb-period 0)"))
        prefix = column_prefix(p)
        tiles = shoal.Array(tile, (grid.nx, grid.ny), args=(p, grid, prefix, c.lb_period),
                            placement=TilePlacement(ax, ay, px))
        warm = shoal.Future()
        tiles.start(0, 1, warm)  # step 0: the PRK's untimed warm-up (and the kernel's compilation)
        warm.get()
        started = time.perf_counter()
        checkpoints = 0
        for first in range(1, p.moves, _CHUNK):  # chunks: between them main may checkpoint
            done = shoal.Future()
            tiles.start(first, min(first + _CHUNK, p.moves), done)
            done.get()
            checkpoints += shoal.checkpoint_point_sync(state={"tiles": tiles, "step": first + _CHUNK - 1})
        elapsed = time.perf_counter() - started
        rows = tiles.report(ret=True).get()
        total = Verification(0, 0, 0, 0)
        compute = [0.0] * npes
        per_pe = [0] * npes
        syncs = 0
        for ver, seconds, n_sync, pe in rows:
            total = total + Verification.from_array(ver)
            for where, s in seconds.items():
                compute[where] += s
            per_pe[pe] += 1
            syncs = max(syncs, n_sync)
        lines.append(("tiles per PE", f"{per_pe} at the end"))
        report = make_report(
            c, npes, elapsed, compute, total, int(prefix[-1]),
            f"{grid.nx} x {grid.ny} tiles, {ax} x {ay} per PE on a {px} x {py} PE grid (odf {c.odf})",
            extra={"tiles": grid.blocks, "tiles_per_pe": per_pe, "lb": c.lb if wanted else None,
                   "balanced": bool(wanted and syncs),
                   "syncs": syncs, "transport": c.transport, "checkpoints": checkpoints},
            lines=lines,
        )
        report.emit(c.json)
        if not report.verified:
            shoal.exit(1)

    return main


def run(cfg: Config) -> int:
    """Every PE: start shoal; PE 0 runs the app and prints the report. Returns the exit code."""
    options: dict[str, Any] = {}
    if cfg.transport == "inproc":
        options.update(transport="inproc", pes=cfg.pes)
    if cfg.lb_period > 0:
        options.update(lb=cfg.lb)
    elif cfg.lb_period < 0:
        options.update(lb=cfg.lb, lb_period=-1)
    return shoal.run(program(cfg), [], **options)
