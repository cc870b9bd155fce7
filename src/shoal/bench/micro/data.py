"""What every PE sends and what it must hold afterwards, for every test.

The contents are patterns, not zeros: buffers that were never written are zero pages
that the kernel maps lazily, which makes large-message numbers look better than they
are, and a zero buffer cannot tell a lost message from a delivered one. Each block is
a function of (sender, receiver), so a block delivered to the wrong PE or in the wrong
place fails validation. Reductions use small whole numbers in float32, whose sums are
exact. Everything here is pure and shared by the Python targets; the C baseline
(``native/micro.c``) computes the same patterns.
"""

from __future__ import annotations

import numpy as np

from .catalog import Test

__all__ = ["POISON", "block", "fblock", "partner", "split", "payload", "expected", "compare"]

#: Receive buffers are filled with this byte before each message size.
POISON = 0xA5


def block(nbytes: int, src: int, dst: int) -> np.ndarray:
    """The bytes PE ``src`` sends to PE ``dst``: a period-251 pattern seeded by both."""
    seed = src * 31 + dst * 17 + 1
    return ((np.arange(nbytes, dtype=np.int64) * 7 + seed) % 251).astype(np.uint8)


def fblock(count: int, src: int) -> np.ndarray:
    """The float32 values PE ``src`` contributes to a reduction: small whole numbers."""
    return ((np.arange(count, dtype=np.int64) + 5 * src) % 13 + 1).astype(np.float32)


def partner(rank: int, n: int) -> int:
    """Point-to-point pairs: PE i < N/2 talks to PE i + N/2 (0 <-> 1 on two PEs)."""
    half = n // 2
    return rank + half if rank < half else rank - half


def split(count: int, n: int) -> list[int]:
    """Per-PE element counts of a reduce_scatter of ``count`` elements (remainder first)."""
    base, extra = divmod(count, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.uint8)


def payload(test: Test, size: int, rank: int, n: int) -> np.ndarray:
    """What ``rank`` sends in one operation of ``test`` with ``size``-byte messages.

    For scatter and alltoall this is the concatenation of the per-destination blocks;
    for reductions, the float32 array of ``size // 4`` elements.
    """
    name = test.name.rstrip("v") if test.vector else test.name
    if test.dtype == "float":
        return fblock(size // 4, rank)
    if name in ("latency", "multi_lat", "bw", "bibw"):
        return block(size, rank, partner(rank, n))
    if name in ("bcast", "gather", "allgather"):
        return block(size, rank, 0)
    if name == "scatter":
        return _concat([block(size, rank, d) for d in range(n)])
    if name == "alltoall":
        return _concat([block(size, rank, d) for d in range(n)])
    return np.empty(0, np.uint8)  # barrier


def expected(test: Test, size: int, rank: int, n: int, root: int = 0) -> np.ndarray | None:
    """What ``rank`` must hold after one operation, or None if it receives nothing."""
    name = test.name.rstrip("v") if test.vector else test.name
    if name in ("latency", "multi_lat", "bibw"):
        return block(size, partner(rank, n), rank)
    if name == "bw":
        return block(size, 0, 1) if rank == 1 else None
    if name == "bcast":
        return block(size, root, 0) if rank != root else None
    if name == "gather":
        return _concat([block(size, s, 0) for s in range(n)]) if rank == root else None
    if name == "allgather":
        return _concat([block(size, s, 0) for s in range(n)])
    if name == "scatter":
        return block(size, root, rank)
    if name == "alltoall":
        return _concat([block(size, s, rank) for s in range(n)])
    if name in ("allreduce", "reduce", "reduce_scatter"):
        count = size // 4
        total = np.sum([fblock(count, s) for s in range(n)], axis=0, dtype=np.float32).reshape(count)
        if name == "reduce":
            return total if rank == root else None
        if name == "reduce_scatter":
            counts = split(count, n)
            lo = sum(counts[:rank])
            return total[lo : lo + counts[rank]]
        return total
    return None  # barrier


def compare(got: np.ndarray, want: np.ndarray, where: str, corrupt: bool = False) -> str | None:
    """None if ``got`` holds exactly the bytes of ``want``; otherwise what differs, and where.

    ``corrupt`` flips one received byte first: the test suite uses it (through the
    hidden ``--corrupt-for-testing`` option) to prove that validation catches errors.
    """
    g = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
    w = np.ascontiguousarray(want).reshape(-1).view(np.uint8)
    if corrupt and g.size:
        g = g.copy()
        g[g.size // 2] ^= 0xFF
    if g.size != w.size:
        return f"{where}: received {g.size} bytes, expected {w.size}"
    bad = np.flatnonzero(g != w)
    if bad.size == 0:
        return None
    i = int(bad[0])
    return f"{where}: {bad.size} of {w.size} bytes differ, first at byte {i} (got {g[i]:#04x}, expected {w[i]:#04x})"
