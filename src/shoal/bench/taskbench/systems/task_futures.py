"""Task Bench as one future per task: what the Dask and Ray systems share.

Both express a graph the same way. The driver submits every task in row order with
the futures of its producers as arguments (:func:`submit_graph`), and the system's
scheduler runs a task once its producers are done and moves their outputs to it. On a
worker, every task is :func:`run_task`: it copies its inputs into its point's
:class:`PointRunner` (kept per worker process), which checks them and runs the
kernel, and returns a copy of the output.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import numpy as np

from ..execute import PointRunner
from ..graph import TaskGraph

__all__ = ["run_task", "submit_graph"]

F = TypeVar("F")

#: per worker process: the runner of each (graph, point, --corrupt) that ran here
_RUNNERS: dict[tuple[TaskGraph, int, Any], PointRunner] = {}


def run_task(g: TaskGraph, corrupt: tuple[int, int] | None, t: int, p: int, *inputs: np.ndarray) -> np.ndarray:
    """Task ``(t, p)`` of graph ``g`` on the outputs of its producers; its output."""
    runner = _RUNNERS.get((g, p, corrupt))
    if runner is None:
        runner = _RUNNERS[(g, p, corrupt)] = PointRunner(g, p, corrupt=corrupt)
    rows, sizes = runner.rows, runner.input_bytes
    for k, data in enumerate(inputs):
        sizes[k] = data.nbytes
        if data.nbytes == runner.output.nbytes:
            rows[k][:] = data
    runner.execute(t)
    return runner.output.copy()


def submit_graph(g: TaskGraph, submit: Callable[..., F]) -> list[F]:
    """Every task of ``g`` as ``submit(t, p, *producer_futures)``, row by row; the futures in order."""
    futures: list[F] = []
    last: dict[int, F] = {}
    for t in range(g.timesteps):
        off = g.offset_at_timestep(t)
        row = {p: submit(t, p, *(last[q] for q in g.inputs(t, p))) for p in range(off, off + g.width_at_timestep(t))}
        futures.extend(row.values())
        last = row
    return futures
