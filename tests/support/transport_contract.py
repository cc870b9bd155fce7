"""The transport contract, written once and run against every transport.

Each check is a generator ``check(ep)`` run by every rank of one job, where ``ep`` is
an :class:`Endpoint` wrapping that rank's :class:`~shoal._transport.base.Transport`.
A check yields ``WAIT`` when it needs messages that have not arrived yet and
``BARRIER`` to meet the other ranks. Two drivers run the same checks:

* :func:`run_lockstep` drives every rank of an in-process hub from one loop
  (an in-process send is immediate; the receiver's ``poll`` delivers);
* :func:`run_alone` drives one rank of a real MPI job (``WAIT`` means: poll again;
  ``BARRIER`` calls the transport's own barrier).

Run as a script under ``mpiexec`` it checks :class:`~shoal._transport.mpi.MPITransport`:
``mpiexec -n 2 python tests/support/transport_contract.py [--checks a,b]`` prints a line
starting with ``OK`` on rank 0 and exits 0 when every check passed; any failure prints
a traceback and aborts the job with a non-zero exit code.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
import zlib
from collections import deque
from collections.abc import Callable, Generator, Iterable
from typing import Any

import numpy as np

WAIT = "wait"
BARRIER = "barrier"

Check = Callable[["Endpoint"], Generator[str, None, Any]]


# -- helpers ---------------------------------------------------------------------
def raw(buf: Any) -> np.ndarray:
    """The bytes of any buffer-protocol object as a flat uint8 array (no copy)."""
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1).view(np.uint8)
    return np.frombuffer(memoryview(buf).cast("B"), np.uint8)


def address(buf: Any) -> int:
    return raw(buf).__array_interface__["data"][0]


def pattern(tag: str, n: int) -> np.ndarray:
    """Deterministic, tag-dependent bytes, so a receiver knows what it must get."""
    seed = zlib.crc32(tag.encode())
    return ((np.arange(n, dtype=np.uint64) * 131 + seed) % 251).astype(np.uint8)


def assert_bytes(seg: Any, expected: np.ndarray, what: str) -> None:
    got = raw(seg)
    assert got.size == expected.size, f"{what}: {got.size} bytes arrived, {expected.size} were sent"
    if not np.array_equal(got, expected):
        bad = int(np.flatnonzero(got != expected)[0])
        raise AssertionError(f"{what}: byte {bad} differs: got {got[bad]}, sent {expected[bad]}")


def as_kind(data: np.ndarray, kind: str) -> Any:
    """``data`` as one of the segment types the runtime hands to ``send``."""
    if kind == "bytes":
        return data.tobytes()
    if kind == "bytearray":
        return bytearray(data.tobytes())
    if kind == "memoryview":
        return memoryview(bytearray(data.tobytes()))
    if kind == "numpy":
        return data.copy()
    if kind == "float64" and data.size % 8 == 0 and data.size:
        return data.view(np.float64).reshape(2, -1) if data.size % 16 == 0 else data.view(np.float64)
    return data.copy()


class Message:
    __slots__ = ("allocated", "header", "segments")

    def __init__(self, header: bytes, segments: list, allocated: dict):
        self.header = header
        self.segments = segments
        self.allocated = allocated  # segment index -> the allocator's buffer

    def __repr__(self) -> str:
        sizes = [raw(s).size for s in self.segments]
        return f"<Message {self.header[:40]!r} sizes={sizes} bulk={sorted(self.allocated)}>"


class Endpoint:
    """One rank's transport plus the bookkeeping the checks need.

    Installs an allocator that records every buffer it hands out; when a message is
    delivered, every segment the allocator was asked for must be that very buffer.
    """

    def __init__(self, transport: Any, lockstep: bool):
        self.t = transport
        self.lockstep = lockstep  # all ranks driven by one loop in this process
        self.rank = transport.rank
        self.size = transport.size
        self.inbox: deque[Message] = deque()
        self.delivered = 0
        self.allocs: dict[tuple, deque] = {}  # (header, index) -> buffers handed out
        self.custom_alloc: Callable[[bytes, int, int], Any] | None = None
        self.on_deliver: Callable[[Message], None] | None = None
        transport.allocator = self._allocate

    # the transport's callbacks
    def _allocate(self, header: bytes, index: int, nbytes: int) -> Any:
        buf = self.custom_alloc(header, index, nbytes) if self.custom_alloc else None
        if buf is None:
            buf = np.empty(nbytes, np.uint8)
        self.allocs.setdefault((bytes(header), index), deque()).append((nbytes, buf))
        return buf

    def _deliver(self, header: bytes, segments: list) -> None:
        header = bytes(header)
        allocated = {}
        for i, seg in enumerate(segments):
            queue = self.allocs.get((header, i))
            if not queue:
                continue
            nbytes, buf = queue.popleft()
            if not queue:
                del self.allocs[(header, i)]
            size = raw(seg).size
            assert size == nbytes, f"segment {i} of {header!r}: allocator asked for {nbytes} bytes, {size} delivered"
            assert nbytes == 0 or (address(seg) == address(buf) and np.shares_memory(raw(seg), raw(buf))), (
                f"segment {i} of {header!r} ({nbytes} bytes) was not delivered in the buffer the allocator returned"
            )
            allocated[i] = buf
        msg = Message(header, list(segments), allocated)
        self.delivered += 1
        self.inbox.append(msg)
        if self.on_deliver is not None:
            self.on_deliver(msg)

    # used by the checks
    def poll(self) -> int:
        return self.t.poll(self._deliver)

    def expect(self, n: int) -> Generator[str, None, list[Message]]:
        """Wait until ``n`` messages arrived; return them in arrival order."""
        while len(self.inbox) < n:
            if not self.poll() and len(self.inbox) < n:
                yield WAIT
        return [self.inbox.popleft() for _ in range(n)]

    def send(self, dest: int, header: str | bytes, segments: list) -> None:
        self.t.send(dest, header.encode() if isinstance(header, str) else header, segments)

    @property
    def others(self) -> list[int]:
        return [r for r in range(self.size) if r != self.rank]

    @property
    def next(self) -> int:
        return (self.rank + 1) % self.size

    @property
    def prev(self) -> int:
        return (self.rank - 1) % self.size

    @property
    def T(self) -> int:
        return self.t.rendezvous_threshold


def by_sender(msgs: list[Message]) -> dict[int, list[Message]]:
    """Group ``<check>:<src>:<i>`` messages by sender, keeping arrival order."""
    out: dict[int, list[Message]] = {}
    for m in msgs:
        src = int(m.header.split(b":")[1])
        out.setdefault(src, []).append(m)
    return out


def assert_bulk(ep: Endpoint, msg: Message, sizes: list[int]) -> None:
    """Every segment at or above the threshold went through the allocator."""
    for i, n in enumerate(sizes):
        if n >= ep.T:
            assert i in msg.allocated, (
                f"segment {i} of {msg.header!r} ({n} bytes >= rendezvous_threshold {ep.T}) "
                "did not land in a buffer from the receiver's allocator"
            )


# -- the checks ------------------------------------------------------------------
def check_fifo(ep: Endpoint) -> Generator[str, None, None]:
    """Per-sender FIFO, every rank sending to every other, mixing eager and rendezvous."""
    T, N = ep.T, 96

    def segs(src: int, i: int) -> list[np.ndarray]:
        shape = [[], [1], [T - 1], [T + 1], [0, 10, T], [3, T + 5, 7]][i % 6]
        return [pattern(f"fifo{src}.{i}.{j}", n) for j, n in enumerate(shape)]

    for i in range(N):
        for dest in ep.others:
            kinds = ("bytes", "numpy", "bytearray", "memoryview")
            ep.send(dest, f"fifo:{ep.rank}:{i}", [as_kind(s, kinds[(i + j) % 4]) for j, s in enumerate(segs(ep.rank, i))])
    msgs = yield from ep.expect(N * (ep.size - 1))
    groups = by_sender(msgs)
    assert sorted(groups) == ep.others, f"messages came from {sorted(groups)}, expected {ep.others}"
    for src, got in groups.items():
        headers = [m.header.decode() for m in got]
        want = [f"fifo:{src}:{i}" for i in range(N)]
        assert headers == want, f"from PE {src}: out of order, first difference at {next(k for k, (a, b) in enumerate(zip(headers, want)) if a != b)}: {headers[:12]}..."
        # checked only now, after many later polls: delivered segments must stay intact
        for i, m in enumerate(got):
            expected = segs(src, i)
            assert len(m.segments) == len(expected), f"{m!r}: {len(m.segments)} segments, {len(expected)} sent"
            for j, e in enumerate(expected):
                assert_bytes(m.segments[j], e, f"fifo message {i} from PE {src}, segment {j}")
            assert_bulk(ep, m, [e.size for e in expected])


def _size_cases(T: int) -> list[tuple[str, int]]:
    sizes = [0, 1, 2, T - 2, T - 1, T, T + 1, 2 * T + 3, 4 * T]
    kinds = ["bytes", "bytearray", "memoryview", "numpy", "float64"]
    return [(kinds[(i + k) % len(kinds)], n) for i, n in enumerate(sizes) for k in range(3)]


def check_sizes(ep: Endpoint) -> Generator[str, None, None]:
    """One segment of 0, 1, …, just below / at / above the threshold bytes arrives intact."""
    cases = _size_cases(ep.T)
    for k, (kind, n) in enumerate(cases):
        ep.send(ep.next, f"sizes:{ep.rank}:{k}", [as_kind(pattern(f"sizes{ep.rank}.{k}", n), kind)])
    long_header = b"L" * 3000 + b":" + str(ep.rank).encode()
    ep.send(ep.next, b"", [b"empty header"])
    ep.send(ep.next, long_header, [pattern("long", ep.T + 1)])
    msgs = yield from ep.expect(len(cases) + 2)
    for k, ((kind, n), m) in enumerate(zip(cases, msgs)):
        assert m.header == f"sizes:{ep.prev}:{k}".encode(), f"message {k}: header {m.header!r}"
        assert len(m.segments) == 1, f"{m!r}: {len(m.segments)} segments, 1 sent"
        assert_bytes(m.segments[0], pattern(f"sizes{ep.prev}.{k}", n), f"{n}-byte {kind} segment")
        assert_bulk(ep, m, [n])
    empty, long = msgs[-2:]
    assert empty.header == b"" and bytes(raw(empty.segments[0])) == b"empty header", empty
    assert long.header == b"L" * 3000 + b":" + str(ep.prev).encode(), "a 3000-byte header was altered"
    assert_bytes(long.segments[0], pattern("long", ep.T + 1), "segment after a long header")
    assert_bulk(ep, long, [ep.T + 1])


def check_big_array(ep: Endpoint) -> Generator[str, None, None]:
    """A 4 MiB NumPy array, once into a posted float64 array (like a channel's), once into fresh memory."""
    shape = (512, 1024)  # 4 MiB of float64
    posted: list[np.ndarray] = []

    def post(header: bytes, index: int, nbytes: int) -> Any:
        if header.startswith(b"big:posted") and index == 1:
            assert nbytes == 8 * shape[0] * shape[1], f"allocator asked for {nbytes} bytes"
            posted.append(np.full(shape, -1.0))
            return posted[-1]
        return None

    ep.custom_alloc = post
    yield BARRIER  # every receiver has its allocator in place before anyone sends
    try:
        src = np.random.default_rng(ep.rank).standard_normal(shape)
        ep.send(ep.next, f"big:posted:{ep.rank}", [b"meta", src])
        ep.send(ep.next, f"big:fresh:{ep.rank}", [b"meta", src])
        first, second = yield from ep.expect(2)
    finally:
        ep.custom_alloc = None
    want = np.random.default_rng(ep.prev).standard_normal(shape)
    assert first.header == f"big:posted:{ep.prev}".encode() and second.header == f"big:fresh:{ep.prev}".encode()
    assert len(posted) == 1, f"the allocator was asked {len(posted)} times for the posted array"
    assert first.allocated.get(1) is posted[0], "the 4 MiB segment did not land in the posted array"
    assert np.array_equal(posted[0], want), "the posted array does not hold the sent data"
    assert np.array_equal(np.frombuffer(first.segments[1], np.float64).reshape(shape), want)
    assert 1 in second.allocated, "a 4 MiB segment did not go through the allocator"
    assert np.array_equal(np.frombuffer(second.segments[1], np.float64).reshape(shape), want)
    for m in (first, second):
        assert bytes(raw(m.segments[0])) == b"meta"


def _multi_cases(T: int) -> list[list[tuple[str, int]]]:
    return [
        # inline and bulk mixed, every segment type
        [("bytes", 0), ("bytes", 1), ("bytearray", T - 1), ("numpy", T), ("memoryview", 100),
         ("float64", 1 << 20), ("bytes", T + 1), ("numpy", 1)],
        # more just-below-threshold segments than one eager frame may hold
        [("bytes", T - 1)] * 6,
        # several bulk segments in one message
        [("numpy", T + 1), ("float64", 2 * T), ("bytearray", T), ("bytes", 1)],
        # no segments at all
        [],
        # many small segments
        [("bytes", k % 5) for k in range(200)],
    ]


def check_multi_segment(ep: Endpoint) -> Generator[str, None, None]:
    """Several segments per message, inline and bulk mixed, keep their order and bytes."""
    cases = _multi_cases(ep.T)
    for c, case in enumerate(cases):
        segs = [as_kind(pattern(f"multi{ep.rank}.{c}.{j}", n), kind) for j, (kind, n) in enumerate(case)]
        ep.send(ep.next, f"multi:{ep.rank}:{c}", segs)
    msgs = yield from ep.expect(len(cases))
    for c, (case, m) in enumerate(zip(cases, msgs)):
        assert m.header == f"multi:{ep.prev}:{c}".encode(), m
        assert len(m.segments) == len(case), f"{m!r}: {len(m.segments)} segments, {len(case)} sent"
        for j, (kind, n) in enumerate(case):
            assert_bytes(m.segments[j], pattern(f"multi{ep.prev}.{c}.{j}", n), f"message {c} segment {j} ({kind}, {n} bytes)")
        assert_bulk(ep, m, [n for _, n in case])


def check_buffer_reuse(ep: Endpoint) -> Generator[str, None, None]:
    """``send`` returns once the caller may modify its buffers: the receiver sees the old bytes."""
    T, K = ep.T, 6
    small = bytearray(100)
    medium = np.zeros(T - 1, np.uint8)
    large = np.zeros(4 * T, np.uint8)
    huge = np.zeros(1 << 20, np.float64)
    for k in range(K):
        small[:] = bytes([k]) * len(small)
        medium[:] = k
        large[:] = k
        huge[:] = k
        ep.send(ep.next, f"reuse:{ep.rank}:{k}", [small, medium, large, huge])
        # overwrite at once, as a program reusing its arrays would
        small[:] = b"\xee" * len(small)
        medium[:] = 0xEE
        large[:] = 0xEE
        huge[:] = -1.0
    msgs = yield from ep.expect(K)
    for k, m in enumerate(msgs):
        assert m.header == f"reuse:{ep.prev}:{k}".encode(), m
        for j, seg in enumerate(m.segments[:3]):
            got = raw(seg)
            assert got.size and (got == k).all(), (
                f"message {k} segment {j}: receiver saw bytes {np.unique(got)[:5]} instead of {k}; "
                "the sender's later writes leaked into a message already sent"
            )
        h = np.frombuffer(m.segments[3], np.float64)
        assert h.size == 1 << 20 and (h == k).all(), f"message {k}: the 8 MiB segment holds {np.unique(h)[:5]}"
        assert_bulk(ep, m, [100, T - 1, 4 * T, 8 << 20])


def check_crossfire(ep: Endpoint) -> Generator[str, None, None]:
    """Every rank sends large messages to every other at once, polling only afterwards: no deadlock."""
    M, F, T = 6, 40, ep.T
    for i in range(M):
        for dest in ep.others:
            ep.send(dest, f"cross:{ep.rank}:{i}", [pattern(f"x{ep.rank}.{i}", 1 << 20), b"tail"])
    for i in range(M, M + F):  # a flood of full eager frames nobody is receiving yet
        for dest in ep.others:
            ep.send(dest, f"cross:{ep.rank}:{i}", [pattern(f"x{ep.rank}.{i}", T - 1)])
    msgs = yield from ep.expect((M + F) * (ep.size - 1))
    for src, got in by_sender(msgs).items():
        assert [m.header for m in got] == [f"cross:{src}:{i}".encode() for i in range(M + F)], f"from PE {src}: wrong order"
        for i, m in enumerate(got):
            assert_bytes(m.segments[0], pattern(f"x{src}.{i}", (1 << 20) if i < M else T - 1), f"crossfire message {i} from {src}")
            if i < M:
                assert bytes(raw(m.segments[1])) == b"tail"
                assert_bulk(ep, m, [1 << 20, 4])


def check_send_from_deliver(ep: Endpoint) -> Generator[str, None, None]:
    """A handler may send (large segments too) from inside ``deliver``: PE 0 asks, the others echo."""
    K, T = 8, ep.T
    if ep.rank == 0:
        for i in range(K):
            for dest in ep.others:
                ep.send(dest, f"ask:0:{i}:{dest}", [pattern(f"ask{dest}.{i}", 2 * T + 5), b"small"])
        msgs = yield from ep.expect(K * (ep.size - 1))
        groups = by_sender(msgs)
        assert sorted(groups) == ep.others
        for src, got in groups.items():
            assert [m.header for m in got] == [f"echo:{src}:{i}".encode() for i in range(K)]
            for i, m in enumerate(got):
                assert_bytes(m.segments[0], pattern(f"ask{src}.{i}", 2 * T + 5), f"echo {i} from PE {src}")
                assert bytes(raw(m.segments[1])) == b"small"
                assert_bulk(ep, m, [2 * T + 5, 5])
    else:
        def echo(m: Message) -> None:
            _, _, i, _ = m.header.split(b":")
            ep.send(0, f"echo:{ep.rank}:{int(i)}", m.segments)  # re-entrant send, inside poll

        ep.on_deliver = echo
        try:
            msgs = yield from ep.expect(K)
        finally:
            ep.on_deliver = None
        assert [m.header for m in msgs] == [f"ask:0:{i}:{ep.rank}".encode() for i in range(K)]


def check_barrier_progress(ep: Endpoint) -> Generator[str, None, None]:
    """A rank waiting in ``barrier`` still takes in a rendezvous segment sent to it."""
    ep.send(ep.next, f"bp:{ep.rank}:0", [pattern(f"bp{ep.rank}", 2 << 20), b"x"])
    yield BARRIER
    (m,) = yield from ep.expect(1)
    assert m.header == f"bp:{ep.prev}:0".encode()
    assert_bytes(m.segments[0], pattern(f"bp{ep.prev}", 2 << 20), "message sent across a barrier")
    assert_bulk(ep, m, [2 << 20, 1])


def check_barrier(ep: Endpoint) -> Generator[str, None, None]:
    """``barrier`` returns on every rank, and holds the early ranks until the last one arrives.

    Checked by the order of events, not by time: PE 0 writes a marker file only after
    the others are waiting (it naps first), then enters the barrier; every other rank
    must find the marker once it leaves the barrier."""
    if ep.lockstep:  # all PEs are driven by one loop: the barrier only has to return
        ep.t.barrier()
        ep.t.barrier()
        return
        yield
    if ep.rank == 0:
        token = f"{os.getpid()}-{time.time_ns()}"
        for dest in ep.others:
            ep.send(dest, "barrier-token", [token.encode()])
    else:
        (m,) = yield from ep.expect(1)
        token = bytes(m.segments[0]).decode()
    marker = os.path.join(tempfile.gettempdir(), f"shoal-contract-barrier-{token}")
    if ep.rank == 0:
        time.sleep(0.3)  # a barrier that does not wait lets the others leave meanwhile
        with open(marker, "w") as f:
            f.write("PE 0 entered the barrier")
    ep.t.barrier()
    if ep.rank != 0:
        assert os.path.exists(marker), f"PE {ep.rank} left the barrier before PE 0 entered it"
    ep.t.barrier()
    if ep.rank == 0:
        os.unlink(marker)


def check_invalid_rank(ep: Endpoint) -> Generator[str, None, None]:
    """Sending to a PE outside ``0 .. size-1`` raises, and leaves no stray message behind."""
    for bad in (ep.size, ep.size + 3, -1, -ep.size - 1):
        for segs in ([b"x"], [np.zeros(2 * ep.T, np.uint8)]):
            try:
                ep.send(bad, f"bad:{ep.rank}:{bad}", segs)
            except Exception:  # noqa: BLE001 - any exception will do; it must not pass silently
                continue
            raise AssertionError(f"send to PE {bad} did not raise (job of {ep.size} PEs); the message was lost silently")
    ep.send(ep.next, f"good:{ep.rank}:0", [b"ok"])
    (m,) = yield from ep.expect(1)
    assert m.header == f"good:{ep.prev}:0".encode(), f"a failed send left a message behind: {m!r}"
    for _ in range(3):
        ep.poll()
    assert not ep.inbox, f"stray messages after failed sends: {list(ep.inbox)}"


def check_eager_then_the_rest(ep: Endpoint) -> Generator[str, None, None]:
    """Sent as the runtime sends (``send_eager`` first; what it declines by
    ``send_after_eager``), small and large messages in turn arrive intact and in order,
    and ``send_after_eager`` to a PE outside the job raises."""
    t = ep.t
    sizes = [8, 2 * ep.T, 0, ep.T + 1, 100, 3 * ep.T]
    for k, n in enumerate(sizes):
        header, segments = f"eager:{ep.rank}:{k}".encode(), [b"h", pattern(f"eager{ep.rank}.{k}", n)]
        if t.send_eager is None or not t.send_eager(ep.next, header, segments):
            t.send_after_eager(ep.next, header, segments)
    try:
        t.send_after_eager(ep.size, b"bad", [np.zeros(2 * ep.T, np.uint8)])
    except Exception:  # noqa: BLE001 - any exception will do; it must not pass silently
        pass
    else:
        raise AssertionError(f"send_after_eager to PE {ep.size} did not raise (job of {ep.size} PEs)")
    msgs = yield from ep.expect(len(sizes))
    for k, (n, m) in enumerate(zip(sizes, msgs)):
        assert m.header == f"eager:{ep.prev}:{k}".encode(), f"message {k} out of order: {m!r}"
        assert bytes(raw(m.segments[0])) == b"h", m
        assert_bytes(m.segments[1], pattern(f"eager{ep.prev}.{k}", n), f"{n}-byte segment")


CHECKS: dict[str, Check] = {
    "fifo": check_fifo,
    "sizes": check_sizes,
    "big_array": check_big_array,
    "multi_segment": check_multi_segment,
    "buffer_reuse": check_buffer_reuse,
    "crossfire": check_crossfire,
    "send_from_deliver": check_send_from_deliver,
    "barrier_progress": check_barrier_progress,
    "barrier": check_barrier,
    "invalid_rank": check_invalid_rank,
    "eager_then_the_rest": check_eager_then_the_rest,
}


def _framed(ep: Endpoint, check: Check) -> Generator[str, None, None]:
    """Run ``check``; then nothing may be left over; then meet the other ranks."""
    yield from check(ep)
    assert not ep.inbox, f"PE {ep.rank}: unexpected messages delivered: {list(ep.inbox)[:5]}"
    assert not ep.allocs, f"PE {ep.rank}: allocator buffers never delivered: {list(ep.allocs)[:5]}"
    yield BARRIER


# -- drivers ---------------------------------------------------------------------
def run_lockstep(endpoints: list[Endpoint], check: Check, timeout: float = 30.0) -> None:
    """Drive ``check`` on every in-process rank from one loop, meeting at each BARRIER."""
    gens = [_framed(ep, check) for ep in endpoints]
    state = ["run"] * len(gens)
    deadline = time.monotonic() + timeout
    idle_rounds = 0
    while "run" in state or "barrier" in state:
        before = sum(ep.delivered for ep in endpoints)
        for r, gen in enumerate(gens):
            if state[r] != "run":
                continue
            try:
                step = next(gen)
            except StopIteration:
                state[r] = "done"
                continue
            if step == BARRIER:
                state[r] = "barrier"
        if "run" not in state:
            if "done" in state and "barrier" in state:
                raise AssertionError(f"{check.__name__}: ranks disagree on barriers: {state}")
            for r, ep in enumerate(endpoints):
                if state[r] == "barrier":
                    ep.t.barrier()
                    state[r] = "run"
            continue
        idle_rounds = 0 if sum(ep.delivered for ep in endpoints) != before else idle_rounds + 1
        if idle_rounds > 200 or time.monotonic() > deadline:
            waiting = {ep.rank: len(ep.inbox) for ep in endpoints}
            raise AssertionError(f"{check.__name__} stalled: states {state}, messages waiting per PE {waiting}")


def run_alone(ep: Endpoint, check: Check, timeout: float = 30.0) -> None:
    """Drive ``check`` on this rank of a multi-process job."""
    deadline = time.monotonic() + timeout
    for step in _framed(ep, check):
        if step == BARRIER:
            ep.t.barrier()
        elif time.monotonic() > deadline:
            raise AssertionError(f"PE {ep.rank}: {check.__name__} timed out after {timeout} s; inbox {list(ep.inbox)[:5]}")
        else:
            os.sched_yield()  # 2 cores, up to 3 ranks: let the sender run


def inproc_endpoints(size: int, rendezvous_threshold: int) -> list[Endpoint]:
    from shoal._transport.inproc import InprocHub

    hub = InprocHub(size, rendezvous_threshold=rendezvous_threshold)
    return [Endpoint(t, lockstep=True) for t in hub.transports]


#: Checks run under MPI by default. ``invalid_rank`` is run by its own test.
MPI_DEFAULT = [name for name in CHECKS if name != "invalid_rank"]


def main(argv: Iterable[str]) -> int:
    argv = list(argv)
    names = MPI_DEFAULT
    if "--checks" in argv:
        names = argv[argv.index("--checks") + 1].split(",")
    threshold = 64 * 1024
    if "--threshold" in argv:
        threshold = int(argv[argv.index("--threshold") + 1])

    from mpi4py import MPI

    from shoal._transport.mpi import MPITransport

    shared = 1 << 20
    if "--shared-copy" in argv:  # bytes from which on-node messages are copied by both PEs (0: never)
        shared = int(argv[argv.index("--shared-copy") + 1])

    native = "--python" not in argv  # --python: the pure-Python reference path
    t = MPITransport(rendezvous_threshold=threshold, native=native, shared_copy=shared)
    if t.rank == 0:
        print(f"shared_copy={t.shared_copy}", flush=True)
    if native and t._native is None:
        print("FAIL: the compiled eager path did not build", flush=True)
        return 4
    ep = Endpoint(t, lockstep=False)
    t.barrier()
    for name in names:
        start = time.monotonic()
        try:
            run_alone(ep, CHECKS[name])
        except BaseException:  # noqa: BLE001 - report, then end the whole job
            print(f"FAIL {name} on PE {t.rank}/{t.size}:\n{traceback.format_exc()}", flush=True)
            sys.stdout.flush()
            sys.stderr.flush()
            time.sleep(0.2)  # let the other ranks print their failures too
            MPI.COMM_WORLD.Abort(3)
            os._exit(3)  # MPICH's Abort may return before the launcher kills this process
        if t.rank == 0:
            print(f"ok {name} ({time.monotonic() - start:.2f} s)", flush=True)
    t.close()
    if t.rank == 0:
        print(f"OK {len(names)} checks on {t.size} PEs (mpi, rendezvous_threshold={threshold})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
