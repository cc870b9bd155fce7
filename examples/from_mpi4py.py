"""An mpi4py program moved to shoal: a 1-D heat equation split over ranks, halo cells
traded with the neighbours every step, a total by all-reduce and the pieces gathered on
rank 0, checked against NumPy. docs/howto/from-mpi4py.md shows the mpi4py original
beside it.

    shoal run -n 2 examples/from_mpi4py.py
    shoal run -n 2 --transport inproc examples/from_mpi4py.py

One ``Rank`` chare per PE (a ``shoal.Group``) plays the part of an MPI rank: its body is
the mpi4py loop, with ``comm.Sendrecv`` turned into a channel send and an awaited
receive into the same halo cell, and ``comm.allreduce`` into ``self.allreduce``. The
main program (PE 0) does what ``if rank == 0`` did.
"""

import numpy as np

import shoal

CELLS, STEPS, ALPHA = 50, 100, 0.25


def initial(total):
    x = np.linspace(0.0, 1.0, total, endpoint=False)
    return np.sin(2 * np.pi * x) + (x > 0.5)


class Rank(shoal.Chare):
    def __init__(self):
        rank, size = shoal.my_pe(), shoal.num_pes()  # comm.Get_rank(), comm.Get_size()
        self.u = np.zeros(CELLS + 2)
        self.u[1:-1] = initial(size * CELLS)[rank * CELLS : (rank + 1) * CELLS]
        # a channel per link of the ring, named by its left end (two ranks: one peer, two links)
        self.left = shoal.Channel(self, remote=self.collection[(rank - 1) % size], port=(rank - 1) % size)
        self.right = shoal.Channel(self, remote=self.collection[(rank + 1) % size], port=rank)

    async def run(self, steps):
        u = self.u
        for _ in range(steps):
            # the two comm.Sendrecv calls: send both edges, then receive both halo cells
            self.left.send(u[1:2])
            self.right.send(u[-2:-1])
            await self.left.recv(into=u[0:1])
            await self.right.recv(into=u[-1:])
            u[1:-1] += ALPHA * (u[:-2] - 2 * u[1:-1] + u[2:])
        total = await self.allreduce(float(u[1:-1].sum()))  # comm.allreduce(u[1:-1].sum())
        return total, u[1:-1].copy()  # returned to main: comm.gather(u[1:-1], root=0)


def main(args):
    if shoal.num_pes() < 2:
        print("run on 2 or more PEs: shoal run -n 2 examples/from_mpi4py.py")
        shoal.exit(1)
    results = shoal.Group(Rank).run(STEPS, ret=True).get()  # one result per PE, in PE order
    u = np.concatenate([part for _, part in results])
    ref = initial(u.size)
    for _ in range(STEPS):
        ref = ref + ALPHA * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))
    error = float(np.abs(u - ref).max())
    print(f"{shoal.num_pes()} ranks, {STEPS} steps: total {results[0][0]:.6f}, max difference from NumPy: {error:.1e}")
    if error > 1e-12 or len({t for t, _ in results}) != 1:
        shoal.exit(1)
    print("from_mpi4py: OK")


if __name__ == "__main__":
    shoal.start(main)
