"""``--target shoal``: the OSU tests written with shoal's public API only.

``--api entry`` moves every message as an entry-method call, ``--api channel`` over
a :class:`shoal.Channel` (point-to-point tests). Each test runs on a Group (one
element per PE), so element i is PE i, as rank i is in the MPI versions:

* latency / multi_lat: element i and its partner bounce the buffer as entry-method
  calls (``ping``/``pong``) or channel messages; one-way latency = time / (2 x trips).
* bw: a window of W calls back to back, the last carrying a Future the receiver
  resolves (the ack); bibw: both sides send W and wait until W have arrived. Each
  send has value semantics (it returns when the buffer may be written); ``--lend``
  lends the window's buffer instead (``shoal.lend``), as OSU's window of ``MPI_Isend``
  lends its buffer to MPI until ``MPI_Waitall``.
* collectives: every element times one collective per iteration, then a barrier
  (an all-reduce with ``reducers.nop``); the figure is the average over PEs. The
  equivalents: allreduce = ``self.allreduce(x, sum)``; reduce = ``contribute`` to
  an entry method of element 0; allgather = ``self.allreduce(x, gather)``; gather =
  ``contribute(x, gather, …)`` to element 0; bcast = a multicast to the section of
  the other elements; scatter = element 0 calls each element with its block;
  alltoall = each element calls every other with its block; reduce_scatter = one
  reduction per block, each targeted at the element that owns it; barrier = an
  all-reduce with ``nop``. shoal messages carry their own length, so the vector
  variants are the same code with per-PE counts (equal counts, as in OSU).
"""

from __future__ import annotations

import os
from collections import deque
from time import perf_counter
from typing import Any

import numpy as np

import shoal

from . import buffers, data
from .catalog import TESTS, Test
from .options import Config
from .report import Reporter

__all__ = ["run", "EntryP2P", "ChannelP2P", "Collective"]


class _Element(shoal.Chare):
    """What every benchmark element has: its buffer kind, payload and checks."""

    def __init__(self, buffer: str):
        self.kind = buffers.get(buffer)
        self.n = shoal.num_pes()
        self.test: Test = TESTS["latency"]
        self.size = 0
        self.out: Any = None
        self.last: Any = None
        #: keep what arrives last, for --validate; otherwise an entry method drops each
        #: message's array, as OSU's receiver overwrites its one buffer (keeping it would
        #: make every message land in a second buffer, colder in the cache)
        self.keep = False

    def prepare(self, test: str, size: int, keep: bool = False) -> None:
        """Build this element's payload for ``test`` at ``size`` bytes (untimed); ``keep``:
        keep the last message received, to validate it."""
        self.test, self.size, self.keep = TESTS[test], size, keep
        if self.kind.device == "cuda":
            shoal.my_device()  # the PE's GPU (SHOAL_DEVICE), before any array is made on one
        self.out = self.kind.from_host(data.payload(self.test, size, self.index, self.n))
        self.last = None
        self._prepare()

    def _prepare(self) -> None:
        pass

    def check(self, validate: bool, corrupt: bool) -> list[str]:
        """Validation failures of what this element received last."""
        want = data.expected(self.test, self.size, self.index, self.n)
        if not validate or want is None:
            return []
        got = self.last
        if isinstance(got, list):
            host = np.concatenate([self.kind.to_host(g) for g in got]) if got else np.empty(0, np.uint8)
        else:
            host = self.kind.to_host(got) if got is not None else np.empty(0, np.uint8)
        where = f"{self.test.name} {self.size} B on PE {self.index}"
        problem = data.compare(host, want, where, corrupt)
        return [problem] if problem else []


