"""The communicator ``shoal.mpi_comm()`` hands to programs: MPI, with a watch on collectives.

A collective on it returns only when every PE has called it. In a message-driven
program it is easy to enter one from a single PE (from a point-to-point call instead
of a broadcast); MPI then waits forever without a word. This communicator runs each
blocking collective as its non-blocking form and waits for it the way an idle PE does
(test, then nap); if the wait grows long it says which PE waits in which call and why
that may never end, again at doubling intervals. The data path is MPI's own.
"""

from __future__ import annotations

import sys
import time
import traceback

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

from mpi4py import MPI

__all__ = ["WatchedComm"]

#: blocking collective -> its non-blocking form (same arguments)
_NONBLOCKING = {
    "Barrier": "Ibarrier", "Bcast": "Ibcast", "Reduce": "Ireduce", "Allreduce": "Iallreduce",
    "Gather": "Igather", "Gatherv": "Igatherv", "Allgather": "Iallgather", "Allgatherv": "Iallgatherv",
    "Scatter": "Iscatter", "Scatterv": "Iscatterv", "Alltoall": "Ialltoall", "Alltoallv": "Ialltoallv",
    "Reduce_scatter": "Ireduce_scatter", "Reduce_scatter_block": "Ireduce_scatter_block",
    "Scan": "Iscan", "Exscan": "Iexscan",
}
#: collectives of Python objects (pickled): a watched barrier first, then the call itself
_PICKLED = ("barrier", "bcast", "reduce", "allreduce", "gather", "allgather", "scatter", "alltoall", "scan", "exscan")


class WatchedComm(MPI.Intracomm):
    """A duplicate of ``COMM_WORLD`` whose collectives report a PE that waits too long."""

    pe: int
    patience: float

    def __new__(cls, comm: MPI.Intracomm, pe: int, patience: float) -> "WatchedComm":
        self = super().__new__(cls, comm)
        self.pe = pe
        self.patience = patience  # seconds before the first report
        return self

    def _wait(self, request: MPI.Request, what: str) -> None:
        """Wait for ``request`` of collective ``what``, napping, reporting long waits."""
        if request.Test():
            return
        start = time.monotonic()
        nap, report_at = 1e-6, self.patience
        while not request.Test():
            time.sleep(nap)
            nap = min(nap * 2, 1e-3)
            waited = time.monotonic() - start
            if waited >= report_at:
                self._report(what, waited)
                report_at *= 2

    def _report(self, what: str, waited: float) -> None:
        caller = next((f for f in reversed(traceback.extract_stack()[:-3]) if f.filename != __file__), None)
        where = f" (called at {caller.filename}:{caller.lineno} in {caller.name})" if caller else ""
        sys.stderr.write(
            f"shoal: PE {self.pe} has waited {waited:.1f} s inside MPI {what} on shoal.mpi_comm(){where}. "
            "A collective returns only once every PE has called it; if some PE never does, this job hangs "
            "here. Enter MPI phases from a broadcast, so that every PE runs the collective.\n"
        )
        sys.stderr.flush()


def _blocking(name: str, nonblocking: str) -> Callable[..., Any]:
    start = getattr(MPI.Intracomm, nonblocking)

    def call(self: WatchedComm, *args: Any, **kwargs: Any) -> None:
        self._wait(start(self, *args, **kwargs), name)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"MPI {name}, waited for as shoal waits (see :class:`WatchedComm`)."
    return call


def _pickled(name: str) -> Callable[..., Any]:
    inner = getattr(MPI.Intracomm, name)

    def call(self: WatchedComm, *args: Any, **kwargs: Any) -> Any:
        self._wait(self.Ibarrier(), name)  # everyone is here: the collective itself cannot hang
        return None if name == "barrier" else inner(self, *args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"mpi4py's {name}, after a watched barrier (see :class:`WatchedComm`)."
    return call


for _name, _nb in _NONBLOCKING.items():
    if hasattr(MPI.Intracomm, _nb):
        setattr(WatchedComm, _name, _blocking(_name, _nb))
for _name in _PICKLED:
    setattr(WatchedComm, _name, _pickled(_name))
