# mypy: disable-error-code="has-type,call-arg"
"""``shoal bench stencil``: the stencil DSL against NumPy and hand-written C, on this machine.

Problems: Jacobi 5-point (2-D Laplace) and 2-D Burgers (two coupled fields), on an
n×n float64 grid. Systems:

* ``numpy`` — the statements on whole arrays (the reference);
* ``c`` — a hand-written C loop, 1 thread, compiled with the same flags as kernels, on
  arrays whose rows start their first written point on a cache line (as shoal's tiles);
* ``c-omp`` — the same loop with OpenMP on ``--threads`` threads (if -fopenmp builds);
* ``numba`` — ``@njit(parallel=True)`` with ``prange`` on ``--threads`` threads (if
  Numba is installed);
* ``shoal-<P>pe`` — the DSL on P PEs (``--pes``; 1 PE in-process, more under mpiexec),
  the time loop sent once (``solve(steps=...)``).

Each system runs in its own process: warm-up, then ``--trials`` timed runs of
``--steps`` steps; the table shows the median time per step and ratios. ``--json`` and
``--figure`` write the numbers and a bar chart.

This file is also the worker each system runs (``python bench.py --worker ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Sequence

import numpy as np

__all__ = ["main", "jacobi_numpy", "burgers_numpy"]

NU = 0.01


# -- the problems, written once for NumPy arrays and stencil fields ----------------------------
def jacobi_numpy(x: Any, y: Any) -> None:
    y[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])


def burgers_consts(n: int) -> tuple[float, float, float]:
    dx = 2.0 / (n - 1)
    dt = 0.2 * dx * dx / NU / 10
    return dx, dx, dt


def burgers_numpy(u: Any, v: Any, un: Any, vn: Any, n: int) -> None:
    dx, dy, dt = burgers_consts(n)
    c, w, e, s, nth = (slice(1, -1), slice(1, -1)), (slice(1, -1), slice(0, -2)), (slice(1, -1), slice(2, None)), \
        (slice(0, -2), slice(1, -1)), (slice(2, None), slice(1, -1))
    un[c] = (u[c] - dt / dx * u[c] * (u[c] - u[w]) - dt / dy * v[c] * (u[c] - u[s])
             + NU * dt / dx**2 * (u[e] - 2 * u[c] + u[w]) + NU * dt / dy**2 * (u[nth] - 2 * u[c] + u[s]))
    vn[c] = (v[c] - dt / dx * u[c] * (v[c] - v[w]) - dt / dy * v[c] * (v[c] - v[s])
             + NU * dt / dx**2 * (v[e] - 2 * v[c] + v[w]) + NU * dt / dy**2 * (v[nth] - 2 * v[c] + v[s]))


HAND_C = r"""
#include <math.h>
void jacobi(double *restrict x, double *restrict y, long n, long steps) {
  for (long s = 0; s < steps; ++s) {
    #pragma omp parallel for schedule(static)
    for (long i = 1; i < n - 1; ++i)
      for (long j = 1; j < n - 1; ++j)
        y[i*n+j] = 0.25 * (((x[(i-1)*n+j] + x[(i+1)*n+j]) + x[i*n+j-1]) + x[i*n+j+1]);
    double *t = x; x = y; y = t;
  }
}
void burgers(double *restrict u, double *restrict v, double *restrict un, double *restrict vn,
             long n, long steps, double dx, double dy, double dt, double nu) {
  const double a = dt / dx, b = dt / dy, cx = nu * dt / (dx * dx), cy = nu * dt / (dy * dy);
  for (long s = 0; s < steps; ++s) {
    #pragma omp parallel for schedule(static)
    for (long i = 1; i < n - 1; ++i)
      for (long j = 1; j < n - 1; ++j) {
        const long p = i*n+j;
        un[p] = u[p] - a*u[p]*(u[p]-u[p-1]) - b*v[p]*(u[p]-u[p-n]) + cx*(u[p+1]-2*u[p]+u[p-1]) + cy*(u[p+n]-2*u[p]+u[p-n]);
        vn[p] = v[p] - a*u[p]*(v[p]-v[p-1]) - b*v[p]*(v[p]-v[p-n]) + cx*(v[p+1]-2*v[p]+v[p-1]) + cy*(v[p+n]-2*v[p]+v[p-n]);
      }
    double *t = u; u = un; un = t; t = v; v = vn; vn = t;
  }
}
"""


def _initial(problem: str, n: int) -> list[np.ndarray]:
    if problem == "jacobi":
        x = np.zeros((n, n))
        x[0, :] = x[-1, :] = x[:, 0] = x[:, -1] = 100.0
        return [x, x.copy()]
    u = np.ones((n, n))
    u[n // 4: n // 2, n // 4: n // 2] = 2.0
    return [u, u.copy(), u.copy(), u.copy()]


def _line_aligned(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` whose rows' second point (the first one the loops write) starts a
    64-byte line, as in shoal's tiles: the compiled peers get the same layout. On
    NumPy's own arrays the hand-written Burgers loop took 113 ms, on these 93 ms."""
    raw = np.empty(a.size + 8, dtype=a.dtype)
    off = ((-raw.ctypes.data - a.itemsize) % 64) // a.itemsize
    out = raw[off:off + a.size].reshape(a.shape)
    out[...] = a
    return out


