"""``shoal bench experiment``: variants of a benchmark run interleaved, compared with statistics.

Two forms. ``shoal bench experiment FILE.toml [--out results.csv]`` runs an experiment
file's grid of configurations × targets × trials into a resumable CSV file, which
``shoal bench report`` analyses (:mod:`.evaluation`; docs/benchmarks.md). The form
below compares a few command lines given with ``--variant``.

Each variant is a ``shoal bench`` command line that ends its output with one JSON
object (``--json``; every ``shoal bench app`` does). The runner runs each variant
``--warmup`` times untimed, then ``--trials`` rounds, each round every variant once in
a fresh random order (so drift of the machine spreads over all variants alike), and
reads ``--metric`` from each run's JSON. It prints per variant the median, a bootstrap
95% confidence interval, the ratio of medians to the baseline with its interval, and a
one-sided Mann–Whitney p-value for "faster than the baseline" (:mod:`.stats`), and
writes every sample to ``--out`` so the figures can be checked and re-analysed::

    shoal bench experiment --trials 5 --metric time_per_step --baseline mpi4py \\
        --variant "mpi4py=app pic --target mpi4py -n 2 --dist patch" \\
        --variant "shoal=app pic --target shoal -n 2 --dist patch --odf 8 --lb-period 80"
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from .stats import faster_test, median, median_ci, ratio_ci, ratio_of_medians

__all__ = ["main", "run_variant"]


def run_variant(args: Sequence[str], metric: str, timeout: float) -> tuple[float, dict]:
    """Run ``shoal bench *args --json`` once; ``metric`` of its JSON, and the JSON."""
    from .evaluation.runner import run_once

    record = run_once([sys.executable, "-m", "shoal", "bench", *args, "--json"], metric, timeout)
    return float(record[metric]), record


def _variant(text: str) -> tuple[str, list[str]]:
    name, sep, args = text.partition("=")
    if not sep or not name.strip() or not args.strip():
        raise argparse.ArgumentTypeError(f"--variant {text!r}: give NAME=ARGS (a shoal bench command line)")
    return name.strip(), shlex.split(args)


def main(argv: Sequence[str]) -> int:
    argv = list(argv)
    if argv and not argv[0].startswith("-"):  # an experiment file
        from .evaluation.runner import main as run_file

        return run_file(argv)
    p = argparse.ArgumentParser(prog="shoal bench experiment", description=__doc__.splitlines()[0],
                                epilog="shoal bench experiment FILE.toml [--out results.csv] runs an experiment "
                                       "file instead (docs/benchmarks.md)")
    p.add_argument("--variant", type=_variant, action="append", required=True, metavar="NAME=ARGS",
                   help="a variant: a name and a shoal bench command line (repeat for each)")
    p.add_argument("--metric", default="time_per_step", help="the JSON field compared (time_per_step)")
    p.add_argument("--baseline", help="the variant ratios are relative to (default: the first)")
    p.add_argument("--trials", type=int, default=5, help="rounds of every variant (5, at least 2)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each variant first (1)")
    p.add_argument("--seed", type=int, default=None, help="seed of the run order (default: random, recorded)")
    p.add_argument("--timeout", type=float, default=1200, help="seconds one run may take (1200)")
    p.add_argument("--out", type=Path, default=None, help="results file (default results/experiment-<UTC time>.json)")
    ns = p.parse_args(argv)
    names = [name for name, _ in ns.variant]
    if len(set(names)) != len(names):
        p.error(f"variant names must differ: {names}")
    baseline = ns.baseline or names[0]
    if baseline not in names:
        p.error(f"--baseline {baseline!r} is not a variant: {names}")
    if ns.trials < 2:
        p.error("--trials: at least 2 (a confidence interval needs them)")
    seed = ns.seed if ns.seed is not None else random.SystemRandom().randrange(2**31)
    order = random.Random(seed)
    variants = dict(ns.variant)
    samples: dict[str, list[float]] = {name: [] for name in names}
    records: dict[str, list[dict]] = {name: [] for name in names}
    try:
        for name in names:
            for _ in range(ns.warmup):
                run_variant(variants[name], ns.metric, ns.timeout)
        for trial in range(ns.trials):
            round_ = names[:]
            order.shuffle(round_)
            for name in round_:
                value, record = run_variant(variants[name], ns.metric, ns.timeout)
                samples[name].append(value)
                records[name].append(record)
            print(f"round {trial + 1}/{ns.trials}: " + ", ".join(f"{n} {samples[n][-1]:.6g}" for n in round_),
                  file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"shoal bench experiment: {exc}", file=sys.stderr)
        return 1
    print(f"{ns.metric}: median [95% CI] of {ns.trials} interleaved trials (seed {seed}); ratio to {baseline}")
    summary = {}
    base = samples[baseline]
    for name in names:
        s = samples[name]
        ci = median_ci(s)
        line = f"  {name:<16} {median(s):.6g} [{ci.low:.6g}, {ci.high:.6g}]"
        entry: dict = {"median": median(s), "ci": [ci.low, ci.high], "samples": s}
        if name != baseline:
            r, rci = ratio_of_medians(s, base), ratio_ci(s, base)
            test = faster_test(s, base, lower_is_better=True)
            line += f"   ratio {r:.3f} [{rci.low:.3f}, {rci.high:.3f}] (speed-up {1 / r:.2f}x), p(faster) {test.pvalue:.3g}"
            entry.update(ratio=r, ratio_ci=[rci.low, rci.high], p_faster=test.pvalue)
        print(line)
        summary[name] = entry
    out = ns.out or Path("results") / f"experiment-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"metric": ns.metric, "baseline": baseline, "seed": seed, "trials": ns.trials,
                               "variants": {n: shlex.join(variants[n]) for n in names}, "summary": summary,
                               "records": records}, indent=1))
    print(f"samples and records: {out}")
    return 0
