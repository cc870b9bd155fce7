"""The small internal API that shoal's own upper layers build on.

The stencil DSL and the benchmarks reach the runtime and the launcher through these
names only, so the runtime's private modules can change without touching them (as
``trio.lowlevel`` does for trio's ``_core``). Programs should not need them.
"""

from __future__ import annotations

from .launcher import find_mpiexec, launch_mpi
from ._runtime.context import current
from ._runtime.engine import launcher_size, under_mpi_launcher
from .settings import Settings

__all__ = ["current_settings", "restore_seconds", "under_mpi_launcher", "launcher_size", "launch_mpi", "find_mpiexec"]


def current_settings(what: str = "this call") -> Settings:
    """The settings of the job running on this PE (a clear error outside a running job)."""
    return current(what).settings


def restore_seconds() -> float:
    """How long this PE took to rebuild its elements from the checkpoint this run
    restarted from (0 in a fresh run)."""
    return current("shoal.lowlevel.restore_seconds()").restore_seconds

