"""Receive sets: a 1-D heat equation over a ring of over-decomposed blocks, checked against NumPy.

    shoal run -n 2 examples/receive_sets.py
    shoal run -n 2 --transport inproc examples/receive_sets.py

Each block needs both neighbours' edge cells before it can take a step. A
``shoal.ReceiveSet`` posts one receive per channel, straight into the ghost cells,
and runs the entry method ``step`` once, when the last edge has landed: no
coroutine, no future and no Python call per message, and a block whose ghosts are
in runs while the others still wait.
"""

import numpy as np

import shoal

CELLS, STEPS, ALPHA = 64, 200, 0.25  # cells per block, time steps, diffusion number


def initial(n_blocks):
    x = np.linspace(0.0, 1.0, n_blocks * CELLS, endpoint=False)
    return np.sin(2 * np.pi * x) + 0.5 * np.cos(6 * np.pi * x)


class Block(shoal.Chare):
    def __init__(self, n):
        i = self.index[0]
        self.u = np.zeros(CELLS + 2)  # u[0] and u[-1] are ghost cells
        self.u[1:-1] = initial(n)[i * CELLS : (i + 1) * CELLS]
        # a channel per edge of the ring, named by the block on its left: with two blocks
        # both neighbours are the same chare, and the port tells the two links apart
        self.left = shoal.Channel(self, remote=self.collection[(i - 1) % n], port=(i - 1) % n)
        self.right = shoal.Channel(self, remote=self.collection[(i + 1) % n], port=i)
        # the left neighbour's last cell lands in u[0], the right one's first in u[-1]
        self.ghosts = shoal.ReceiveSet([self.left, self.right], [self.u[0:1], self.u[-1:]], then=self.step)
        self.t = 0
        self.done = None

    def start(self, done):
        self.done = done
        self._exchange()

    def step(self):
        """Both ghosts are in: advance one step, then exchange again (or report)."""
        u = self.u
        u[1:-1] = u[1:-1] + ALPHA * (u[:-2] - 2 * u[1:-1] + u[2:])
        self.t += 1
        if self.t == STEPS:
            self.contribute((self.index[0], u[1:-1].copy()), shoal.reducers.gather, self.done)
        else:
            self._exchange()

    def _exchange(self):
        self.left.send(self.u[1:2])
        self.right.send(self.u[-2:-1])
        self.ghosts.post()  # step() runs when both have landed, never inside post()


def main(args):
    n = int(args[1]) if len(args) > 1 else 4 * shoal.num_pes()  # blocks in the ring (2 works too)
    done = shoal.Future()
    shoal.Array(Block, n, args=(n,)).start(done)
    u = np.concatenate([part for _, part in sorted(done.get(), key=lambda p: p[0])])

    ref = initial(n)
    for _ in range(STEPS):
        ref = ref + ALPHA * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))
    error = float(np.abs(u - ref).max())
    print(f"{n} blocks of {CELLS} cells, {STEPS} steps, max difference from NumPy: {error:.1e}")
    if error > 1e-12:
        shoal.exit(1)
    print("receive_sets: OK")


if __name__ == "__main__":
    shoal.start(main)
