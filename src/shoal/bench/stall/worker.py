"""The shoal program of ``shoal bench stall`` (see :mod:`.cli`).

PE 1 computes for ``--compute`` seconds; while it does, PE 0's main program sends it
``--mb`` MiB and then pings an element of its own PE until PE 1 is done. It records how
long the send call took, how many pings PE 0 served while PE 1 computed, and when the
data had arrived intact. Prints one JSON line. The array goes by value, or lent
(``shoal.lend``): then PE 0 waits for the loan's return before the next trial.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import shoal


class Busy(shoal.Chare):
    """One per PE; PE 1's computes and receives."""

    def compute(self, seconds: float) -> float:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # busy: no message is looked at meanwhile
            pass
        return time.perf_counter()

    def take(self, data: np.ndarray) -> None:
        self.arrived = time.perf_counter()
        self.total = float(data[::4096].sum())

    def report(self) -> tuple[float, float]:
        return self.arrived, self.total

    def ping(self) -> int:
        return 1


def main(args: list) -> None:
    mib, compute, trials = int(args[1]), float(args[2]), int(args[3])
    lend = len(args) > 4 and args[4] == "lend"
    if shoal.num_pes() < 2:
        raise SystemExit("shoal bench stall needs 2 PEs")
    busy = shoal.Group(Busy)
    data = np.ones(mib << 17)  # float64: MiB * 2**20 / 8
    want = float(data[::4096].sum())
    busy[1].take(data)  # warm: the first large message's memory, the rendezvous path
    busy[1].report(ret=True).get()
    rows = []
    for _ in range(trials):
        done = busy[1].compute(compute, ret=True)
        time.sleep(min(0.01, compute / 10))  # PE 1 is computing by now
        t0 = time.perf_counter()
        loan = shoal.lend(data) if lend else None
        busy[1].take(loan or data)
        sent = time.perf_counter() - t0
        pings = 0
        while not done.done():
            busy[0].ping(ret=True).get()  # served by this PE's own scheduler
            pings += 1
        finished = done.get()
        if loan is not None:
            loan.returned.get()
        arrived, total = busy[1].report(ret=True).get()
        if total != want:
            raise SystemExit(f"shoal bench stall: the data arrived changed ({total} != {want})")
        rows.append({"send_s": sent, "pings": pings, "arrived_after_compute_s": arrived - finished})
    print(json.dumps({"mib": mib, "compute_s": compute, "trials": rows}))
    sys.stdout.flush()
    shoal.exit()


shoal.start(main)
