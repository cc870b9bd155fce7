"""``--system dask``: Task Bench as a graph of Dask futures on a local cluster.

The natural Dask program: a ``distributed.LocalCluster`` of ``-n`` single-threaded
worker processes, and one ``client.submit`` per task whose arguments are the futures
of its producers, so Dask's scheduler tracks the dependencies and moves the outputs.
Each task runs on a worker through the shared core (a :class:`PointRunner` per point,
kept per worker process, that copies in the inputs, checks them and runs the kernel).
A run is timed from the first submit to the completion of every task, so building
the graph counts, as in the reference's Dask implementation. ``pip install
'dask[distributed]'`` provides it.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

import numpy as np

from ..app import App
from ..execute import PointRunner
from ..graph import TaskGraph

__all__ = ["main", "run", "task"]

#: per worker process: the runner of each (graph, point, --corrupt) that ran here
_RUNNERS: dict[tuple[TaskGraph, int, Any], PointRunner] = {}


def task(g: TaskGraph, corrupt: Any, t: int, p: int, *inputs: np.ndarray) -> np.ndarray:
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


def run(app: App, client: Any) -> float:
    """Every graph of ``app``, ``app.runs`` times; the last run's seconds."""
    from dask.distributed import wait

    graphs = [client.scatter(g, broadcast=True) for g in app.graphs]
    elapsed = 0.0
    for r in range(app.runs):
        started = time.perf_counter()
        futures: list[Any] = []
        for g, gf in zip(app.graphs, graphs):
            last: dict[int, Any] = {}
            for t in range(g.timesteps):
                off = g.offset_at_timestep(t)
                row = {
                    p: client.submit(task, gf, app.corrupt, t, p, *(last[q] for q in g.inputs(t, p)), pure=False,
                                     key=f"taskbench-{r}-{g.graph_index}-{t}-{p}")
                    for p in range(off, off + g.width_at_timestep(t))
                }
                futures.extend(row.values())
                last = row
        wait(futures)
        for f in futures:
            if f.status == "error":
                f.result()  # raises the task's exception (a ValidationError names the task)
        elapsed = time.perf_counter() - started
        del futures
    return elapsed


def main(app: App, out: TextIO = sys.stdout) -> int:
    """Start a local cluster of ``app.pes`` workers, run each configuration, print."""
    from dask.distributed import Client, LocalCluster

    from ..report import print_report

    with LocalCluster(n_workers=app.pes, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            for one in app.sweep():
                print_report(one, run(one, client), out)
    return 0
