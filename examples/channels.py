"""Channels: neighbours in a chain of array elements exchange NumPy halos.

    shoal run -n 2 examples/channels.py
    shoal run -n 2 --transport inproc examples/channels.py

Each element owns a block of rows of a 2-D grid plus one ghost row above and below.
A ``shoal.Channel`` is an ordered stream between two chares: both ends create it,
``ch.send(...)`` never waits for the receiver, and ``await ch.recv()`` suspends only
the calling coroutine. ``await ch.recv(into=buf)`` names the destination in advance:
a large array (here a 128 KiB row) lands straight in ``buf``, with no extra copy.
"""

import numpy as np

import shoal

ROWS, COLS = 4, 16384  # rows per element; a row of 16384 float64 is 128 KiB
STEPS = 5


class Block(shoal.Chare):
    def __init__(self, n):
        i = self.index[0]
        self.u = np.zeros((ROWS + 2, COLS))  # rows 0 and ROWS+1 are ghosts
        # One channel per neighbour. Both ends must open it: the k-th channel an
        # element opens towards a peer pairs with the peer's k-th one towards it.
        self.up = shoal.Channel(self, remote=self.collection[i - 1]) if i > 0 else None
        self.down = shoal.Channel(self, remote=self.collection[i + 1]) if i < n - 1 else None

    async def run(self, steps):
        i = self.index[0]
        u = self.u
        bad = 0
        for step in range(steps):
            u[1:-1] = 1000 * step + i  # this step's interior values
            # Send the edge rows. send() returns once the array may be reused; the
            # data is copied out or delivered, never shared with the receiver.
            if self.up:
                self.up.send(u[1])
                self.up.send(step, float(u[1].sum()))  # several values arrive as a tuple
            if self.down:
                self.down.send(u[-2])
                self.down.send(step, float(u[-2].sum()))
            # Receive the neighbours' edges straight into the ghost rows.
            for ch, ghost, neighbour in ((self.up, u[0], i - 1), (self.down, u[-1], i + 1)):
                if ch is None:
                    continue
                got = await ch.recv(into=ghost)  # returns `ghost`, filled in place
                their_step, their_sum = await ch.recv()
                expected = 1000 * step + neighbour
                if got is not ghost or their_step != step or their_sum != ghost.sum() or np.any(ghost != expected):
                    bad += 1
        # Everyone agrees on the number of mismatches seen anywhere.
        return await self.allreduce(bad, shoal.reducers.sum)


def main(args):
    n = 2 * shoal.num_pes()
    blocks = shoal.Array(Block, n, args=(n,))
    errors = blocks.run(STEPS, ret=True).get()
    print(f"{n} blocks, {STEPS} halo exchanges of {COLS * 8 // 1024} KiB rows, mismatches: {errors[0]}")
    if errors[0]:
        shoal.exit(1)
    print("channels: OK")


if __name__ == "__main__":
    shoal.start(main)
