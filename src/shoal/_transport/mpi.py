"""The distributed transport over mpi4py: eager frames plus zero-copy rendezvous.

Every MPI call of shoal lives in this module. Wire protocol, on a private duplicate
of ``COMM_WORLD``:

* a *frame* (tag ``FRAME``): ``<HH`` header length and segment count, one ``<Q`` per
  segment (``nbytes << 2``, plus ``_BULK`` for a segment sent by rendezvous and
  ``_DEVICE`` for one in device memory), the header, then the inline segments. Frames
  and clear-to-send answers come by a standing ``ANY_SOURCE`` receive on one node, and
  by matched probe across nodes, where MPICH's ch4:ucx netmod can lose messages for an
  any-source receive (``Settings.receive``);
* each *bulk* segment follows as its own message on a second duplicate communicator,
  sent straight from the caller's buffer once the receiver, having posted its receives,
  answers clear-to-send (:mod:`.rendezvous`: a receiver that is busy computing makes the
  sender copy, not wait). MPI never reorders messages with the same source, tag and
  communicator, so the receiver posts its bulk receives in the order frames arrive and
  each one matches the right data, with no tag bookkeeping. A segment in device memory
  (:class:`~.base.DeviceSegment`, the CUDA-aware ``mpi`` GPU path) moves the same way,
  from the sender's device copy into device memory the receiver's ``device_allocator``
  names.
"""

from __future__ import annotations

import os
import struct
import time
from array import array
from collections import deque

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

from mpi4py import MPI

from .base import Deliver, DeviceSegment, Transport
from .mpi_library import abort_world, check_launcher, finished, native_module, reuse_heap
from . import shared_copy as _shared
from .rendezvous import BULK_TAG as _BULK_TAG, BulkSender

__all__ = ["MPITransport"]

_PREFIX = struct.Struct("<HH")
_SEG = struct.Struct("<Q")
_FRAME_TAG = 1
#: flags of a segment's length word, and where its length starts
_BULK = 1
_DEVICE = 2
_SHIFT = 2


#: messages of one source whose bulk receives are posted (and cleared to send) at a time;
#: the rest wait unposted, so a window of lent sends (shoal.lend) does not make its
#: receiver allocate the whole window's memory at once. The next is posted as soon as
#: the last has arrived, before it is delivered, so the next transfer's handshake
#: overlaps the delivery; a message the runtime wants received late (a channel's, whose
#: posted buffer comes with the next ``recv``: ``Transport.receive_early``) is posted once
#: the last has been delivered. One at a time measured best: with 2 or more, MPICH's
#: transfers here shared the memory bus and the window's bandwidth fell (4 MiB: 0.53x →
#: 0.39x mpi4py).
RECEIVE_DEPTH = 1


