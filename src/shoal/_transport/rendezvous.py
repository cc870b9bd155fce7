"""Bulk segments by rendezvous, without letting a busy receiver stall the sender.

A large segment moves only once its receiver has posted where it lands, which the
receiver does when it next polls. Sending it at once would tie the sender to the
receiver's pace: with MPI owning the caller's buffer, ``send`` could not return (it
promises the caller may reuse its buffers) until the receiver polled, and a receiver
computing for 100 ms stalled its sender for as long.

So the protocol is receiver-driven. The frame is the request to send; the receiver,
on unpacking it, posts its receives and answers *clear to send* (an empty message on
:data:`CTS_TAG`); the sender then hands the caller's buffer to MPI. A sender waits for
that answer only as long as copying the segment would take (the ski-rental rule: at
most twice the better choice's cost); past that it copies the segment, returns, and
sends the copy when the answer comes, from its poll loop. MPI keeps per-source,
per-tag order, so answers arrive in the order of the frames and need no numbering.

Segments of arrays the program lent (``shoal.lend``: it promises not to write them
until the loan is returned) are not waited for at all: they go as the answer comes,
like the copies, and the loan is returned when they have gone. Segments in device
memory (:class:`~.base.DeviceSegment`) are the sender's own copies already: they are
not waited for either, and never copied to the host.

A clear-to-send that names the receiver's memory (a PE of the same node: see
:mod:`.shared_copy`) makes the sender copy its part of the segments there itself; the
segments are sent once the receiver says it has read the rest.
"""

from __future__ import annotations

import os
from collections import deque
from time import perf_counter

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

from mpi4py import MPI

from . import shared_copy
from .base import DeviceSegment

__all__ = ["BULK_TAG", "CTS_TAG", "LENT", "BulkSender", "stall_budget"]

BULK_TAG = 2
CTS_TAG = 3
#: bytes per second a PE copies memory at, for the budget (a low estimate: the budget errs
#: towards waiting, which costs nothing when the receiver is polling)
COPY_RATE = 4e9
#: the least a sender waits for the answer, seconds: a polling receiver answers in a few µs
MIN_WAIT = 20e-6
#: ids of the lent arrays that messages carry (``_runtime/loans.py`` keeps it): their
#: segments are sent without the sender waiting
LENT: set[int] = set()


def stall_budget(nbytes: int) -> float:
    """Seconds a sender waits for clear-to-send before copying ``nbytes`` instead."""
    return max(MIN_WAIT, nbytes / COPY_RATE)


class _Outgoing:
    """A message's bulk segments, from its frame until MPI has sent them."""

    __slots__ = ("views", "requests", "detached")

    def __init__(self, views: list):
        self.views = views
        self.requests: list | None = None  # posted once the receiver said clear to send
        self.detached = False  # the sender went on: the views are copies, or lent


class BulkSender:
    """One PE's side of the protocol: its segments waiting to be cleared or sent, the
    clear-to-send answers it receives (from any source) and those it gives."""

    def __init__(self, comm: MPI.Comm, probe: bool = False):
        self.comm = comm
        self.waiting: dict[int, deque[_Outgoing]] = {}  # destination -> uncleared, in frame order
        self.moving: list[_Outgoing] = []  # copies and loans cleared, in MPI's hands (changed in place)
        self._answer = bytearray(shared_copy.MAX_ANSWER)
        self._status = MPI.Status()
        #: answers by matched probe (across nodes), else by a standing any-source receive
        self._cts = None if probe else comm.Recv_init(self._answer, MPI.ANY_SOURCE, CTS_TAG)
        if self._cts is not None:
            self._cts.Start()
        self._empty = bytearray(0)
        self._pid = os.getpid()

    def busy(self) -> bool:
        """Whether segments still wait to be cleared or are moving (the PE must keep polling)."""
        return bool(self.waiting or self.moving)

    def clear(self, src: int, shared: bytes = b"") -> None:
        """Tell PE ``src`` its next message's receives are posted (the receiver's side);
        ``shared``: where its segments land, for the sender to write its part there."""
        self.comm.Send(shared or self._empty, src, CTS_TAG)

    def send(self, dest: int, views: list, progress: Any) -> None:
        """Send ``views`` to ``dest`` once cleared, calling ``progress()`` while waiting;
        returns when the caller may reuse them: sent, or copied past the budget, or at
        once if they are all lent."""
        out = _Outgoing(views)
        queue = self.waiting.get(dest)
        if queue is None:
            queue = self.waiting[dest] = deque()
        queue.append(out)
        if all(type(v) is DeviceSegment or id(getattr(v, "obj", None)) in LENT for v in views):
            out.detached = True
            return
        host = sum(len(v) for v in views if type(v) is not DeviceSegment)  # device copies never need copying
        deadline = perf_counter() + stall_budget(host)
        while True:
            progress()
            self.take_answers()
            if out.requests is not None:
                if MPI.Request.Testall(out.requests):
                    return
                continue  # the receiver has posted: the transfer is under way
            if perf_counter() > deadline:
                out.views = [v if type(v) is DeviceSegment else bytearray(v) for v in views]  # busy: copy, return
                out.detached = True
                return

    def take_answers(self) -> None:
        """Start the sends that clear-to-send answers arrived for."""
        while self._next_answer():
            status = self._status
            src = status.Get_source()
            count = status.Get_count(MPI.BYTE)
            shared = shared_copy.unpack(self._answer, count) if count else None
            if self._cts is not None:
                self._cts.Start()
            queue = self.waiting[src]
            out = queue.popleft()
            if not queue:
                del self.waiting[src]
            if shared is not None:
                self._write_shared(out, src, *shared)
            else:
                out.requests = [
                    self.comm.Isend(v.memory if type(v) is DeviceSegment else v, src, BULK_TAG) for v in out.views
                ]
            if out.detached:
                self.moving.append(out)

    def _next_answer(self) -> bool:
        """Whether a clear-to-send answer came: then it is in ``_answer``, its source and
        size in ``_status``."""
        if self._cts is not None:
            return self._cts.Test(self._status)
        answer = MPI.Message.iprobe(self.comm, MPI.ANY_SOURCE, CTS_TAG, self._status)
        if answer is None:
            return False
        answer.Recv(self._answer)
        return True

    def _write_shared(self, out: _Outgoing, dest: int, pid: int, targets: tuple) -> None:
        """Copy the sender's part of each segment into the receiver's memory; the
        segments are sent once the receiver has read the rest (its ``READ``)."""
        comm, sources = self.comm, [shared_copy.address(v) for v in out.views]
        out.requests = [comm.Irecv(self._empty, dest, shared_copy.READ_TAG)]
        comm.Send(shared_copy.pack(self._pid, sources), dest, shared_copy.GO_TAG)
        for view, source, target in zip(out.views, sources, targets):
            shared_copy.write(pid, source, target, shared_copy.split(len(view)))
        comm.Send(self._empty, dest, shared_copy.WROTE_TAG)

    def advance(self) -> None:
        """Answers in, copies and loans sent: called from the poll loop while :meth:`busy`."""
        if self.waiting:
            self.take_answers()
        if self.moving:
            self.moving[:] = [o for o in self.moving if not MPI.Request.Testall(o.requests or [])]

    def close(self) -> None:
        """Cancel the standing receive, if any (every segment has been sent by now)."""
        if self._cts is not None:
            self._cts.Cancel()
            self._cts.Wait()
            self._cts.Free()
