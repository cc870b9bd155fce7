"""The systems Task Bench runs on: a table read before any job starts.

Each system's module has ``main(app, out) -> int``, run by every process of the job
(``launcher="mpi"``: under mpiexec, relaunched if needed) or by the one process that
starts the system's own workers (``launcher="local"``). Modules are imported only
when their system runs, so a missing optional package costs nothing elsewhere.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

__all__ = ["System", "SYSTEMS"]


@dataclass(frozen=True, slots=True)
class System:
    name: str
    module: str
    package: str | None  # import name that must be installed
    install: str  # how to install it
    launcher: str  # "mpi" or "local"
    description: str

    def missing(self) -> str | None:
        """One line saying how to install this system's package, or None if it is there."""
        if self.package is None or importlib.util.find_spec(self.package) is not None:
            return None
        return f"--system {self.name} needs the {self.package} package, which is not installed: {self.install}"


SYSTEMS: dict[str, System] = {
    s.name: s
    for s in [
        System("shoal", "shoal.bench.taskbench.systems.shoal_system", None, "", "mpi",
               "points as elements of a chare Array; data by entry methods or channels"),
        System("mpi4py", "shoal.bench.taskbench.systems.mpi4py_system", "mpi4py", "pip install mpi4py", "mpi",
               "the reference's MPI non-blocking pattern: block-distributed points, Isend/Irecv/Waitall per step"),
        System("charm4py", "shoal.bench.taskbench.systems.charm4py_system", "charm4py",
               "pip install charm4py", "local", "points as elements of a Charm4py Array; data by entry methods"),
        System("dask", "shoal.bench.taskbench.systems.dask_system", "distributed",
               "pip install 'dask[distributed]'", "local", "one Dask future per task on a LocalCluster of -n workers"),
        System("ray", "shoal.bench.taskbench.systems.ray_system", "ray", "pip install ray", "local",
               "one Ray task per task, producers' ObjectRefs as arguments, on a local Ray instance of -n CPUs"),
    ]
}
