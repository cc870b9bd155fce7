"""The program one configuration of ``shoal bench stencil-pipeline`` runs.

    python pipeline_worker.py PROBLEM N STEPS MODE FREQ ODF TRIALS [LINK_PES]
    shoal run -n P pipeline_worker.py PROBLEM N STEPS MODE FREQ ODF TRIALS

``PROBLEM`` is ``laplace3d`` (N³ points) or ``jacobi2d`` (N²). ``MODE`` ``loop`` sends
the time loop once (``solve(steps=STEPS)``, the shoal spelling); ``steps`` records every
step on the frontend and sends batches of ``FREQ`` steps (``backend_freq``, the
CharmStencil spelling); ``record`` records and pickles the batches with no backend (the
frontend's own overhead). After a warm-up of up to 4 steps it times TRIALS runs of STEPS
steps and prints their seconds on one ``RESULT`` line (:mod:`.jobs`). With ``LINK_PES``
the frontend is this plain process and the backend a ``shoal serve`` job of that many
PEs, over the client–server link (:func:`shoal.remote.local`).
"""

from __future__ import annotations

import pickle
import sys
import time
from typing import Any, Sequence

import numpy as np

from shoal.stencil import Interface, Pending
from shoal.stencil.interface import BatchResult

from shoal.bench.stencil.jobs import emit
from shoal.bench.stencil.problems import jacobi_numpy, laplace3d_numpy

__all__ = ["PROBLEMS", "MODES", "NoBackend", "main"]

PROBLEMS = ("laplace3d", "jacobi2d")
MODES = ("loop", "steps", "record")


class _Done:
    """A value that is there already (what :class:`NoBackend` answers)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value

    def done(self) -> bool:
        return True


class NoBackend(Interface):
    """A backend that only pickles what it is sent: ``record`` mode times the frontend's
    own Python overhead (recording the steps, pickling the batches)."""

    def create(self, spec: Any) -> Any:
        return spec

    def submit(self, handle: Any, batch: Any) -> Pending:
        pickle.dumps(batch, 5)  # what sending it costs the frontend
        return Pending(_Done(BatchResult(-1)))

    def gather(self, handle: Any, field: int, seq: int) -> Pending:
        return Pending(_Done(np.zeros(handle.shape)))

    def scatter(self, handle: Any, field: int, array: Any, seq: int) -> None:
        pass

    def reduce(self, handle: Any, rid: int, finish: str, seq: int) -> Pending:
        return Pending(_Done(0.0))


def run(problem: str, n: int, steps: int, mode: str, freq: int, odf: int, trials: int,
        interface: Any = None) -> list[float]:
    """Seconds of each of ``trials`` timed runs of ``steps`` steps (``record``: recording
    and pickling them, with no backend: the frontend's Python overhead)."""
    from shoal.stencil import Stencil

    if mode == "record":
        interface, mode = NoBackend(), "steps"

    shape = (n, n, n) if problem == "laplace3d" else (n, n)
    update = laplace3d_numpy if problem == "laplace3d" else jacobi_numpy

    class Solver(Stencil):
        def __init__(self) -> None:
            self.a, self.b = self.initialize(shape, backend_freq=freq, odf=odf, num_fields=2, interface=interface)
            self.count = 0

        def step(self) -> None:  # the shoal spelling: solve(steps=N) sends one loop
            update(self.a, self.b)
            self.a, self.b = self.b, self.a

        def iterate(self, nsteps: int) -> bool:  # the CharmStencil spelling: per-step batches
            update(self.a, self.b)
            self.a, self.b = self.b, self.a
            self.count += 1
            return self.count < nsteps

    s: Any = Solver()
    s.a[0, ...] = s.b[0, ...] = 1.0

    def once(k: int) -> None:
        if mode == "loop":
            s.solve(steps=k)
        else:
            s.count = 0
            s.solve(k)
        s.sync()

    once(min(steps, 4))
    times = []
    for _ in range(trials):
        t = time.perf_counter()
        once(steps)
        times.append(time.perf_counter() - t)
    return times


def main(argv: Sequence[str]) -> int:
    """Run one configuration as the arguments say and print its ``RESULT`` line."""
    if len(argv) not in (7, 8) or argv[0] not in PROBLEMS or argv[3] not in MODES:
        print(f"usage: pipeline_worker.py {{{','.join(PROBLEMS)}}} N STEPS {{{','.join(MODES)}}} FREQ ODF TRIALS "
              f"[LINK_PES]; got {list(argv)}", file=sys.stderr)
        return 2
    problem, mode = argv[0], argv[3]
    n, steps, freq, odf, trials = int(argv[1]), int(argv[2]), int(argv[4]), int(argv[5]), int(argv[6])
    if len(argv) == 8:
        from shoal.remote import local

        with local(pes=int(argv[7])) as conn:
            emit(run(problem, n, steps, mode, freq, odf, trials, conn))
        return 0
    emit(run(problem, n, steps, mode, freq, odf, trials))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
