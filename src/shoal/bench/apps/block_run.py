"""What the shoal targets of the block apps (jacobi2d, jacobi3d) do alike: the block
chares' run of steps, timing it between two waits, gathering what each block measured,
starting the job."""

from __future__ import annotations

import time
from typing import Any, Callable

import shoal

from .jacobi2d.kernels import to_float

__all__ = ["StepBlock", "time_blocks", "run_job"]


class StepBlock(shoal.Chare):
    """A block that runs rounds of ``_exchange()`` (send faces, post the receive set) and
    ``step()`` (the kernel, then :meth:`_stepped`), ``steps`` times per ``start``; a
    subclass defines both, and ``report``."""

    t = 0
    steps = 0
    done: Any = None
    compute = 0.0  # kernel seconds of the current run

    def ready(self, fut: Any) -> None:
        """Contribute to ``fut`` (every block is built and its kernel compiled)."""
        self.contribute(None, shoal.reducers.nop, fut)

    def start(self, steps: int, done: Any) -> None:
        """Run ``steps`` steps; contribute to ``done`` when they are over."""
        self.t, self.steps, self.done = 0, steps, done
        self.compute = 0.0
        self._exchange()

    def _stepped(self, seconds: float) -> None:
        """A step's kernel took ``seconds``: the next round, or the end of the run."""
        self.compute += seconds
        self.t += 1
        if self.t == self.steps:
            self.contribute(None, shoal.reducers.nop, self.done)
        else:
            self._exchange()

    def _exchange(self) -> None:
        raise NotImplementedError


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
