"""The hand-written CuPy peers of ``shoal bench stencil --device cuda``, both NumPy's bits.

* ``cupy``: the problems' own functions (:mod:`.problems`) on CuPy arrays: one kernel
  per operation, with temporaries; one operation a kernel cannot contract into a fused
  multiply-add.
* ``cupy-raw``: one fused kernel per step (:data:`KERNELS`), written by hand with
  NumPy's order of operations (the scalars computed in Python as the NumPy statement
  computes them) and compiled with ``--fmad=false``: what a careful CuPy programmer
  writes for speed.

CuPy is imported by the functions, never at import time.
"""

from __future__ import annotations

from typing import Any, Callable

from .problems import NU, burgers_consts, burgers_numpy, jacobi_numpy

__all__ = ["KERNELS", "stepper", "synchronize"]

#: one thread per point of a row (x), rows over y (looping past 65535); n x n arrays
KERNELS = r"""
extern "C" __global__ void jacobi(const double *__restrict__ x, double *__restrict__ y, const long n)
{
    const long j = (long)blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (j >= n - 1) return;
    for (long i = (long)blockIdx.y + 1; i < n - 1; i += gridDim.y) {
        const long p = i * n + j;
        y[p] = 0.25 * (((x[p - n] + x[p + n]) + x[p - 1]) + x[p + 1]);
    }
}

extern "C" __global__ void burgers(const double *__restrict__ u, const double *__restrict__ v,
                                   double *__restrict__ un, double *__restrict__ vn, const long n,
                                   const double a, const double b, const double cx, const double cy)
{
    const long j = (long)blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (j >= n - 1) return;
    for (long i = (long)blockIdx.y + 1; i < n - 1; i += gridDim.y) {
        const long p = i * n + j;
        const double uc = u[p], vc = v[p];
        un[p] = (((uc - (a * uc) * (uc - u[p - 1])) - (b * vc) * (uc - u[p - n]))
                 + cx * ((u[p + 1] - 2.0 * uc) + u[p - 1])) + cy * ((u[p + n] - 2.0 * uc) + u[p - n]);
        vn[p] = (((vc - (a * uc) * (vc - v[p - 1])) - (b * vc) * (vc - v[p - n]))
                 + cx * ((v[p + 1] - 2.0 * vc) + v[p - 1])) + cy * ((v[p + n] - 2.0 * vc) + v[p - n]);
    }
}
"""

_THREADS = 256


def synchronize() -> None:
    """Wait for the current device's work (a timer must not stop before the kernels do)."""
    import cupy

    cupy.cuda.Device().synchronize()


def stepper(system: str, problem: str, n: int, arrays: list) -> Callable[[], None]:
    """One step of ``problem`` by ``system`` ("cupy" or "cupy-raw") on the CuPy
    ``arrays`` (jacobi: x, y; burgers: u, v, un, vn), swapping them as the NumPy
    version does."""
    if problem not in ("jacobi", "burgers"):
        raise ValueError(f"the CuPy peers run jacobi and burgers, not {problem}")
    if system == "cupy":
        return _expressions(problem, n, arrays)
    if system == "cupy-raw":
        return _fused(problem, n, arrays)
    raise ValueError(f"unknown CuPy peer {system!r}")


def _swap(problem: str, arrays: list) -> None:
    if problem == "jacobi":
        arrays[0], arrays[1] = arrays[1], arrays[0]
    else:
        arrays[0], arrays[2] = arrays[2], arrays[0]
        arrays[1], arrays[3] = arrays[3], arrays[1]


def _expressions(problem: str, n: int, arrays: list) -> Callable[[], None]:
    """The NumPy statements themselves, on CuPy arrays."""

    def step() -> None:
        if problem == "jacobi":
            jacobi_numpy(arrays[0], arrays[1])
        else:
            burgers_numpy(arrays[0], arrays[1], arrays[2], arrays[3], n)
        _swap(problem, arrays)

    return step


def _fused(problem: str, n: int, arrays: list) -> Callable[[], None]:
    """One launch of :data:`KERNELS`' kernel a step, compiled with ``--fmad=false``."""
    import cupy
    import numpy as np

    kernel = cupy.RawModule(code=KERNELS, options=("--fmad=false",)).get_function(problem)
    grid = ((n - 2 + _THREADS - 1) // _THREADS, min(n - 2, 65535))
    scalars: tuple[Any, ...] = (np.int64(n),)
    if problem == "burgers":
        dx, dy, dt = burgers_consts(n)  # as burgers_numpy computes them, in Python
        scalars += tuple(np.float64(c) for c in (dt / dx, dt / dy, NU * dt / dx**2, NU * dt / dy**2))

    def step() -> None:
        kernel(grid, (_THREADS,), (*arrays, *scalars))
        _swap(problem, arrays)

    return step
