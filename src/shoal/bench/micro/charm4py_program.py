"""The Charm4py program of ``--target charm4py``; ``charm4py_target.launch`` runs it.

Run as ``python -m charmrun.start +pN -m shoal.bench.micro.charm4py_program CONFIG
OUT ERR CODE``: it reads the benchmark :class:`Config` from CONFIG and writes the
rendered results to OUT, validation failures to ERR and the exit code to CODE
(Charm++ prints banners on stdout, so results cannot go there). Charm4py registers
chare classes from the main module, so they live at module level here.

The loops mirror the shoal entry-method ones exactly (a Group, one element per PE):
latency bounces the buffer between two elements with entry-method calls; bw sends a
window of calls, the last carrying a Future that the receiver resolves (the ack).
"""

from __future__ import annotations

import json
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np
from charm4py import Chare, Future, Group, charm, coro

from shoal.bench.micro import buffers, data
from shoal.bench.micro.catalog import TESTS, Test
from shoal.bench.micro.options import Config
from shoal.bench.micro.report import Reporter


class Pair(Chare):
    """One element per PE; element i talks to its partner only."""

    def __init__(self, buffer: str) -> None:
        self.kind = buffers.get(buffer)
        self.me, self.n = charm.myPe(), charm.numPes()
        partner = data.partner(self.me, self.n)
        self.peer = self.thisProxy[partner]
        self.leads = self.me < partner
        self.test: Test = TESTS["latency"]
        self.size = self.trips = self.total = self.warm = 0
        self.out: Any = None
        self.last: Any = None
        self.keep = False  # keep the last message, for --validate (as shoal_target.py)
        self.done: Any = None
        self.t0 = 0.0

    def prepare(self, test: str, size: int, keep: bool = False) -> None:
        """Build this element's payload for ``test`` at ``size`` bytes (untimed); ``keep``:
        keep the last message received, to validate it."""
        self.test, self.size, self.keep = TESTS[test], size, keep
        self.out = self.kind.from_host(data.payload(self.test, size, self.me, self.n))
        self.last = None

    def pingpong(self, iters: int, warm: int, done: Any) -> None:
        """Leader: start the rally; ``done`` receives the seconds of the timed trips."""
        self.trips, self.total, self.warm, self.done = 0, iters + warm, warm, done
        self.t0 = perf_counter()
        self.peer.ping(self.out)

    def ping(self, buf: Any) -> None:
        """Follower: answer with our own buffer."""
        if self.keep:
            self.last = buf
        self.peer.pong(self.out)

    def pong(self, buf: Any) -> None:
        """Leader: one round trip done; start the next or report the time."""
        if self.keep:
            self.last = buf
        self.trips += 1
        if self.trips == self.warm:
            self.t0 = perf_counter()
        if self.trips < self.total:
            self.peer.ping(self.out)
        else:
            self.done(perf_counter() - self.t0)

    @coro
    def bw(self, iters: int, warm: int, window: int) -> float:
        """Leader: seconds for ``iters`` windows of calls, each acked through a Future."""
        peer, out = self.peer, self.out
        t0 = perf_counter()
        for i in range(iters + warm):
            if i == warm:
                t0 = perf_counter()
            ack = Future()
            for _ in range(window - 1):
                peer.take(out)
            peer.take_last(out, ack)
            ack.get()
        return perf_counter() - t0

    def take(self, buf: Any) -> None:
        """Receiver of bw: one message of the window."""
        if self.keep:
            self.last = buf

    def take_last(self, buf: Any, ack: Any) -> None:
        """Receiver of bw: the window's last message; resolving ``ack`` is the ack."""
        if self.keep:
            self.last = buf
        ack()

    def check(self, validate: bool, corrupt: bool) -> list:
        """Validation failures of what this element received last."""
        want = data.expected(self.test, self.size, self.me, self.n)
        if not validate or want is None:
            return []
        host = self.kind.to_host(self.last) if self.last is not None else np.empty(0, np.uint8)
        problem = data.compare(host, want, f"{self.test.name} {self.size} B on PE {self.me}", corrupt)
        return [problem] if problem else []

def main(args: list) -> None:
    """The Charm4py main program: every test in turn, results into the files."""
    cfg_file, out_file, err_file, code_file = args[-4:]
    raw = json.loads(Path(cfg_file).read_text())
    cfg = Config(**{**raw, "tests": tuple(raw["tests"])})
    with open(out_file, "w") as out, open(err_file, "w") as err:
        reporter = Reporter(cfg, out=out, err=err)
        group = Group(Pair, args=[cfg.buffer])
        for name in cfg.tests:
            test, result = TESTS[name], cfg.result(name)
            for size in cfg.sizes(test):
                iters, warm = cfg.counts(test, size)
                group.prepare(name, size, cfg.validate, awaitable=True).get()
                if name == "latency":
                    done = Future()
                    group[0].pingpong(iters, warm, done)
                    value = done.get() * 1e6 / (2 * iters)
                else:
                    elapsed = group[0].bw(iters, warm, cfg.window, ret=True).get()
                    value = size / 1e6 * iters * cfg.window / elapsed
                result.add(size, value, iters)
                for fails in group.check(cfg.validate, cfg.corrupt, ret=True).get():
                    result.failures += fails
            reporter.emit(result)
        code = reporter.finish()
    Path(code_file).write_text(str(code))
    charm.exit()



if __name__ == "__main__":
    charm.start(main)
