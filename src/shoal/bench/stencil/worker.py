# mypy: disable-error-code="has-type,call-arg"
"""The program one system of ``shoal bench stencil`` runs: time ``--steps`` steps of a problem.

    python worker.py SYSTEM PROBLEM N STEPS TRIALS EXTRA
    shoal run -n P worker.py shoal PROBLEM N STEPS TRIALS ODF

``SYSTEM`` is ``numpy``, ``c`` (``EXTRA`` threads: 1 is the plain loop, more build it
with OpenMP), ``numba`` (``EXTRA`` threads) or ``shoal`` (``EXTRA`` tiles per PE; 1 PE
in this process, more when started by ``shoal run``). ``PROBLEM`` is ``jacobi`` or
``burgers`` on an N×N float64 grid, or ``laplace3d`` on an N×N×N one. After an untimed
warm-up of STEPS/5 steps it runs TRIALS timed runs of STEPS steps and prints their
seconds per step on one ``RESULT`` line (:mod:`.jobs`). ``cli`` (the driver) starts one such process per system and round.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Sequence

from shoal.bench.stencil.jobs import emit
from shoal.bench.stencil.problems import (
    HAND_C, NU, PROBLEMS, burgers_consts, burgers_numpy, initial, jacobi_numpy, laplace3d_numpy, line_aligned,
)

__all__ = ["SYSTEMS", "main"]

#: the systems a worker can run
SYSTEMS = ("numpy", "c", "numba", "shoal")


def _time_runs(run: Callable[[int], Any], steps: int, trials: int) -> list[float]:
    run(max(1, steps // 5))  # warm-up (compiles, touches memory)
    out = []
    for _ in range(trials):
        t = time.perf_counter()
        run(steps)
        out.append((time.perf_counter() - t) / steps)
    return out


def _numpy(problem: str, n: int, steps: int, trials: int) -> list[float]:
    arrays = initial(problem, n)

    def run(k: int) -> None:
        a = arrays
        for _ in range(k):
            if problem == "jacobi":
                jacobi_numpy(a[0], a[1])
                a[0], a[1] = a[1], a[0]
            elif problem == "laplace3d":
                laplace3d_numpy(a[0], a[1])
                a[0], a[1] = a[1], a[0]
            else:
                burgers_numpy(a[0], a[1], a[2], a[3], n)
                a[0], a[2] = a[2], a[0]
                a[1], a[3] = a[3], a[1]

    return _time_runs(run, steps, trials)


def _c(problem: str, n: int, steps: int, trials: int, threads: int) -> list[float]:
    import ctypes

    from shoal.stencil.build import compile_kernel  # the one place a compiler runs

    flags = ("-fopenmp",) if threads > 1 else ()
    if threads > 1:
        os.environ["OMP_NUM_THREADS"] = str(threads)
    lib = ctypes.CDLL(str(compile_kernel(HAND_C, False, flags)))
    arrays = [line_aligned(a) for a in initial(problem, n)]
    ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
    if problem in ("jacobi", "laplace3d"):
        fn = lib.jacobi if problem == "jacobi" else lib.laplace3d

        def run(k: int) -> None:
            fn(ptr[0], ptr[1], ctypes.c_long(n), ctypes.c_long(k))
    else:
        dx, dy, dt = burgers_consts(n)

        def run(k: int) -> None:
            lib.burgers(*ptr, ctypes.c_long(n), ctypes.c_long(k), *(ctypes.c_double(v) for v in (dx, dy, dt, NU)))
    return _time_runs(run, steps, trials)


def _numba(problem: str, n: int, steps: int, trials: int, threads: int) -> list[float]:
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

    @numba.njit(parallel=True)
    def lap(a, b, k):  # type: ignore[no-untyped-def]
        for _ in range(k):
            for i in numba.prange(1, a.shape[0] - 1):
                for j in range(1, a.shape[1] - 1):
                    for m in range(1, a.shape[2] - 1):
                        b[i, j, m] = (a[i - 1, j, m] + a[i + 1, j, m] + a[i, j - 1, m] + a[i, j + 1, m]
                                      + a[i, j, m - 1] + a[i, j, m + 1]) / 6.0
            a, b = b, a

    arrays = [line_aligned(a) for a in initial(problem, n)]
    if problem == "jacobi":
        return _time_runs(lambda k: jac(arrays[0], arrays[1], k), steps, trials)
    if problem == "laplace3d":
        return _time_runs(lambda k: lap(arrays[0], arrays[1], k), steps, trials)
    dx, dy, dt = burgers_consts(n)
    return _time_runs(lambda k: burg(*arrays, k, dx, dy, dt, NU), steps, trials)


def _shoal(problem: str, n: int, steps: int, trials: int, odf: int) -> list[float]:
    from shoal.stencil import Stencil

    if problem == "jacobi":
        class Jacobi(Stencil):
            fields = ("x", "y")

            def step(self) -> None:
                jacobi_numpy(self.x, self.y)
                self.x, self.y = self.y, self.x

        grid: Any = Jacobi((n, n), odf=odf)
        grid.x.from_numpy(initial(problem, n)[0])
        grid.y.from_numpy(initial(problem, n)[0])
    elif problem == "laplace3d":
        class Laplace3D(Stencil):
            fields = ("a", "b")

            def step(self) -> None:
                laplace3d_numpy(self.a, self.b)
                self.a, self.b = self.b, self.a

        grid = Laplace3D((n, n, n), odf=odf)
        start = initial(problem, n)
        grid.a.from_numpy(start[0])
        grid.b.from_numpy(start[1])
        del start
    else:
        class Burgers(Stencil):
            fields = ("u", "v", "un", "vn")

            def step(self) -> None:
                burgers_numpy(self.u, self.v, self.un, self.vn, n)
                self.u, self.un = self.un, self.u
                self.v, self.vn = self.vn, self.v

        grid = Burgers((n, n), odf=odf)
        for f, a in zip((grid.u, grid.v, grid.un, grid.vn), initial(problem, n)):
            f.from_numpy(a)

    def run(k: int) -> None:
        grid.solve(steps=k)
        grid.sync()

    return _time_runs(run, steps, trials)


def main(argv: Sequence[str]) -> int:
    """Run one system as the arguments say and print its ``RESULT`` line."""
    if len(argv) != 6 or argv[0] not in SYSTEMS or argv[1] not in PROBLEMS:
        usage = f"worker.py {{{','.join(SYSTEMS)}}} {{{','.join(PROBLEMS)}}} N STEPS TRIALS EXTRA"
        print(f"usage: {usage}; got {list(argv)}", file=sys.stderr)
        return 2
    system, problem = argv[0], argv[1]
    n, steps, trials, extra = (int(a) for a in argv[2:])
    if system == "numpy":
        times = _numpy(problem, n, steps, trials)
    elif system == "c":
        times = _c(problem, n, steps, trials, extra)
    elif system == "numba":
        times = _numba(problem, n, steps, trials, extra)
    else:
        times = _shoal(problem, n, steps, trials, extra)
    emit(times)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