class EntryP2P(_Element):
    """Point-to-point over entry methods; element i talks to its partner only."""

    def __init__(self, buffer: str):
        super().__init__(buffer)
        partner = data.partner(self.index, self.n)
        self.peer = self.collection[partner]
        self.leads = self.index < partner
        self.trips = self.total = self.warm = 0
        self.t0 = 0.0
        self.done: shoal.Future | None = None
        self.received = self.need = 0
        self.wake: shoal.Future | None = None

    def _prepare(self) -> None:
        self.received = self.need = 0
        self.wake = None

    # -- latency: ping-pong of entry-method calls ------------------------------
    async def pingpong(self, iters: int, warm: int) -> float | None:
        """Leaders: seconds for ``iters`` round trips after ``warm`` untimed ones."""
        if not self.leads:
            return None
        self.trips, self.total, self.warm = 0, iters + warm, warm
        self.done = shoal.Future()
        self.t0 = perf_counter()
        self.peer.ping(self.out)
        return await self.done

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
            assert self.done is not None
            self.done.send(perf_counter() - self.t0)

    # -- bandwidth: a window of calls, the last one acknowledged ---------------
    async def bw(self, iters: int, warm: int, window: int, lend: bool) -> float | None:
        """Leaders: seconds for ``iters`` windows of ``window`` calls, each acked."""
        if not self.leads:
            return None
        peer, out = self.peer, self.out
        t0 = perf_counter()
        for i in range(iters + warm):
            if i == warm:
                t0 = perf_counter()
            ack = shoal.Future()
            loan = _lend(out, lend)
            for _ in range(window - 1):
                peer.take(loan)
            peer.take_last(loan, ack)
            await ack
            if loan is not out:
                await loan.returned
        return perf_counter() - t0

    def take(self, buf: Any) -> None:
        """Receiver of bw: one message of the window."""
        if self.keep:
            self.last = buf

    def take_last(self, buf: Any, ack: shoal.Future) -> None:
        """Receiver of bw: the window's last message; resolving ``ack`` is the ack."""
        if self.keep:
            self.last = buf
        ack.send(None)

    # -- bi-directional bandwidth: both send a window, wait for the peer's -----
    async def bibw(self, iters: int, warm: int, window: int, lend: bool) -> float:
        """Seconds for ``iters`` windows sent and received by both partners."""
        peer, out = self.peer, self.out
        t0 = perf_counter()
        for i in range(iters + warm):
            if i == warm:
                t0 = perf_counter()
            loan = _lend(out, lend)
            for _ in range(window):
                peer.arrive(loan)
            need = (i + 1) * window
            if self.received < need:
                self.need, self.wake = need, shoal.Future()
                await self.wake
            if loan is not out:
                await loan.returned
        return perf_counter() - t0

    def arrive(self, buf: Any) -> None:
        """bibw: one message from the partner; wake the loop when its window is in."""
        if self.keep:
            self.last = buf
        self.received += 1
        wake = self.wake
        if wake is not None and self.received >= self.need:
            self.wake = None
            wake.send(None)


def _lend(out: Any, lend: bool) -> Any:
    """The window's payload: ``out`` lent (``shoal.lend``: sent without a copy or a wait,
    not written until it is returned, as OSU's window of ``MPI_Isend`` asks), or ``out``
    itself, sent with value semantics (``--lend`` takes NumPy buffers only: options.py)."""
    return shoal.lend(out) if lend else out


