"""Jobs for tests: in-process runs for unit tests, the result of a real ``mpiexec`` job,
and the depth of a spanning tree (what message counts are checked against)."""

from __future__ import annotations

import subprocess
from typing import Any, Callable

import shoal

__all__ = ["run_inproc", "tree_levels", "Job", "named_results"]


def run_inproc(main: Callable[[list], Any], pes: int = 2, **settings: Any) -> int:
    """Run ``main`` on ``pes`` in-process PEs; return the exit code."""
    settings.setdefault("deadlock_timeout", 0.3)
    return shoal.run(main, [], transport="inproc", pes=pes, **settings)


def tree_levels(n: int, k: int) -> int:
    """Hops from the root to the deepest node of the shallowest tree of ``n`` nodes with fan-out ``k``."""
    depth, capacity, width = 0, 1, 1
    while capacity < n:
        width *= k
        capacity += width
        depth += 1
    return depth


class Job:
    """A finished job: its exit code and output (what ``mpi_job`` returns)."""

    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        # Open MPI 5's launcher ends its abort notice with a NUL byte and no newline
        self.stderr = proc.stderr.replace("\x00", "")

    def __repr__(self) -> str:
        return f"<Job rc={self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}>"


def named_results(stdout: str) -> dict[str, str]:
    """The ``RESULT name rest`` lines a test program printed, as ``{name: rest}``."""
    out = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            name, _, rest = line[len("RESULT "):].partition(" ")
            out[name] = rest
    return out
