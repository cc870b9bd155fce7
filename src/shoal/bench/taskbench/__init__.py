"""Task Bench (Slaughter et al., SC 2020) for shoal: graphs, kernels, validation, METG.

One core shared by every system under test — the task graph (:mod:`.graph`), the
compiled kernels and checks (:mod:`.native`, :mod:`.execute`), the command line and
report (:mod:`.app`) — and one module per system (:mod:`.systems`). ``shoal bench
taskbench`` runs a graph; ``shoal bench metg`` sweeps task granularity and reports the
minimum effective task granularity. See ``docs/taskbench.md``.
"""

from __future__ import annotations

from .app import App, UsageError, parse
from .execute import PointRunner, ValidationError
from .graph import DependenceType, GraphError, Kernel, KernelType, TaskGraph

__all__ = [
    "App",
    "UsageError",
    "parse",
    "TaskGraph",
    "Kernel",
    "KernelType",
    "DependenceType",
    "GraphError",
    "PointRunner",
    "ValidationError",
]
