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

``--device cuda`` compares on a GPU instead (Jacobi and Burgers): ``shoal-cuda-<P>pe``
(the DSL with ``device="cuda"`` on P PEs sharing the GPUs), ``cupy`` and ``cupy-raw``
(hand-written CuPy: array expressions, and one fused kernel a step;
:mod:`.cupy_peers`), and the CPU backend ``shoal-<P>pe`` (``--cpu-pes``); the table
gives each GPU system's speed-up over the CPU backend and its time against
``cupy-raw``, and whether it equals NumPy bit for bit on a small grid. Without a GPU it
exits with 2 and the reason.

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

from .jobs import run_worker_record, worker_command
from .problems import PROBLEMS

__all__ = ["main", "systems", "json_record", "build_parser"]

#: the program each system runs
WORKER = Path(__file__).with_name("worker.py")


def systems(problem: str, n: int, steps: int, pes: Sequence[int], odf: int, threads: int,
            numba: bool, device: str = "cpu", cpu_pes: Sequence[int] = ()) -> list[tuple[str, list[str]]]:
    """``(name, command)`` of every system for ``problem``, each command one timed run
    (``device="cuda"``: the GPU systems, then the CPU backend on ``cpu_pes``)."""
    numpy_steps = max(1, steps // 5) if problem != "jacobi" else steps

    def run(system: str, k: int, extra: int, on: int | None = None) -> list[str]:
        return worker_command(WORKER, [system, problem, str(n), str(k), "1", str(extra)], on)

    if device == "cuda":
        gpu = [("cupy", run("cupy", steps, 0)), ("cupy-raw", run("cupy-raw", steps, 0))]
        gpu += [(f"shoal-cuda-{p}pe", run("shoal-cuda", steps, odf, p)) for p in pes]
        return gpu + [(f"shoal-{p}pe", run("shoal", steps, odf, p)) for p in cpu_pes]

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
    p.add_argument("--problems", default="",
                   help=f"comma-separated: {', '.join(PROBLEMS)} (default: all; with --device cuda: jacobi,burgers)")
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
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: shoal with device='cuda' against hand-written CuPy and the CPU backend (needs a GPU)")
    p.add_argument("--cpu-pes", default="", help="with --device cuda: PE counts of the CPU backend (default: --pes)")
    return p


def main(argv: Sequence[str]) -> int:
    ns = build_parser().parse_args(list(argv))
    ns.n3 = ns.n3 or min(ns.n, 512)
    have_numba = importlib.util.find_spec("numba") is not None
    pes = [int(x) for x in ns.pes.split(",")]
    cpu_pes = [int(x) for x in (ns.cpu_pes or ns.pes).split(",")]
    wanted = set(filter(None, ns.systems.split(",")))
    cuda = ns.device == "cuda"
    if cuda:
        from shoal.stencil.cuda import cuda_status

        why = cuda_status()
        if why is not None:
            print(f"shoal bench stencil --device cuda: needs a CUDA GPU, CuPy and nvcc: {why}", file=sys.stderr)
            return 2
    ns.problems = ns.problems or ("jacobi,burgers" if cuda else ",".join(PROBLEMS))
    results: dict[str, dict[str, Any]] = {}
    for problem in ns.problems.split(","):
        if problem not in PROBLEMS or (cuda and problem == "laplace3d"):
            which = "jacobi, burgers" if cuda else ", ".join(PROBLEMS)
            print(f"shoal bench stencil: unknown problem {problem!r} ({which})", file=sys.stderr)
            return 2
        n = ns.n3 if problem == "laplace3d" else ns.n
        every = systems(problem, n, ns.steps, pes, ns.odf, ns.threads, have_numba, ns.device, cpu_pes)
        chosen = [(name, cmd) for name, cmd in every if not wanted or name in wanted]
        rows = results.setdefault(problem, {})
        times: dict[str, list[float]] = {}
        same: dict[str, bool] = {}  # GPU systems: equal to NumPy bit for bit in every round
        checked: dict[str, str] = {}
        for r in range(ns.trials):  # rounds: every system once per round, so drifting load hits all alike
            for name, cmd in chosen:
                if name in rows:
                    continue  # failed in an earlier round
                out = run_worker_record(cmd, ns.timeout)
                if isinstance(out, str):
                    rows[name] = {"error": out}
                    print(f"  {problem:8s} {name:14s} {out}")
                    continue
                times.setdefault(name, []).extend(out["times"])
                if "identical" in out:
                    same[name] = same.get(name, True) and bool(out["identical"])
                    checked[name] = out.get("check", "")
                print(f"  {problem:8s} {name:14s} round {r + 1}: {out['times'][0] * 1e3:9.3f} ms/step", flush=True)
        for name, _ in chosen:
            if name in times and name not in rows:
                rows[name] = {"median_s": statistics.median(times[name]), "times_s": times[name]}
                if name in same:
                    rows[name].update(identical=same[name], check=checked[name])
        results[problem] = {name: rows[name] for name, _ in chosen if name in rows}
    if cuda:
        _cuda_table(results, ns)
    else:
        _table(results, ns)
    record = json_record(results, ns)
    if ns.json and ns.json != "-":
        with open(ns.json, "w") as f:
            json.dump(record, f, indent=2)
    if ns.figure:
        _figure(results, ns.figure, ns.n, ns.n3)
    if ns.json == "-":
        print(json.dumps(record), flush=True)
    if cuda:  # on a GPU a failed system or a bit of difference is a failed check
        bad = [f"{p}/{k}" for p, rows in results.items() for k, r in rows.items()
               if "error" in r or r.get("identical") is False]
        if bad:
            print(f"shoal bench stencil --device cuda: failed or not NumPy's bits: {', '.join(bad)}", file=sys.stderr)
            return 1
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
                if "identical" in r:
                    row.update(identical=r["identical"])
            else:
                row.update(error=r["error"])
            rows.append(row)
    return {"bench": "stencil", "n": ns.n, "n3": ns.n3, "steps": ns.steps, "odf": ns.odf, "threads": ns.threads,
            "device": ns.device, "unit": "s", "results": results, "rows": rows}


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


def _cpu_reference(rows: dict) -> str | None:
    """The CPU backend row GPU systems are compared with: 2 PEs (the issue's 2 cores) if
    it ran, else the fastest CPU backend row."""
    cpu = {k: r["median_s"] for k, r in rows.items() if k.startswith("shoal-") and not k.startswith("shoal-cuda")
           and "median_s" in r}
    if "shoal-2pe" in cpu:
        return "shoal-2pe"
    return min(cpu, key=lambda k: cpu[k]) if cpu else None


def _cuda_table(results: dict, ns: argparse.Namespace) -> None:
    print(f"\nper-step time on a GPU, {ns.n}x{ns.n} float64 grid (median of {ns.trials} interleaved rounds of "
          f"{ns.steps} steps); speed-up over the CPU backend, time against hand-written fused CuPy (cupy-raw), "
          "and whether each GPU system equals NumPy bit for bit on a small grid")
    print(f"{'problem':9s} {'system':14s} {'ms/step':>10s} {'speed-up':>20s} {'x cupy-raw':>10s} {'bit-identical':>22s}")
    for problem, rows in results.items():
        ref = _cpu_reference(rows)
        cpu = rows[ref]["median_s"] if ref else None
        raw = rows.get("cupy-raw", {}).get("median_s")
        for name, r in rows.items():
            if "median_s" not in r:
                print(f"{problem:9s} {name:14s} {r['error']}")
                continue
            t = r["median_s"]
            up = f"{cpu / t:8.1f}x {ref}" if cpu and name != ref else ""
            vs_raw = f"{t / raw:9.2f}x" if raw else ""
            ident = "" if "identical" not in r else ("yes" if r["identical"] else "NO") + f" ({r['check']})"
            print(f"{problem:9s} {name:14s} {t * 1e3:10.3f} {up:>20s} {vs_raw:>10s} {ident:>22s}")


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
