"""``shoal bench stall``: a large send to a busy PE, and whether the sender keeps working.

Runs :mod:`.worker` on 2 PEs: PE 1 computes for ``--compute`` seconds (100 ms) without
polling; meanwhile PE 0 sends it ``--mb`` MiB (64) and then serves pings of its own.
Prints, as medians of ``--trials``, how long the send call took, how many pings PE 0
served during PE 1's computation, and how soon after it the data had arrived. With
``--lend`` the array goes lent (``shoal.lend``) instead of by value: no copy, no wait.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["main"]

WORKER = Path(__file__).with_name("worker.py")


def main(argv: Sequence[str]) -> int:
    """Entry point of ``shoal bench stall``; returns the exit code."""
    from ..stats import median

    p = argparse.ArgumentParser(prog="shoal bench stall", description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=64, help="MiB sent (64)")
    p.add_argument("--compute", type=float, default=0.1, help="seconds PE 1 computes (0.1)")
    p.add_argument("--trials", type=int, default=7, help="trials (7)")
    p.add_argument("--lend", action="store_true", help="lend the array (shoal.lend) instead of sending it by value")
    p.add_argument("--json", action="store_true", help="also print the job's JSON line")
    ns = p.parse_args(argv)
    if ns.mb < 1 or not 0 < ns.compute <= 60 or ns.trials < 1:
        p.error("give --mb >= 1, 0 < --compute <= 60 and --trials >= 1")
    cmd = [sys.executable, "-m", "shoal", "run", "-n", "2", str(WORKER), str(ns.mb), str(ns.compute), str(ns.trials),
           "lend" if ns.lend else "value"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode:
        sys.stderr.write(proc.stdout + proc.stderr)
        return proc.returncode
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = r["trials"]
    how = "lent" if ns.lend else "sent by value"
    print(f"{ns.mb} MiB {how} to a PE computing for {ns.compute * 1e3:.0f} ms, median of {len(rows)} trials:")
    print(f"  the send call took                 {median([t['send_s'] for t in rows]) * 1e3:8.2f} ms")
    print(f"  pings PE 0 served meanwhile        {median([t['pings'] for t in rows]):8.0f}")
    print(f"  data arrived after the computation {median([t['arrived_after_compute_s'] for t in rows]) * 1e3:8.2f} ms")
    if ns.json:
        print(json.dumps(r))
    return 0
