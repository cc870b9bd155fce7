"""``--target shoal``: jacobi2d over-decomposed into a 2-D Array of block chares.

The grid is cut into ``odf`` blocks per PE (:func:`.app.layout`): the same ``q1 x q2``
grid of PEs as the mpi4py target's ranks, each PE's share cut again into ``a1 x a2``
blocks, and block ``(bi, bj)`` lives on the PE whose share holds it. Each block opens one
``shoal.Channel`` per neighbour (north, south, west, east; none across the physical
boundary, where its ghosts stay zero) and a ``shoal.ReceiveSet`` that receives one edge
from each neighbour into posted contiguous buffers. One step is one round: the block
sends its four edges, posts the set, and when the last edge has landed the runtime runs
``step()``, which copies the edges into the ghost ring, runs the kernel and starts the
next round. No coroutine or future per message, and a block whose edges are in runs
while its PE's other blocks still wait.

Main (PE 0) creates the blocks, waits until every one is built (and has compiled the
kernel), then times ``start(S)`` until the blocks' completion reduction, and finally asks
every block for the exact sum of its final interior and its kernel seconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import shoal

from ..block_run import StepBlock, run_job, time_blocks

from .app import Config, layout, make_report
from .kernels import exact_sum, initial_block, jacobi_step, warm
from .layout import Layout, send_edges

__all__ = ["Block", "BlockPlacement", "program", "run"]


@dataclass(frozen=True)
class BlockPlacement:
    """Block ``(bi, bj)`` -> the PE of PE-grid cell ``(bi // a1, bj // a2)``."""

    a1: int  # blocks per PE share, vertically
    a2: int
    q2: int  # PEs per row of the PE grid

    def __call__(self, index: Any, npes: int) -> int:
        bi, bj = index
        return (bi // self.a1) * self.q2 + bj // self.a2


class Block(StepBlock):
    """One block of the grid with its ghost ring, and a channel to each neighbour."""

    def __init__(self, cfg: Config, grid: Layout):
        bi, bj = self.index
        r0, r1, c0, c1 = grid.bounds(bi, bj)
        self.u = initial_block(cfg.N, cfg.M, r0, r1, c0, c1)
        self.v = self.u.copy()
        n, m = r1 - r0, c1 - c0
        # (side, neighbour, port, buffer): a pair of blocks shares one link, named by its axis
        sides = [("n", (bi - 1, bj), "ns", m), ("s", (bi + 1, bj), "ns", m),
                 ("w", (bi, bj - 1), "we", n), ("e", (bi, bj + 1), "we", n)]
        self.links: dict[str, Any] = {}
        self.bufs: dict[str, np.ndarray] = {}
        for side, (i, j), port, length in sides:
            if 0 <= i < grid.p1 and 0 <= j < grid.p2:
                self.links[side] = shoal.Channel(self, remote=self.collection[i, j], port=port)
                self.bufs[side] = np.zeros(length)
        self.ghosts = shoal.ReceiveSet(list(self.links.values()), list(self.bufs.values()), then=self.step)
        warm()

    # -- entry methods (and ready, start: StepBlock's) ----------------------------------
    def step(self) -> None:
        """Every neighbour's edge is in: fill the ghosts, sweep, then the next round (or report)."""
        u, b = self.u, self.bufs
        if "n" in b:
            u[0, 1:-1] = b["n"]
        if "s" in b:
            u[-1, 1:-1] = b["s"]
        if "w" in b:
            u[1:-1, 0] = b["w"]
        if "e" in b:
            u[1:-1, -1] = b["e"]
        started = time.perf_counter()
        jacobi_step(u, self.v)
        seconds = time.perf_counter() - started
        self.u, self.v = self.v, u
        self._stepped(seconds)

    def report(self) -> tuple[int, float, int]:
        """(exact sum of the interior, kernel seconds of the last run, this PE)."""
        return exact_sum(self.u[1:-1, 1:-1]), self.compute, shoal.my_pe()

    # -- one round -------------------------------------------------------------------
    def _exchange(self) -> None:
        send_edges(self.u, self.links)
        self.ghosts.post()  # step() runs when the last edge has landed, never inside post()


def program(cfg: Config) -> Callable[[list], None]:
    """The shoal main program (PE 0) of a run of ``cfg``."""

    def main(_args: list) -> None:
        npes = shoal.num_pes()
        c = cfg.with_pes(npes)
        grid, a1, a2 = layout(c)
        q1, q2 = grid.p1 // a1, grid.p2 // a2
        blocks = shoal.Array(Block, (grid.p1, grid.p2), args=(c, grid), placement=BlockPlacement(a1, a2, q2))
        elapsed, compute, per_pe, checksum = time_blocks(blocks, c.steps, npes)
        report = make_report(
            c, npes, elapsed, compute, checksum,
            f"{grid.p1} x {grid.p2} blocks, {a1} x {a2} per PE on a {q1} x {q2} PE grid (odf {c.odf}; "
            f"{grid.describe()})",
            extra={"blocks": grid.blocks, "blocks_per_pe": per_pe, "transport": c.transport},
        )
        report.emit(c.json)
        if not report.verified:
            shoal.exit(1)

    return main


def run(cfg: Config) -> int:
    """Every PE: start shoal; PE 0 runs the app and prints the report. Returns the exit code."""
    return run_job(program(cfg), cfg.transport, cfg.pes)
