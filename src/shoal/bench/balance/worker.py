"""The shoal program of ``shoal bench balance`` (one job per experiment; see :mod:`.cli`).

``imbalance``: 16 elements, half with 3 ms and half with 1 ms of work per step, the
heavy half on one PE (block placement), driven by a broadcast per step or by a call to
each element per step; each trial times steps with no balancing and steps after one
at_sync round (the job's strategy, ``SHOAL_LB``). ``throughput``: N elements of M MB each
call at_sync once; with ``SHOAL_LB=rotate`` every element moves, and the round's time
gives MB/s and elements/s.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

import shoal
import shoal.lowlevel
from shoal.bench.stats import median, median_ci, ratio_ci, ratio_of_medians


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Load(shoal.Chare):
    """An element with a fixed amount of work per step."""

    def __init__(self, costs: list[float]):
        self.cost = costs[self.index[0]]

    def step(self, fut: shoal.Future) -> None:
        _spin(self.cost)
        self.contribute(None, shoal.reducers.nop, fut)

    def sync(self, fut: shoal.Future) -> None:
        self.fut = fut
        self.at_sync()

    def resume_from_sync(self) -> None:
        self.contribute(shoal.my_pe(), shoal.reducers.gather, self.fut)


class Blob(shoal.Chare):
    """An element holding ``mb`` MB of state."""

    def __init__(self, mb: float):
        self.data = np.ones(int(mb * 2**20) // 8)

    def sync(self, fut: shoal.Future) -> None:
        self.fut = fut
        self.at_sync()

    def resume_from_sync(self) -> None:
        self.contribute(float(self.data[-1]), shoal.reducers.sum, self.fut)


def _steps(a: Any, n: int, count: int, drive: str) -> float:
    """Seconds per step of ``count`` steps."""
    start = time.perf_counter()
    for _ in range(count):
        f = shoal.Future()
        if drive == "broadcast":
            a.step(f)
        else:
            for i in range(n):
                a[i].step(f)
        f.get()
    return (time.perf_counter() - start) / count


def imbalance(trials: int, steps: int) -> None:
    n = 16
    costs = [0.003] * (n // 2) + [0.001] * (n // 2)
    print(f"imbalance: {n} elements (8 of 3 ms, 8 of 1 ms per step, the 3 ms ones on PE 0), "
          f"{shoal.num_pes()} PEs, strategy {shoal.lowlevel.current_settings().lb}, "
          f"{trials} trials of {steps} steps", flush=True)
    out = {}
    for drive in ("broadcast", "p2p"):
        plain, balanced, spread = [], [], []
        for _ in range(trials):
            a = shoal.Array(Load, n, args=(costs,))
            _steps(a, n, 3, drive)  # warm-up
            plain.append(_steps(a, n, steps, drive))
            f = shoal.Future()
            a.sync(f)
            where = f.get()
            spread.append(sum(1 for pe in where[: n // 2] if pe != 0))
            _steps(a, n, 3, drive)
            balanced.append(_steps(a, n, steps, drive))
        ratio = ratio_of_medians(balanced, plain)
        ci, ci_p, ci_b = ratio_ci(balanced, plain), median_ci(plain), median_ci(balanced)
        low, high, lo_p, hi_p, lo_b, hi_b = ci.low, ci.high, ci_p.low, ci_p.high, ci_b.low, ci_b.high
        print(f"  {drive:<9}  unbalanced {median(plain) * 1e3:6.2f} ms/step [{lo_p * 1e3:.2f}, {hi_p * 1e3:.2f}]   "
              f"balanced {median(balanced) * 1e3:6.2f} ms/step [{lo_b * 1e3:.2f}, {hi_b * 1e3:.2f}]   "
              f"ratio {ratio:.3f} [{low:.3f}, {high:.3f}]   heavy elements moved off PE 0: {spread}", flush=True)
        out[drive] = {"unbalanced": plain, "balanced": balanced, "ratio": ratio, "ci": [low, high]}
    print("JSON " + json.dumps({"experiment": "imbalance", **out}), flush=True)


def throughput(count: int, mb: float) -> None:
    a = shoal.Array(Blob, count, args=(mb,))
    shoal.quiescence().get()
    f = shoal.Future()
    start = time.perf_counter()
    a.sync(f)
    total = f.get()
    seconds = time.perf_counter() - start
    moved = count if shoal.lowlevel.current_settings().lb == "rotate" else None
    size = count * int(mb * 2**20) // 8 * 8 / 1e6
    print(f"throughput: {count} elements of {mb:g} MB on {shoal.num_pes()} PEs, strategy "
          f"{shoal.lowlevel.current_settings().lb}: the round took {seconds:.3f} s "
          f"({'every element moved' if moved else 'moves: see the strategy'}): "
          f"{size / seconds:,.0f} MB/s, {count / seconds:,.0f} elements/s; state intact: {total == count}", flush=True)
    print("JSON " + json.dumps({"experiment": "throughput", "elements": count, "mb": mb, "seconds": seconds,
                                "mb_per_s": size / seconds, "elements_per_s": count / seconds}), flush=True)


def main(args: list) -> None:
    mode = args[1]
    if mode == "imbalance":
        imbalance(int(args[2]), int(args[3]))
    elif mode == "throughput":
        throughput(int(args[2]), float(args[3]))
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        shoal.exit(2)


if __name__ == "__main__":
    shoal.start(main)
