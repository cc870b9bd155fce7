"""Transports: the registry of machine layers the runtime can run on."""

from __future__ import annotations

import os
import sys

from ..settings import TRANSPORTS
from .base import Allocator, Deliver, DeviceSegment, Transport, default_allocator

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Transport", "Allocator", "Deliver", "DeviceSegment", "default_allocator", "TRANSPORTS", "open_transports", "ask_thread_level"]

def open_transports(name: str, settings: Any) -> list[Transport]:
    """This process's transports for a job on transport ``name``: one (this PE's) under
    MPI, every PE's for the in-process transport."""
    if name == "mpi":
        ask_thread_level(settings.mpi_threads)
        from .mpi import MPITransport

        return [MPITransport.from_settings(settings)]
    if name == "inproc":
        from .inproc import InprocHub

        return list(InprocHub(settings.pes, settings.rendezvous_threshold).transports)
    raise ValueError(f"unknown transport {name!r}; valid transports: {', '.join(TRANSPORTS)}")


def ask_thread_level(level: str) -> None:
    """Have mpi4py start MPI at thread level ``level`` (``SHOAL_MPI_THREADS``), unless MPI
    has started already or ``MPI4PY_RC_THREAD_LEVEL`` chose a level."""
    if "mpi4py.MPI" in sys.modules or "MPI4PY_RC_THREAD_LEVEL" in os.environ:
        return
    import mpi4py

    mpi4py.rc.thread_level = level
