"""A residual inside a receive-set step: Jacobi iterations on a 1-D ring of blocks until
the largest change is below a tolerance, checked against NumPy.

    shoal run -n 2 examples/residual.py
    shoal run -n 2 --transport inproc examples/residual.py

Every CHECK steps each block computes two numbers about its last update, the sum of
squares (for the 2-norm) and the largest absolute change, and combines both with every
other block's in ONE all-reduce: the reducer is a module-level function of a list of
``(sum, max)`` pairs. The step is an ``async def`` entry method, so it can ``await``
the all-reduce before it posts the next round of receives; every block gets the same
answer and they stop at the same step.
"""

import math

import numpy as np

import shoal

CELLS, CHECK, TOL = 8, 10, 1e-3  # cells per block, steps between residual checks, tolerance


def sum_and_max(pairs):
    """Combine (sum of squares, max |change|) pairs: sums add, maxima take the max.

    A reducer gets contributions and partial results alike, so it returns a pair too."""
    return (sum(s for s, _ in pairs), max(m for _, m in pairs))


def initial(n_blocks):
    x = np.linspace(0.0, 1.0, n_blocks * CELLS, endpoint=False)
    return np.where(x < 0.5, 1.0, 0.0) + 0.1 * np.sin(6 * np.pi * x)


def jacobi(u):
    """One Jacobi sweep of the 1-D Laplace equation on the interior of ``u`` (ghosts at the ends)."""
    return 0.5 * (u[:-2] + u[2:])


class Block(shoal.Chare):
    def __init__(self, n):
        i = self.index[0]
        self.u = np.zeros(CELLS + 2)
        self.u[1:-1] = initial(n)[i * CELLS : (i + 1) * CELLS]
        self.left = shoal.Channel(self, remote=self.collection[(i - 1) % n], port=(i - 1) % n)
        self.right = shoal.Channel(self, remote=self.collection[(i + 1) % n], port=i)
        self.ghosts = shoal.ReceiveSet([self.left, self.right], [self.u[0:1], self.u[-1:]], then=self.step)
        self.t, self.done = 0, None

    def start(self, done):
        self.done = done
        self._exchange()

    def _exchange(self):
        self.left.send(self.u[1:2])
        self.right.send(self.u[-2:-1])
        self.ghosts.post()

    async def step(self):
        """Both ghosts are in: one sweep; every CHECK steps, the residual, then stop or go on."""
        new = jacobi(self.u)
        change = new - self.u[1:-1]
        self.u[1:-1] = new
        self.t += 1
        if self.t % CHECK == 0:
            sumsq, biggest = await self.allreduce((float(change @ change), float(np.abs(change).max())), sum_and_max)
            if biggest < TOL:
                if self.index[0] == 0:
                    print(f"converged after {self.t} steps: ||change||_2 = {math.sqrt(sumsq):.2e}, "
                          f"max |change| = {biggest:.2e}", flush=True)
                self.contribute((self.index[0], self.t, self.u[1:-1].copy()), shoal.reducers.gather, self.done)
                return
        self._exchange()  # the next round, posted after the residual is known


def reference(u):
    """The same iteration in NumPy, with the same stopping rule."""
    t = 0
    while True:
        new = 0.5 * (np.roll(u, 1) + np.roll(u, -1))
        change, u = new - u, new
        t += 1
        if t % CHECK == 0 and np.abs(change).max() < TOL:
            return t, u


def main(args):
    n = 4  # blocks in the ring
    done = shoal.Future()
    shoal.Array(Block, n, args=(n,)).start(done)
    parts = sorted(done.get(), key=lambda p: p[0])
    steps = {t for _, t, _ in parts}
    u = np.concatenate([part for _, _, part in parts])
    ref_steps, ref = reference(initial(n))
    error = float(np.abs(u - ref).max())
    print(f"{n} blocks stopped at step {sorted(steps)} (NumPy: {ref_steps}), max difference from NumPy: {error:.1e}")
    if steps != {ref_steps} or error > 1e-12:
        shoal.exit(1)
    print("residual: OK")


if __name__ == "__main__":
    shoal.start(main)
