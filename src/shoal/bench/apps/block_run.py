"""What the shoal targets of the block apps (jacobi2d, jacobi3d) do alike: time the
blocks' steps between two waits, gather what each block measured, start the job."""

from __future__ import annotations

import time
from typing import Any, Callable

import shoal

from .jacobi2d.kernels import to_float

__all__ = ["time_blocks", "run_job"]


def time_blocks(blocks: Any, steps: int, npes: int) -> tuple[float, list[float], list[int], float]:
    """Once every block is ready, run ``steps`` steps; returns the seconds they took, the
    kernel seconds of each PE, the blocks of each PE, and the exact-sum checksum (blocks
    report ``(partial sum, kernel seconds, pe)``)."""
    ready = shoal.Future()
    blocks.ready(ready)
    ready.get()
    done = shoal.Future()
    started = time.perf_counter()
    blocks.start(steps, done)
    done.get()
    elapsed = time.perf_counter() - started
    rows = blocks.report(ret=True).get()
    compute = [0.0] * npes
    per_pe = [0] * npes
    for _, seconds, pe in rows:
        compute[pe] += seconds
        per_pe[pe] += 1
    return elapsed, compute, per_pe, to_float(sum(r[0] for r in rows))


def run_job(main: Callable[[list], None], transport: str, pes: int) -> int:
    """Every PE: start shoal with ``main`` on PE 0 (in this process with ``inproc``)."""
    options: dict[str, Any] = {}
    if transport == "inproc":
        options.update(transport="inproc", pes=pes)
    return shoal.run(main, [], **options)
