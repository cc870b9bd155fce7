"""``--target shoal``: jacobi3d over-decomposed into a 3-D Array of block chares.

The grid is cut into ``odf`` blocks per PE (:func:`.app.layout`): the same ``q1 x q2 x
q3`` grid of PEs as the mpi4py target's ranks, each PE's share cut again into ``a1 x a2
x a3`` blocks, and each block lives on the PE whose share holds it
(:class:`..blocks.Placement`). Each block opens one ``shoal.Channel`` per neighbour (up
to six; none across the physical boundary, where its ghosts stay zero) and receives its
neighbours' faces straight into its ghost layers: the buffers of its
``shoal.ReceiveSet`` are strided views of the block's array (see docs/howto/blocks.md),
so no face is copied twice on the receiving side. The kernel reads ``u`` and writes
``v``, then the two swap, so a block has two receive sets over the same channels, one
into ``u``'s ghost layers and one into ``v``'s, and posts the one of the array it is
about to read. One step is one round: the block sends its six interior faces (strided
views, packed by the send), posts the set, and when the last face has landed the
runtime runs ``step()``, which runs the kernel and starts the next round. No coroutine
or future per message, and a block whose faces are in runs while its PE's other
blocks still wait.

Main (PE 0) creates the blocks, waits until every one is built (and has compiled the
kernel), then times ``start(S)`` until the blocks' completion reduction, and finally asks
every block for the exact sum of its final interior and its kernel seconds.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import shoal

from ..block_run import StepBlock, run_job, time_blocks

from ..blocks import BlockGrid, Placement
from .app import AXES, Config, layout, make_report, shape_text
from .kernels import exact_sum, face, initial_block, jacobi_step, warm

__all__ = ["Block", "program", "run"]


class Block(StepBlock):
    """One block of the grid with its ghost layers, and a channel to each neighbour."""

    def __init__(self, cfg: Config, grid: BlockGrid):
        me = tuple(self.index)
        bounds = grid.bounds(me)
        u = initial_block(cfg.shape, bounds)
        v = u.copy()
        self.arrays = (u, v)
        channels: list[Any] = []
        self.sends: list[tuple[Any, int, int]] = []  # (channel, axis, interior layer it carries)
        ghosts: list[tuple[int, int]] = []  # (axis, ghost layer it fills)
        for axis in range(3):
            n = bounds[axis][1] - bounds[axis][0]
            for side in (-1, 1):
                peer = list(me)
                peer[axis] += side
                if not 0 <= peer[axis] < grid.grid[axis]:
                    continue
                # the pair of blocks shares one link, named by its axis (the same at both ends)
                ch = shoal.Channel(self, remote=self.collection[tuple(peer)], port=AXES[axis])
                channels.append(ch)
                self.sends.append((ch, axis, 1 if side < 0 else n))
                ghosts.append((axis, 0 if side < 0 else n + 1))
        # one set per array: the faces of a round land in the ghost layers of the array read next
        self.sets = tuple(shoal.ReceiveSet(channels, [face(a, axis, k) for axis, k in ghosts], then=self.step)
                          for a in (u, v))
        self.cur = 0  # self.arrays[self.cur] is the current state
        warm()

    # -- entry methods (and ready, start: StepBlock's) ----------------------------------
    def step(self) -> None:
        """Every neighbour's face is in the ghost layers: sweep, then the next round (or report)."""
        u, v = self.arrays[self.cur], self.arrays[1 - self.cur]
        started = time.perf_counter()
        jacobi_step(u, v)
        seconds = time.perf_counter() - started
        self.cur = 1 - self.cur
        self._stepped(seconds)

    def report(self) -> tuple[int, float, int]:
        """(exact sum of the interior, kernel seconds of the last run, this PE)."""
        return exact_sum(self.arrays[self.cur][1:-1, 1:-1, 1:-1]), self.compute, shoal.my_pe()

    # -- one round -------------------------------------------------------------------
    def _exchange(self) -> None:
        u = self.arrays[self.cur]
        for ch, axis, layer in self.sends:
            ch.send(face(u, axis, layer))  # a strided view: the send packs it
        self.sets[self.cur].post()  # step() runs when the last face has landed, never inside post()


def program(cfg: Config) -> Callable[[list], None]:
    """The shoal main program (PE 0) of a run of ``cfg``."""

    def main(_args: list) -> None:
        npes = shoal.num_pes()
        c = cfg.with_pes(npes)
        grid, per_pe, q = layout(c)
        blocks = shoal.Array(Block, grid.grid, args=(c, grid), placement=Placement(per_pe, q))
        elapsed, compute, per_pe_count, checksum = time_blocks(blocks, c.steps, npes)
        report = make_report(
            c, npes, elapsed, compute, checksum,
            f"{shape_text(grid.grid)} blocks, {shape_text(per_pe)} per PE on a {shape_text(q)} PE grid "
            f"(odf {c.odf}; {grid.describe()})",
            extra={"blocks": grid.blocks, "blocks_per_pe": per_pe_count, "transport": c.transport},
        )
        report.emit(c.json)
        if not report.verified:
            shoal.exit(1)

    return main


def run(cfg: Config) -> int:
    """Every PE: start shoal; PE 0 runs the app and prints the report. Returns the exit code."""
    return run_job(program(cfg), cfg.transport, cfg.pes)
