"""``--target mpi4py``: the OSU loops on mpi4py, with buffers or with pickle.

``--api buffer`` uses the upper-case methods (``Send``, ``Allreduce``…) on the
buffers themselves; ``--api pickle`` (``--pickle``) the lower-case ones, which pickle
Python objects. The loops follow OSU: ping-pong for latency, a window of non-blocking
sends and an ack for bandwidth, and for collectives each iteration timed alone, a
barrier between iterations, and the average over PEs. Reductions run on float32
elements with an explicit ``MPI.FLOAT`` (a ``bytearray`` has no element type, and
MPI has no SUM of bytes), which is why they work under mpi4py 4.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from . import buffers, data
from .catalog import TESTS, Test
from .options import Config
from .report import Reporter

__all__ = ["run"]


class _Ctx:
    """One PE's view of the job: communicator, buffer kind, options, failures."""

    def __init__(self, comm: Any, MPI: Any, kind: buffers.BufferKind, cfg: Config):
        self.comm, self.MPI, self.kind, self.cfg = comm, MPI, kind, cfg
        self.rank, self.n = comm.Get_rank(), comm.Get_size()
        self.failures: list[str] = []
        self.t0 = 0.0

    def check(self, test: Test, size: int, got: Any, want: np.ndarray | None) -> None:
        """Compare what this PE received with what it should have (with --validate)."""
        if not self.cfg.validate or want is None:
            return
        host = _host(self.kind, got)
        problem = data.compare(host, want, f"{test.name} {size} B on PE {self.rank}", self.cfg.corrupt)
        if problem:
            self.failures.append(problem)

    def send_buf(self, test: Test, size: int) -> Any:
        """This PE's payload for ``test`` at ``size`` bytes, in the chosen buffer kind."""
        return self.kind.from_host(data.payload(test, size, self.rank, self.n))

    def recv_buf(self, nbytes: int, test: Test) -> Any:
        """A poisoned receive buffer of ``nbytes``."""
        return self.kind.alloc(nbytes, test.dtype)

    def spec(self, buf: Any, test: Test) -> Any:
        """The mpi4py buffer argument: explicit MPI.FLOAT for reductions."""
        return [buf, self.MPI.FLOAT] if test.dtype == "float" else buf

    def coll_latency(self, seconds: float, iters: int) -> float | None:
        """OSU: each PE's average per-iteration time, averaged over PEs (on PE 0)."""
        total = self.comm.reduce(seconds * 1e6 / iters, op=self.MPI.SUM, root=0)
        return None if total is None else total / self.n


def _host(kind: buffers.BufferKind, got: Any) -> np.ndarray:
    if isinstance(got, list):  # pickle-mode gathers return one object per PE
        return np.concatenate([_host(kind, g) for g in got]) if got else np.empty(0, np.uint8)
    if isinstance(got, (bytes, bytearray)):
        return np.frombuffer(got, np.uint8)
    return kind.to_host(got)


# -- point-to-point ---------------------------------------------------------------
def _pingpong(c: _Ctx, test: Test, size: int, iters: int, warm: int) -> float:
    """Time ``iters`` round trips with this PE's partner; returns seconds (both sides)."""
    comm, MPI = c.comm, c.MPI
    peer = data.partner(c.rank, c.n)
    leads = c.rank < peer
    sbuf, rbuf = c.send_buf(test, size), c.recv_buf(size, test)
    t0 = 0.0
    comm.Barrier()
    if c.cfg.api == "pickle":
        send, recv = comm.send, comm.recv
        got = rbuf
        for i in range(iters + warm):
            if i == warm:
                t0 = MPI.Wtime()
            if leads:
                send(sbuf, peer, 1)
                got = recv(None, peer, 1)
            else:
                got = recv(None, peer, 1)
                send(sbuf, peer, 1)
        rbuf = got
    elif c.kind.device != "cpu" and getattr(c.kind, "staged", False):
        _staged_pingpong(c, sbuf, rbuf, peer, leads, iters, warm)
        t0 = c.t0
    else:
        Send, Recv = comm.Send, comm.Recv
        for i in range(iters + warm):
            if i == warm:
                t0 = MPI.Wtime()
            if leads:
                Send(sbuf, peer, 1)
                Recv(rbuf, peer, 1)
            else:
                Recv(rbuf, peer, 1)
                Send(sbuf, peer, 1)
    elapsed = MPI.Wtime() - t0
    c.check(test, size, rbuf, data.expected(test, size, c.rank, c.n))
    return elapsed