# -- workers --------------------------------------------------------------------------------------
def _time_runs(run: Any, steps: int, trials: int) -> list[float]:
    run(max(1, steps // 5))  # warm-up (compiles, touches memory)
    out = []
    for _ in range(trials):
        t = time.perf_counter()
        run(steps)
        out.append((time.perf_counter() - t) / steps)
    return out


def _worker_numpy(problem: str, n: int, steps: int, trials: int) -> list[float]:
    arrays = _initial(problem, n)

    def run(k: int) -> None:
        a = arrays
        for _ in range(k):
            if problem == "jacobi":
                jacobi_numpy(a[0], a[1])
                a[0], a[1] = a[1], a[0]
            else:
                burgers_numpy(a[0], a[1], a[2], a[3], n)
                a[0], a[2] = a[2], a[0]
                a[1], a[3] = a[3], a[1]

    return _time_runs(run, steps, trials)


def _worker_c(problem: str, n: int, steps: int, trials: int, threads: int) -> list[float]:
    import ctypes

    from shoal.stencil.build import compile_kernel  # the one place a compiler runs

    flags = ("-fopenmp",) if threads > 1 else ()
    if threads > 1:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    lib = ctypes.CDLL(str(compile_kernel(HAND_C, False, flags)))
    arrays = [_line_aligned(a) for a in _initial(problem, n)]
    ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
    if problem == "jacobi":
        def run(k: int) -> None:
            lib.jacobi(ptr[0], ptr[1], ctypes.c_long(n), ctypes.c_long(k))
    else:
        dx, dy, dt = burgers_consts(n)

        def run(k: int) -> None:
            lib.burgers(*ptr, ctypes.c_long(n), ctypes.c_long(k), *(ctypes.c_double(v) for v in (dx, dy, dt, NU)))
    return _time_runs(run, steps, trials)


def _worker_numba(problem: str, n: int, steps: int, trials: int, threads: int) -> list[float]:
    import numba  # noqa: F401 - optional peer

    numba.set_num_threads(threads)

    @numba.njit(parallel=True)
    def jac(x, y, k):  # type: ignore[no-untyped-def]
        for _ in range(k):
            for i in numba.prange(1, x.shape[0] - 1):
                for j in range(1, x.shape[1] - 1):
                    y[i, j] = 0.25 * (x[i - 1, j] + x[i + 1, j] + x[i, j - 1] + x[i, j + 1])
            x, y = y, x

    @numba.njit(parallel=True)
    def burg(u, v, un, vn, k, dx, dy, dt, nu):  # type: ignore[no-untyped-def]
        for _ in range(k):
            for i in numba.prange(1, u.shape[0] - 1):
                for j in range(1, u.shape[1] - 1):
                    un[i, j] = (u[i, j] - dt / dx * u[i, j] * (u[i, j] - u[i, j - 1]) - dt / dy * v[i, j] * (u[i, j] - u[i - 1, j])
                                + nu * dt / dx**2 * (u[i, j + 1] - 2 * u[i, j] + u[i, j - 1]) + nu * dt / dy**2 * (u[i + 1, j] - 2 * u[i, j] + u[i - 1, j]))
                    vn[i, j] = (v[i, j] - dt / dx * u[i, j] * (v[i, j] - v[i, j - 1]) - dt / dy * v[i, j] * (v[i, j] - v[i - 1, j])
                                + nu * dt / dx**2 * (v[i, j + 1] - 2 * v[i, j] + v[i, j - 1]) + nu * dt / dy**2 * (v[i + 1, j] - 2 * v[i, j] + v[i - 1, j]))
            u, un = un, u
            v, vn = vn, v

    arrays = [_line_aligned(a) for a in _initial(problem, n)]
    if problem == "jacobi":
        return _time_runs(lambda k: jac(arrays[0], arrays[1], k), steps, trials)
    dx, dy, dt = burgers_consts(n)
    return _time_runs(lambda k: burg(*arrays, k, dx, dy, dt, NU), steps, trials)


def _worker_shoal(problem: str, n: int, steps: int, trials: int, odf: int) -> list[float]:
    from shoal.stencil import Stencil

    if problem == "jacobi":
        class Jacobi(Stencil):
            fields = ("x", "y")

            def step(self) -> None:
                jacobi_numpy(self.x, self.y)
                self.x, self.y = self.y, self.x

        grid: Any = Jacobi((n, n), odf=odf)
        grid.x.from_numpy(_initial(problem, n)[0])
        grid.y.from_numpy(_initial(problem, n)[0])
    else:
        class Burgers(Stencil):
            fields = ("u", "v", "un", "vn")

            def step(self) -> None:
                burgers_numpy(self.u, self.v, self.un, self.vn, n)
                self.u, self.un = self.un, self.u
                self.v, self.vn = self.vn, self.v

        grid = Burgers((n, n), odf=odf)
        for f, a in zip((grid.u, grid.v, grid.un, grid.vn), _initial(problem, n)):
            f.from_numpy(a)

    def run(k: int) -> None:
        grid.solve(steps=k)
        grid.sync()

    return _time_runs(run, steps, trials)


def _worker(argv: Sequence[str]) -> None:
    system, problem, n, steps, trials, extra = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5])
    if system == "numpy":
        times = _worker_numpy(problem, n, steps, trials)
    elif system == "c":
        times = _worker_c(problem, n, steps, trials, extra)
    elif system == "numba":
        times = _worker_numba(problem, n, steps, trials, extra)
    else:
        times = _worker_shoal(problem, n, steps, trials, extra)
    print("RESULT " + json.dumps(times), flush=True)


