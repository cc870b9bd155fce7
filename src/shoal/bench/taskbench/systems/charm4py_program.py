"""The Charm4py program of ``--system charm4py``; ``charm4py_system.main`` launches it.

Run as ``python -m charmrun.start +pN -m shoal.bench.taskbench.systems.charm4py_program
APP OUT CODE``: it reads the pickled :class:`App` from APP, writes the reports to OUT
and the exit code to CODE (Charm++ prints banners on stdout). Charm4py registers chare
classes from the main module, so the chare lives at module level here.

The chare mirrors shoal's ``EntryPoint`` line for line: one element per point of a
Charm4py Array, inputs arrive as ``take(message)`` calls carrying (timestep, point)
and the output in one NumPy array, and a task runs when its last input has arrived.
"""

from __future__ import annotations

import io
import pickle
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from charm4py import Array, Chare, Future, Reducer, charm

from shoal.bench.taskbench.execute import PointRunner, ValidationError
from shoal.bench.taskbench.graph import TaskGraph
from shoal.bench.taskbench.report import print_report

_HEADER = struct.Struct("=qq")
_GRAPHS: dict[TaskGraph, TaskGraph] = {}


class Point(Chare):
    """One point of one graph."""

    def __init__(self, graph: TaskGraph, corrupt: Any = None) -> None:
        g = self.g = _GRAPHS.setdefault(graph, graph)
        p = self.p = self.thisIndex[0]
        self.runner = PointRunner(g, p, header_words=2, corrupt=corrupt)
        self.runner.header[1] = p
        self.steps = g.timesteps
        self.t = self.steps
        self.done: Any = None
        self.pending: dict[int, dict[int, np.ndarray]] = {}
        peers = {q: self.thisProxy[q] for t in range(g.timesteps) for q in g.outputs(t, p) if q != p}
        self.plan = [
            (g.inputs(t, p), sum(1 for q in g.inputs(t, p) if q != p), g.active(t, p),
             tuple(peers[c] for c in g.outputs(t, p) if c != p))
            for t in range(g.timesteps)
        ]

    def ready(self) -> None:
        pass

    def start(self, done: Any) -> None:
        self.runner.reset()
        self.done = done
        self.t = 0
        self._advance()

    def take(self, message: np.ndarray) -> None:
        t, src = _HEADER.unpack_from(message)  # type: ignore[arg-type]  # ndarray is a buffer
        box = self.pending.get(t)
        if box is None:
            box = self.pending[t] = {}
        if src in box:
            raise ValidationError(f"Task Bench validation failed: graph {self.g.graph_index} task (timestep {t}, "
                                  f"point {self.p}) received two inputs from point {src}")
        box[src] = message
        if t == self.t and len(box) >= self.plan[t][1]:
            self._advance()

    def _advance(self) -> None:
        runner, plan, p = self.runner, self.plan, self.p
        rows, sizes, output = runner.rows, runner.input_bytes, runner.output
        message, header = runner.message, runner.header
        while self.t < self.steps:
            t = self.t
            deps, remote, active, sends = plan[t]
            if remote:
                box = self.pending.get(t)
                if box is None or len(box) < remote:
                    return
                del self.pending[t]
                for k, q in enumerate(deps):
                    if q == p:
                        rows[k][:] = output
                        continue
                    data = box.pop(q, None)
                    if data is None:
                        raise ValidationError(
                            f"Task Bench validation failed: graph {self.g.graph_index} task (timestep {t}, point {p}) "
                            f"got inputs from points {sorted(box)} but depends on {list(deps)}")
                    sizes[k] = data.nbytes - 16
                    if data.nbytes == message.nbytes:
                        rows[k][:] = data[16:]
            elif deps:
                rows[0][:] = output
            if active:
                runner.execute(t)
                if sends:
                    header[0] = t + 1
                    for peer in sends:
                        peer.take(message)
            self.t = t + 1
        self.contribute(None, Reducer.nop, self.done)


def _run(app: Any) -> float:
    arrays = [Array(Point, g.max_width, args=[g, app.corrupt]) for g in app.graphs]
    for arr in arrays:
        arr.ready(awaitable=True).get()
    elapsed = 0.0
    for _ in range(app.runs):
        started = time.perf_counter()
        for arr in arrays:
            done = Future()
            arr.start(done)
            done.get()
        elapsed = time.perf_counter() - started
    return elapsed


def main(args: list) -> None:
    app_file, out_file, code_file = args[-3:]
    app = pickle.loads(Path(app_file).read_bytes())
    out = io.StringIO()
    code = 0
    try:
        for one in app.sweep():
            print_report(one, _run(one), out)
    except Exception as exc:  # noqa: BLE001 - reported through the code file
        print(f"shoal bench taskbench: charm4py: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    Path(out_file).write_text(out.getvalue())
    Path(code_file).write_text(str(code))
    charm.exit()


if __name__ == "__main__":
    charm.start(main)
