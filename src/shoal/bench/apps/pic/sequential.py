"""``--target sequential``: the reference run, one process, the whole mesh as one block.

Step 0 is the PRK's warm-up (it also compiles the kernel); the timed steps follow.
"""

from __future__ import annotations

import time

import numpy as np

from .app import Config, make_report
from .kernels import Particles
from .physics import Problem, Verification, column_prefix, init_particles, verify

__all__ = ["simulate", "result", "run"]


def simulate(p: Problem) -> tuple[np.ndarray, int, float]:
    """Run ``p`` sequentially: the final particles ``(NFIELDS, n)``, how many were
    placed, and the seconds of the timed steps."""
    L = p.size
    prefix = column_prefix(p)
    parts = Particles(init_particles(p, 0, L, 0, L, prefix))
    placed = int(prefix[-1])
    zero = np.zeros(L, dtype=np.int64)
    slots = np.zeros(1, dtype=np.int64)
    started = time.perf_counter()
    for step in range(p.moves):
        if step == 1:
            started = time.perf_counter()
        parts.move(L, zero, zero, 1, slots, 1)
    return parts.live, placed, time.perf_counter() - started


def result(p: Problem) -> tuple[Verification, int]:
    """The sequential run's verification sums and the number of particles placed."""
    parts, placed, _ = simulate(p)
    return verify(parts, p), placed


def run(cfg: Config) -> int:
    p = cfg.problem
    parts, placed, elapsed = simulate(p)
    report = make_report(cfg, 1, elapsed, [elapsed], verify(parts, p), placed, "1 x 1 (the whole mesh)",
                         extra={"tiles": 1})
    report.emit(cfg.json)
    return report.exit_code
