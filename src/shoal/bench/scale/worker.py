"""The shoal program of ``shoal bench scale elements`` (see :mod:`.cli`).

Creates an Array of N trivial elements, then times ``ret=True`` broadcasts to all of
them, broadcasts whose completion is a ``nop`` reduction, and broadcasts answered by a
``sum`` of one float per element. Memory per element is
the growth of the PEs' resident set across the creation (summed over PEs, from
``/proc/self/statm``), and again once every element has contributed to reductions, read by a Group broadcast that each PE runs after it built its
elements. Prints one JSON line.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

import shoal


def _resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Probe(shoal.Chare):
    """One per PE: reads the PE's resident set size."""

    def resident(self) -> int:
        gc.collect()
        return _resident()


class Element(shoal.Chare):
    """An element with no state of its own."""

    def ping(self, x: int) -> int:
        return x

    def touch(self, done: shoal.Future) -> None:
        self.contribute(None, shoal.reducers.nop, done)

    def add(self, total: shoal.Future) -> None:
        self.contribute(0.5, shoal.reducers.sum, total)


def main(args: list) -> None:
    n, trials = int(args[1]), int(args[2])
    probe = shoal.Group(Probe)
    before = sum(probe.resident(ret=True).get())
    t0 = time.perf_counter()
    arr = shoal.Array(Element, n)
    after = sum(probe.resident(ret=True).get())  # runs after the creation, on each PE (same tree)
    first = arr.ping(1, ret=True).get()
    created = time.perf_counter() - t0
    assert len(first) == n and first[0] == first[-1] == 1
    ret, nop, sums = [], [], []
    for _ in range(trials):
        t = time.perf_counter()
        arr.ping(2, ret=True).get()
        ret.append(time.perf_counter() - t)
        done = shoal.Future()
        t = time.perf_counter()
        arr.touch(done)
        done.get()
        nop.append(time.perf_counter() - t)
        total = shoal.Future()
        t = time.perf_counter()
        arr.add(total)
        assert total.get() == 0.5 * n
        sums.append(time.perf_counter() - t)
    settled = sum(probe.resident(ret=True).get())  # every element has contributed since
    print(json.dumps({
        "pes": shoal.num_pes(), "elements": n, "create_and_first_broadcast_s": created,
        "bytes_per_element": (after - before) / n,
        "bytes_per_element_after_reductions": (settled - before) / n, "ret_broadcast_s": ret, "nop_broadcast_s": nop,
        "sum_broadcast_s": sums,
        "load_balancing": bool(os.environ.get("SHOAL_LB")),
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    shoal.start(main)
