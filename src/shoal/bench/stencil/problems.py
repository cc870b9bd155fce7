"""The benchmark problems, written once for NumPy arrays and stencil fields alike.

Jacobi 5-point (2-D Laplace), 2-D Burgers (two coupled fields) and the 7-point 3-D
Laplace (also the pipeline experiment's); their initial grids; and ``HAND_C``, the
hand-written C loops the compiled peers run (1 thread, or OpenMP with ``-fopenmp``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "NU", "HAND_C", "jacobi_numpy", "burgers_consts", "burgers_numpy", "laplace3d_numpy",
    "initial", "line_aligned", "PROBLEMS",
]

#: the problems of ``shoal bench stencil``; laplace3d runs on an n3 x n3 x n3 grid
PROBLEMS = ("jacobi", "burgers", "laplace3d")

#: viscosity of the Burgers problem
NU = 0.01


def jacobi_numpy(x: Any, y: Any) -> None:
    """One Jacobi 5-point step from ``x`` into ``y`` (NumPy arrays or stencil fields)."""
    y[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])


def laplace3d_numpy(a: Any, b: Any) -> None:
    """One 7-point 3-D Laplace step from ``a`` into ``b``."""
    b[1:-1, 1:-1, 1:-1] = (a[:-2, 1:-1, 1:-1] + a[2:, 1:-1, 1:-1] + a[1:-1, :-2, 1:-1]
                           + a[1:-1, 2:, 1:-1] + a[1:-1, 1:-1, :-2] + a[1:-1, 1:-1, 2:]) / 6.0


def burgers_consts(n: int) -> tuple[float, float, float]:
    """``(dx, dy, dt)`` of the Burgers problem on an n×n grid."""
    dx = 2.0 / (n - 1)
    dt = 0.2 * dx * dx / NU / 10
    return dx, dx, dt


def burgers_numpy(u: Any, v: Any, un: Any, vn: Any, n: int) -> None:
    """One Burgers step from ``u, v`` into ``un, vn``."""
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
void laplace3d(double *restrict a, double *restrict b, long n, long steps) {
  const long p = n * n;
  for (long s = 0; s < steps; ++s) {
    #pragma omp parallel for schedule(static)
    for (long i = 1; i < n - 1; ++i)
      for (long j = 1; j < n - 1; ++j)
        for (long k = 1; k < n - 1; ++k) {
          const long q = i*p + j*n + k;
          b[q] = (((((a[q-p] + a[q+p]) + a[q-n]) + a[q+n]) + a[q-1]) + a[q+1]) / 6.0;
        }
    double *t = a; a = b; b = t;
  }
}
"""


def initial(problem: str, n: int) -> list[np.ndarray]:
    """The starting arrays of ``problem`` ("jacobi": x, y; "burgers": u, v, un, vn;
    "laplace3d": a, b on an n x n x n grid)."""
    if problem == "laplace3d":
        a = np.zeros((n, n, n))
        a[0], a[:, 0], a[:, :, 0] = 100.0, 50.0, 25.0
        return [a, a.copy()]
    if problem == "jacobi":
        x = np.zeros((n, n))
        x[0, :] = x[-1, :] = x[:, 0] = x[:, -1] = 100.0
        return [x, x.copy()]
    u = np.ones((n, n))
    u[n // 4: n // 2, n // 4: n // 2] = 2.0
    return [u, u.copy(), u.copy(), u.copy()]


def line_aligned(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` whose rows' second point (the first one the loops write) starts a
    64-byte line, as in shoal's tiles: the compiled peers get the same layout. On
    NumPy's own arrays the hand-written Burgers loop took 113 ms, on these 93 ms."""
    raw = np.empty(a.size + 8, dtype=a.dtype)
    off = ((-raw.ctypes.data - a.itemsize) % 64) // a.itemsize
    out = raw[off:off + a.size].reshape(a.shape)
    out[...] = a
    return out
