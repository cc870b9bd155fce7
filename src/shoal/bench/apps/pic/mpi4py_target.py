"""``--target mpi4py``: the PRK's MPI PIC in mpi4py, one block of the mesh per rank.

As the reference (MPI1/PIC): the ranks form a ``px x py`` grid (:func:`prk_grid`), rank
``r`` owning block ``(r % px, r // px)``; every step each rank moves its particles, then
tells each neighbour how many particles it sends, then sends them, all with non-blocking
point-to-point calls (``Isend``/``Irecv`` and ``Waitall``), and appends what arrived.
Particles travel as contiguous ``(NFIELDS, count)`` float64 blocks, one message per
distinct neighbour per step (empty ones too). Step 0 is the untimed warm-up.

Per rank the time in the kernel and in appending is "compute", the time in the two
exchanges "communication" (which includes waiting for a slower neighbour).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from .app import Config, layout, make_report
from .kernels import MoveError, Particles
from .physics import NFIELDS, Verification, column_prefix, init_particles, verify

__all__ = ["run"]

_TAG_COUNT, _TAG_PARTICLES = 11, 12


def _simulate(cfg: Config, comm: Any, MPI: Any) -> tuple[float, float, float, Verification, int, str]:
    """This rank's part of the run: (elapsed, compute, comm seconds, its verification, placed, grid)."""
    p = cfg.problem
    rank, size = comm.Get_rank(), comm.Get_size()
    grid, _ = layout(cfg.with_pes(size))
    px = grid.nx
    bx, by = rank % px, rank // px
    x0, x1, y0, y1 = grid.bounds(bx, by)
    prefix = column_prefix(p)
    parts = Particles(init_particles(p, x0, x1, y0, y1, prefix))
    nbrs = grid.neighbours(bx, by)
    peers = [nby * px + nbx for nbx, nby in nbrs]
    slot_of = grid.slot_table(bx, by, nbrs)
    nslots = len(nbrs) + 1
    L, owner_x, owner_y, ny = p.size, grid.owner_x, grid.owner_y, grid.ny
    send_counts = np.zeros(len(peers), dtype=np.int64)
    recv_counts = np.zeros(len(peers), dtype=np.int64)
    waitall = MPI.Request.Waitall
    compute = exchange = 0.0
    started = 0.0
    for step in range(p.moves):
        if step == 1:  # the PRK times every step after the first
            comm.Barrier()
            compute = exchange = 0.0
            started = time.perf_counter()
        t0 = time.perf_counter()
        blocks = parts.move(L, owner_x, owner_y, ny, slot_of, nslots)
        t1 = time.perf_counter()
        for i, block in enumerate(blocks):
            send_counts[i] = block.shape[1]
        requests = [comm.Irecv(recv_counts[i: i + 1], source=peer, tag=_TAG_COUNT) for i, peer in enumerate(peers)]
        requests += [comm.Isend(send_counts[i: i + 1], dest=peer, tag=_TAG_COUNT) for i, peer in enumerate(peers)]
        waitall(requests)
        incoming = [np.empty((NFIELDS, int(c)), dtype=np.float64) for c in recv_counts]
        requests = [comm.Irecv(buf, source=peer, tag=_TAG_PARTICLES) for buf, peer in zip(incoming, peers)]
        requests += [comm.Isend(block, dest=peer, tag=_TAG_PARTICLES) for block, peer in zip(blocks, peers)]
        waitall(requests)
        t2 = time.perf_counter()
        parts.extend(incoming)
        t3 = time.perf_counter()
        compute += (t1 - t0) + (t3 - t2)
        exchange += t2 - t1
    elapsed = time.perf_counter() - started
    return elapsed, compute, exchange, verify(parts.live, p), int(prefix[-1]), f"{grid.nx} x {grid.ny} ranks"


def run(cfg: Config) -> int:
    """Every rank: run the app; rank 0 prints the report. Returns the exit code."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD.Dup()
    rank = comm.Get_rank()
    try:
        elapsed, compute, exchange, mine, placed, grid = _simulate(cfg, comm, MPI)
    except MoveError as exc:
        print(f"shoal bench app pic: rank {rank}: {exc}", file=sys.stderr, flush=True)
        comm.Abort(1)
        return 1
    slowest = comm.reduce(elapsed, op=MPI.MAX, root=0)
    rows = comm.gather((compute, exchange, mine.as_array()), root=0)
    code = 0
    if rank == 0:
        assert rows is not None and slowest is not None
        total = Verification.from_array(np.sum([r[2] for r in rows], axis=0, dtype=np.uint64))
        report = make_report(cfg, comm.Get_size(), slowest, [r[0] for r in rows], total, placed, grid,
                             extra={"tiles": comm.Get_size(),
                                    "comm_per_pe": [r[1] / cfg.problem.steps for r in rows]})
        report.emit(cfg.json)
        code = report.exit_code
    code = comm.bcast(code, root=0)
    comm.Free()
    return code
