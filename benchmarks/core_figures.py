"""Core-runtime figures on 2 PEs, in one run: ping-pong latency and bandwidth of entry
methods and channels against mpi4py Send/Recv, and the cost of a 100,000-element array.

    shoal run -n 2 benchmarks/core_figures.py [--iters N] [--elements N]

Prints one table; mpi4py runs inside the same job (on ``shoal.mpi_comm()``).
"""

import argparse
import time

import numpy as np

import shoal

SIZES = (8, 4 << 20)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


class Mpi(shoal.Chare):
    def pingpong(self, size, iters):
        comm = shoal.mpi_comm()
        buf = np.ones(size, np.uint8)
        peer = 1 - comm.rank
        comm.Barrier()
        t = time.perf_counter()
        for _ in range(iters):
            if comm.rank == 0:
                comm.Send(buf, peer)
                comm.Recv(buf, peer)
            else:
                comm.Recv(buf, peer)
                comm.Send(buf, peer)
        return (time.perf_counter() - t) / (2 * iters)

    def rss(self):
        return rss_bytes()


class Ping(shoal.Chare):
    def __init__(self):
        self.peer = self.collection[1 - self.index[0]]
        self.ch = shoal.Channel(self, remote=self.peer)

    def start(self, data, iters, done):
        self.left, self.done, self.t = iters, done, time.perf_counter()
        self.peer.bounce(data)

    def bounce(self, data):
        if self.index[0] == 1:
            self.peer.bounce(data)
            return
        self.left -= 1
        if self.left:
            self.peer.bounce(data)
        else:
            self.done.send(time.perf_counter() - self.t)

    async def channel(self, size, iters):
        buf = np.ones(size // 8 if size >= 8 else 1)
        t = time.perf_counter()
        for _ in range(iters):
            if self.index[0] == 0:
                self.ch.send(buf)
                await self.ch.recv(into=buf)
            else:
                await self.ch.recv(into=buf)
                self.ch.send(buf)
        return time.perf_counter() - t


class Tiny(shoal.Chare):
    def __init__(self):
        self.value = 0

    def touch(self):
        return None


def on_pe(index, npes):
    return index % npes


async def main(args):
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--elements", type=int, default=100_000)
    ns = p.parse_args(args[1:])
    if shoal.num_pes() != 2:
        raise SystemExit("run with 2 PEs: shoal run -n 2 benchmarks/core_figures.py")
    mpi = shoal.Group(Mpi)
    pair = shoal.Array(Ping, 2, placement=on_pe)
    rows = []
    for size in SIZES:
        iters = ns.iters if size < 65536 else max(20, ns.iters // 50)
        for rep in range(2):  # the first round warms up
            t_mpi = (await mpi.pingpong(size, iters, ret=True))[0]
            done = shoal.Future()
            pair[0].start(np.ones(max(1, size // 8)), iters, done)
            t_entry = await done / (2 * iters)
            t_chan = (await pair.channel(size, iters, ret=True))[0] / (2 * iters)
        rows.append((size, t_mpi, t_entry, t_chan))
    print(f"{'size':>9} {'mpi4py us':>10} {'entry us':>9} {'x':>5} {'channel us':>10} {'x':>5}"
          f" {'mpi4py GB/s':>11} {'entry GB/s':>10} {'chan GB/s':>9}")
    for size, m, e, c in rows:
        print(f"{size:>9} {m*1e6:>10.2f} {e*1e6:>9.2f} {e/m:>5.2f} {c*1e6:>10.2f} {c/m:>5.2f}"
              f" {size/m/1e9:>11.2f} {size/e/1e9:>10.2f} {size/c/1e9:>9.2f}")

    before = await mpi.rss(ret=True)
    t = time.perf_counter()
    arr = shoal.Array(Tiny, ns.elements)
    await arr.touch(ret=True)
    t_create = time.perf_counter() - t
    after = await mpi.rss(ret=True)
    t = time.perf_counter()
    await arr.touch(ret=True)
    t_bcast = time.perf_counter() - t
    per_element = (sum(after) - sum(before)) / ns.elements
    print(f"{ns.elements} elements: create + first broadcast(ret=True) {t_create:.3f} s, "
          f"next broadcast(ret=True) {t_bcast:.3f} s, memory {per_element:.0f} B/element")


shoal.start(main)