# -- the driver -----------------------------------------------------------------------------------
def _run_worker(cmd: list[str], timeout: float) -> list[float] | str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return list(json.loads(line[7:]))
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return "failed: " + " | ".join(tail)


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="shoal bench stencil", description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", default="jacobi,burgers", help="comma-separated: jacobi, burgers")
    p.add_argument("--n", type=int, default=8192, help="grid size n (an n x n grid; default 8192)")
    p.add_argument("--steps", type=int, default=10, help="steps per timed run (NumPy Burgers: 1/5 of it, at least 1)")
    p.add_argument("--trials", type=int, default=3, help="rounds; each runs every system once (the median is shown)")
    p.add_argument("--pes", default="1,2", help="PE counts for shoal (comma-separated)")
    p.add_argument("--odf", type=int, default=1, help="tiles per PE")
    p.add_argument("--threads", type=int, default=2, help="threads of the C OpenMP and Numba peers")
    p.add_argument("--systems", default="", help="only these systems (comma-separated names)")
    p.add_argument("--json", default="", help="write the results to this JSON file")
    p.add_argument("--figure", default="", help="write a bar chart (PNG) here (needs matplotlib)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per system run")
    p.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    ns = p.parse_args(list(argv))
    if ns.worker:
        _worker(ns.worker)
        return 0
    me = os.path.abspath(__file__)
    py = sys.executable
    results: dict[str, dict[str, Any]] = {}
    for problem in ns.problems.split(","):
        if problem not in ("jacobi", "burgers"):
            print(f"shoal bench stencil: unknown problem {problem!r} (jacobi, burgers)", file=sys.stderr)
            return 2
        steps = ns.steps
        numpy_steps = max(1, steps // 5) if problem == "burgers" else steps
        systems: list[tuple[str, list[str]]] = [
            ("numpy", [py, me, "--worker", "numpy", problem, str(ns.n), str(numpy_steps), str(ns.trials), "0"]),
            ("c", [py, me, "--worker", "c", problem, str(ns.n), str(steps), str(ns.trials), "1"]),
            (f"c-omp{ns.threads}", [py, me, "--worker", "c", problem, str(ns.n), str(steps), str(ns.trials), str(ns.threads)]),
        ]
        if _have("numba"):
            systems.append((f"numba{ns.threads}", [py, me, "--worker", "numba", problem, str(ns.n), str(steps), str(ns.trials), str(ns.threads)]))
        for pes in (int(x) for x in ns.pes.split(",")):
            args = ["--worker", "shoal", problem, str(ns.n), str(steps), str(ns.trials), str(ns.odf)]
            if pes == 1:
                cmd = [py, me, *args]
            else:
                cmd = [py, "-m", "shoal", "run", "-n", str(pes), me, *args]
            systems.append((f"shoal-{pes}pe", cmd))
        wanted = set(filter(None, ns.systems.split(",")))
        rows = results.setdefault(problem, {})
        chosen = [(name, cmd) for name, cmd in systems if not wanted or name in wanted]
        times: dict[str, list[float]] = {}
        for r in range(ns.trials):  # rounds: every system once per round, so drifting load hits all alike
            for name, cmd in chosen:
                if name in rows:
                    continue  # failed in an earlier round
                cmd = cmd[:-2] + ["1", cmd[-1]]  # one timed run per process
                out = _run_worker(cmd, ns.timeout)
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
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump({"n": ns.n, "steps": ns.steps, "results": results}, f, indent=2)
    if ns.figure:
        _figure(results, ns.figure, ns.n)
    return 0


def _table(results: dict, ns: argparse.Namespace) -> None:
    print(f"\nper-step time, {ns.n}x{ns.n} float64 grid (median of {ns.trials} interleaved rounds of {ns.steps} steps)")
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


def _figure(results: dict, path: str, n: int) -> None:
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
        ax.set_title(f"{problem}, {n}x{n}")
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2:])
    else:
        sys.exit(main(sys.argv[1:]))