def _staged_pingpong(c: _Ctx, sbuf: Any, rbuf: Any, peer: int, leads: bool, iters: int, warm: int) -> None:
    """The ping-pong with device buffers staged through host memory (copies timed)."""
    Send, Recv, kind = c.comm.Send, c.comm.Recv, c.kind
    for i in range(iters + warm):
        if i == warm:
            c.t0 = c.MPI.Wtime()
        if leads:
            Send(kind.sendable(sbuf), peer, 1)
            into, done = kind.receiver(rbuf)
            Recv(into, peer, 1)
            done()
        else:
            into, done = kind.receiver(rbuf)
            Recv(into, peer, 1)
            done()
            Send(kind.sendable(sbuf), peer, 1)


def _latency(c: _Ctx, test: Test, size: int, iters: int, warm: int) -> float | None:
    elapsed = _pingpong(c, test, size, iters, warm)
    return elapsed * 1e6 / (2 * iters) if c.rank == 0 else None


def _multi_lat(c: _Ctx, test: Test, size: int, iters: int, warm: int) -> float | None:
    elapsed = _pingpong(c, test, size, iters, warm)
    total = c.comm.reduce(elapsed * 1e6 / (2 * iters), op=c.MPI.SUM, root=0)
    return None if total is None else total / c.n


#: the tests that can stage device buffers through host memory (the others need a CUDA-aware MPI)
STAGED_TESTS = ("latency", "multi_lat", "bw", "bibw")
_PICKLE_ROOM = 1024  # bytes of pickle framing around a buffer's data


def _bw(c: _Ctx, test: Test, size: int, iters: int, warm: int) -> float | None:
    comm, MPI, W = c.comm, c.MPI, c.cfg.window
    pickle = c.cfg.api == "pickle"
    staged = getattr(c.kind, "staged", False)
    sbuf, rbuf = c.send_buf(test, size), c.recv_buf(size, test)
    ack = bytearray(1)
    # a pickle-mode irecv needs room for the pickled object: one buffer per window slot
    slots = [bytearray(size + _PICKLE_ROOM) for _ in range(W)] if pickle and c.rank == 1 else []
    t0 = 0.0
    comm.Barrier()
    got: Any = rbuf
    for i in range(iters + warm):
        if i == warm:
            t0 = MPI.Wtime()
        if c.rank == 0:
            if pickle:
                MPI.Request.waitall([comm.isend(sbuf, 1, 100) for _ in range(W)])
                comm.recv(None, 1, 101)
            elif staged:
                MPI.Request.Waitall([comm.Isend(c.kind.sendable(sbuf), 1, 100) for _ in range(W)])
                comm.Recv(ack, 1, 101)
            else:
                MPI.Request.Waitall([comm.Isend(sbuf, 1, 100) for _ in range(W)])
                comm.Recv(ack, 1, 101)
        else:
            if pickle:
                got = MPI.Request.waitall([comm.irecv(b, 0, 100) for b in slots])[-1]
                comm.send(b"", 0, 101)
            elif staged:
                _staged_waitall(c, [], [(c.kind.receiver(rbuf), 0) for _ in range(W)])
                comm.Send(ack, 0, 101)
            else:
                MPI.Request.Waitall([comm.Irecv(rbuf, 0, 100) for _ in range(W)])
                comm.Send(ack, 0, 101)
    elapsed = MPI.Wtime() - t0
    c.check(test, size, got, data.expected(test, size, c.rank, c.n))
    return size / 1e6 * iters * W / elapsed if c.rank == 0 else None


def _staged_waitall(c: _Ctx, sends: list, receives: list) -> None:
    """Post the window's receives into host buffers (``((into, done), source)``) and its
    sends of host copies (to the partner), wait for all, then copy each arrival onto the
    device: every message staged through host memory, the copies timed."""
    peer = data.partner(c.rank, c.n)
    reqs = [c.comm.Irecv(into, src, 100) for (into, _), src in receives]
    reqs += [c.comm.Isend(host, peer, 100) for host in sends]
    c.MPI.Request.Waitall(reqs)
    for (_, done), _ in receives:
        done()


