"""``shoal bench taskbench``: check the command line, then run or launch the job.

Like ``shoal run``, the command starts its own job: outside an MPI launcher it runs
``mpiexec -n N python -m shoal bench taskbench …`` with the same arguments; inside one
(every process of that job, or a job started with ``mpiexec``/``srun``) it runs the
chosen system directly. ``--system shoal --transport inproc`` runs every PE in this
process, without MPI.
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

from ...lowlevel import launcher_size
from .app import HELP, UsageError, parse
from .systems import SYSTEMS

__all__ = ["main"]

_PROG = "shoal bench taskbench"


def main(argv: Sequence[str]) -> int:
    """Entry point of ``shoal bench taskbench``; returns the exit code."""
    from ...lowlevel import launch_mpi, under_mpi_launcher

    argv = list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(HELP, end="")
        return 0
    try:
        app = parse(argv)
    except UsageError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
    system = SYSTEMS.get(app.system)
    if system is None:
        print(f"{_PROG}: unknown --system {app.system!r}; systems: {', '.join(SYSTEMS)}", file=sys.stderr)
        return 2
    problem = system.missing()
    if problem:
        print(f"{_PROG}: {problem}", file=sys.stderr)
        return 2
    inside = under_mpi_launcher()
    in_process = app.system == "shoal" and app.transport == "inproc"
    if system.launcher == "mpi" and not inside and not in_process:
        return launch_mpi(["bench", "taskbench", *argv], app.pes, app.mpiexec)
    if system.launcher == "local" and inside:
        print(f"{_PROG}: --system {app.system} starts its own processes; run it without mpiexec/srun", file=sys.stderr)
        return 2
    if inside:
        size = launcher_size()
        if size is not None:
            app.pes = size
    module = importlib.import_module(system.module)
    return int(module.main(app) or 0)
