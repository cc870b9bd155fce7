"""``--target sequential``: the reference run, one process, the whole grid as one block."""

from __future__ import annotations

import time

from .app import Config, make_report
from .kernels import exact_sum, initial_block, jacobi_step, to_float, warm

__all__ = ["simulate", "run"]


def simulate(shape: tuple[int, int, int], steps: int) -> tuple[float, float]:
    """Run the problem on one block: ``(checksum, seconds of the steps)``."""
    warm()
    u = initial_block(shape, tuple((0, n) for n in shape))
    v = u.copy()
    started = time.perf_counter()
    for _ in range(steps):
        jacobi_step(u, v)
        u, v = v, u
    elapsed = time.perf_counter() - started
    return to_float(exact_sum(u[1:-1, 1:-1, 1:-1])), elapsed


def run(cfg: Config) -> int:
    checksum, elapsed = simulate(cfg.shape, cfg.steps)
    report = make_report(cfg, 1, elapsed, [elapsed], checksum, "1 x 1 x 1 (the whole grid)", extra={"blocks": 1})
    report.emit(cfg.json)
    return report.exit_code
