"""A representative shoal job: a 1-D heat equation on an over-decomposed chare Array.

    shoal run -n 4 examples/demo.py          # what `make demo` runs
    shoal run -n 2 --transport inproc examples/demo.py

The rod [0, 1] (N interior points, ends held at 0) is cut into 4 blocks per PE, each
a chare. Every iteration each block

  1. sends its edge values to its neighbours over channels and receives theirs into
     its ghost cells (``await ch.recv(into=...)``),
  2. takes an explicit time step, u += r * (u[i-1] - 2 u[i] + u[i+1]),
  3. all-reduces the largest change (the residual); every block stops together once
     it falls below TOL, and every REPORT iterations contributes its heat to a
     reduction whose target is the Monitor group's element on PE 0, which prints it.

Afterwards the main program samples a section of the blocks and gathers the
solution, and checks both against the same computation done serially with NumPy.
"""

import sys
import time

import numpy as np

import shoal

N = 240  # interior points
R = 0.4  # dt / dx^2 (stable for r <= 0.5)
TOL = 1e-3  # stop when no point changes by more than this in one iteration
MAX_ITERS = 1000
REPORT = 50  # iterations between progress reports


def initial(n):
    """A hot spot, a warm plateau and a little noise, as a function of the grid index."""
    x = np.arange(1, n + 1) / (n + 1)
    u = np.exp(-(((x - 0.3) / 0.05) ** 2)) + 0.5 * ((x > 0.6) & (x < 0.9))
    return u + 0.01 * np.sin(97 * np.pi * x)


def step(u, r):
    """One explicit step on u[1:-1] (u[0], u[-1] are ghosts/boundaries); the largest change."""
    new = u[1:-1] + r * (u[:-2] - 2.0 * u[1:-1] + u[2:])
    change = float(np.max(np.abs(new - u[1:-1])))
    u[1:-1] = new
    return change


class Block(shoal.Chare):
    """Points [lo, hi) of the rod, plus one ghost cell on each side."""

    def __init__(self, nblocks):
        i = self.index[0]
        self.lo, self.hi = i * N // nblocks, (i + 1) * N // nblocks
        self.u = np.zeros(self.hi - self.lo + 2)
        self.u[1:-1] = initial(N)[self.lo : self.hi]
        self.left = shoal.Channel(self, remote=self.collection[i - 1]) if i > 0 else None
        self.right = shoal.Channel(self, remote=self.collection[i + 1]) if i < nblocks - 1 else None

    async def solve(self, monitor):
        u = self.u
        it, residual = 0, float("inf")
        while residual > TOL and it < MAX_ITERS:
            it += 1
            if self.left:
                self.left.send(u[1:2])  # sent by value: safe to overwrite u afterwards
            if self.right:
                self.right.send(u[-2:-1])
            if self.left:
                await self.left.recv(into=u[0:1])
            if self.right:
                await self.right.recv(into=u[-1:])
            change = step(u, R)
            residual = await self.allreduce(change, shoal.reducers.max)
            if it % REPORT == 0:
                # Every block contributes alike, so the reductions line up.
                self.contribute(float(u[1:-1].sum()), shoal.reducers.sum, monitor[0].progress.bind(it, residual))
        return it, residual

    def sample(self, points):
        """Values at the global ``points`` this block owns."""
        return {p: float(self.u[1 + p - self.lo]) for p in points if self.lo <= p < self.hi}

    def solution(self):
        return self.u[1:-1]


class Monitor(shoal.Chare):
    """A Group; element 0 (on PE 0) prints progress reports."""

    def progress(self, it, residual, heat):
        dx = 1.0 / (N + 1)
        print(f"  iteration {it:5d}: residual {residual:.2e}, heat {heat * dx:.6f}", flush=True)


def serial():
    """The same computation on one array, with NumPy only."""
    u = np.zeros(N + 2)
    u[1:-1] = initial(N)
    it, residual = 0, float("inf")
    while residual > TOL and it < MAX_ITERS:
        it += 1
        residual = step(u, R)
    return it, residual, u[1:-1]


def main(args):
    npes = shoal.num_pes()
    nblocks = min(4 * npes, N)  # over-decomposition: 4 blocks per PE
    start = time.perf_counter()
    monitor = shoal.Group(Monitor)
    blocks = shoal.Array(Block, nblocks, args=(nblocks,))
    print(f"heat equation: {N} points in {nblocks} blocks on {npes} PEs")
    results = blocks.solve(monitor, ret=True).get()  # [(iterations, residual)] per block
    elapsed = time.perf_counter() - start
    iters, residual = results[0]

    # A section: only the blocks that own the probe points get the multicast.
    probes = [N // 4, N // 2, 3 * N // 4]
    owners = [i for i in range(nblocks) if any(i * N // nblocks <= p < (i + 1) * N // nblocks for p in probes)]
    section = blocks.section(owners)
    sampled = {}
    for d in section.sample(probes, ret=True).get():
        sampled.update(d)
    u = np.concatenate(blocks.solution(ret=True).get())

    want_iters, want_residual, want_u = serial()
    error = float(np.max(np.abs(u - want_u)))
    ok = (
        all(r == (want_iters, want_residual) for r in results)  # every block stopped alike
        and error <= 1e-12  # the same arithmetic in the same order: expect exactly 0
        and all(sampled[p] == u[p] for p in probes)
    )
    print(f"  probes {', '.join(f'u[{p}]={v:.5f}' for p, v in sorted(sampled.items()))}")
    summary = (
        f"{iters} iterations, residual {residual:.2e}, max difference from serial NumPy "
        f"{error:.1e}, {elapsed:.2f} s"
    )
    if not ok:
        print(f"demo: FAIL: {summary} (serial: {want_iters} iterations, residual {want_residual:.2e})")
        sys.exit(1)
    print(f"demo: OK: {summary}")


if __name__ == "__main__":
    shoal.start(main)
