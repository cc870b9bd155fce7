"""The machine layer: the interface every transport implements.

A transport moves *messages* between PEs. A message is an opaque header (bytes the
runtime encodes) plus a list of segments (the pickle stream and its out-of-band
buffers). The transport never looks inside either; it only decides how the bytes
travel: small messages in one eager frame, large segments by rendezvous straight
into memory the receiver names through its *allocator*.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence, TypeAlias

__all__ = ["Transport", "Allocator", "Deliver", "DeviceSegment", "default_allocator"]

#: ``allocator(header, segment_index, nbytes) -> writable buffer`` chooses where a
#: large incoming segment lands (a channel's posted array, or fresh memory).
Allocator: TypeAlias = "Callable[[bytes, int, int], Any]"

#: ``deliver(header, segments)`` is called once per message, in per-sender order.
Deliver: TypeAlias = "Callable[[bytes, list], None]"


def default_allocator(header: bytes, index: int, nbytes: int) -> bytearray:
    """Fresh memory for one incoming segment."""
    return bytearray(nbytes)


def no_device_allocator(header: bytes, index: int, nbytes: int) -> Any:
    """What a transport does with device memory arriving at a PE that cannot take it."""
    raise RuntimeError(f"a {nbytes}-byte segment in device memory arrived, but nothing here allocates device memory")


class DeviceSegment:
    """A segment in device memory that MPI moves itself (a CUDA-aware MPI: the ``mpi`` GPU
    path). ``memory`` is a flat uint8 device array mpi4py takes as a buffer (through
    ``__cuda_array_interface__`` or DLPack); nothing on the host reads its bytes. It
    always travels by rendezvous, and it is the sender's own copy: the transport holds
    it until sent, never waits for the receiver and never copies it."""

    __slots__ = ("memory", "nbytes")

    def __init__(self, memory: Any, nbytes: int):
        self.memory = memory
        self.nbytes = nbytes

    def __repr__(self) -> str:
        return f"DeviceSegment({self.nbytes} bytes)"


class Transport(ABC):
    """Point-to-point messaging between the PEs of one job.

    Contract (checked by ``tests/transport/test_transport_contract.py`` for every transport):
    messages from one sender to one receiver are delivered in send order; a segment
    arrives byte-identical; ``send`` returns once the caller may reuse its buffers;
    large segments land in the buffer the receiver's allocator returned; a small first
    segment (the pickle stream or array descriptor) arrives as ``bytes``, the others
    as writable memory. A :class:`DeviceSegment` arrives as a DeviceSegment of memory
    the receiver's ``device_allocator`` returned (MPI transport; in-process, as sent).
    """

    name: str = "abstract"
    rank: int
    size: int
    #: PEs of this job on this node (they share its cores).
    local_size: int = 1
    #: this PE's place among them (0 to local_size - 1): which GPU it takes by default.
    local_rank: int = 0
    #: CPUs this node's PEs may run on between them (the union of their affinity masks; a
    #: launcher that binds each PE to a core gives each one CPU of its own): fewer than
    #: ``local_size`` means PEs share cores, and an idle PE must not spin. 0: unknown.
    node_cpus: int = 0
    #: the node (0, 1, …) of each PE, in PE order, as MPI's shared-memory split groups them;
    #: None when every PE is on one node.
    node_of: Sequence[int] | None = None
    #: Segments at least this large travel by rendezvous instead of in the frame.
    rendezvous_threshold: int
    allocator: Allocator = staticmethod(default_allocator)  # type: ignore[assignment]
    #: where an incoming :class:`DeviceSegment` lands: a flat uint8 device array
    device_allocator: Allocator = staticmethod(no_device_allocator)  # type: ignore[assignment]
    #: ``receive_early(header) -> bool``: whether a message's large segments may be
    #: received before the messages ahead of it are delivered (their allocator call comes
    #: sooner; a receiver whose buffer is posted by what those messages run says no)
    receive_early: Callable[[bytes], bool] = staticmethod(lambda header: True)  # type: ignore[assignment]
    #: Optional shortcut ``send_eager(dest, header, segments) -> bool`` for a valid
    #: ``dest``: True if it sent the message, False if :meth:`send_after_eager` must.
    send_eager: Callable[[int, bytes, list], bool] | None = None

    @abstractmethod
    def send(self, dest: int, header: bytes, segments: Sequence[Any]) -> None:
        """Send one message; returns when ``segments`` may be modified again."""

    def send_after_eager(self, dest: int, header: bytes, segments: Sequence[Any]) -> None:
        """:meth:`send` a message that :attr:`send_eager` declined, without trying it again."""
        self.send(dest, header, segments)

    @abstractmethod
    def poll(self, deliver: Deliver) -> int:
        """Deliver every message that has fully arrived; return how many."""

    def wait(self, deliver: Deliver, seconds: float) -> int:
        """:meth:`poll`, but a transport that can may wait up to ``seconds`` for a message
        (an idle PE that has its core to itself); the default does not wait."""
        return self.poll(deliver)

    def serve(
        self, deliver: Deliver, seconds: float, quiet: tuple, done: Callable[[], bool] | None, timers: list,
    ) -> tuple[int, float, float] | None:
        """:meth:`wait` again and again without returning between messages, while each comes
        within ``seconds`` of the last, every container in ``quiet`` stays empty, ``done()``
        is false (None: not asked) and the first of ``timers`` (``(when, ...)`` on ``time.monotonic``'s clock)
        is not due: ``(messages, seconds idle before them, when the last wait began if it
        ended with none, else 0.0)``. None: not offered here, the caller waits instead."""
        return None

    def in_flight(self) -> bool:
        """Whether a transfer under way needs this PE to keep polling (a large message
        coming in or going out by rendezvous); the default: never."""
        return False

    def compiled(self) -> tuple[Any, Any] | None:
        """``(module, frames)``: shoal's compiled module and this transport's compiled
        frames, to which a runtime may attach its compiled per-message paths (their hook
        takes received frames first); None if this transport has none."""
        return None

    def trace_messages(self, on: bool) -> bool:
        """Number the messages sent and delivered for a full timeline's arrows (see
        ``_runtime/trace_messages.py``); False (the default): this transport cannot."""
        return False

    def trace_events(self) -> tuple[list, list]:
        """The messages sent and delivered since the last call, each ``(ticks, PE, bytes,
        number)`` (see :meth:`trace_messages`)."""
        return [], []

    @abstractmethod
    def barrier(self) -> None:
        """Block until every PE reached the barrier (start-up and shut-down only)."""

    @abstractmethod
    def abort(self, code: int) -> None:
        """End the whole job at once with exit code ``code``."""

    def close(self) -> None:
        """Release resources; called once at normal shut-down."""
