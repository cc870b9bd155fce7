"""Task Bench on shoal: every point of a graph is an element of a chare Array.

The Array has ``max_width`` elements spread in blocks over the PEs, so
``-width`` = PEs x tasks per PE sets the over-decomposition. Three ways to move data:

* ``--api set`` (default): one channel per neighbour, and per list of producers a
  :class:`shoal.ReceiveSet` over their channels into the point's input rows. The
  runtime copies each input into its row as it arrives (from a sender on the same PE,
  at send time) and calls the entry method ``compute`` once, when the last one lands.
  One Python call per task, none per dependency.
* ``--api entry``: message-driven. A finished task calls the entry method
  ``take(message)`` of each consumer, where ``message`` is one array: the timestep
  and point (two int64s) followed by the output, so it takes shoal's pickle-free
  path for NumPy arguments. An element runs its next task as soon as the last of its
  inputs has arrived: one Python call per dependency.
* ``--api channel``: each element is a coroutine that, step by step, awaits
  ``recv(into=row)`` on a channel per producer, runs its task and sends its output
  on a channel per consumer: a coroutine resumption per dependency.

``docs/taskbench.md`` has the measurements that picked the default. A run is timed on
PE 0 from the broadcast that starts it to the reduction that says every element has
finished; it is repeated (``--runs``) and the last run is reported.
"""

from __future__ import annotations

import struct
import sys
import time
from typing import Any, Callable, TextIO

import numpy as np

import shoal

from ..app import App
from ..execute import PointRunner, ValidationError
from ..graph import TaskGraph, expand

__all__ = ["main", "run", "EntryPoint", "ChannelPoint", "SetPoint", "APIS"]

_HEADER = struct.Struct("=qq")  # timestep, point: the head of an EntryPoint message

#: one graph object per process, shared by the elements on it (and its caches)
_GRAPHS: dict[TaskGraph, TaskGraph] = {}


def _canonical(g: TaskGraph) -> TaskGraph:
    return _GRAPHS.setdefault(g, g)


class _Shared:
    """``make(key)``, made once per distinct key: timesteps that do the same share one
    plan entry (as the mpi4py implementation's do), which keeps a point's plan small."""

    def __init__(self, make: Callable[[Any], Any]):
        self.make = make
        self.made: dict[Any, Any] = {}

    def __call__(self, key: Any) -> Any:
        value = self.made.get(key)
        if value is None:
            value = self.made[key] = self.make(key)
        return value


def _channels(chare: shoal.Chare, g: TaskGraph, p: int) -> dict[int, shoal.Channel]:
    """A channel from point ``p`` to each point it exchanges with in any timestep,
    opened in the same (sorted) order at both ends so that they pair up."""
    peers: set[int] = set()
    for dset in range(g.max_dependence_sets()):
        peers.update(expand(g.dependencies(dset, p)))
        peers.update(expand(g.reverse_dependencies(dset, p)))
    peers.discard(p)
    return {q: shoal.Channel(chare, remote=chare.collection[q]) for q in sorted(peers)}


class EntryPoint(shoal.Chare):
    """One point; inputs arrive as calls of ``take`` and the next task runs on the last."""

    def __init__(self, graph: TaskGraph, corrupt: tuple[int, int] | None = None):
        g = self.g = _canonical(graph)
        p = self.p = self.index[0]
        self.runner = PointRunner(g, p, header_words=2, corrupt=corrupt)
        self.runner.header[1] = p
        self.steps = g.timesteps
        self.t = self.steps  # not running
        self.done: Any = None
        self.pending: dict[int, dict[int, np.ndarray]] = {}
        peers = {q: self.collection[q] for q in {c for t in range(g.timesteps) for c in g.outputs(t, p) if c != p}}
        # per timestep: producers, how many are other elements, and the consumers' proxies
        takes = _Shared(lambda consumers: tuple(peers[c].take for c in consumers))
        steps = _Shared(lambda key: (key[0], sum(1 for q in key[0] if q != p), key[2], takes(key[1])))
        self.plan = [steps((g.inputs(t, p), tuple(c for c in g.outputs(t, p) if c != p), g.active(t, p)))
                     for t in range(g.timesteps)]

    def ready(self) -> None:
        """A no-op, to know that every element has been built."""

    def start(self, done: Any) -> None:
        """Run this point's tasks of one run; contribute to ``done`` when they are over."""
        self.runner.reset()
        self.done = done
        self.t = 0
        self._advance()

    def take(self, message: np.ndarray) -> None:
        """The output of task ``(t - 1, src)``, an input of this point's task ``t``."""
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
                rows[0][:] = output  # only itself (no_comm)
            if active:
                runner.execute(t)
                if sends:
                    header[0] = t + 1
                    for take in sends:
                        take(message)
            self.t = t + 1
        self.contribute(None, shoal.reducers.nop, self.done)


