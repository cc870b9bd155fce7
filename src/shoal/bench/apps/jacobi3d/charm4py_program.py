"""The Charm4py program of jacobi3d's ``--target charm4py``; :mod:`.charm4py_target` runs it.

Run as ``python -m charmrun.start +pN -m shoal.bench.apps.jacobi3d.charm4py_program
CONFIG RESULT``, with jacobi2d's file protocol (:mod:`..jacobi2d.charm4py_program`):
CONFIG holds the app's :class:`.app.Config`, RESULT gets the measurements.

A 3-D chare Array of blocks (the decomposition of :func:`.app.layout`, ``--odf`` blocks
per PE, placed as the shoal target places them), one ``charm4py.Channel`` per neighbour
(up to six), and jacobi2d's coroutine loop (:class:`..jacobi2d.charm4py_program.ChannelBlock`):
each step a block sends its six interior faces as contiguous copies, receives the
neighbours' faces into its ghost layers and runs the shared Numba kernel
(:mod:`.kernels`). What is timed is what jacobi2d's Charm4py program times.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from charm4py import charm

from shoal.bench.apps.blocks import BlockGrid
from shoal.bench.apps.jacobi2d.charm4py_program import BlockMap, ChannelBlock, measure
from shoal.bench.apps.jacobi3d.app import Config, layout
from shoal.bench.apps.jacobi3d.kernels import face, initial_block, jacobi_step, warm

__all__ = ["Block", "main"]


class Block(ChannelBlock):
    """One block of the 3-D grid with its ghost layers."""

    def __init__(self, cfg: Config, grid: BlockGrid) -> None:
        me = tuple(self.thisIndex)
        bounds = grid.bounds(me)
        self.u = initial_block(cfg.shape, bounds)
        self.v = self.u.copy()
        # side (axis, -1 | 1) -> (the neighbour's index, interior layer sent, ghost layer filled);
        # none across the physical boundary, where the ghosts stay zero
        self.layers: dict[tuple[int, int], tuple[int, int]] = {}
        self.neighbours = {}
        for axis in range(3):
            n = bounds[axis][1] - bounds[axis][0]
            for side in (-1, 1):
                peer = list(me)
                peer[axis] += side
                if 0 <= peer[axis] < grid.grid[axis]:
                    self.neighbours[axis, side] = tuple(peer)
                    self.layers[axis, side] = (1, 0) if side < 0 else (n, n + 1)
        self.links = {}
        warm()

    def exchange(self) -> None:
        u = self.u
        for (axis, side), ch in self.links.items():
            ch.send(np.ascontiguousarray(face(u, axis, self.layers[axis, side][0])))
        for (axis, side), ch in self.links.items():
            face(u, axis, self.layers[axis, side][1])[...] = ch.recv()

    def sweep(self) -> None:
        jacobi_step(self.u, self.v)
        self.u, self.v = self.v, self.u


def main(args: list) -> None:
    """Build the blocks, time the steps, write the measurements to RESULT, exit."""
    config_file, result_file = args[-2:]
    raw = json.loads(Path(config_file).read_text())
    cfg = Config(**{**raw, "shape": tuple(raw["shape"])}).with_pes(charm.numPes())
    grid, per_pe, q = layout(cfg)
    measured = measure(Block, grid.grid, [cfg, grid], per_pe, q, cfg.steps)
    measured.update(blocks=list(grid.grid), per_pe=list(per_pe), describe=grid.describe())
    Path(result_file).write_text(json.dumps(measured))
    charm.exit()


if __name__ == "__main__":
    charm.start(main, classes=[BlockMap])  # the map is jacobi2d's: register it by name
