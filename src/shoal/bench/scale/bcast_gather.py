"""The mpi4py program of ``shoal bench scale broadcast``: what a ``ret=True`` broadcast
does, in MPI calls: ``Bcast`` of 8 bytes from rank 0, then ``Gather`` of 8 bytes from
every rank to it; prints the best of 5 repeats in µs per pair, on rank 0."""

from __future__ import annotations

import sys
import timeit

import numpy as np
from mpi4py import MPI


def main() -> None:
    calls = int(sys.argv[1])
    comm = MPI.COMM_WORLD
    send = np.zeros(1)
    recv = np.empty(comm.size)

    def once() -> None:
        comm.Bcast(send, 0)
        comm.Gather(send, recv, 0)

    for _ in range(max(calls // 10, 100)):
        once()
    best = min(timeit.repeat(once, number=calls, repeat=5))
    if comm.rank == 0:
        print(f"us_per_call {best / calls * 1e6:.4f}")


main()
