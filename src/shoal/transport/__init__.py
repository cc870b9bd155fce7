"""Transports: the registry of machine layers the runtime can run on."""

from __future__ import annotations

from .base import Allocator, Deliver, Transport, default_allocator

__all__ = ["Transport", "Allocator", "Deliver", "default_allocator", "TRANSPORTS"]

#: Transport names accepted by ``shoal run --transport`` and ``SHOAL_TRANSPORT``.
TRANSPORTS = ("mpi", "inproc")
