"""``--system dask``: Task Bench as a graph of Dask futures on a local cluster.

The natural Dask program: a ``distributed.LocalCluster`` of ``-n`` single-threaded
worker processes, and one ``client.submit`` per task whose arguments are the futures
of its producers, so Dask's scheduler tracks the dependencies and moves the outputs.
Each task runs on a worker through the core it shares with the Ray system
(:mod:`.task_futures`). A run is timed from the first submit to the completion of
every task, so building the graph counts, as in the reference's Dask
implementation. ``pip install 'dask[distributed]'`` provides it.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..app import App
from .task_futures import run_task, submit_graph

__all__ = ["main", "run"]


def run(app: App, client: Any) -> float:
    """Every graph of ``app``, ``app.runs`` times; the last run's seconds."""
    from dask.distributed import wait

    graphs = [client.scatter(g, broadcast=True) for g in app.graphs]
    elapsed = 0.0
    for r in range(app.runs):
        started = time.perf_counter()
        futures: list[Any] = []
        for g, gf in zip(app.graphs, graphs):
            prefix = f"taskbench-{r}-{g.graph_index}"
            futures += submit_graph(g, lambda t, p, *inputs, gf=gf, prefix=prefix: client.submit(
                run_task, gf, app.corrupt, t, p, *inputs, pure=False, key=f"{prefix}-{t}-{p}"))
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