class ChannelP2P(_Element):
    """Point-to-point over one channel between partners; numpy buffers land in place."""

    def __init__(self, buffer: str):
        super().__init__(buffer)
        partner = data.partner(self.index, self.n)
        self.leads = self.index < partner
        self.ch = shoal.Channel(self, remote=self.collection[partner])
        self.into: np.ndarray | None = None

    def _prepare(self) -> None:
        # recv(into=) takes NumPy and device arrays; bytearrays receive a new object per message
        posted = isinstance(self.out, np.ndarray) or (self.kind.device == "cuda" and self.kind.name != "pycuda")
        self.into = self.kind.alloc(self.size) if posted else None

    async def pingpong(self, iters: int, warm: int) -> float | None:
        """Both partners: send then receive (leader) or receive then send; leader's seconds."""
        ch, out, into = self.ch, self.out, self.into
        t0 = perf_counter()
        for i in range(iters + warm):
            if i == warm:
                t0 = perf_counter()
            if self.leads:
                ch.send(out)
                self.last = await ch.recv(into=into)
            else:
                self.last = await ch.recv(into=into)
                ch.send(out)
        elapsed = perf_counter() - t0
        return elapsed if self.leads else None

    async def bw(self, iters: int, warm: int, window: int, lend: bool) -> float | None:
        """Leader sends windows and awaits an ack message per window; leader's seconds."""
        ch, out, into = self.ch, self.out, self.into
        t0 = perf_counter()
        for i in range(iters + warm):
            if i == warm:
                t0 = perf_counter()
            if self.leads:
                loan = _lend(out, lend)
                for _ in range(window):
                    ch.send(loan)
                await ch.recv()
                if loan is not out:
                    await loan.returned
            else:
                for _ in range(window):
                    self.last = await ch.recv(into=into)
                ch.send(True)
        elapsed = perf_counter() - t0
        return elapsed if self.leads else None

    async def bibw(self, iters: int, warm: int, window: int, lend: bool) -> float:
        """Both partners send a window, then receive the other's; seconds."""
        ch, out, into = self.ch, self.out, self.into
        t0 = perf_counter()
        for i in range(iters + warm):
            if i == warm:
                t0 = perf_counter()
            loan = _lend(out, lend)
            for _ in range(window):
                ch.send(loan)
            for _ in range(window):
                self.last = await ch.recv(into=into)
            if loan is not out:
                await loan.returned
        return perf_counter() - t0


