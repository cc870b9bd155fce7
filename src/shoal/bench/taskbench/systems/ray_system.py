"""``--system ray``: Task Bench as a graph of Ray tasks on a local Ray instance.

The natural Ray program: ``ray.init(num_cpus=N)`` starts a local instance that runs
at most ``-n`` tasks at a time, each in a worker process, and every Task Bench task is
one call of a ``@ray.remote`` function whose arguments are the ObjectRefs of its
producers; Ray runs it once they are ready and hands it their values. Tasks run the
core shared with the Dask system (:mod:`.task_futures`). A run is timed from the
first ``.remote()`` call to the completion of every task, so building the graph
counts, as for Dask. The instance is kept small and quiet (a small object store, no
dashboard, worker output not forwarded) and is shut down at the end, also on errors.
``pip install ray`` provides it.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from contextlib import contextmanager
from functools import partial
from typing import Any, Iterator, TextIO

from ..app import App
from ..execute import ValidationError
from .task_futures import run_task, submit_graph

__all__ = ["main", "run", "instance"]

#: outputs of the default 16 B stay in the driver's memory, not here; larger ones that do
#: not fit spill to disk. Ray accepts no less than 75 MiB.
_OBJECT_STORE_BYTES = 200 << 20
#: outputs fetched at a time when looking for failed tasks after a run
_CHECK_CHUNK = 1024


def run(app: App, task: Any) -> float:
    """Every graph of ``app``, ``app.runs`` times, as calls of the remote ``task``; the last run's seconds."""
    import ray

    graphs = [ray.put(g) for g in app.graphs]
    elapsed = 0.0
    for _ in range(app.runs):
        started = time.perf_counter()
        refs: list[Any] = []
        for g, gref in zip(app.graphs, graphs):
            refs += submit_graph(g, partial(task.remote, gref, app.corrupt))
        ray.wait(refs, num_returns=len(refs), fetch_local=False)
        elapsed = time.perf_counter() - started
        _raise_failures(refs)
        del refs
    return elapsed


def _raise_failures(refs: list[Any]) -> None:
    """Raise the error of every task that failed (its consumers fail with the same one)."""
    import ray
    from ray.exceptions import RayTaskError

    try:
        for i in range(0, len(refs), _CHECK_CHUNK):  # in chunks: outputs may be large
            ray.get(refs[i : i + _CHECK_CHUNK])
        return
    except RayTaskError:
        pass
    failures: list[BaseException] = []
    for ref in refs:
        try:
            ray.get(ref)
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            if all(str(cause) != str(f) for f in failures):
                failures.append(cause)
    first = failures[0]
    if len(failures) == 1 or not all(isinstance(f, ValidationError) for f in failures):
        raise first
    raise ValidationError("\n".join(str(f) for f in failures))


@contextmanager
def instance(pes: int) -> Iterator[Any]:
    """A local Ray instance of ``pes`` CPUs for the block; yields the remote Task Bench task.

    If this process already runs Ray (a test, a notebook), that instance is used and
    left running.
    """
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=pes, num_gpus=0, include_dashboard=False, log_to_driver=False,
                 object_store_memory=_OBJECT_STORE_BYTES, logging_level=logging.ERROR)
    try:
        yield ray.remote(num_cpus=1, max_retries=0)(run_task)
    finally:
        if started:
            ray.shutdown()


def main(app: App, out: TextIO = sys.stdout) -> int:
    """Run each configuration of ``app`` on a local Ray instance of ``app.pes`` CPUs; print the reports."""
    from ..report import print_report

    with instance(app.pes) as task:
        for one in app.sweep():
            print_report(one, run(one, task), out)
    return 0
