"""``--target shoal``: jacobi3d over-decomposed into a 3-D Array of block chares.

The grid is cut into ``odf`` blocks per PE (:func:`.app.layout`): the same ``q1 x q2 x
q3`` grid of PEs as the mpi4py target's ranks, each PE's share cut again into ``a1 x a2
x a3`` blocks, and each block lives on the PE whose share holds it
(:class:`..blocks.Placement`). Each block opens one ``shoal.Channel`` per neighbour (up
to six; none across the physical boundary, where its ghosts stay zero). One step is one
round: the block sends its six interior faces, posts a ``shoal.ReceiveSet``, and when the
last face has landed the runtime runs ``step()``, which runs the kernel and starts the
next round. No coroutine or future per message, and a block whose faces are in runs
while its PE's other blocks still wait.

Where the faces land depends on where the blocks live (:mod:`.arrays`):

* CPU: the set's buffers are the ghost layers themselves, strided views of the block
  (see docs/howto/blocks.md), and the faces are sent as strided views (the send packs
  them), so no face is copied twice. The kernel reads ``u`` and writes ``v``, then the
  two swap, so a block has two receive sets over the same channels, one into ``u``'s
  ghost layers and one into ``v``'s, and posts the one of the array it is about to read.
* GPU (``--device cuda``; CuPy arrays on ``shoal.my_device()``): messages carry
  contiguous device arrays only, so each face is packed into a contiguous buffer on the
  device, and the set receives into contiguous landing buffers that ``step()`` unpacks
  into the ghost layers before the kernel. ``--staging direct`` sends the packed device
  arrays and posts device landing buffers: shoal moves them device to device (CUDA IPC
  between PEs of one node; docs/gpu.md). ``--staging host`` copies each packed face into
  a page-locked host buffer and sends that, receives into host buffers and copies them
  to the device before unpacking. The device is synchronised after packing (shoal's
  runtime and MPI read the faces outside the device's stream), after unpacking, and
  after the kernel, so a block's compute seconds are the kernel's time on the device;
  packing, copies, messages and unpacking count as communication.

Main (PE 0) creates the blocks, waits until every one is built (and has compiled the
kernel), then times ``start(S)`` until the blocks' completion reduction, and finally asks
every block for the exact sum of its final interior and its kernel seconds.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import shoal

from ..block_run import StepBlock, run_job, time_blocks

from ..blocks import BlockGrid, Placement
from .app import AXES, Config, layout, make_report, shape_text
from .arrays import BlockArrays, arrays_for
from .kernels import exact_sum, face, initial_block

__all__ = ["Block", "program", "run"]


def _views(arrays: type[BlockArrays], staging: str | None) -> bool:
    """Whether faces travel as views of the block (else through contiguous buffers)."""
    return arrays.views_in_messages and staging != "host"


class Block(StepBlock):
    """One block of the grid with its ghost layers, and a channel to each neighbour."""

    def __init__(self, cfg: Config, grid: BlockGrid, arrays: type[BlockArrays]):
        me = tuple(self.index)
        bounds = grid.bounds(me)
        dev = self.dev = arrays(shoal.my_device() if arrays.gpu else 0)  # choose the GPU before allocating
        u = dev.put(initial_block(cfg.shape, bounds))
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
        self.ghosts = ghosts
        self.staged = cfg.staging == "host"
        self.packs: list[Any] | None = None  # contiguous faces, on the device (None: faces go as views)
        self.lands: list[Any] | None = None  # contiguous received faces, on the device, unpacked by step()
        self.outgoing: list[Any] = []  # what is sent: the packs, or their host copies
        self.incoming: list[Any] = []  # what the set receives into: the lands, or host buffers
        if _views(arrays, cfg.staging):
            # one set per array: the faces of a round land in the ghost layers of the array read next
            self.sets = tuple(shoal.ReceiveSet(channels, [face(a, axis, k) for axis, k in ghosts], then=self.step)
                              for a in (u, v))
        else:
            shapes = [face(u, axis, 0).shape for _, axis, _ in self.sends]
            self.packs = [dev.empty(s) for s in shapes]
            self.lands = [dev.empty(s) for s in shapes]
            if self.staged:
                self.outgoing = [dev.staging_buffer(s) for s in shapes]
                self.incoming = [dev.staging_buffer(s) for s in shapes]
            else:
                self.outgoing = [dev.message(p) for p in self.packs]
                self.incoming = [dev.message(a) for a in self.lands]
            one = shoal.ReceiveSet(channels, self.incoming, then=self.step)  # its buffers serve both arrays
            self.sets = (one, one)
        self.cur = 0  # self.arrays[self.cur] is the current state
        dev.warm()

    # -- entry methods (and ready, start: StepBlock's) ----------------------------------
    def step(self) -> None:
        """Every neighbour's face has landed: unpack (GPU), sweep, then the next round (or report)."""
        u, v = self.arrays[self.cur], self.arrays[1 - self.cur]
        dev = self.dev
        if self.lands is not None:
            self._unpack(u)
            dev.sync()
        started = time.perf_counter()
        dev.step(u, v)
        dev.sync()  # the kernel was only queued: its time ends when the device is done
        seconds = time.perf_counter() - started
        self.cur = 1 - self.cur
        self._stepped(seconds)

    def report(self) -> tuple[int, float, int]:
        """(exact sum of the interior, kernel seconds of the last run, this PE)."""
        return exact_sum(self.dev.get(self.arrays[self.cur][1:-1, 1:-1, 1:-1])), self.compute, shoal.my_pe()

    # -- one round -------------------------------------------------------------------
    def _exchange(self) -> None:
        u = self.arrays[self.cur]
        if self.packs is None:
            for ch, axis, layer in self.sends:
                ch.send(face(u, axis, layer))  # a strided view: the send packs it
        else:
            dev = self.dev
            for (_, axis, layer), pack, out in zip(self.sends, self.packs, self.outgoing):
                pack[...] = face(u, axis, layer)
                if self.staged:
                    dev.to_host(pack, out)
            dev.sync()  # the runtime reads the faces outside the device's stream
            for (ch, _, _), out in zip(self.sends, self.outgoing):
                ch.send(out)  # returns once `out` may be written again
        self.sets[self.cur].post()  # step() runs when the last face has landed, never inside post()

    def _unpack(self, u: Any) -> None:
        """Copy the landed faces into ``u``'s ghost layers (through the device, when staged)."""
        assert self.lands is not None
        dev = self.dev
        for (axis, ghost), land, got in zip(self.ghosts, self.lands, self.incoming):
            if self.staged:
                dev.to_device(got, land)
            face(u, axis, ghost)[...] = land