def _bibw(c: _Ctx, test: Test, size: int, iters: int, warm: int) -> float | None:
    comm, MPI, W = c.comm, c.MPI, c.cfg.window
    peer = data.partner(c.rank, c.n)
    pickle = c.cfg.api == "pickle"
    staged = getattr(c.kind, "staged", False)
    sbuf, rbuf = c.send_buf(test, size), c.recv_buf(size, test)
    slots = [bytearray(size + _PICKLE_ROOM) for _ in range(W)] if pickle else []
    t0 = 0.0
    comm.Barrier()
    got: Any = rbuf
    for i in range(iters + warm):
        if i == warm:
            t0 = MPI.Wtime()
        if pickle:
            reqs = [comm.irecv(b, peer, 100) for b in slots] + [comm.isend(sbuf, peer, 100) for _ in range(W)]
            got = MPI.Request.waitall(reqs)[W - 1]
        elif staged:
            _staged_waitall(c, [c.kind.sendable(sbuf) for _ in range(W)], [(c.kind.receiver(rbuf), peer)
                                                                           for _ in range(W)])
        else:
            reqs = [comm.Irecv(rbuf, peer, 100) for _ in range(W)] + [comm.Isend(sbuf, peer, 100) for _ in range(W)]
            MPI.Request.Waitall(reqs)
    elapsed = MPI.Wtime() - t0
    c.check(test, size, got, data.expected(test, size, c.rank, c.n))
    return size / 1e6 * iters * W * 2 / elapsed if c.rank == 0 else None


# -- collectives ------------------------------------------------------------------
def _collective(op: Callable[[_Ctx, Test, int], tuple[Callable[[], Any], Callable[[], Any]]]) -> Callable[..., float | None]:
    """An OSU collective loop around ``op``, which returns (one call, what was received)."""

    def bench(c: _Ctx, test: Test, size: int, iters: int, warm: int) -> float | None:
        call, received = op(c, test, size)
        Wtime, barrier = c.MPI.Wtime, c.comm.Barrier
        timer = 0.0
        barrier()
        for i in range(iters + warm):
            t0 = Wtime()
            call()
            t1 = Wtime()
            if i >= warm:
                timer += t1 - t0
            barrier()
        c.check(test, size, received(), data.expected(test, size, c.rank, c.n))
        return c.coll_latency(timer, iters)

    return bench


class _Box:
    """Holds the last object a pickle-mode call returned."""

    value: Any = None

    def keep(self, fn: Callable[[], Any]) -> Callable[[], None]:
        def call() -> None:
            self.value = fn()

        return call


def _equal(c: _Ctx, size: int) -> tuple[list[int], list[int]]:
    return [size] * c.n, [i * size for i in range(c.n)]


