"""``shoal bench stencil``: the stencil DSL against NumPy and hand-written C, on this machine.

Problems: Jacobi 5-point (2-D Laplace) and 2-D Burgers (two coupled fields), on an
n×n float64 grid, and the 7-point 3-D Laplace on an n3×n3×n3 one. Systems:

* ``numpy`` — the statements on whole arrays (the reference);
* ``c`` — a hand-written C loop, 1 thread, compiled with the same flags as kernels, on
  arrays whose rows start their first written point on a cache line (as shoal's tiles);
* ``c-omp`` — the same loop with OpenMP on ``--threads`` threads (if -fopenmp builds);
* ``numba`` — ``@njit(parallel=True)`` with ``prange`` on ``--threads`` threads (if
  Numba is installed);
* ``shoal-<P>pe`` — the DSL on P PEs (``--pes``; 1 PE in-process, more under mpiexec),
  the time loop sent once (``solve(steps=...)``).

Each system runs in its own process (:mod:`.worker`): warm-up, then ``--trials`` timed
runs of ``--steps`` steps; the table shows the median time per step and ratios.
``--json FILE`` and ``--figure`` write the numbers and a bar chart; ``--json -`` ends
the output with the JSON as one line instead, the result ``shoal bench experiment``
reads from a run (:func:`json_record`: one row per problem × system).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from .jobs import run_worker, worker_command
from .problems import PROBLEMS

__all__ = ["main", "systems", "json_record", "build_parser"]

#: the program each system runs
WORKER = Path(__file__).with_name("worker.py")


def systems(problem: str, n: int, steps: int, pes: Sequence[int], odf: int, threads: int,
            numba: bool) -> list[tuple[str, list[str]]]:
    """``(name, command)`` of every system for ``problem``, each command one timed run."""
    numpy_steps = max(1, steps // 5) if problem != "jacobi" else steps

    def run(system: str, k: int, extra: int, on: int | None = None) -> list[str]:
        return worker_command(WORKER, [system, problem, str(n), str(k), "1", str(extra)], on)

    out = [
        ("numpy", run("numpy", numpy_steps, 0)),
        ("c", run("c", steps, 1)),
        (f"c-omp{threads}", run("c", steps, threads)),
    ]
    if numba:
        out.append((f"numba{threads}", run("numba", steps, threads)))
    out += [(f"shoal-{p}pe", run("shoal", steps, odf, p)) for p in pes]
    return out


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``shoal bench stencil`` (``shoal bench experiment`` reads its options too)."""
    p = argparse.ArgumentParser(prog="shoal bench stencil", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--problems", default=",".join(PROBLEMS), help=f"comma-separated: {', '.join(PROBLEMS)}")
    p.add_argument("--n", type=int, default=8192, help="grid size n (an n x n grid; default 8192)")
    p.add_argument("--n3", type=int, default=0, help="grid size of laplace3d (n3 x n3 x n3; default: n, at most 512)")
    p.add_argument("--steps", type=int, default=10,
                   help="steps per timed run (NumPy Burgers and laplace3d: 1/5 of it, at least 1)")
    p.add_argument("--trials", type=int, default=3, help="rounds; each runs every system once (the median is shown)")
    p.add_argument("--pes", default="1,2", help="PE counts for shoal (comma-separated)")
    p.add_argument("--odf", type=int, default=1, help="tiles per PE")
    p.add_argument("--threads", type=int, default=2, help="threads of the C OpenMP and Numba peers")
    p.add_argument("--systems", default="", help="only these systems (comma-separated names)")
    p.add_argument("--json", default="", metavar="FILE",
                   help="write the results to this JSON file (-: as the last line of the output)")
    p.add_argument("--figure", default="", help="write a bar chart (PNG) here (needs matplotlib)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per system run")
    return p


def main(argv: Sequence[str]) -> int:
    ns = build_parser().parse_args(list(argv))
    ns.n3 = ns.n3 or min(ns.n, 512)
    have_numba = importlib.util.find_spec("numba") is not None
    pes = [int(x) for x in ns.pes.split(",")]
    wanted = set(filter(None, ns.systems.split(",")))
    results: dict[str, dict[str, Any]] = {}
    for problem in ns.problems.split(","):
        if problem not in PROBLEMS:
            print(f"shoal bench stencil: unknown problem {problem!r} ({', '.join(PROBLEMS)})", file=sys.stderr)
            return 2
        n = ns.n3 if problem == "laplace3d" else ns.n
        chosen = [(name, cmd) for name, cmd in systems(problem, n, ns.steps, pes, ns.odf, ns.threads, have_numba)
                  if not wanted or name in wanted]
        rows = results.setdefault(problem, {})
        times: dict[str, list[float]] = {}
        for r in range(ns.trials):  # rounds: every system once per round, so drifting load hits all alike
            for name, cmd in chosen:
                if name in rows:
                    continue  # failed in an earlier round
                out = run_worker(cmd, ns.timeout)
                if isinstance(out, str):
                    rows[name] = {"error": out}
                    print(f"  {problem:8s} {name:12s} {out}")
                    continue
                times.setdefault(name, []).extend(out)
                print(f"  {problem:8s} {name:12s} round {r + 1}: {out[0] * 1e3:9.2f} ms/step", flush=True)
        for name, _ in chosen:
            if name in times and name not in rows:
                rows[name] = {"median_s": statistics.median(times[name]), "times_s": times[name]}
        results[problem] = {name: rows[name] for name, _ in chosen if name in rows}
    _table(results, ns)
    record = json_record(results, ns)
    if ns.json and ns.json != "-":
        with open(ns.json, "w") as f:
            json.dump(record, f, indent=2)
    if ns.figure:
        _figure(results, ns.figure, ns.n, ns.n3)
    if ns.json == "-":
        print(json.dumps(record), flush=True)
    return 0


def json_record(results: dict[str, dict[str, Any]], ns: argparse.Namespace) -> dict[str, Any]:
    """What ``--json`` writes: the settings, ``results`` (problem -> system -> median and
    times in seconds, or the error), and the same as flat ``rows`` (``problem, system,
    time_per_step`` in seconds (the median), ``trials``; ``error`` instead for a system
    that failed)."""
    rows: list[dict[str, Any]] = []
    for problem, by_system in results.items():
        for name, r in by_system.items():
            row: dict[str, Any] = {"problem": problem, "system": name}
            if "median_s" in r:
                row.update(time_per_step=r["median_s"], trials=len(r["times_s"]))
            else:
                row.update(error=r["error"])
            rows.append(row)
    return {"bench": "stencil", "n": ns.n, "n3": ns.n3, "steps": ns.steps, "odf": ns.odf, "threads": ns.threads,
            "unit": "s", "results": results, "rows": rows}


def _table(results: dict, ns: argparse.Namespace) -> None:
    print(f"\nper-step time, {ns.n}x{ns.n} float64 grid, laplace3d {ns.n3}^3 "
          f"(median of {ns.trials} interleaved rounds of {ns.steps} steps)")
    print(f"{'problem':9s} {'system':12s} {'ms/step':>10s} {'vs numpy':>9s} {'vs c':>7s} {'vs best 2T':>10s}")
    for problem, rows in results.items():
        base = rows.get("numpy", {}).get("median_s")
        c1 = rows.get("c", {}).get("median_s")
        peers = [r["median_s"] for k, r in rows.items() if (k.startswith("c-omp") or k.startswith("numba")) and "median_s" in r]
        best2 = min(peers) if peers else None
        for name, r in rows.items():
            if "median_s" not in r:
                print(f"{problem:9s} {name:12s} {r['error']}")
                continue
            t = r["median_s"]
            vs_np = f"{base / t:8.1f}x" if base else ""
            vs_c = f"{t / c1:6.2f}x" if c1 else ""
            vs_b = f"{t / best2:9.2f}x" if best2 else ""
            print(f"{problem:9s} {name:12s} {t * 1e3:10.2f} {vs_np:>9s} {vs_c:>7s} {vs_b:>10s}")


def _figure(results: dict, path: str, n: int, n3: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no figure: matplotlib is not installed", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, (problem, rows) in zip(axes[0], results.items()):
        names = [k for k, r in rows.items() if "median_s" in r]
        values = [rows[k]["median_s"] * 1e3 for k in names]
        bars = ax.bar(names, values)
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], fontsize=8)
        ax.set_yscale("log")
        if values:
            ax.set_ylim(bottom=min(values) / 3)
        ax.set_ylabel("ms per step (log)")
        ax.set_title(f"{problem}, {n3}^3" if problem == "laplace3d" else f"{problem}, {n}x{n}")
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")
