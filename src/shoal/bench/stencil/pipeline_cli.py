"""``shoal bench stencil-pipeline``: is the frontend's Python overhead hidden?

The CharmStencil paper's Fig. 6 experiment: a 3-D Laplace solver (7-point Jacobi)
run with the frontend recording every step and sending ``backend_freq`` steps per
batch, for several ``backend_freq``, against the same program sent once as a backend
loop (``solve(steps=N)``). A ratio near 1 means the recording overlapped the
computation. The frontend's own overhead (recording and pickling the steps, with no
backend) is timed too, and the share of it hidden is ``1 - max(0, T - T_loop) /
T_frontend``. ``--problem jacobi2d`` runs the 2-D check of the issue (2048², 1000 steps).

``--frontend link`` runs the frontend as a plain process talking to a ``shoal serve``
backend of ``--pes`` PEs over the client–server link (issue 16's experiment);
``--frontend both`` runs each configuration both ways and prints link/job ratios.

Defaults fit a 2-core machine (128³ points, 200 steps, 2 PEs); the paper's size is
``--n 256 --steps 1024``. Each configuration runs in its own process or job
(:mod:`.pipeline_worker`), interleaved over the rounds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from .jobs import run_worker, worker_command
from .pipeline_worker import PROBLEMS

__all__ = ["main"]

#: the program each configuration runs
WORKER = Path(__file__).with_name("pipeline_worker.py")
LOOP = "one backend loop"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoal bench stencil-pipeline", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--problem", choices=PROBLEMS, default="laplace3d")
    p.add_argument("--n", type=int, default=0, help="grid size per axis (default 128 for laplace3d, 2048 for jacobi2d)")
    p.add_argument("--steps", type=int, default=0, help="steps (default 200 for laplace3d, 1000 for jacobi2d)")
    p.add_argument("--freqs", default="1,2,5,10,20,50,100,200", help="backend_freq values to try")
    p.add_argument("--pes", type=int, default=2, help="PEs (1: in-process; more: mpiexec)")
    p.add_argument("--odf", type=int, default=1, help="tiles per PE")
    p.add_argument("--frontend", choices=("job", "link", "both"), default="job",
                   help="job: the frontend is PE 0 of the job; link: a separate process over shoal serve's link")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--json", default="", help="write the results to this JSON file")
    p.add_argument("--figure", default="", help="write a plot (PNG) here (needs matplotlib)")
    p.add_argument("--timeout", type=float, default=1800.0)
    return p


def main(argv: Sequence[str]) -> int:
    ns = _parser().parse_args(list(argv))
    n = ns.n or (128 if ns.problem == "laplace3d" else 2048)
    steps = ns.steps or (200 if ns.problem == "laplace3d" else 1000)
    results: dict[str, Any] = {}
    configs = [("loop", 1)] + [("steps", int(f)) for f in ns.freqs.split(",")]
    ways = ("job", "link") if ns.frontend == "both" else (ns.frontend,)
    print(f"{ns.problem}: {n}^{3 if ns.problem == 'laplace3d' else 2} points, {steps} steps, {ns.pes} PE(s), "
          f"odf {ns.odf}; {ns.trials} rounds, configurations interleaved in each")
    times: dict[str, list[float]] = {}
    overhead: dict[int, list[float]] = {}  # backend_freq -> seconds the frontend alone takes
    errors: dict[str, str] = {}
    names = {(c, w): (LOOP if c[0] == "loop" else f"backend_freq={c[1]}") + (" (link)" if w == "link" else "")
             for c in configs for w in ways}
    for _ in range(ns.trials):  # interleave: load that drifts hits every configuration alike
        for (mode, freq), way in names:
            name = names[((mode, freq), way)]
            if name in errors:
                continue
            args = [ns.problem, str(n), str(steps), mode, str(freq), str(ns.odf), "1"]
            cmd = worker_command(WORKER, [*args, str(ns.pes)], 1) if way == "link" else \
                worker_command(WORKER, args, ns.pes)
            out = run_worker(cmd, ns.timeout)
            if isinstance(out, str):
                errors[name] = out
            else:
                times.setdefault(name, []).extend(out)
        for _, freq in configs[1:]:  # the frontend alone: recording and pickling, no backend
            out = run_worker(worker_command(WORKER, [ns.problem, str(n), str(steps), "record", str(freq),
                                                     str(ns.odf), "1"], 1), ns.timeout)
            if not isinstance(out, str):
                overhead.setdefault(freq, []).extend(out)
    for way in ways:
        base_name = names[(("loop", 1), way)]
        base = statistics.median(times[base_name]) if base_name in times else None
        for mode, freq in configs:
            name = names[((mode, freq), way)]
            if name in errors:
                print(f"  {name:25s} {errors[name]}")
                results[name] = {"error": errors[name]}
                continue
            med = statistics.median(times[name])
            results[name] = {"mode": mode, "backend_freq": freq, "frontend": way, "median_s": med,
                             "times_s": times[name]}
            spread = f"[{min(times[name]):.3f}-{max(times[name]):.3f}]"
            job = names.get(((mode, freq), "job"))
            vs_job = (f"  {med / statistics.median(times[job]):.2f}x the in-job frontend"
                      if way == "link" and job in times else "")
            hidden = ""
            if mode == "steps" and base and freq in overhead:
                front = statistics.median(overhead[freq])
                noise = max(times[base_name]) - min(times[base_name])
                results[name].update(frontend_s=front)
                if front < noise:  # the difference to the loop says nothing about the frontend
                    hidden = f"  frontend {front:.3f} s (< the loop's spread, {noise:.3f} s: share hidden not resolved)"
                else:
                    share = min(1.0, max(0.0, 1 - max(0.0, med - base) / front))
                    results[name].update(hidden_share=share)
                    hidden = f"  frontend {front:.3f} s, {100 * share:.0f}% hidden"
            print(f"  {name:25s} {med:8.3f} s {spread:>15s}" + (f"  {med / base:.2f}x the loop" if base else "")
                  + vs_job + hidden)
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"problem": ns.problem, "n": n, "steps": steps, "pes": ns.pes, "frontend": ns.frontend,
                       "results": results}, f, indent=2)
    if ns.figure:
        _figure(results, ns.figure, ns.problem)
    return 0


def _figure(results: dict, path: str, problem: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no figure: matplotlib is not installed", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(5, 4))
    for way, style in (("job", "o-"), ("link", "s-")):
        pts = sorted((r["backend_freq"], r["median_s"]) for r in results.values()
                     if r.get("mode") == "steps" and r.get("frontend") == way)
        if pts:
            ax.plot([f for f, _ in pts], [t for _, t in pts], style,
                    label=f"batches of backend_freq steps ({'in-job frontend' if way == 'job' else 'over the link'})")
        loop = results.get(LOOP + (" (link)" if way == "link" else ""), {}).get("median_s")
        if loop:
            ax.axhline(loop, color="k" if way == "job" else "grey", linestyle="--", label=f"{LOOP} ({way})")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("backend_freq")
    ax.set_ylabel("seconds")
    ax.set_title(f"{problem}: hiding the frontend")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")