class Collective(_Element):
    """One element per PE; ``run`` times a collective the way OSU does."""

    def __init__(self, buffer: str):
        super().__init__(buffer)
        self.box: deque = deque()
        self.want: shoal.Future | None = None
        self.puts = [self.collection[d].put for d in range(self.n)]
        self.others: Any = None
        self.values: Any = None
        self.chunks: list = []
        self.blocks: list = []
        self.mine: Any = None

    def _prepare(self) -> None:
        t, size, n, me = self.test, self.size, self.n, self.index
        self.box.clear()
        if t.dtype == "float":
            self.values = self.kind.typed(self.out)
            counts = data.split(size // 4, n)
            starts = np.cumsum([0, *counts])
            self.blocks = [self.values[starts[d] : starts[d + 1]] for d in range(n)]
        base = t.name.rstrip("v") if t.vector else t.name
        if base in ("scatter", "alltoall"):
            self.chunks = [self.out[d * size : (d + 1) * size] for d in range(n)]
            self.mine = self.kind.alloc(size)
        if base == "bcast" and me == 0 and n > 1 and self.others is None:
            self.others = self.collection.section(range(1, n))

    # -- the mailbox: point-to-point deliveries and reduction results ----------
    def put(self, item: Any) -> None:
        """Deliver ``item`` to this element (a block, a broadcast, a reduction result)."""
        want = self.want
        if want is not None:
            self.want = None
            want.send(item)
        else:
            self.box.append(item)

    async def _next(self) -> Any:
        if self.box:
            return self.box.popleft()
        self.want = shoal.Future()
        return await self.want

    async def _barrier(self) -> None:
        """Between iterations, and the barrier test itself: an all-reduce of nothing."""
        await self.allreduce(None, shoal.reducers.nop)

    # -- the loop ----------------------------------------------------------------
    async def run(self, iters: int, warm: int, validate: bool, corrupt: bool) -> tuple[float, list[str]]:
        """(this PE's average µs per collective, validation failures)."""
        name = self.test.name.rstrip("v") if self.test.vector else self.test.name
        op = getattr(self, "_" + name)
        timer = 0.0
        got: Any = None
        await self._barrier()
        for i in range(iters + warm):
            t0 = perf_counter()
            got = await op()
            t1 = perf_counter()
            if i >= warm:
                timer += t1 - t0
            await self._barrier()
        self.last = got
        return timer * 1e6 / iters, self.check(validate, corrupt)

    async def _allreduce(self) -> Any:
        return await self.allreduce(self.values, shoal.reducers.sum)

    async def _reduce(self) -> Any:
        self.contribute(self.values, shoal.reducers.sum, self.puts[0])
        return await self._next() if self.index == 0 else None

    async def _reduce_scatter(self) -> Any:
        for d in range(self.n):
            self.contribute(self.blocks[d], shoal.reducers.sum, self.puts[d])
        return await self._next()

    async def _allgather(self) -> Any:
        return await self.allreduce(self.out, shoal.reducers.gather)

    async def _gather(self) -> Any:
        self.contribute(self.out, shoal.reducers.gather, self.puts[0])
        return await self._next() if self.index == 0 else None

    async def _bcast(self) -> Any:
        if self.index == 0:
            if self.others is not None:
                self.others.put(self.out)
            return None
        return await self._next()

    async def _scatter(self) -> Any:
        if self.index == 0:
            for d in range(1, self.n):
                self.puts[d](self.chunks[d])
            self.mine[:] = self.chunks[0]  # as MPI_Scatter copies the root's own block
            return self.mine
        return await self._next()

    async def _alltoall(self) -> Any:
        me, n = self.index, self.n
        for d in range(n):
            if d != me:
                self.puts[d]((me, self.chunks[d]))
        parts: list = [None] * n
        self.mine[:] = self.chunks[me]
        parts[me] = self.mine
        for _ in range(n - 1):
            src, block = await self._next()
            parts[src] = block
        return parts


def _measure(cfg: Config, name: str, reporter: Reporter) -> None:
    """Run test ``name`` at every size and hand its result to ``reporter``."""
    test = TESTS[name]
    result = cfg.result(name)
    if test.kind == "collective":
        group = shoal.Group(Collective, args=(cfg.buffer,))
    else:
        group = shoal.Group(ChannelP2P if cfg.api == "channel" else EntryP2P, args=(cfg.buffer,))
    for size in cfg.sizes(test):
        iters, warm = cfg.counts(test, size)
        group.prepare(name, size, cfg.validate, ret=True).get()
        if test.kind == "collective":
            outs = group.run(iters, warm, cfg.validate, cfg.corrupt, ret=True).get()
            result.add(size, sum(lat for lat, _ in outs) / len(outs), iters)
            result.failures += [f for _, fails in outs for f in fails]
            continue
        if name in ("latency", "multi_lat"):
            times = [t for t in group.pingpong(iters, warm, ret=True).get() if t is not None]
            value = sum(times) / len(times) * 1e6 / (2 * iters)
        else:
            method = group.bw if name == "bw" else group.bibw
            elapsed = method(iters, warm, cfg.window, cfg.lend, ret=True).get()[0]
            value = size / 1e6 * iters * cfg.window * (2 if name == "bibw" else 1) / elapsed
        result.add(size, value, iters)
        result.failures += [f for fails in group.check(cfg.validate, cfg.corrupt, ret=True).get() for f in fails]
    reporter.emit(result)


def run(cfg: Config) -> int:
    """Run ``cfg.tests`` as a shoal program on this PE; PE 0 prints; returns the exit code."""

    def main(args: list) -> None:
        """The shoal main program (PE 0): every test in turn, results as they finish."""
        if shoal.num_pes() != cfg.pes:
            raise SystemExit(f"shoal bench micro: the job has {shoal.num_pes()} PEs, not -n {cfg.pes}")
        reporter = Reporter(cfg)
        for name in cfg.tests:
            _measure(cfg, name, reporter)
        code = reporter.finish()
        if code:
            shoal.exit(code)

    if cfg.device == "cuda":  # how shoal moves device arrays (shoal/gpu/paths.py)
        os.environ["SHOAL_GPU_PATH"] = {"auto": "", "aware": "mpi"}.get(cfg.gpu_path, cfg.gpu_path)
    return shoal.run(main, [])
