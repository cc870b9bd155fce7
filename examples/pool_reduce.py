"""Reducing task results from the pool: a Monte-Carlo estimate of pi and a parameter
sweep, each reduced to a few numbers in the main program.

    shoal run -n 2 examples/pool_reduce.py
    shoal run -n 2 --transport inproc examples/pool_reduce.py

``shoal.pool.map`` returns the tasks' results in input order, whichever PE ran them, so
the reduction is ordinary Python in ``main`` and gives the same answer on any number of
PEs. Three patterns:

* reduce inside the task, then combine: each task returns a partial result (hits out of
  a batch of samples), not one value per sample, so little travels;
* reduce as results arrive: ``shoal.Executor`` with ``concurrent.futures.as_completed``
  keeps only the running result, not every task's output;
* floating-point sums that must not depend on the order: ``math.fsum`` (exact, rounded
  once) rather than ``sum``.
"""

import concurrent.futures as cf
import math

import numpy as np

import shoal

BATCHES, SAMPLES = 32, 20_000  # Monte-Carlo tasks and samples per task


def hits(seed):
    """One task: how many of SAMPLES random points of the unit square fall in the quarter circle."""
    xy = np.random.default_rng(seed).random((SAMPLES, 2))
    return int(np.count_nonzero((xy * xy).sum(axis=1) <= 1.0))


def energy(params):
    """One point of a sweep: a made-up model's energy and its gradient norm."""
    a, b = params
    return (a - 0.3) ** 2 + 10 * (b - a * a) ** 2, math.hypot(2 * (a - 0.3), 20 * (b - a * a))


def main(args):
    # 1. reduce inside the task (a batch of samples -> one count), then combine in main
    counts = shoal.pool.map(hits, range(BATCHES))
    pi = 4 * sum(counts) / (BATCHES * SAMPLES)  # integers: the same on any PE count
    print(f"pi ~ {pi:.4f} from {BATCHES} tasks of {SAMPLES} samples")
    assert abs(pi - math.pi) < 0.01 and counts == [hits(s) for s in range(BATCHES)]

    # 2. reduce several quantities at once from one result per task: minimum, mean, max
    grid = [(a, b) for a in np.linspace(-1, 1, 21) for b in np.linspace(-1, 1, 21)]
    results = shoal.pool.map(energy, grid, chunksize=16)  # input order: results[k] is grid[k]'s
    energies = [e for e, _ in results]
    best = min(range(len(grid)), key=energies.__getitem__)
    mean = math.fsum(energies) / len(energies)  # exact sum: no dependence on order
    steepest = max(g for _, g in results)
    print(f"sweep of {len(grid)} points: minimum {energies[best]:.4f} at {tuple(round(float(v), 2) for v in grid[best])}, "
          f"mean {mean:.4f}, steepest gradient {steepest:.2f}")
    assert grid[best] == min(grid, key=lambda p: energy(p)[0])

    # 3. reduce as results arrive: the Executor keeps nothing but the running total
    total, done = 0, 0
    with shoal.Executor() as ex:
        for fut in cf.as_completed([ex.submit(hits, seed) for seed in range(BATCHES)]):
            total += fut.result()
            done += 1
    assert done == BATCHES and total == sum(counts)
    print(f"as_completed: {done} results folded into a running total of {total} hits")
    print("pool_reduce: OK")


if __name__ == "__main__":
    shoal.start(main)