class ChannelPoint(shoal.Chare):
    """One point as a coroutine: await each input on its channel, run, send the output."""

    def __init__(self, graph: TaskGraph, corrupt: tuple[int, int] | None = None):
        g = self.g = _canonical(graph)
        p = self.p = self.index[0]
        self.runner = PointRunner(g, p, corrupt=corrupt)
        ch = self.channels = _channels(self, g, p)
        steps = _Shared(lambda key: (tuple((k, None if q == p else ch[q]) for k, q in enumerate(key[0])), key[2],
                                     tuple(ch[c] for c in key[1])))
        self.plan = [steps((g.inputs(t, p), tuple(c for c in g.outputs(t, p) if c != p), g.active(t, p)))
                     for t in range(g.timesteps)]

    def ready(self) -> None:
        """A no-op, to know that every element has been built."""

    async def run(self, done: Any) -> None:
        """Run this point's tasks of one run; contribute to ``done`` when they are over.

        Not called with ``ret=True``: an exception here (a failed check) then has no
        waiter and ends the job at once, instead of leaving the broadcast's future to
        wait for the elements downstream, which never get their inputs."""
        runner = self.runner
        rows, output = runner.rows, runner.output
        for t, (inputs, active, sends) in enumerate(self.plan):
            for k, channel in inputs:
                if channel is None:
                    rows[k][:] = output
                else:
                    await channel.recv(into=rows[k])
            if active:
                runner.execute(t)
                for channel in sends:
                    channel.send(output)
        self.contribute(None, shoal.reducers.nop, done)


class SetPoint(shoal.Chare):
    """One point whose inputs from other points land by a :class:`shoal.ReceiveSet`.

    Per distinct list of producers, one set over their channels into the rows they
    fill; ``compute`` runs when the set of the current timestep is complete, copies
    its own previous output (a point's own input is no message), runs the task, sends
    its output on each consumer's channel and posts the next timestep's set."""

    def __init__(self, graph: TaskGraph, corrupt: tuple[int, int] | None = None):
        g = self.g = _canonical(graph)
        p = self.p = self.index[0]
        self.runner = PointRunner(g, p, corrupt=corrupt)
        ch = _channels(self, g, p)
        rows = self.runner.rows
        # one set per list of producers, over their channels into the rows they fill
        sets = _Shared(lambda deps: shoal.ReceiveSet([ch[q] for q in deps if q != p],
                                                     [rows[k] for k, q in enumerate(deps) if q != p], self.compute))

        def step(key: tuple) -> tuple:
            deps, consumers, active = key
            post = sets(deps).post if any(q != p for q in deps) else None
            return post, deps.index(p) if p in deps else -1, active, tuple(ch[c].send for c in consumers)

        steps = _Shared(step)
        self.plan = [steps((g.inputs(t, p), tuple(c for c in g.outputs(t, p) if c != p), g.active(t, p)))
                     for t in range(g.timesteps)]
        self.steps = g.timesteps
        self.t = self.steps
        self.done: Any = None

    def ready(self) -> None:
        """A no-op, to know that every element has been built."""

    def start(self, done: Any) -> None:
        """Run this point's tasks of one run; contribute to ``done`` when they are over."""
        self.runner.reset()
        self.done = done
        self.t = 0
        self._next()

    def compute(self) -> None:
        """The inputs of task ``self.t`` are in: run it and every following one that needs none."""
        runner, plan = self.runner, self.plan
        rows, output = runner.rows, runner.output
        t = self.t
        _, own, active, sends = plan[t]
        while True:
            if own >= 0:
                rows[own][:] = output
            if active:
                runner.execute(t)
                for send in sends:
                    send(output)
            t = self.t = t + 1
            if t == self.steps:
                self.contribute(None, shoal.reducers.nop, self.done)
                return
            post, own, active, sends = plan[t]
            if post is not None:
                post()
                return

    def _next(self) -> None:
        post = self.plan[0][0]
        if post is not None:
            post()
        else:
            self.compute()


APIS = {"entry": EntryPoint, "channel": ChannelPoint, "set": SetPoint}


def run(app: App, api: str = "set") -> float:
    """In ``main`` on PE 0: run every graph ``app.runs`` times; the last run's seconds."""
    cls = APIS[api]
    arrays = [shoal.Array(cls, g.max_width, args=(g, app.corrupt)) for g in app.graphs]
    for arr in arrays:
        arr.ready(ret=True).get()
    elapsed = 0.0
    for _ in range(app.runs):
        started = time.perf_counter()
        for arr in arrays:
            done = shoal.Future()
            if api in ("entry", "set"):
                arr.start(done)
            else:
                arr.run(done)
            done.get()
        elapsed = time.perf_counter() - started
    return elapsed


def main(app: App, out: TextIO = sys.stdout) -> int:
    """Every PE: start shoal; PE 0 runs each configuration of the sweep and prints."""
    api = app.api or "set"
    if api not in APIS:
        print(f"shoal bench taskbench: --api {api!r} is not one of {', '.join(APIS)}", file=sys.stderr)
        return 2

    def program(_args: list) -> None:
        from ..report import print_report

        for one in app.sweep():
            print_report(one, run(one, api), out)

    options: dict = {}
    if app.transport == "inproc":
        options = {"transport": "inproc", "pes": app.pes}
    return shoal.run(program, [], **options)
