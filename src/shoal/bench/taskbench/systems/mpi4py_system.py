"""Task Bench on mpi4py: the reference's non-blocking MPI implementation, in Python.

One rank per core; each rank owns a contiguous block of every graph's points. Per
timestep a rank posts an ``Irecv`` for every input produced on another rank, copies
inputs produced on its own points, posts an ``Isend`` of the previous output of each
of its points to every consumer on another rank, waits for all of them
(``Waitall``), then runs its points' tasks. Graphs of one run follow each other. The
run is timed between barriers; it is repeated (``--runs``, 2 by default) and the
last run is reported, as the reference does.

What each rank does at a timestep is worked out once, before timing, into plain
lists of (buffer, rank, tag) so the timed loop does only MPI calls and the kernel.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..app import App
from ..execute import PointRunner, Timer, ValidationError
from ..graph import TaskGraph

__all__ = ["main", "run"]


def _block(rank: int, size: int, width: int) -> range:
    return range(rank * width // size, (rank + 1) * width // size)


class _Step:
    """What one rank does at one timestep of one graph."""

    __slots__ = ("recvs", "recv_rows", "copies", "sends", "tasks", "statuses")

    def __init__(self, recvs: list, recv_rows: list, copies: list, sends: list, tasks: list, mpi: Any):
        self.recvs = recvs  # (row array, source rank, tag)
        self.recv_rows = recv_rows  # (runner, k) of each receive, to record its size
        self.copies = copies  # (row array, output array)
        self.sends = sends  # (output array, destination rank, tag)
        self.tasks = tasks  # runners to execute
        self.statuses = [mpi.Status() for _ in range(len(recvs) + len(sends))]


class _GraphRun:
    """One graph on one rank: its points' runners and a plan per timestep."""

    def __init__(self, g: TaskGraph, comm: Any, mpi: Any, corrupt: tuple[int, int] | None = None):
        self.g, self.comm = g, comm
        rank, size = comm.Get_rank(), comm.Get_size()
        owner = [0] * g.max_width
        local_index = [0] * g.max_width
        for r in range(size):
            for i, p in enumerate(_block(r, size, g.max_width)):
                owner[p], local_index[p] = r, i
        per_rank = -(-g.max_width // size)
        tag_ub = comm.Get_attr(mpi.TAG_UB)
        if per_rank * per_rank > tag_ub:
            raise ValueError(f"-width {g.max_width} on {size} ranks needs tags up to {per_rank ** 2}, above MPI_TAG_UB {tag_ub}")

        def tag(src: int, dst: int) -> int:
            return local_index[src] * per_rank + local_index[dst]

        mine = _block(rank, size, g.max_width)
        self.runners = {p: PointRunner(g, p, corrupt=corrupt) for p in mine}
        cache: dict[tuple, _Step] = {}
        self.steps: list[_Step] = []
        for t in range(g.timesteps):
            inputs = tuple(g.inputs(t, p) for p in mine)
            outputs = tuple(g.outputs(t - 1, p) if t > 0 else () for p in mine)
            key = (inputs, outputs, tuple(g.active(t, p) for p in mine))
            step = cache.get(key)
            if step is None:
                recvs, recv_rows, copies, sends, tasks = [], [], [], [], []
                for p, deps, consumers in zip(mine, inputs, outputs):
                    runner = self.runners[p]
                    for k, q in enumerate(deps):
                        if q in self.runners:
                            copies.append((runner.rows[k], self.runners[q].output))
                        else:
                            recvs.append((runner.rows[k], owner[q], tag(q, p)))
                            recv_rows.append((runner, k))
                    for c in consumers:
                        if c not in self.runners:
                            sends.append((runner.output, owner[c], tag(p, c)))
                    if g.active(t, p):
                        tasks.append(runner)
                step = cache[key] = _Step(recvs, recv_rows, copies, sends, tasks, mpi)
            self.steps.append(step)

    def reset(self) -> None:
        for runner in self.runners.values():
            runner.reset()

    def execute(self, mpi: Any) -> None:
        comm = self.comm
        irecv, isend, waitall = comm.Irecv, comm.Isend, mpi.Request.Waitall
        byte = mpi.BYTE
        for t, step in enumerate(self.steps):
            requests = [irecv(row, src, tag) for row, src, tag in step.recvs]
            for row, output in step.copies:
                row[:] = output
            requests += [isend(output, dst, tag) for output, dst, tag in step.sends]
            if requests:
                try:
                    waitall(requests, step.statuses)
                except mpi.Exception as exc:
                    raise ValidationError(
                        f"Task Bench validation failed: graph {self.g.graph_index} timestep {t}: a message could not be "
                        f"received into a {self.g.output_bytes_per_task}-byte input ({exc})"
                    ) from None
                for (runner, k), status in zip(step.recv_rows, step.statuses):
                    runner.input_bytes[k] = status.Get_count(byte)
            for runner in step.tasks:
                runner.execute(t)


def run(app: App) -> float | None:
    """Run every graph of ``app`` ``app.runs`` times; rank 0 gets the last run's seconds."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD.Dup()
    try:
        graphs = [_GraphRun(g, comm, MPI, app.corrupt) for g in app.graphs]
        timer = Timer(comm.Barrier)
        elapsed = 0.0
        for _ in range(app.runs):
            for gr in graphs:
                gr.reset()
            timer.start()
            for gr in graphs:
                gr.execute(MPI)
            elapsed = timer.stop()
        return elapsed if comm.Get_rank() == 0 else None
    finally:
        comm.Free()


def main(app: App, out: TextIO = sys.stdout) -> int:
    """Every rank: run each configuration of the sweep; rank 0 prints the reports."""
    from mpi4py import MPI

    from ..report import print_report

    for one in app.sweep():
        try:
            elapsed = run(one)
        except ValidationError as exc:
            print(f"shoal bench taskbench: rank {MPI.COMM_WORLD.Get_rank()}: {exc}", file=sys.stderr, flush=True)
            time.sleep(0.25)  # let the launcher forward the line before Abort ends every process
            MPI.COMM_WORLD.Abort(1)
            return 1
        if elapsed is not None:
            print_report(one, elapsed, out)
    return 0
