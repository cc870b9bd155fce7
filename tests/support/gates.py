"""Gates: files one PE creates to let another go on, so that a test waits for events,
not for a clock (imported by the programs tests run under ``mpiexec``)."""

from __future__ import annotations

import os
import tempfile
import time

__all__ = ["gate_path", "wait_for", "busy_until"]


def gate_path(name: str) -> str:
    """A fresh path for gate ``name`` of this process."""
    return os.path.join(tempfile.gettempdir(), f"shoal-test-{os.getpid()}-{name}")


def wait_for(path: str, bound: float = 120) -> bool:
    """Spin until ``path`` exists (``bound`` seconds guard against a hang; they measure nothing)."""
    end = time.monotonic() + bound
    while not os.path.exists(path) and time.monotonic() < end:
        pass
    return os.path.exists(path)


def busy_until(gate: str) -> bool:
    """Say that the computation started (``gate + ".started"``), then compute (spin) until
    ``gate`` opens: a PE that handles no message meanwhile."""
    open(gate + ".started", "w").close()
    return wait_for(gate)
