"""Transports: the registry of machine layers the runtime can run on."""

from __future__ import annotations

from .base import Allocator, Deliver, Transport, default_allocator

from typing import Any

__all__ = ["Transport", "Allocator", "Deliver", "default_allocator", "TRANSPORTS", "open_transports"]

#: Transport names accepted by ``shoal run --transport`` and ``SHOAL_TRANSPORT``.
TRANSPORTS = ("mpi", "inproc")


def open_transports(name: str, settings: Any) -> list[Transport]:
    """This process's transports for a job on transport ``name``: one (this PE's) under
    MPI, every PE's for the in-process transport."""
    if name == "mpi":
        from .mpi import MPITransport

        return [MPITransport.from_settings(settings)]
    if name == "inproc":
        from .inproc import InprocHub

        return list(InprocHub(settings.pes, settings.rendezvous_threshold).transports)
    raise ValueError(f"unknown transport {name!r}; valid transports: {', '.join(TRANSPORTS)}")
