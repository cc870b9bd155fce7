"""``shoal bench stencil-pipeline``: is the frontend's Python overhead hidden?

The CharmStencil paper's Fig. 6 experiment: a 3-D Laplace solver (7-point Jacobi)
run with the frontend recording every step and sending ``backend_freq`` steps per
batch, for several ``backend_freq``, against the same program sent once as a backend
loop (``solve(steps=N)``). A ratio near 1 means the recording overlapped the
computation. ``--problem jacobi2d`` runs the 2-D check of the issue (2048², 1000 steps).

Defaults fit a 2-core machine (128³ points, 200 steps, 2 PEs); the paper's size is
``--n 256 --steps 1024``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Sequence

__all__ = ["main"]


def _worker(problem: str, n: int, steps: int, mode: str, freq: int, odf: int, trials: int) -> None:
    from shoal.stencil import Stencil

    shape = (n, n, n) if problem == "laplace3d" else (n, n)

    def update(a: Any, b: Any) -> None:
        if problem == "laplace3d":
            b[1:-1, 1:-1, 1:-1] = (a[:-2, 1:-1, 1:-1] + a[2:, 1:-1, 1:-1] + a[1:-1, :-2, 1:-1]
                                   + a[1:-1, 2:, 1:-1] + a[1:-1, 1:-1, :-2] + a[1:-1, 1:-1, 2:]) / 6.0
        else:
            b[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])

    class Solver(Stencil):
        def __init__(self) -> None:
            self.a, self.b = self.initialize(shape, backend_freq=freq, odf=odf, num_fields=2)
            self.count = 0

        def step(self) -> None:  # the shoal spelling: solve(steps=N) sends one loop
            update(self.a, self.b)
            self.a, self.b = self.b, self.a

        def iterate(self, nsteps: int) -> bool:  # the CharmStencil spelling: per-step batches
            update(self.a, self.b)
            self.a, self.b = self.b, self.a
            self.count += 1
            return self.count < nsteps

    s = Solver()
    s.a[0, ...] = s.b[0, ...] = 1.0

    def run(k: int) -> None:
        if mode == "loop":
            s.solve(steps=k)
        else:
            s.count = 0
            s.solve(k)
        s.sync()

    run(min(steps, 4))
    times = []
    for _ in range(trials):
        t = time.perf_counter()
        run(steps)
        times.append(time.perf_counter() - t)
    print("RESULT " + json.dumps(times), flush=True)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="shoal bench stencil-pipeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--problem", choices=("laplace3d", "jacobi2d"), default="laplace3d")
    p.add_argument("--n", type=int, default=0, help="grid size per axis (default 128 for laplace3d, 2048 for jacobi2d)")
    p.add_argument("--steps", type=int, default=0, help="steps (default 200 for laplace3d, 1000 for jacobi2d)")
    p.add_argument("--freqs", default="1,2,5,10,20,50,100,200", help="backend_freq values to try")
    p.add_argument("--pes", type=int, default=2, help="PEs (1: in-process; more: mpiexec)")
    p.add_argument("--odf", type=int, default=1, help="tiles per PE")
    p.add_argument("--trials", type=int, default=3)
    p.add_argument("--json", default="", help="write the results to this JSON file")
    p.add_argument("--figure", default="", help="write a plot (PNG) here (needs matplotlib)")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    ns = p.parse_args(list(argv))
    if ns.worker:
        w = ns.worker
        _worker(w[0], int(w[1]), int(w[2]), w[3], int(w[4]), int(w[5]), int(w[6]))
        return 0
    from .bench import _run_worker

    n = ns.n or (128 if ns.problem == "laplace3d" else 2048)
    steps = ns.steps or (200 if ns.problem == "laplace3d" else 1000)
    me = os.path.abspath(__file__)
    py = sys.executable
    results: dict[str, Any] = {}
    configs = [("loop", 1)] + [("steps", int(f)) for f in ns.freqs.split(",")]
    print(f"{ns.problem}: {n}^{3 if ns.problem == 'laplace3d' else 2} points, {steps} steps, {ns.pes} PE(s), "
          f"odf {ns.odf}; {ns.trials} rounds, configurations interleaved in each")
    times: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    names = {c: "one backend loop" if c[0] == "loop" else f"backend_freq={c[1]}" for c in configs}
    for _ in range(ns.trials):  # interleave: load that drifts hits every configuration alike
        for mode, freq in configs:
            name = names[(mode, freq)]
            if name in errors:
                continue
            args = ["--worker", ns.problem, str(n), str(steps), mode, str(freq), str(ns.odf), "1"]
            cmd = [py, me, *args] if ns.pes == 1 else [py, "-m", "shoal", "run", "-n", str(ns.pes), me, *args]
            out = _run_worker(cmd, ns.timeout)
            if isinstance(out, str):
                errors[name] = out
            else:
                times.setdefault(name, []).extend(out)
    base = statistics.median(times["one backend loop"]) if "one backend loop" in times else None
    for mode, freq in configs:
        name = names[(mode, freq)]
        if name in errors:
            print(f"  {name:18s} {errors[name]}")
            results[name] = {"error": errors[name]}
            continue
        med = statistics.median(times[name])
        results[name] = {"mode": mode, "backend_freq": freq, "median_s": med, "times_s": times[name]}
        spread = f"[{min(times[name]):.3f}-{max(times[name]):.3f}]"
        print(f"  {name:18s} {med:8.3f} s {spread:>15s}" + (f"  {med / base:.2f}x the loop" if base else ""))
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"problem": ns.problem, "n": n, "steps": steps, "pes": ns.pes, "results": results}, f, indent=2)
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
    pts = sorted((r["backend_freq"], r["median_s"]) for r in results.values() if r.get("mode") == "steps")
    fig, ax = plt.subplots(figsize=(5, 4))
    if pts:
        ax.plot([f for f, _ in pts], [t for _, t in pts], "o-", label="batches of backend_freq steps")
    loop = results.get("one backend loop", {}).get("median_s")
    if loop:
        ax.axhline(loop, color="k", linestyle="--", label="one backend loop")
    ax.set_xscale("log")
    ax.set_xlabel("backend_freq")
    ax.set_ylabel("seconds")
    ax.set_title(f"{problem}: hiding the frontend")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        w = sys.argv[2:]
        _worker(w[0], int(w[1]), int(w[2]), w[3], int(w[4]), int(w[5]), int(w[6]))
    else:
        sys.exit(main(sys.argv[1:]))
