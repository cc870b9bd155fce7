"""The Charm4py program of jacobi2d's ``--target charm4py``; :mod:`.charm4py_target` runs it.

Run as ``python -m charmrun.start +pN -m shoal.bench.apps.jacobi2d.charm4py_program
CONFIG RESULT``: it reads the app's :class:`.app.Config` from CONFIG (JSON) and writes
what it measured to RESULT (JSON: elapsed seconds, kernel seconds per PE, the checksum,
the decomposition); Charm++ prints banners on stdout, so nothing is reported there.
Charm4py registers the chare classes it finds in the main module (imported ones too),
so they live at module level.

The program is written the way seed 000's artifact wrote Jacobi2D for Charm4py: a 2-D
chare Array of blocks (the decomposition of :func:`.app.layout`, ``--odf`` blocks per
PE, placed on the PE grid by an ``ArrayMap`` exactly as the shoal target places them),
one ``charm4py.Channel`` per neighbour, and a coroutine entry method whose loop sends
the four edges, receives the neighbours' edges into the ghost ring and runs the shared
Numba kernel (:mod:`.kernels`). Untimed: creating the blocks, compiling the kernel and
one round on every channel (which establishes it). Timed on PE 0: from broadcasting the
run until the blocks' empty reduction says every block has done its steps.

:class:`BlockMap`, :class:`ChannelBlock` and :func:`measure` are what jacobi3d's Charm4py
program shares with this one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from charm4py import Array, ArrayMap, Channel, Chare, Future, Group, charm, coro

from shoal.bench.apps.blocks import Placement
from shoal.bench.apps.jacobi2d.app import Config, layout
from shoal.bench.apps.jacobi2d.kernels import exact_sum, initial_block, jacobi_step, to_float, warm
from shoal.bench.apps.jacobi2d.layout import Layout, send_edges

__all__ = ["BlockMap", "ChannelBlock", "Block", "measure", "main"]


class BlockMap(ArrayMap):
    """Places block ``index`` on the PE of PE-grid cell ``index[d] // per_pe[d]`` (the
    shoal targets' :class:`..blocks.Placement`)."""

    def __init__(self, per_pe: Sequence[int], pes: Sequence[int]) -> None:
        super().__init__()
        self.place = Placement(tuple(per_pe), tuple(pes))

    def procNum(self, index: tuple[int, ...]) -> int:
        return self.place(index, charm.numPes())


class ChannelBlock(Chare):
    """A block with a channel to each neighbour. A subclass's ``__init__`` sets ``u`` and
    ``v`` (the state with its ghosts, and the array the kernel writes) and ``neighbours``
    (side -> the neighbour's index), and it defines :meth:`exchange` and :meth:`sweep`."""

    u: np.ndarray
    v: np.ndarray
    neighbours: dict[Any, tuple[int, ...]]
    links: dict[Any, Any]  # side -> its Channel
    compute = 0.0  # kernel seconds of the last run

    @coro
    def connect(self, ready: Any) -> None:
        """Open a channel to every neighbour and pass one message each way on it (a
        channel is established by its first round), then join the ``ready`` reduction."""
        self.links = {k: Channel(self, remote=self.thisProxy[ij]) for k, ij in self.neighbours.items()}
        for ch in self.links.values():
            ch.send(None)
        for ch in self.links.values():
            ch.recv()
        self.reduce(ready)

    @coro
    def run(self, steps: int, done: Any) -> None:
        """``steps`` rounds of :meth:`exchange` and :meth:`sweep` (timed: ``compute``),
        then join the ``done`` reduction."""
        self.compute = 0.0
        for _ in range(steps):
            self.exchange()
            started = time.perf_counter()
            self.sweep()
            self.compute += time.perf_counter() - started
        self.reduce(done)

    def report(self) -> tuple[int, float, int]:
        """(exact sum of the interior, kernel seconds of the last run, this PE)."""
        return exact_sum(self.u[(slice(1, -1),) * self.u.ndim]), self.compute, charm.myPe()

    def exchange(self) -> None:
        """Send the faces to the neighbours; receive theirs into the ghosts of ``u``."""
        raise NotImplementedError

    def sweep(self) -> None:
        """One kernel sweep from ``u`` into ``v``, then swap them."""
        raise NotImplementedError


class Block(ChannelBlock):
    """One block of the 2-D grid with its ghost ring."""

    def __init__(self, cfg: Config, grid: Layout) -> None:
        bi, bj = self.thisIndex
        r0, r1, c0, c1 = grid.bounds(bi, bj)
        self.u = initial_block(cfg.N, cfg.M, r0, r1, c0, c1)
        self.v = self.u.copy()
        # the neighbours that exist (none across the physical boundary: those ghosts stay zero)
        sides = {"n": (bi - 1, bj), "s": (bi + 1, bj), "w": (bi, bj - 1), "e": (bi, bj + 1)}
        self.neighbours = {k: ij for k, ij in sides.items() if 0 <= ij[0] < grid.p1 and 0 <= ij[1] < grid.p2}
        self.links = {}
        warm()

    def exchange(self) -> None:
        u, links = self.u, self.links
        send_edges(u, links)
        if "n" in links:
            u[0, 1:-1] = links["n"].recv()
        if "s" in links:
            u[-1, 1:-1] = links["s"].recv()
        if "w" in links:
            u[1:-1, 0] = links["w"].recv()
        if "e" in links:
            u[1:-1, -1] = links["e"].recv()

    def sweep(self) -> None:
        jacobi_step(self.u, self.v)
        self.u, self.v = self.v, self.u


def measure(block: type, dims: tuple[int, ...], args: list, per_pe: tuple[int, ...], pes: tuple[int, ...],
            steps: int) -> dict[str, Any]:
    """Create the Array of ``block`` (``dims`` blocks, placed by :class:`BlockMap`),
    connect its channels, time ``steps`` steps; returns the result file's measurements:
    ``pes, elapsed, compute`` (kernel seconds per PE), ``blocks_per_pe, checksum``."""
    npes = charm.numPes()
    placement = Group(BlockMap, args=[per_pe, pes])  # a map group is created before any array that uses it
    blocks = Array(block, dims, args=args, map=placement)
    charm.awaitCreation(blocks)
    ready = Future()
    blocks.connect(ready)
    ready.get()
    done = Future()
    started = time.perf_counter()
    blocks.run(steps, done)
    done.get()
    elapsed = time.perf_counter() - started
    rows = blocks.report(ret=True).get()
    compute = [0.0] * npes
    per_pe_count = [0] * npes
    for _, seconds, pe in rows:
        compute[pe] += seconds
        per_pe_count[pe] += 1
    return {"pes": npes, "elapsed": elapsed, "compute": compute, "blocks_per_pe": per_pe_count,
            "checksum": to_float(sum(r[0] for r in rows))}


def main(args: list) -> None:
    """Build the blocks, time the steps, write the measurements to RESULT, exit."""
    config_file, result_file = args[-2:]
    cfg = Config(**json.loads(Path(config_file).read_text())).with_pes(charm.numPes())
    grid, a1, a2 = layout(cfg)
    pes = (grid.p1 // a1, grid.p2 // a2)
    measured = measure(Block, (grid.p1, grid.p2), [cfg, grid], (a1, a2), pes, cfg.steps)
    measured.update(blocks=[grid.p1, grid.p2], per_pe=[a1, a2], describe=grid.describe())
    Path(result_file).write_text(json.dumps(measured))
    charm.exit()


if __name__ == "__main__":
    charm.start(main)