def _node_cpus(node: MPI.Comm) -> int:
    """The CPUs the processes of node communicator ``node`` may run on, between them
    (collective over ``node``): Open MPI binds each process to a core of its own, where
    this process's own mask would suggest one core for the whole node."""
    if not hasattr(os, "sched_getaffinity"):
        return os.cpu_count() or 1
    words = (os.sysconf("SC_NPROCESSORS_CONF") or 1) // 64 + 1  # the same on every PE of a node
    mask, union = array("Q", bytes(8 * words)), array("Q", bytes(8 * words))
    for cpu in os.sched_getaffinity(0):
        if cpu // 64 < words:
            mask[cpu // 64] |= 1 << (cpu % 64)
    wait_for_all([node.Iallreduce(mask, union, op=MPI.BOR)])
    return sum(word.bit_count() for word in union)


def wait_for_all(requests: list) -> None:
    """Complete MPI ``requests`` napping between tests, as every wait of start-up does: a
    blocking collective spins, and 16 PEs spinning on 2 cores in one start-up took 17 ms
    of CPU each (more than their imports)."""
    _wait_patiently(lambda: MPI.Request.Testall(requests), oversubscribed=True)


def _wait_patiently(done: Callable[[], bool], oversubscribed: bool) -> None:
    """Poll ``done()`` until it says True: for a millisecond, then (at once where the node
    has more PEs than CPUs) napping between polls, 20 µs doubling to 1 ms. The waits of
    start-up and of the job's end need no microsecond answer, and 16 PEs spinning on 2
    cores kept the PEs still on their way from the CPU (``shoal bench scale startup -n 16``
    under MPICH: 1.80x a bare mpi4py launch before, 1.54x after)."""
    if done():
        return
    spin_until = 0.0 if oversubscribed else time.monotonic() + 1e-3
    nap = 1e-5
    while not done():
        if time.monotonic() >= spin_until:
            nap = min(nap * 2, 1e-3)
            time.sleep(nap)


def _say_python_path(pe: int) -> None:
    """One line per node whose PEs could not load the compiled path: the job goes on, on
    the Python path (the same results, slower), and the user learns why and where."""
    import socket
    import sys

    from ..native import native_status

    why = " ".join(native_status().split())  # one line: a compiler's message may span several
    sys.stderr.write(f"shoal: PE {pe} (host {socket.gethostname()}): the compiled per-message path is unavailable, so "
                     f"this node's PEs run the Python path (the same results, slower): {why}. "
                     "Fix: `shoal info` on this host says why; set MPICC to the MPI's compiler wrapper, or "
                     "SHOAL_NATIVE=0 to choose the Python path\n")  # one write: lines of PEs do not interleave
    sys.stderr.flush()


def _node_numbers(world: MPI.Comm, node: MPI.Comm) -> array:
    """The node of each PE, numbered 0, 1, … in the order of their first PEs (collective
    over ``world``: one all-gather of an int per PE)."""
    first = array("i", [world.Get_rank()])
    wait_for_all([node.Ibcast([first, MPI.INT])])
    firsts = array("i", bytes(4 * world.Get_size()))
    wait_for_all([world.Iallgather([first, MPI.INT], [firsts, MPI.INT])])
    number = {pe: n for n, pe in enumerate(sorted(set(firsts)))}
    return array("i", [number[pe] for pe in firsts])


class _Incoming:
    """A message whose frame arrived but whose bulk segments are still moving."""

    __slots__ = ("header", "segments", "bulk", "requests", "shared", "cause")

    def __init__(self, header: bytes, segments: list, bulk: list, cause: int = 0):
        self.header = header
        #: a full timeline's number of its frame (``_native/frames_trace.c``), 0 untraced
        self.cause = cause
        self.segments = segments  # the bulk ones are None until posted
        self.bulk = bulk  # (segment index, bytes, in device memory) of each bulk segment
        self.requests: list | None = [] if not bulk else None  # None: not posted yet
        #: copied by both processes (shared_copy.py): (go message, wrote request, targets'
        #: addresses) until the sender's go arrives and this PE has read its parts
        self.shared: tuple | None = None


class MPITransport(Transport):
    name = "mpi"

    def __init__(
        self, rendezvous_threshold: int = 256 * 1024, frame_capacity: int = 256 * 1024, native: bool = True,
        heap_reuse: int = 32 << 20, shared_copy: int = 1 << 20, receive: str = "auto",
    ):
        if heap_reuse > 0:
            reuse_heap(heap_reuse)
        world = MPI.COMM_WORLD
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        check_launcher(self.rank, self.size)
        node = world.Split_type(MPI.COMM_TYPE_SHARED)
        self.local_size = node.Get_size()
        self.local_rank = node.Get_rank()
        self.node_cpus = _node_cpus(node)
        #: more PEs than CPUs on this node: waits nap at once instead of spinning first
        self.oversubscribed = self.local_size > self.node_cpus
        if self.local_size < self.size:
            self.node_of = _node_numbers(world, node)
        self._frames, self._bulk, self._user = world.Dup(), world.Dup(), world.Dup()
        #: frames and clear-to-send answers are received by matched probe (see :data:`Settings.receive`)
        self.probe = receive == "probe" or (receive == "auto" and self.local_size < self.size)
        #: messages of at least this many rendezvous bytes from a PE of this node are copied
        #: by both processes (shared_copy.py); 0: by MPI alone
        self.shared_copy = 0
        self._node: frozenset = frozenset()  # the world ranks of this node's PEs, when it shares
        if self.local_size > 1 and _shared.available(node, wait_for_all) and shared_copy > 0:  # (collective on every PE)
            self.shared_copy = shared_copy
            mine, everyone = node.Get_group(), world.Get_group()
            self._node = frozenset(MPI.Group.Translate_ranks(mine, range(self.local_size), everyone))
            mine.Free()
            everyone.Free()
        self._pid = os.getpid()
        node.Free()
        self.rendezvous_threshold = rendezvous_threshold
        self.frame_capacity = max(frame_capacity, rendezvous_threshold + 4096)
        # The compiled per-message path (shoal/_native) when it builds; this
        # module's Python code is the reference and the fallback.
        self._module = native_module() if native else None
        if native and self._module is None and self.local_rank == 0:
            _say_python_path(self.rank)
        self._native = (
            self._module.Frames(self._frames, self.frame_capacity, rendezvous_threshold, self.probe)
            if self._module else None
        )
        #: ``send_eager(dest, header, segments) -> bool``: the compiled send of an eager-only
        #: message (False: not eager-only, use :meth:`send`); None without the compiled path.
        self.send_eager = self._native.send if self._native is not None else None
        self._status = MPI.Status()
        if self._native is None and not self.probe:
            self._buf = bytearray(self.frame_capacity)
            self._recv = self._frames.Recv_init(self._buf, MPI.ANY_SOURCE, _FRAME_TAG)
            self._recv.Start()
        self._nothing = bytearray(0)
        self._sends: list = []  # (request, frame) pairs of eager sends in flight
        self._bulk_sender = BulkSender(self._bulk, self.probe)
        # the sender's queues themselves (changed in place), tested on every poll
        self._bulk_waiting, self._bulk_moving = self._bulk_sender.waiting, self._bulk_sender.moving
        self._arrived: deque = deque()  # complete messages not yet delivered: (header, segments, cause)
        #: a full timeline numbers frames (trace_messages): a queued one keeps its number
        self._tracing = False
        self._stalled: dict[int, deque] = {}  # source -> messages waiting on bulk data
        self._repost: list[int] = []  # sources whose next bulk receives may be posted
        #: what the Python side has to do once it is not empty: the compiled serve() returns then
        self._python_work = (self._arrived, self._stalled, self._sends, self._bulk_waiting, self._bulk_moving,
                             self._repost)

    @classmethod
    def from_settings(cls, settings: Any) -> "MPITransport":
        """The transport a job with :class:`shoal.settings.Settings` ``settings`` uses."""
        return cls(
            settings.rendezvous_threshold, settings.frame_capacity, native=bool(settings.native),
            heap_reuse=settings.heap_reuse, shared_copy=settings.shared_copy, receive=settings.receive,
        )

    def trace_messages(self, on: bool) -> bool:
        """Number each frame sent and delivered, for a full timeline's message arrows
        (``_native/frames_trace.c``); False where the compiled frames are not in use."""
        native = self._native
        if native is None:
            return False
        native.trace_on(self.size if on else 0)
        self._tracing = on
        return on

    def trace_events(self) -> tuple[list, list]:
        """The frames sent and delivered since the last call (see :meth:`trace_messages`)."""
        return self._native.trace_take() if self._native is not None else ([], [])

    # -- sending -----------------------------------------------------------------
    def send(self, dest: int, header: bytes, segments: Sequence[Any]) -> None:
        if not 0 <= dest < self.size:
            raise ValueError(f"PE {self.rank}: send to PE {dest}, but the job has {self.size} PEs")
        native = self._native
        if native is not None and type(segments) is list and native.send(dest, header, segments):
            return
        self.send_after_eager(dest, header, segments)

    def send_after_eager(self, dest: int, header: bytes, segments: Sequence[Any]) -> None:
        """Frame a message with large or device segments (or any, without the compiled
        path) and send it: the eager part in a frame, the rest by rendezvous."""
        if not 0 <= dest < self.size:
            raise ValueError(f"PE {self.rank}: send to PE {dest}, but the job has {self.size} PEs")
        views = [s if isinstance(s, (bytes, DeviceSegment)) else memoryview(s).cast("B") for s in segments]
        room = self.frame_capacity - _PREFIX.size - len(header) - _SEG.size * len(views)
        lengths = []
        inline: list = []
        bulk: list = []
        for v in views:
            n = len(v) if isinstance(v, bytes) else v.nbytes
            if type(v) is DeviceSegment:
                lengths.append(n << _SHIFT | _DEVICE | _BULK)
                bulk.append(v)
            elif n >= self.rendezvous_threshold or n > room:
                lengths.append(n << _SHIFT | _BULK)
                bulk.append(v)
            else:
                lengths.append(n << _SHIFT)
                inline.append(v)
                room -= n
        frame = b"".join(
            [_PREFIX.pack(len(header), len(views)), struct.pack(f"<{len(views)}Q", *lengths), header, *inline]
        )
        if self._tracing:  # numbered as the compiled frames are (frames_trace.c), before it leaves
            self._native.trace_send(  # type: ignore[union-attr]  # (tracing: the compiled frames)
                dest, len(header) + sum(w >> _SHIFT for w in lengths))
        req = self._frames.Isend(frame, dest, _FRAME_TAG)
        if not req.Test():  # small frames usually complete at once (eager protocol)
            self._sends.append((req, frame))
        if bulk:
            # Value semantics: the caller may reuse its arrays once send() returns, so
            # wait here for the receiver (or copy, if it is busy), receiving (not
            # delivering) meanwhile so two PEs sending large messages to each other
            # cannot deadlock.
            self._bulk_sender.send(dest, bulk, self._progress)

    # -- receiving ---------------------------------------------------------------
    def _progress(self) -> None:
        """Receive (never deliver) while a send waits: frames in, and the parts of shared
        copies this PE reads (a peer's send may wait for them while this one waits too)."""
        self._receive_frames()
        if self._stalled:
            self._advance_stalled()

    def _receive_frames(self) -> None:
        """Take in every frame that arrived, queueing (never delivering) messages."""
        if self._native is not None:
            self._native.poll(None, self._unpack, self._stalled, self._arrived)
            return
        status = self._status
        if self.probe:
            comm, probe = self._frames, MPI.Message.iprobe
            while (message := probe(comm, MPI.ANY_SOURCE, _FRAME_TAG, status)) is not None:
                frame = bytearray(status.Get_count(MPI.BYTE))
                message.Recv(frame)
                self._unpack(status.Get_source(), frame)
            return
        req = self._recv
        while req.Test(status):
            frame = bytearray(memoryview(self._buf)[: status.Get_count(MPI.BYTE)])
            req.Start()
            self._unpack(status.Get_source(), frame)

    def _unpack(self, src: int, frame: bytearray) -> None:
        hlen, nseg = _PREFIX.unpack_from(frame, 0)
        off = _PREFIX.size
        lengths = struct.unpack_from(f"<{nseg}Q", frame, off)
        off += _SEG.size * nseg
        header = bytes(frame[off : off + hlen])
        off += hlen
        mv = memoryview(frame)
        segments: list = []
        bulk = []
        for i, word in enumerate(lengths):
            n = word >> _SHIFT
            if word & _BULK:
                bulk.append((i, n, word & _DEVICE))
                segments.append(None)
            else:
                segments.append(bytes(mv[off : off + n]) if i == 0 else mv[off : off + n])
                off += n
        cause = self._native.trace_cause() if self._tracing else 0  # type: ignore[union-attr]  # its number
        queue = self._stalled.get(src)
        if bulk or queue:
            if queue is None:
                queue = self._stalled[src] = deque()
            queue.append(_Incoming(header, segments, bulk, cause))
            if bulk:
                self._post_next(src, queue)
        else:
            self._arrived.append((header, segments, cause))

    def _post_next(self, src: int, queue: deque, early: bool = False) -> None:
        """Post the bulk receives of ``src``'s next messages, in order, while fewer than
        :data:`RECEIVE_DEPTH` are posted, and clear each one's sender to send; ``early``
        (messages ahead are not delivered yet): only those :attr:`receive_early` allows."""
        posted = 0
        for msg in queue:
            if msg.requests is None:
                if posted >= RECEIVE_DEPTH or (early and not self.receive_early(msg.header)):
                    return
                if self._shares(src, msg.bulk):
                    self._post_shared(src, msg)
                else:
                    requests = msg.requests = []
                    for i, n, device in msg.bulk:
                        if device:
                            target = self.device_allocator(msg.header, i, n)
                            msg.segments[i] = DeviceSegment(target, n)
                        else:
                            target = msg.segments[i] = self.allocator(msg.header, i, n)
                        requests.append(self._bulk.Irecv(target, src, _BULK_TAG))
                    self._bulk_sender.clear(src)
            if msg.requests:
                posted += 1
                if posted >= RECEIVE_DEPTH:
                    return

    def _shares(self, src: int, bulk: list) -> bool:
        """Whether a message's rendezvous segments are copied by both processes."""
        if src not in self._node or len(bulk) > _shared.MAX_SEGMENTS:
            return False
        total = 0
        for _, n, device in bulk:
            if device:
                return False
            total += n
        return total >= self.shared_copy

    def _post_shared(self, src: int, msg: _Incoming) -> None:
        """Name the memory ``src``'s message lands in: the sender writes its parts there."""
        targets = []
        for i, n, _ in msg.bulk:
            target = msg.segments[i] = self.allocator(msg.header, i, n)
            targets.append(_shared.address(target))
        go = bytearray(_shared.MAX_ANSWER)
        msg.requests = [self._bulk.Irecv(go, src, _shared.GO_TAG)]
        msg.shared = (go, self._bulk.Irecv(self._nothing, src, _shared.WROTE_TAG), targets)
        self._bulk_sender.clear(src, _shared.pack(self._pid, targets))

    def _read_shared(self, src: int, msg: _Incoming) -> None:
        """The sender's go arrived: read this PE's parts, free the sender's memory."""
        go, wrote, targets = msg.shared  # type: ignore[misc]
        msg.shared = None
        pid, sources = _shared.unpack(go, 8 * (len(targets) + 1))
        for (_, n, _), target, source in zip(msg.bulk, targets, sources):
            part = _shared.split(n)
            _shared.read(pid, target + part, source + part, n - part)
        self._bulk.Send(self._nothing, src, _shared.READ_TAG)
        msg.requests = [wrote]

    def _advance_stalled(self) -> None:
        done = []
        for src, queue in self._stalled.items():
            popped = False
            while queue:
                head = queue[0]
                requests = head.requests
                if requests is None or (requests and not MPI.Request.Testall(requests)):
                    break
                if head.shared is not None:
                    self._read_shared(src, head)
                    continue
                msg = queue.popleft()
                self._arrived.append((msg.header, msg.segments, msg.cause))
                popped = True
            if not queue:
                done.append(src)
            elif popped:
                self._repost.append(src)  # its next may be posted (see RECEIVE_DEPTH)
        for src in done:
            del self._stalled[src]

    def _post_stalled(self, early: bool = False) -> None:
        for src in self._repost:
            queue = self._stalled.get(src)
            if queue:
                self._post_next(src, queue, early)
        if not early:
            self._repost.clear()

    def in_flight(self) -> bool:
        native = self._native
        return bool(self._stalled or self._sends or self._bulk_sender.busy() or (native is not None and native.pending()))

    def compiled(self) -> tuple[Any, Any] | None:
        return (self._module, self._native) if self._native is not None else None

    def poll(self, deliver: Deliver) -> int:
        native = self._native
        if native is not None and not (self._arrived or self._stalled or self._sends or self._bulk_waiting
                                       or self._bulk_moving or self._repost):
            # nothing waits in Python (the common case): the compiled receive alone
            n = native.wait(deliver, self._unpack, self._stalled, self._arrived, 0.0)
            if not (self._stalled or self._arrived):
                return n
            return n + self.wait(deliver, 0.0)
        return self.wait(deliver, 0.0)

    def wait(self, deliver: Deliver, seconds: float) -> int:
        native = self._native
        if native is not None:
            n = self._deliver_arrived(deliver) if self._arrived else 0
            if n or self._stalled or self._sends or self._bulk_waiting or self._bulk_moving:
                seconds = 0.0  # Python-side work to do: no spinning in C
            n += native.wait(deliver, self._unpack, self._stalled, self._arrived, seconds)
        else:
            n = 0
            self._receive_frames()
        if self._stalled:
            self._advance_stalled()
        if self._sends:
            self._complete_sends()
        if self._bulk_waiting or self._bulk_moving:
            self._bulk_sender.advance()
        if self._arrived:
            if self._repost:
                self._post_stalled(early=True)
            n += self._deliver_arrived(deliver)
        if self._repost:
            self._post_stalled()
        return n

    def serve(
        self, deliver: Deliver, seconds: float, quiet: tuple, done: Callable[[], bool] | None, timers: list,
    ) -> tuple[int, float, float] | None:
        native = self._native
        if native is None or any(self._python_work):
            return None
        served = native.serve(deliver, self._unpack, self._stalled, self._arrived, seconds,
                              quiet + self._python_work, done, timers)
        if any(self._python_work):
            return served[0] + self.wait(deliver, 0.0), served[1], 0.0  # the Python side's part, as wait() does it
        return served

    def _deliver_arrived(self, deliver: Deliver) -> int:
        arrived = self._arrived
        n = 0
        while arrived:
            header, segments, cause = arrived.popleft()
            if cause:  # a full timeline: delivered now, the cause of what it runs
                native: Any = self._native
                before = native.trace_deliver(cause, 0)
                try:
                    deliver(header, segments)
                finally:
                    native.trace_restore(before)
            else:
                deliver(header, segments)
            n += 1
        return n

    # -- job control -------------------------------------------------------------
    def _complete_sends(self) -> None:
        self._sends[:] = [(r, f) for r, f in self._sends if not r.Test()]  # in place: serve() watches this list

    def flush(self) -> None:
        """Complete every send in flight (receiving meanwhile)."""
        native = self._native
        while self._sends or self._bulk_sender.busy() or (native is not None and native.pending()):
            self._complete_sends()
            self._bulk_sender.advance()
            self._progress()

    def barrier(self) -> None:
        """Wait until every PE is here, receiving meanwhile (:func:`_wait_patiently`)."""
        self.flush()
        req, progress = self._frames.Ibarrier(), self._progress

        def arrived() -> bool:
            progress()
            return req.Test()

        _wait_patiently(arrived, self.oversubscribed)

    def abort(self, code: int) -> None:
        abort_world(code)

    def close(self) -> None:
        self.barrier()
        finished.append(True)
        if self._native is not None:
            self._native.close()
        elif not self.probe:
            self._recv.Cancel()
            self._recv.Wait()
            self._recv.Free()
        self._bulk_sender.close()
        for comm in (self._frames, self._bulk, self._user):
            comm.Free()

    def user_comm(self, patience: float = 5.0) -> MPI.Comm:
        """A private duplicate of ``COMM_WORLD`` for the program's own MPI calls, whose
        collectives report a wait longer than ``patience`` seconds (:mod:`.user_comm`)."""
        from .user_comm import WatchedComm

        return WatchedComm(self._user, self.rank, patience)