def _op(c: _Ctx, test: Test, size: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The collective call of ``test`` at ``size`` and a getter of what this PE received."""
    comm, MPI, n, rank = c.comm, c.MPI, c.n, c.rank
    name = test.name
    s = c.send_buf(test, size)
    if c.cfg.api == "pickle":
        box = _Box()
        sv: Any = c.kind.typed(s) if test.dtype == "float" else s
        chunks = [s[d * size : (d + 1) * size] for d in range(n)] if name in ("alltoall", "scatter") else []
        calls: dict[str, Callable[[], Any]] = {
            "allgather": lambda: comm.allgather(sv),
            "allreduce": lambda: comm.allreduce(sv, op=MPI.SUM),
            "alltoall": lambda: comm.alltoall(chunks),
            "barrier": comm.barrier,
            "bcast": lambda: comm.bcast(sv if rank == 0 else None, root=0),
            "gather": lambda: comm.gather(sv, root=0),
            "reduce": lambda: comm.reduce(sv, op=MPI.SUM, root=0),
            "scatter": lambda: comm.scatter(chunks if rank == 0 else None, root=0),
        }
        return box.keep(calls[name]), lambda: box.value
    f = test.dtype == "float"
    if name == "barrier":
        return comm.Barrier, lambda: None
    if name == "bcast":
        buf = s if rank == 0 else c.recv_buf(size, test)
        return (lambda: comm.Bcast(buf, root=0)), lambda: buf
    if name in ("allreduce", "reduce"):
        r = c.recv_buf(size, test)
        if name == "allreduce":
            return (lambda: comm.Allreduce(c.spec(s, test), c.spec(r, test), op=MPI.SUM)), lambda: r
        rr = c.spec(r, test) if rank == 0 else None
        return (lambda: comm.Reduce(c.spec(s, test), rr, op=MPI.SUM, root=0)), lambda: r
    if name == "reduce_scatter":
        counts = data.split(size // 4, n)
        r = c.recv_buf(counts[rank] * 4, test)
        return (lambda: comm.Reduce_scatter(c.spec(s, test), c.spec(r, test), counts, op=MPI.SUM)), lambda: r
    assert not f
    counts, displs = _equal(c, size)
    whole = c.recv_buf(size * n, test) if name in ("allgather", "allgatherv", "alltoall", "alltoallv") or rank == 0 else None
    one = c.recv_buf(size, test)
    B = MPI.BYTE
    calls = {
        "allgather": lambda: comm.Allgather(s, whole),
        "allgatherv": lambda: comm.Allgatherv(s, [whole, counts, displs, B]),
        "alltoall": lambda: comm.Alltoall(s, whole),
        "alltoallv": lambda: comm.Alltoallv([s, counts, displs, B], [whole, counts, displs, B]),
        "gather": lambda: comm.Gather(s, whole, root=0),
        "gatherv": lambda: comm.Gatherv(s, [whole, counts, displs, B] if rank == 0 else None, root=0),
        "scatter": lambda: comm.Scatter(s if rank == 0 else None, one, root=0),
        "scatterv": lambda: comm.Scatterv([s, counts, displs, B] if rank == 0 else None, one, root=0),
    }
    received = one if name in ("scatter", "scatterv") else whole
    return calls[name], lambda: received


_P2P = {"latency": _latency, "multi_lat": _multi_lat, "bw": _bw, "bibw": _bibw}


def run(cfg: Config) -> int:
    """Run ``cfg.tests`` on this PE of an MPI job; PE 0 prints; returns the exit code.

    An exception on any PE aborts the whole job (with its traceback), never a hang.
    """
    from mpi4py import MPI

    try:
        return _run(cfg, MPI)
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        print(exc.code, file=sys.stderr, flush=True)
    except BaseException:  # noqa: BLE001 - any failure on one PE must end every PE
        traceback.print_exc()
        sys.stderr.flush()
    MPI.COMM_WORLD.Abort(1)
    return 1  # pragma: no cover - Abort does not return


def _run(cfg: Config, MPI: Any) -> int:
    comm = MPI.COMM_WORLD.Dup()
    if comm.Get_size() != cfg.pes:
        raise SystemExit(f"shoal bench micro: PE {comm.Get_rank()}: the job has {comm.Get_size()} PEs, not -n {cfg.pes}")
    kind = buffers.get(cfg.buffer, staged=_staged(cfg))
    if getattr(kind, "staged", False) and any(t not in STAGED_TESTS for t in cfg.tests):
        raise SystemExit(
            f"shoal bench micro: staging GPU buffers through host memory is implemented for {', '.join(STAGED_TESTS)} "
            "only; use a CUDA-aware MPI (--gpu-path aware) for the other tests"
        )
    c = _Ctx(comm, MPI, kind, cfg)
    reporter = Reporter(cfg) if c.rank == 0 else None
    for name in cfg.tests:
        test = TESTS[name]
        bench = _P2P.get(name) or _collective(_op)
        result = cfg.result(name)
        for size in cfg.sizes(test):
            iters, warm = cfg.counts(test, size)
            value = bench(c, test, size, iters, warm)
            if reporter is not None:
                result.add(size, value, iters)
        failures = comm.gather(c.failures, root=0)
        c.failures = []
        if reporter is not None:
            result.failures = [f for per_pe in failures for f in per_pe]
            reporter.emit(result)
    code = reporter.finish() if reporter is not None else 0
    code = comm.bcast(code, root=0)
    comm.Free()
    return code


def _staged(cfg: Config) -> bool:
    """Whether GPU buffers go through host memory (no CUDA-aware MPI, or asked to)."""
    if cfg.device != "cuda":
        return False
    if cfg.gpu_path != "auto":
        return cfg.gpu_path == "staged"
    return not _cuda_aware()


def _cuda_aware() -> bool:
    """Ask the MPI library (MPICH and Open MPI export MPIX_Query_cuda_support)."""
    import ctypes

    try:
        query = ctypes.CDLL(None).MPIX_Query_cuda_support
    except (OSError, AttributeError):
        return False
    query.restype = ctypes.c_int
    return bool(query())