def program(cfg: Config, arrays: type[BlockArrays] | None = None) -> Callable[[list], None]:
    """The shoal main program (PE 0) of a run of ``cfg``, its blocks in ``arrays``
    (default: ``cfg.device``'s; the tests pass a host-memory class that takes the GPU's
    code path)."""
    kind = arrays or arrays_for(cfg.device)

    def main(_args: list) -> None:
        npes = shoal.num_pes()
        c = cfg.with_pes(npes)
        grid, per_pe, q = layout(c)
        blocks = shoal.Array(Block, grid.grid, args=(c, grid, kind), placement=Placement(per_pe, q))
        elapsed, compute, per_pe_count, checksum = time_blocks(blocks, c.steps, npes)
        extra: dict[str, Any] = {"blocks": grid.blocks, "blocks_per_pe": per_pe_count, "transport": c.transport,
                                 "halo_buffers": "views" if _views(kind, c.staging) else "contiguous"}
        if c.staging == "direct":
            extra["gpu_path"] = os.environ.get("SHOAL_GPU_PATH") or "auto"  # shoal info says which auto is
        report = make_report(
            c, npes, elapsed, compute, checksum,
            f"{shape_text(grid.grid)} blocks, {shape_text(per_pe)} per PE on a {shape_text(q)} PE grid "
            f"(odf {c.odf}; {grid.describe()})",
            extra=extra, arrays=kind,
        )
        report.emit(c.json)
        if not report.verified:
            shoal.exit(1)

    return main


def run(cfg: Config, arrays: type[BlockArrays] | None = None) -> int:
    """Every PE: start shoal; PE 0 runs the app and prints the report. Returns the exit code."""
    return run_job(program(cfg, arrays), cfg.transport, cfg.pes)
