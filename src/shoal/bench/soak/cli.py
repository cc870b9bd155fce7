"""``shoal bench soak``: migration and load balancing under load, every invariant checked.

Runs jobs of :mod:`.program` back to back for ``--minutes``: job ``k`` has seed
``SEED + k``, which picks its strategy (each built-in strategy
in turn, :data:`STRATEGIES`), its at_sync period, its array's size and every rate and
random choice in it. Each job checks at random rounds, at quiescence, that every call,
broadcast, channel message and future arrived exactly once (calls in order from a
sender's stay on one PE, channels and main's broadcasts in order), each element exists
exactly once, reductions and all-reduces are exact, resume_from_sync ran once per
at_sync, and each element's state (an array, a CRC of its history) is intact.

Prints a line per job and a summary; exits 1 with the seed of the job that broke an
invariant (or failed, or hung past ``--timeout``) and the command that reruns it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

__all__ = ["STRATEGIES", "main", "job_settings"]

PROGRAM = Path(__file__).with_name("program.py")

#: the built-in strategies (shoal._runtime.strategy_registry.BUILTIN; tests/bench/test_soak.py pins the list)
STRATEGIES = ("greedy", "refine", "comm", "rotate", "random", "auto")


def job_settings(seed: int, lb: str | None = None, period: int | None = None) -> tuple[str, int, int]:
    """The strategy, at_sync period and tree fan-out of the job of ``seed``."""
    rng = random.Random(seed * 7919 + 17)
    strategy = lb if lb is not None else STRATEGIES[seed % len(STRATEGIES)]
    return strategy, period if period is not None else rng.choice((0, 0, 1, 2, 3)), rng.choice((2, 3, 4))


def _run_job(seed: int, ns: argparse.Namespace, seconds: float, out: str) -> tuple[int, str, int]:
    strategy, period, fanout = job_settings(seed, ns.lb, ns.period)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"SHOAL_LB": strategy, "SHOAL_LB_PERIOD": str(period), "SHOAL_NATIVE": str(ns.native),
                "SHOAL_TREE_FANOUT": str(fanout), "SHOAL_DEADLOCK_TIMEOUT": str(ns.deadlock_timeout)})
    cmd = [sys.executable, "-m", "shoal", "run", "-n", str(ns.pes), "--transport", ns.transport, str(PROGRAM),
           str(seed), str(seconds), str(ns.rounds), out, strategy, str(period), ns.inject or "-"]
    limit = ns.timeout or seconds * 4 + 90
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        code = -1
    return code, strategy, period


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="shoal bench soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=1.0, help="how long to run jobs for (1)")
    p.add_argument("--seed", type=int, default=None, help="seed of the first job (default: from the clock; printed)")
    p.add_argument("--pes", "-n", type=int, default=None, help="PEs per job (2 with mpi, 3 with inproc)")
    p.add_argument("--native", type=int, choices=(0, 1), default=1, help="1: the compiled path (MPI only); 0: Python")
    p.add_argument("--transport", choices=("mpi", "inproc"), default="mpi", help="mpi (default) or inproc")
    p.add_argument("--job-seconds", type=float, default=30.0, help="rounds of one job go on this long (30)")
    p.add_argument("--jobs", type=int, default=0, help="run this many jobs, whatever --minutes says (0: by time)")
    p.add_argument("--rounds", type=int, default=0, help="rounds per job instead of --job-seconds (0: by time)")
    p.add_argument("--lb", default=None, help="one strategy for every job (default: each in turn, by seed)")
    p.add_argument("--period", type=int, default=None, help="SHOAL_LB_PERIOD for every job (default: by seed)")
    p.add_argument("--timeout", type=float, default=0, help="seconds before a job counts as hung (default 4x + 90)")
    p.add_argument("--inject", choices=("dup", "drop", "state"), default=None,
                   help="break an invariant on purpose (a call sent twice, a call lost, an element's state damaged "
                        "by a move): the soak's test of its own checks")
    p.add_argument("--deadlock-timeout", type=float, default=5.0, help="SHOAL_DEADLOCK_TIMEOUT of the jobs (5)")
    ns = p.parse_args(argv)
    if ns.pes is None:
        ns.pes = 2 if ns.transport == "mpi" else 3
    if ns.pes < 1 or ns.minutes < 0 or ns.job_seconds <= 0 or ns.jobs < 0 or ns.rounds < 0:
        p.error("give --pes >= 1, --minutes >= 0, --job-seconds > 0, --jobs >= 0, --rounds >= 0")
    seed = ns.seed if ns.seed is not None else int(time.time()) % 1_000_000
    path = "compiled" if ns.native and ns.transport == "mpi" else "Python"  # inproc has no compiled path
    where = f"{ns.pes} PEs, {ns.transport}, {path} path"
    print(f"soak: seed {seed}, {where}, " + (f"{ns.jobs} job(s)" if ns.jobs else f"{ns.minutes:g} min"), flush=True)
    t0 = time.perf_counter()
    totals: dict = {"jobs": 0, "rounds": 0, "check_rounds": 0, "messages": 0, "broadcasts": 0, "channel_messages": 0,
                    "futures": 0, "migrations": 0, "migrate_requests": 0, "invariants": 0, "reordered_calls": 0,
                    "reordered_broadcasts": 0}
    per_strategy: dict[str, int] = {}
    k = 0
    with tempfile.TemporaryDirectory(prefix="shoal-soak-") as tmp:
        while True:
            left = ns.minutes * 60 - (time.perf_counter() - t0)
            if ns.jobs and k >= ns.jobs:
                break
            if not ns.jobs and k and left < min(5.0, ns.job_seconds):
                break
            seconds = ns.job_seconds if ns.jobs else max(1.0, min(ns.job_seconds, left - 3))
            job_seed = seed + k
            out = os.path.join(tmp, f"job{k}.json")
            code, strategy, period = _run_job(job_seed, ns, seconds, out)
            try:
                summary = json.loads(Path(out).read_text())
            except (OSError, ValueError):
                summary = None
            if code != 0 or summary is None or not summary.get("ok"):
                why = "hung (killed after its timeout)" if code == -1 else f"exit code {code}"
                if summary is not None and summary.get("problems"):
                    why += "; " + "; ".join(summary["problems"][:3])
                rerun = (f"shoal bench soak --seed {job_seed} --jobs 1 --job-seconds {seconds:g} --pes {ns.pes} "
                         f"--native {ns.native} --transport {ns.transport}"
                         + (f" --rounds {ns.rounds}" if ns.rounds else "")
                         + (f" --inject {ns.inject}" if ns.inject else ""))
                print(f"soak: FAILED: job {k}, seed {job_seed} (strategy {strategy}, period {period}): {why}\n"
                      f"soak: rerun it with: {rerun}", flush=True)
                return 1
            k += 1
            totals["jobs"] += 1
            for key in totals:
                if key != "jobs":
                    totals[key] += summary[key]
            per_strategy[strategy] = per_strategy.get(strategy, 0) + summary["balancing_rounds"]
            print(f"soak: job {k - 1} seed {job_seed}: {strategy} (period {period}), {summary['elements']} elements, "
                  f"{summary['rounds']} rounds ({summary['check_rounds']} checked), {summary['messages']:,} calls, "
                  f"{summary['migrations']:,} migrations, {summary['balancing_rounds']} balancing rounds, "
                  f"{summary['invariants']:,} invariants, {summary['elapsed']:.1f} s: ok", flush=True)
    elapsed = time.perf_counter() - t0
    rounds = ", ".join(f"{name} {n}" for name, n in sorted(per_strategy.items())) or "none"
    print(f"soak: OK, seed {seed}, {where}: {totals['jobs']} jobs, {totals['rounds']:,} rounds "
          f"({totals['check_rounds']:,} checked), {totals['messages']:,} calls, {totals['broadcasts']:,} broadcasts, "
          f"{totals['channel_messages']:,} channel messages, {totals['futures']:,} futures, "
          f"{totals['migrations']:,} migrations ({totals['migrate_requests']:,} migrate() requests), "
          f"balancing rounds: {rounds}; {totals['invariants']:,} invariants checked, {elapsed:.1f} s", flush=True)
    print(f"soak: arrived after a message sent later from the PE its sender had moved to (not promised; counted): "
          f"{totals['reordered_calls']:,} calls, {totals['reordered_broadcasts']:,} broadcasts", flush=True)
    return 0
