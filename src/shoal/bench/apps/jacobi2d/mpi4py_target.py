"""``--target mpi4py``: jacobi2d in mpi4py, one block of the grid per rank.

The ranks form a ``q1 x q2`` Cartesian communicator (``comm.Create_cart``, not
periodic); rank ``r`` owns block ``cart.Get_coords(r)``. Every step each rank copies its
four edges into contiguous buffers, exchanges them with its neighbours with non-blocking
``Isend``/``Irecv`` (``MPI.PROC_NULL`` at the physical boundary, where the ghosts stay
zero) and ``Waitall``, copies the received edges into its ghost ring, and runs the
kernel. Before the timed steps every rank compiles the kernel and the ranks meet at a
barrier. Per rank the time in the kernel is "compute", the rest "communication".
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .app import Config, layout, make_report
from .kernels import exact_sum, initial_block, jacobi_step, to_float, warm

__all__ = ["run"]

_TAG_N, _TAG_S, _TAG_W, _TAG_E = 21, 22, 23, 24  # the tag names the edge as the receiver sees it


def _simulate(cfg: Config, cart: Any, MPI: Any) -> tuple[float, float, int]:
    """This rank's part: (elapsed, compute seconds, exact sum of its final block)."""
    grid, _, _ = layout(cfg)
    bi, bj = cart.Get_coords(cart.Get_rank())
    r0, r1, c0, c1 = grid.bounds(bi, bj)
    north, south = cart.Shift(0, 1)
    west, east = cart.Shift(1, 1)
    u = initial_block(cfg.N, cfg.M, r0, r1, c0, c1)
    v = u.copy()
    n, m = r1 - r0, c1 - c0
    send = {k: np.empty(n if k in "we" else m) for k in "nswe"}
    recv = {k: np.zeros(n if k in "we" else m) for k in "nswe"}
    waitall = MPI.Request.Waitall
    warm()
    cart.Barrier()
    compute = 0.0
    started = time.perf_counter()
    for _ in range(cfg.steps):
        send["n"][:] = u[1, 1:-1]
        send["s"][:] = u[-2, 1:-1]
        send["w"][:] = u[1:-1, 1]
        send["e"][:] = u[1:-1, -2]
        reqs = [cart.Irecv(recv["n"], source=north, tag=_TAG_N), cart.Irecv(recv["s"], source=south, tag=_TAG_S),
                cart.Irecv(recv["w"], source=west, tag=_TAG_W), cart.Irecv(recv["e"], source=east, tag=_TAG_E),
                cart.Isend(send["n"], dest=north, tag=_TAG_S), cart.Isend(send["s"], dest=south, tag=_TAG_N),
                cart.Isend(send["w"], dest=west, tag=_TAG_E), cart.Isend(send["e"], dest=east, tag=_TAG_W)]
        waitall(reqs)
        if north != MPI.PROC_NULL:
            u[0, 1:-1] = recv["n"]
        if south != MPI.PROC_NULL:
            u[-1, 1:-1] = recv["s"]
        if west != MPI.PROC_NULL:
            u[1:-1, 0] = recv["w"]
        if east != MPI.PROC_NULL:
            u[1:-1, -1] = recv["e"]
        t0 = time.perf_counter()
        jacobi_step(u, v)
        compute += time.perf_counter() - t0
        u, v = v, u
    elapsed = time.perf_counter() - started
    return elapsed, compute, exact_sum(u[1:-1, 1:-1])


def run(cfg: Config) -> int:
    """Every rank: run the app; rank 0 prints the report. Returns the exit code."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    cfg = cfg.with_pes(world.Get_size())
    grid, _, _ = layout(cfg)
    cart = world.Create_cart([grid.p1, grid.p2], periods=[False, False], reorder=False)
    elapsed, compute, mine = _simulate(cfg, cart, MPI)
    slowest = cart.reduce(elapsed, op=MPI.MAX, root=0)
    rows = cart.gather((compute, mine), root=0)
    code = 0
    if cart.Get_rank() == 0:
        assert rows is not None and slowest is not None
        checksum = to_float(sum(r[1] for r in rows))
        report = make_report(cfg, cart.Get_size(), slowest, [r[0] for r in rows], checksum,
                             f"{grid.p1} x {grid.p2} Cartesian grid of ranks ({grid.describe()})",
                             extra={"blocks": grid.blocks})
        report.emit(cfg.json)
        code = report.exit_code
    code = cart.bcast(code, root=0)
    cart.Free()
    return code
