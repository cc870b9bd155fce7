"""Every feature of the programming model in one job, checked; run by tests/runtime/test_mpi.py."""

import sys

import numpy as np

import shoal


class Cell(shoal.Chare):
    def __init__(self, base=0):
        self.base = base
        self.log = []

    def where(self):
        return self.index, shoal.my_pe()

    def record(self, x):
        self.log.append(x)

    def history(self):
        return self.log

    def reduce_all(self, futs, sink):
        i = self.index[0]
        self.contribute(i, shoal.reducers.sum, futs[0])
        self.contribute(np.full(3, float(i)), shoal.reducers.sum, futs[1])
        self.contribute(i, shoal.reducers.gather, futs[2])
        self.contribute(i, shoal.reducers.max, futs[3])
        self.contribute(i % 2 == 0, shoal.reducers.logical_or, futs[4])
        self.contribute(None, shoal.reducers.nop, futs[5])
        self.contribute(i, _histogram, futs[6])
        self.contribute(1, shoal.reducers.sum, sink.take)

    async def all_sum(self, x):
        return await self.allreduce(x + self.index[0], shoal.reducers.sum)

    def in_section(self, sec, fut):
        self.contribute(self.index[0], shoal.reducers.sum, fut, section=sec)


def _histogram(values):
    out = {}
    for v in values:
        for k, n in (v.items() if isinstance(v, dict) else [(v % 3, 1)]):
            out[k] = out.get(k, 0) + n
    return out


class Sink(shoal.Chare):
    def __init__(self):
        self.got = []

    def take(self, v):
        self.got.append(v)

    def result(self):
        return self.got


class Pair(shoal.Chare):
    def __init__(self):
        self.ch = shoal.Channel(self, remote=self.collection[1 - self.index[0]])

    async def run(self, n, size):
        small = []
        for i in range(n):
            self.ch.send(i, self.index[0])
            small.append(await self.ch.recv())
        big = np.empty(size)
        for i in range(3):
            self.ch.send(np.full(size, 10.0 * i + self.index[0]))
            got = await self.ch.recv(into=big)
            assert got is big and np.all(big == 10.0 * i + 1 - self.index[0]), big[:3]
        return small


class Mpi(shoal.Chare):
    def phase(self):
        from mpi4py import MPI

        return shoal.mpi_comm().allreduce(shoal.my_pe(), op=MPI.SUM)


def square(x):
    return x * x


def check(name, got, want):
    if got != want:
        print(f"FAIL {name}: got {got!r}, want {want!r}")
        sys.exit(1)
    print(f"ok {name}")


async def main(args):
    npes = shoal.num_pes()
    a = shoal.Array(Cell, (3, 4), args=(1,))
    where = await a.where(ret=True)
    check("dense index order", [i for i, _ in where], [(i, j) for i in range(3) for j in range(4)])
    nodes = shoal.topology().nodes
    by_node = [pe for node in nodes for pe in node]  # blocks go to PEs node by node
    check("block placement", [pe for _, pe in where], [by_node[k * npes // 12] for k in range(12)])

    b = shoal.Array(Cell, 10)
    for i in range(50):
        b[7].record(i)
    check("per-pair order", await b[7].history(ret=True), list(range(50)))

    futs = [shoal.Future() for _ in range(7)]
    sink = shoal.Group(Sink)
    b.reduce_all(futs, sink[npes - 1])
    got = await shoal.gather(*futs)
    check("sum", got[0], 45)
    check("numpy sum", got[1].tolist(), [45.0] * 3)
    check("gather", got[2], list(range(10)))
    check("max", got[3], 9)
    check("logical_or", got[4], True)
    check("nop", got[5], None)
    check("custom", got[6], {0: 4, 1: 3, 2: 3})
    await shoal.quiescence()
    check("entry target", await sink[npes - 1].result(ret=True), [10])
    check("allreduce", await b.all_sum(1, ret=True), [55] * 10)

    sec = b.section([9, 2, 5])
    f = shoal.Future()
    sec.in_section(sec, f)
    check("section reduce", await f, 16)
    check("section multicast", [i for i, _ in await sec.where(ret=True)], [(2,), (5,), (9,)])

    sp = shoal.Array(Cell, ndims=1)
    for i in (40, 3, 17):
        sp.insert(i)
    sp.done_inserting()
    check("sparse", [i for i, _ in await sp.where(ret=True)], [(3,), (17,), (40,)])

    pairs = shoal.Array(Pair, 2, placement=lambda_free_placement)
    res = await pairs.run(5, 1 << 19, ret=True)
    check("channels", res, [[(i, 1) for i in range(5)], [(i, 0) for i in range(5)]])

    check("pool", await shoal.pool.map_async(square, range(12), chunksize=5), [i * i for i in range(12)])
    if "--inproc" not in args:
        check("mpi phase", await shoal.Group(Mpi).phase(ret=True), [npes * (npes - 1) // 2] * npes)
    print("ALL OK")


def lambda_free_placement(index, npes):
    return (index + 1) % npes


shoal.start(main)
