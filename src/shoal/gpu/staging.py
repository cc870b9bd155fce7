"""Host staging of device bytes, pipelined in chunks through pinned bounce buffers.

Copies between device memory and ordinary (pageable) host memory run at a fraction of
the bus's speed and block the host. Staging therefore goes through a few page-locked
*bounce buffers* of ``chunk`` bytes: while the device copies chunk *i* into one, the host
copies chunk *i−1* out of another, so the two copies overlap (the pipelined staging of
MVAPICH2-GDR and UCX's ``cuda_copy``). Data no larger than one chunk is copied directly.
"""

from __future__ import annotations

from collections import deque

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    import numpy as np

from .ops import DeviceOps

__all__ = ["DEFAULT_CHUNK", "chunks", "Stager"]

#: bytes per pipelined chunk: large enough that a copy's fixed cost (~10 µs) is amortised,
#: small enough that a few MiB still overlap in several steps
DEFAULT_CHUNK = 1 << 20


def chunks(nbytes: int, chunk: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each chunk of ``nbytes`` bytes, in order; the last may be short."""
    if chunk <= 0:
        raise ValueError(f"a staging chunk must be at least 1 byte, not {chunk}")
    return [(off, min(chunk, nbytes - off)) for off in range(0, nbytes, chunk)]


class Stager:
    """One PE's bounce buffers and the two pipelined copies through them."""

    def __init__(self, ops: DeviceOps, chunk: int = DEFAULT_CHUNK, buffers: int = 2):
        if buffers < 1:
            raise ValueError("a stager needs at least one bounce buffer")
        self.ops = ops
        self.chunk = chunk
        self.count = buffers
        self._bounce: list[np.ndarray] = []  # allocated on first use: pinning costs milliseconds

    def _buffers(self) -> list[np.ndarray]:
        if not self._bounce:
            self._bounce = [self.ops.pinned(self.chunk) for _ in range(self.count)]
        return self._bounce

    def to_host(self, host: np.ndarray, src: Any) -> None:
        """Copy device bytes ``src`` into host bytes ``host``; returns when ``host`` holds them."""
        ops, n = self.ops, host.nbytes
        if n <= self.chunk:
            ops.to_host(host, src)
            ops.sync()
            return
        bounce = self._buffers()
        pending: deque[Any] = deque()
        for i, (off, size) in enumerate(chunks(n, self.chunk)):
            if len(pending) == self.count:  # this chunk's buffer still holds an earlier chunk
                self._drain(host, pending.popleft())
            buf = bounce[i % self.count]
            ops.to_host(buf[:size], src[off : off + size])
            pending.append((ops.record(), buf, off, size))
        while pending:
            self._drain(host, pending.popleft())

    def _drain(self, host: np.ndarray, item: tuple) -> None:
        event, buf, off, size = item
        self.ops.wait(event)
        host[off : off + size] = buf[:size]

    def from_host(self, dst: Any, host: np.ndarray) -> None:
        """Copy host bytes ``host`` into device bytes ``dst``; returns when ``dst`` holds them."""
        ops, n = self.ops, host.nbytes
        if n <= self.chunk:
            ops.from_host(dst, host)
            ops.sync()
            return
        bounce = self._buffers()
        pending: deque[Any] = deque()
        for i, (off, size) in enumerate(chunks(n, self.chunk)):
            if len(pending) == self.count:  # wait until the device has read this buffer
                ops.wait(pending.popleft())
            buf = bounce[i % self.count]
            buf[:size] = host[off : off + size]
            ops.from_host(dst[off : off + size], buf[:size])
            pending.append(ops.record())
        ops.sync()
