"""``--target sequential``: the reference run, one process, the whole grid as one block.

On the CPU (NumPy, the Numba kernel) it is also the reference every other run's checksum
is checked against; with ``--device cuda`` the block is one CuPy array on GPU 0, and the
timing ends after the device has finished the last sweep (kernels are queued, not run,
when they are launched).
"""

from __future__ import annotations

import time

from .app import Config, make_report
from .arrays import BlockArrays, HostArrays, arrays_for
from .kernels import exact_sum, initial_block, to_float

__all__ = ["simulate", "run"]


def simulate(shape: tuple[int, int, int], steps: int, arrays: type[BlockArrays] = HostArrays) -> tuple[float, float]:
    """Run the problem on one block in ``arrays``: ``(checksum, seconds of the steps)``."""
    dev = arrays(0)
    dev.warm()
    u = dev.put(initial_block(shape, tuple((0, n) for n in shape)))
    v = u.copy()
    dev.sync()
    started = time.perf_counter()
    for _ in range(steps):
        dev.step(u, v)
        u, v = v, u
    dev.sync()
    elapsed = time.perf_counter() - started
    return to_float(exact_sum(dev.get(u[1:-1, 1:-1, 1:-1]))), elapsed


def run(cfg: Config) -> int:
    arrays = arrays_for(cfg.device)
    checksum, elapsed = simulate(cfg.shape, cfg.steps, arrays)
    report = make_report(cfg, 1, elapsed, [elapsed], checksum, "1 x 1 x 1 (the whole grid)", extra={"blocks": 1},
                         arrays=arrays)
    report.emit(cfg.json)
    return report.exit_code
