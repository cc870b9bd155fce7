"""``shoal bench balance``: load balancing's gain on a synthetic imbalance, and migration throughput.

Two jobs, each a real MPI job of ``-n`` PEs running :mod:`.worker`:

* ``imbalance`` (strategy ``--lb``, greedy by default): 16 elements, half with 3 ms and
  half with 1 ms of work per step, driven by broadcasts and by point-to-point calls;
  the time per step after one balancing round against the time before, as a ratio of
  medians over ``--trials`` trials with a bootstrap 95% CI (:mod:`shoal.bench.stats`);
* ``throughput``: ``--elements`` elements of ``--mb`` MB each, all moved in one round
  (strategy rotate): MB/s and elements/s.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Sequence

__all__ = ["main"]

WORKER = Path(__file__).with_name("worker.py")


def main(argv: Sequence[str]) -> int:
    from ...lowlevel import launch_mpi

    p = argparse.ArgumentParser(prog="shoal bench balance", description=__doc__.splitlines()[0])
    p.add_argument("-n", "--pes", type=int, default=2, help="PEs (2)")
    p.add_argument("--only", choices=("imbalance", "throughput"), help="run one experiment")
    p.add_argument("--lb", default="greedy", help="strategy of the imbalance experiment (greedy)")
    p.add_argument("--trials", type=int, default=5, help="imbalance: trials (5)")
    p.add_argument("--steps", type=int, default=20, help="imbalance: timed steps per trial (20)")
    p.add_argument("--elements", type=int, default=10_000, help="throughput: elements (10000)")
    p.add_argument("--mb", type=float, default=1.0, help="throughput: MB of state per element (1)")
    p.add_argument("--mpiexec", default=None, help="launcher (default: $SHOAL_MPIEXEC, then PATH)")
    ns = p.parse_args(argv)
    if ns.trials < 2 or ns.steps < 1 or ns.elements < 1 or ns.mb <= 0 or ns.pes < 2:
        p.error("give --trials >= 2, --steps >= 1, --elements >= 1, --mb > 0 and -n >= 2")
    jobs = []
    if ns.only in (None, "imbalance"):
        jobs.append((ns.lb, ["imbalance", str(ns.trials), str(ns.steps)]))
    if ns.only in (None, "throughput"):
        jobs.append(("rotate", ["throughput", str(ns.elements), str(ns.mb)]))
    code = 0
    for strategy, args in jobs:
        saved = os.environ.get("SHOAL_LB")
        os.environ["SHOAL_LB"] = strategy
        try:
            code = code or launch_mpi([str(WORKER), *args], ns.pes, ns.mpiexec)
        finally:
            if saved is None:
                os.environ.pop("SHOAL_LB", None)
            else:
                os.environ["SHOAL_LB"] = saved
    return code
