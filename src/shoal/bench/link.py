"""``shoal bench link``: the client–server link's round trip and bandwidth.

Starts a private ``shoal serve`` backend of ``--pes`` PEs (:func:`shoal.remote.local`)
and measures, from this process as the frontend:

* the round trip of an empty ``conn.run`` (a function that returns at once), and
* the bandwidth of ``field.to_numpy()`` and ``field.from_numpy()`` on a 2-D float64
  grid of ``--mb`` megabytes (the whole grid crosses the link each time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any, Sequence

import numpy as np

__all__ = ["main"]


def _noop() -> None:
    return None


def latency(conn: Any, reps: int) -> dict:
    """Seconds of each of ``reps`` empty round trips, after a warm-up."""
    for _ in range(min(reps, 200)):
        conn.run(_noop)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        conn.run(_noop)
        times.append(time.perf_counter() - t)
    times.sort()
    return {"median_us": statistics.median(times) * 1e6, "p10_us": times[len(times) // 10] * 1e6,
            "p90_us": times[9 * len(times) // 10] * 1e6, "reps": reps}


def bandwidth(conn: Any, mb: float, trials: int) -> dict:
    """to_numpy() and from_numpy() of a grid of ``mb`` MB: GB/s of the median trial."""
    from shoal.stencil import Stencil

    side = int((mb * 2**20 / 8) ** 0.5)

    class Grid(Stencil):
        def __init__(self) -> None:
            self.u = self.initialize((side, side), interface=conn)

    g: Any = Grid()
    data = np.random.default_rng(0).random((side, side))
    nbytes = data.nbytes
    back, forth = [], []
    for _ in range(trials):
        t = time.perf_counter()
        g.u.from_numpy(data)
        g.sync()
        forth.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = g.u.to_numpy()
        back.append(time.perf_counter() - t)
    ok = bool(np.array_equal(out, data))
    del out
    g.close()
    return {"bytes": nbytes, "to_numpy_s": statistics.median(back), "from_numpy_s": statistics.median(forth),
            "to_numpy_GBps": nbytes / statistics.median(back) / 1e9,
            "from_numpy_GBps": nbytes / statistics.median(forth) / 1e9, "identical": ok, "trials": trials}


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="shoal bench link", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--pes", type=int, default=2, help="PEs of the backend (default 2)")
    p.add_argument("--transport", choices=("mpi", "inproc"), default="mpi")
    p.add_argument("--reps", type=int, default=2000, help="round trips timed (default 2000)")
    p.add_argument("--mb", type=float, default=1024.0, help="grid size in MB for the bandwidth (default 1024)")
    p.add_argument("--trials", type=int, default=3, help="bandwidth trials (default 3)")
    p.add_argument("--json", default="", help="write the figures to this JSON file")
    ns = p.parse_args(list(argv))
    from shoal.remote import local

    results: dict[str, Any] = {"pes": ns.pes, "transport": ns.transport}
    with local(pes=ns.pes, transport=ns.transport) as conn:
        lat = results["latency"] = latency(conn, ns.reps)
        print(f"empty conn.run round trip: median {lat['median_us']:.0f} us (p10 {lat['p10_us']:.0f}, "
              f"p90 {lat['p90_us']:.0f}; {ns.reps} calls, {ns.pes} PEs)", flush=True)
        bw = results["bandwidth"] = bandwidth(conn, ns.mb, ns.trials)
        print(f"to_numpy() of {bw['bytes'] / 2**20:.0f} MB: {bw['to_numpy_s']:.3f} s, {bw['to_numpy_GBps']:.2f} GB/s; "
              f"from_numpy(): {bw['from_numpy_s']:.3f} s, {bw['from_numpy_GBps']:.2f} GB/s "
              f"(median of {ns.trials}; data {'identical' if bw['identical'] else 'DIFFERENT'})")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if results["bandwidth"]["identical"] else 1
