"""SipHash-2-4, and Task Bench's deterministic "random" numbers built on it.

Task Bench draws every random choice — which neighbours a ``random_nearest`` task
depends on, how many iterations a ``load_imbalance`` task runs — from a hash of the
parameters of that choice, so every process (and every system under test) makes the
same choice without communicating. The hash is SipHash-2-4 with 64-bit output under
the key bytes ``1, 2, …, 15, 0``, over the raw bytes of an array of C ``long``s
(little-endian 64-bit integers here); the result scaled by 2^-64 is uniform in [0, 1).

This is the readable Python version, used to build graphs; the kernels use the same
function compiled (``kernels.c``), and the tests hold both to the published vectors.
"""

from __future__ import annotations

import struct
from typing import Iterable

__all__ = ["TASKBENCH_KEY", "siphash24", "random_uniform"]

#: the key Task Bench's ``gen_bits`` uses: the bytes 1..15 and a final 0
TASKBENCH_KEY = bytes([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0])

_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _rounds(v0: int, v1: int, v2: int, v3: int, n: int) -> tuple[int, int, int, int]:
    for _ in range(n):
        v0 = (v0 + v1) & _MASK
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & _MASK
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & _MASK
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & _MASK
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(data: bytes, key: bytes) -> int:
    """SipHash-2-4 (64-bit output) of ``data`` under the 16-byte ``key``, as an int."""
    if len(key) != 16:
        raise ValueError(f"SipHash needs a 16-byte key, got {len(key)} bytes")
    k0, k1 = struct.unpack("<QQ", key)
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573
    whole = len(data) - len(data) % 8
    for off in range(0, whole, 8):
        (m,) = struct.unpack_from("<Q", data, off)
        v3 ^= m
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    last = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= last
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
    v0 ^= last
    v2 ^= 0xFF
    v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


def random_uniform(values: Iterable[int]) -> float:
    """Task Bench's ``random_uniform`` of a sequence of C longs: a float in [0, 1)."""
    vals = list(values)
    data = struct.pack(f"<{len(vals)}q", *vals)
    return siphash24(data, TASKBENCH_KEY) * 2.0**-64
