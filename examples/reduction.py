"""Reductions: combine one value from every element of a collection.

    shoal run -n 2 examples/reduction.py
    shoal run -n 2 --transport inproc examples/reduction.py

``self.contribute(value, reducer, target)`` adds an element's value to the
collection's next reduction. Values are combined on each PE first, then up a tree
of PEs, and the result goes to the *target*: a ``shoal.Future``, or an entry method
of a proxy (a broadcast to a whole collection, or one element). ``await
self.allreduce(value, reducer)`` hands the result back to every contributor.
Every element must make the same sequence of contributions (same reducer, same
target), like the collective calls of MPI.
"""

import numpy as np

import shoal

N = 10  # elements


def merge_counts(values):
    """A custom reducer: merge {pe: count} dicts.

    A reducer gets a list of values and returns one. The list may hold results of
    earlier calls (partial results from other PEs), so the function must accept its
    own output as input and must not depend on the order of the values.
    """
    out = {}
    for d in values:
        for pe, n in d.items():
            out[pe] = out.get(pe, 0) + n
    return out


class Worker(shoal.Chare):
    def __init__(self):
        self.x = float(self.index[0] + 1)  # elements hold 1.0, 2.0, ..., N

    def stats(self, futures):
        i = self.index[0]
        r = shoal.reducers
        self.contribute(i, r.sum, futures["sum"])  # scalars
        self.contribute(np.array([1.0, self.x, self.x**2]), r.sum, futures["moments"])  # element-wise
        self.contribute(self.x, r.max, futures["max"])
        self.contribute(shoal.my_pe(), r.gather, futures["gather"])  # a list, in index order
        self.contribute({shoal.my_pe(): 1}, merge_counts, futures["per_pe"])  # custom reducer

    def normalize(self, done):
        # Target an entry method: the sum of squares is broadcast to every element's
        # ``rescale``; ``bind(done)`` puts ``done`` before the result in its arguments.
        self.contribute(self.x**2, shoal.reducers.sum, self.collection.rescale.bind(done))

    def rescale(self, done, sum_of_squares):
        self.x /= sum_of_squares**0.5
        self.contribute(self.x**2, shoal.reducers.sum, done)  # now 1.0 (up to rounding)

    async def center(self):
        # allreduce inside an async entry method: every element gets the total.
        total = await self.allreduce(self.x, shoal.reducers.sum)
        self.x -= total / N
        return self.x


def main(args):
    workers = shoal.Array(Worker, N)

    futures = {k: shoal.Future() for k in ("sum", "moments", "max", "gather", "per_pe")}
    workers.stats(futures)  # a broadcast: every element contributes to each reduction
    got = {k: f.get() for k, f in futures.items()}
    for k, v in got.items():
        print(f"{k:>8}: {v}")
    assert got["sum"] == N * (N - 1) // 2
    assert got["moments"].tolist() == [N, N * (N + 1) / 2, N * (N + 1) * (2 * N + 1) / 6]
    assert got["max"] == N
    assert len(got["gather"]) == N and got["gather"] == sorted(got["gather"])
    assert sum(got["per_pe"].values()) == N

    done = shoal.Future()
    workers.normalize(done)
    norm = done.get()
    print(f"    norm: {norm:.12f} after normalizing")
    assert abs(norm - 1.0) < 1e-12

    centered = workers.center(ret=True).get()  # ret=True on a broadcast: every result
    print(f"centered: sum {sum(centered):+.1e}")
    assert abs(sum(centered)) < 1e-12
    print("reduction: OK")


if __name__ == "__main__":
    shoal.start(main)
