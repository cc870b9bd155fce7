# mypy: disable-error-code="has-type,call-arg"
"""The program one system of ``shoal bench stencil`` runs: time ``--steps`` steps of a problem.

    python worker.py SYSTEM PROBLEM N STEPS TRIALS EXTRA
    shoal run -n P worker.py shoal PROBLEM N STEPS TRIALS ODF

``SYSTEM`` is ``numpy``, ``c`` (``EXTRA`` threads: 1 is the plain loop, more build it
with OpenMP), ``numba`` (``EXTRA`` threads), ``shoal`` (``EXTRA`` tiles per PE; 1 PE
in this process, more when started by ``shoal run``), or on a GPU ``shoal-cuda`` (the
same with ``device="cuda"``), ``cupy`` or ``cupy-raw`` (:mod:`.cupy_peers`; ``EXTRA``
unused). ``PROBLEM`` is ``jacobi`` or ``burgers`` on an N×N float64 grid, or
``laplace3d`` on an N×N×N one. After an untimed warm-up of STEPS/5 steps it runs TRIALS
timed runs of STEPS steps and prints their seconds per step on one ``RESULT`` line
(:mod:`.jobs`); a GPU system first runs :data:`CHECK_STEPS` steps on a
:data:`CHECK_N`² grid and reports beside its timings whether every field equals
NumPy's bit for bit (``identical``). ``cli`` (the driver) starts one such process per
system and round.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from shoal.bench.stencil.jobs import emit
from shoal.bench.stencil.problems import (
    HAND_C, NU, PROBLEMS, burgers_consts, burgers_numpy, initial, jacobi_numpy, laplace3d_numpy, line_aligned,
)

__all__ = ["SYSTEMS", "main"]

#: the systems a worker can run
SYSTEMS = ("numpy", "c", "numba", "shoal", "shoal-cuda", "cupy", "cupy-raw")
#: the systems that run on a GPU (each checks its bits against NumPy first)
GPU_SYSTEMS = ("shoal-cuda", "cupy", "cupy-raw")
#: the bit-identity check of a GPU system: steps on a CHECK_N x CHECK_N grid (odd: tiles of unequal sizes)
CHECK_N, CHECK_STEPS = 131, 10


def _numpy_steps(problem: str, arrays: list, n: int, steps: int) -> list:
    """``steps`` steps of ``problem`` with NumPy on ``arrays``; the arrays in their final roles."""
    a = list(arrays)
    for _ in range(steps):
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
    return a


def _identical(problem: str, got: list) -> bool:
    """Whether ``got`` (host arrays after CHECK_STEPS steps on CHECK_N²) is NumPy's, bit for bit."""
    want = _numpy_steps(problem, initial(problem, CHECK_N), CHECK_N, CHECK_STEPS)
    return all(g.shape == w.shape and np.array_equal(g, w) for g, w in zip(got, want))


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
        arrays[:] = _numpy_steps(problem, arrays, n, k)

    return _time_runs(run, steps, trials)


def _cupy(system: str, problem: str, n: int, steps: int, trials: int) -> tuple[list[float], bool]:
    """A hand-written CuPy peer: its timings, and whether its bits are NumPy's."""
    import cupy

    from shoal.bench.stencil.cupy_peers import stepper, synchronize

    small = [cupy.asarray(a) for a in initial(problem, CHECK_N)]
    one = stepper(system, problem, CHECK_N, small)
    for _ in range(CHECK_STEPS):
        one()
    same = _identical(problem, [cupy.asnumpy(a) for a in small])
    del small
    arrays = [cupy.asarray(a) for a in initial(problem, n)]
    step = stepper(system, problem, n, arrays)

    def run(k: int) -> None:
        for _ in range(k):
            step()
        synchronize()

    return _time_runs(run, steps, trials), same


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


def _grid(problem: str, n: int, odf: int, device: str) -> tuple[Any, Callable[[], list]]:
    """The problem as a stencil, its fields set to the initial arrays; and a function
    giving the fields' values now, in :func:`initial`'s order."""
    from shoal.stencil import Stencil

    if problem == "jacobi":
        class Jacobi(Stencil):
            fields = ("x", "y")

            def step(self) -> None:
                jacobi_numpy(self.x, self.y)
                self.x, self.y = self.y, self.x

        grid: Any = Jacobi((n, n), odf=odf, device=device)
    elif problem == "laplace3d":
        class Laplace3D(Stencil):
            fields = ("a", "b")

            def step(self) -> None:
                laplace3d_numpy(self.a, self.b)
                self.a, self.b = self.b, self.a

        grid = Laplace3D((n, n, n), odf=odf, device=device)
    else:
        class Burgers(Stencil):
            fields = ("u", "v", "un", "vn")

            def step(self) -> None:
                burgers_numpy(self.u, self.v, self.un, self.vn, n)
                self.u, self.un = self.un, self.u
                self.v, self.vn = self.vn, self.v

        grid = Burgers((n, n), odf=odf, device=device)
    names = type(grid).fields  # in initial()'s order

    def handles() -> list:
        return [getattr(grid, name) for name in names]

    for f, a in zip(handles(), initial(problem, n)):
        f.from_numpy(a)
    return grid, lambda: [f.to_numpy() for f in handles()]


def _shoal(problem: str, n: int, steps: int, trials: int, odf: int, device: str = "cpu") -> tuple[list[float], bool]:
    """The DSL on this job's PEs: its timings, and (on a GPU) whether its bits are NumPy's."""
    same = True
    if device != "cpu":
        small, values = _grid(problem, CHECK_N, odf, device)
        small.solve(steps=CHECK_STEPS)
        same = _identical(problem, values())
        small.close()
    grid, _ = _grid(problem, n, odf, device)

    def run(k: int) -> None:
        grid.solve(steps=k)
        grid.sync()

    return _time_runs(run, steps, trials), same


def main(argv: Sequence[str]) -> int:
    """Run one system as the arguments say and print its ``RESULT`` line."""
    if len(argv) != 6 or argv[0] not in SYSTEMS or argv[1] not in PROBLEMS:
        usage = f"worker.py {{{','.join(SYSTEMS)}}} {{{','.join(PROBLEMS)}}} N STEPS TRIALS EXTRA"
        print(f"usage: {usage}; got {list(argv)}", file=sys.stderr)
        return 2
    system, problem = argv[0], argv[1]
    n, steps, trials, extra = (int(a) for a in argv[2:])
    if system in GPU_SYSTEMS:
        from shoal.stencil.cuda import cuda_status

        why = cuda_status()
        if why is not None:
            print(f"worker.py {system}: needs a CUDA GPU: {why}", file=sys.stderr)
            return 2
        if system == "shoal-cuda":
            times, same = _shoal(problem, n, steps, trials, extra, "cuda")
        else:
            times, same = _cupy(system, problem, n, steps, trials)
        emit(times, identical=same, check=f"{CHECK_N}x{CHECK_N}, {CHECK_STEPS} steps")
        return 0
    if system == "numpy":
        times = _numpy(problem, n, steps, trials)
    elif system == "c":
        times = _c(problem, n, steps, trials, extra)
    elif system == "numba":
        times = _numba(problem, n, steps, trials, extra)
    else:
        times = _shoal(problem, n, steps, trials, extra)[0]
    emit(times)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
