"""N PEs in one process: deterministic mailboxes for unit tests and quick tries.

Every PE gets an :class:`InprocTransport` sharing one :class:`InprocHub`. A send
copies each segment once, as a network would: small ones into a private
``bytearray``, large ones into the buffer the receiving PE's allocator names. A
:class:`~shoal._transport.base.DeviceSegment` is handed over as it is.
"""

from __future__ import annotations

from collections import deque

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Sequence

from .base import Deliver, DeviceSegment, Transport

__all__ = ["InprocHub", "InprocTransport"]


class InprocHub:
    """The shared mailboxes of ``size`` in-process PEs."""

    def __init__(self, size: int, rendezvous_threshold: int = 256 * 1024):
        if size < 1:
            raise ValueError(f"an in-process job needs at least 1 PE, not {size}")
        self.size = size
        self.mailboxes: list[deque] = [deque() for _ in range(size)]
        self.transports = [InprocTransport(self, r, rendezvous_threshold) for r in range(size)]


class InprocTransport(Transport):
    name = "inproc"

    def __init__(self, hub: InprocHub, rank: int, rendezvous_threshold: int):
        self.hub = hub
        self.rank = rank
        self.local_rank = rank  # every PE is in this process
        self.size = hub.size
        self.rendezvous_threshold = rendezvous_threshold

    def send(self, dest: int, header: bytes, segments: Sequence[Any]) -> None:
        if not 0 <= dest < self.size:
            raise ValueError(f"PE {self.rank}: send to PE {dest}, but the job has {self.size} PEs")
        receiver = self.hub.transports[dest]
        copies: list = []
        for i, seg in enumerate(segments):
            if type(seg) is DeviceSegment:  # the sender's own copy: in this process, the receiver's
                copies.append(seg)
                continue
            view = memoryview(seg).cast("B")
            if view.nbytes >= self.rendezvous_threshold:
                target = receiver.allocator(header, i, view.nbytes)
                memoryview(target).cast("B")[:] = view
                copies.append(target)
            else:
                copies.append(bytes(view) if i == 0 else bytearray(view))
        self.hub.mailboxes[dest].append((header, copies))

    def poll(self, deliver: Deliver) -> int:
        box = self.hub.mailboxes[self.rank]
        n = 0
        while box:
            header, segments = box.popleft()
            deliver(header, segments)
            n += 1
        return n

    def barrier(self) -> None:
        """All in-process PEs are driven by one loop, so they are always in step."""

    def abort(self, code: int) -> None:
        """Every PE is in this process: ending the process ends the job."""
        raise SystemExit(code)
