"""Large messages between PEs of one node, copied by both processes at once.

MPI moves a large message within a node with one copy made by one process (MPICH: the
receiver reads the sender's memory through Linux cross-memory attach). A shoal sender
waits meanwhile anyway (a send returns once the caller may reuse its arrays), so here it
copies too: the receiver's clear-to-send names the memory its segments land in, the
sender writes the first part of each segment there (``process_vm_writev``) while the
receiver reads the rest from the sender (``process_vm_readv``). Two cores copy at once.

The protocol, on the rendezvous communicator (MPI keeps per-source, per-tag order):

* receiver → sender, ``CTS_TAG``: its pid and the address of each segment's memory
  (an empty clear-to-send means: send by MPI);
* sender → receiver, ``GO_TAG``: its pid and the address of each segment it sends from
  (its caller's arrays, or its copies of them); it writes its parts, then sends
  ``WROTE_TAG``;
* the receiver reads its parts on ``GO``, answers ``READ_TAG`` (the sender's arrays are
  free again), and has the message once ``WROTE`` arrives too.

Whether the processes of a node may read each other's memory (same user, ptrace allowed)
is tested once, when the transport starts; ``SHOAL_SHARED_COPY=0`` turns this off.
"""

from __future__ import annotations

import ctypes
import os
import struct
from array import array

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any, Callable

__all__ = ["GO_TAG", "WROTE_TAG", "READ_TAG", "MAX_SEGMENTS", "address", "pack", "unpack", "split",
           "read", "write", "available"]

GO_TAG = 4
WROTE_TAG = 5
READ_TAG = 6
#: messages with more rendezvous segments than this move by MPI
MAX_SEGMENTS = 8
#: the largest clear-to-send or go message: a pid and MAX_SEGMENTS addresses
MAX_ANSWER = 8 * (MAX_SEGMENTS + 1)

_WORDS = [struct.Struct(f"<{n + 1}Q") for n in range(MAX_SEGMENTS + 1)]
_PAGE = 4096


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc: Any = None


def _calls() -> Any:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("process_vm_readv", "process_vm_writev"):
            fn = getattr(libc, name)
            fn.restype = ctypes.c_ssize_t
            fn.argtypes = [ctypes.c_int, ctypes.POINTER(_IOVec), ctypes.c_ulong, ctypes.POINTER(_IOVec),
                           ctypes.c_ulong, ctypes.c_ulong]
        _libc = libc
    return _libc


def address(buf: Any) -> int:
    """The address of the first byte of contiguous buffer ``buf`` (read-only ones too)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(buf))
    except TypeError:  # read-only: NumPy reads its address without writing
        import numpy as np

        return np.frombuffer(buf, np.uint8).__array_interface__["data"][0]


def pack(pid: int, addresses: list[int]) -> bytes:
    """A clear-to-send or go message: ``pid`` and one address per segment."""
    return _WORDS[len(addresses)].pack(pid, *addresses)


def unpack(data: Any, nbytes: int) -> tuple[int, tuple]:
    """``(pid, addresses)`` of a message of ``nbytes`` bytes that :func:`pack` made."""
    words = _WORDS[nbytes // 8 - 1].unpack_from(data)
    return words[0], words[1:]


def split(nbytes: int) -> int:
    """How many leading bytes of a segment the sender writes (about half, in whole
    pages); the receiver reads the rest."""
    return (nbytes // 2) & ~(_PAGE - 1)


def _move(name: str, pid: int, local: int, remote: int, nbytes: int) -> None:
    fn = getattr(_calls(), name)
    done = 0
    while done < nbytes:  # the kernel may move less than asked at once
        here = _IOVec(local + done, nbytes - done)
        there = _IOVec(remote + done, nbytes - done)
        got = fn(pid, ctypes.byref(here), 1, ctypes.byref(there), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{name} of {nbytes - done} bytes with process {pid}: {os.strerror(err)} "
                               "(SHOAL_SHARED_COPY=0 lets MPI alone move large messages)")
        done += got


def read(pid: int, local: int, remote: int, nbytes: int) -> None:
    """Copy ``nbytes`` at ``remote`` in process ``pid`` to ``local`` in this one."""
    _move("process_vm_readv", pid, local, remote, nbytes)


def write(pid: int, local: int, remote: int, nbytes: int) -> None:
    """Copy ``nbytes`` at ``local`` in this process to ``remote`` in process ``pid``."""
    _move("process_vm_writev", pid, local, remote, nbytes)


def available(node: Any, wait_for_all: Callable[[list], None]) -> bool:
    """Whether every process of node communicator ``node`` can read its neighbour's
    memory (collective over ``node``: a ring exchange and an all-reduce, their requests
    completed by ``wait_for_all``)."""
    from mpi4py import MPI

    rank, size = node.Get_rank(), node.Get_size()
    probe = bytearray(struct.pack("<q", os.getpid()))
    mine, theirs = array("q", [os.getpid(), address(probe)]), array("q", [0, 0])
    wait_for_all([node.Isend(mine, dest=(rank - 1) % size), node.Irecv(theirs, source=(rank + 1) % size)])
    pid, where = theirs
    got = bytearray(8)
    try:
        read(pid, address(got), where, 8)
        ok = struct.unpack("<q", got)[0] == pid
    except (OSError, AttributeError):  # not permitted (ptrace), or not Linux
        ok = False
    verdict, everyone = array("i", [int(ok)]), array("i", [0])
    wait_for_all([node.Iallreduce(verdict, everyone, op=MPI.LAND)])
    return bool(everyone[0])
