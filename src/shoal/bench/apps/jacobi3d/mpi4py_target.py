"""``--target mpi4py``: jacobi3d in mpi4py (4.x), one block of the grid per rank.

The ranks form a ``q1 x q2 x q3`` Cartesian communicator (``comm.Create_cart``, not
periodic, not reordered); rank ``r`` owns block ``cart.Get_coords(r)``. Every step each
rank copies its six interior faces (strided views of its block) into contiguous
buffers, exchanges them with its neighbours with non-blocking ``Isend``/``Irecv``
(``MPI.PROC_NULL`` at the physical boundary, where the ghosts stay zero) and
``Waitall``, copies the received faces into its ghost layers, and runs the kernel.
Before the timed steps every rank compiles the kernel and the ranks meet at a barrier.
Per rank the time in the kernel is "compute", the rest (packing, messages, waiting)
"communication".
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np

from .app import Config, layout, make_report, shape_text
from .kernels import exact_sum, face, initial_block, jacobi_step, to_float, warm

__all__ = ["run"]


class _Side(NamedTuple):
    """One neighbour of a rank's block."""

    peer: int  # its rank
    axis: int
    high: bool  # the neighbour above along ``axis`` (else below)
    send: np.ndarray  # contiguous copy of the interior layer it gets
    recv: np.ndarray  # where its layer lands, before the copy into the ghost layer
    layer: int  # index along ``axis`` of the interior layer sent
    ghost: int  # index along ``axis`` of the ghost layer filled


def _tag(axis: int, high: bool) -> int:
    """The tag of a face as its receiver sees it: which ghost layer (axis, low/high) it fills."""
    return 30 + 2 * axis + int(high)


def _simulate(cfg: Config, cart: Any, MPI: Any) -> tuple[float, float, int]:
    """This rank's part: (elapsed, compute seconds, exact sum of its final block)."""
    grid, _, _ = layout(cfg)
    bounds = grid.bounds(cart.Get_coords(cart.Get_rank()))
    u = initial_block(cfg.shape, bounds)
    v = u.copy()
    sides: list[_Side] = []
    for axis in range(3):
        n = bounds[axis][1] - bounds[axis][0]
        for peer, high in zip(cart.Shift(axis, 1), (False, True)):
            if peer != MPI.PROC_NULL:
                shape = face(u, axis, 0).shape
                sides.append(_Side(peer, axis, high, np.empty(shape), np.zeros(shape),
                                   n if high else 1, n + 1 if high else 0))
    waitall = MPI.Request.Waitall
    warm()
    cart.Barrier()
    compute = 0.0
    started = time.perf_counter()
    for _ in range(cfg.steps):
        reqs = [cart.Irecv(s.recv, source=s.peer, tag=_tag(s.axis, s.high)) for s in sides]
        for s in sides:
            s.send[...] = face(u, s.axis, s.layer)
        reqs += [cart.Isend(s.send, dest=s.peer, tag=_tag(s.axis, not s.high)) for s in sides]
        waitall(reqs)
        for s in sides:
            face(u, s.axis, s.ghost)[...] = s.recv
        t0 = time.perf_counter()
        jacobi_step(u, v)
        compute += time.perf_counter() - t0
        u, v = v, u
    elapsed = time.perf_counter() - started
    return elapsed, compute, exact_sum(u[1:-1, 1:-1, 1:-1])


def run(cfg: Config) -> int:
    """Every rank: run the app; rank 0 prints the report. Returns the exit code."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    cfg = cfg.with_pes(world.Get_size())
    grid, _, q = layout(cfg)
    cart = world.Create_cart(list(q), periods=[False] * 3, reorder=False)
    elapsed, compute, mine = _simulate(cfg, cart, MPI)
    slowest = cart.reduce(elapsed, op=MPI.MAX, root=0)
    rows = cart.gather((compute, mine), root=0)
    code = 0
    if cart.Get_rank() == 0:
        assert rows is not None and slowest is not None
        checksum = to_float(sum(r[1] for r in rows))
        report = make_report(cfg, cart.Get_size(), slowest, [r[0] for r in rows], checksum,
                             f"{shape_text(q)} Cartesian grid of ranks ({grid.describe()})",
                             extra={"blocks": grid.blocks})
        report.emit(cfg.json)
        code = report.exit_code
    code = cart.bcast(code, root=0)
    cart.Free()
    return code
