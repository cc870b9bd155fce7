"""The per-step work of every jacobi3d target, and the problem's initial state and faces.

Why Numba, as in jacobi2d (:mod:`..jacobi2d.kernels`): every target (sequential,
mpi4py, shoal) calls the *same* compiled kernel :func:`jacobi_step`, so the targets
differ only in how they decompose and communicate, and they compute the same numbers
bit for bit. The update is a plain loop, ``(((((u[i-1] + u[i+1]) + u[j-1]) + u[j+1]) +
u[k-1]) + u[k+1]) * SIXTH`` in that order, with no fast-math (one multiply after the
adds: nothing to contract into a fused multiply-add), so the NumPy fallback (used if
Numba cannot be imported; ``NUMBA`` says which) evaluates the identical expression and
gives identical results.

The problem: an ``N1 x N2 x N3`` grid of interior points with a fixed boundary held at
zero (Dirichlet). The initial state is the product of the three sine modes
``sin(pi (i+1)/(N+1))`` plus a unit hot spot at ``(N1 // 3, N2 // 5, N3 // 7)``; the sine
vectors are computed over the whole grid by every block (then sliced), so every
decomposition starts from the same bits.

The checksum is jacobi2d's (:func:`exact_sum`, :func:`to_float`): the exact sum of the
final interior rounded once to a float, bit-identical across targets, PE counts and
decompositions.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..jacobi2d.kernels import compile_kernel, exact_sum, to_float

__all__ = ["NUMBA", "SIXTH", "jacobi_step", "warm", "initial_block", "face", "exact_sum", "to_float"]

SIXTH = 1.0 / 6.0


def _jacobi_source(u: np.ndarray, out: np.ndarray) -> None:
    """``out[1:-1, 1:-1, 1:-1]`` = the mean of the six neighbours in ``u`` (ghosts included)."""
    n1, n2, n3 = u.shape
    for i in range(1, n1 - 1):
        for j in range(1, n2 - 1):
            for k in range(1, n3 - 1):
                out[i, j, k] = (((((u[i - 1, j, k] + u[i + 1, j, k]) + u[i, j - 1, k]) + u[i, j + 1, k])
                                 + u[i, j, k - 1]) + u[i, j, k + 1]) * SIXTH


def _jacobi_numpy(u: np.ndarray, out: np.ndarray) -> None:
    out[1:-1, 1:-1, 1:-1] = (((((u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1]) + u[1:-1, :-2, 1:-1])
                               + u[1:-1, 2:, 1:-1]) + u[1:-1, 1:-1, :-2]) + u[1:-1, 1:-1, 2:]) * SIXTH


jacobi_step: Callable[[np.ndarray, np.ndarray], None]
jacobi_step, NUMBA = compile_kernel(_jacobi_source, _jacobi_numpy)


def warm() -> None:
    """Compile (or load from Numba's cache) the kernel, outside any timed region."""
    a = np.zeros((3, 3, 3))
    jacobi_step(a, a.copy())


def initial_block(shape: tuple[int, int, int], bounds: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Points ``lo:hi`` along each axis of the initial state of a ``shape`` grid, with a
    ghost layer of zeros all round: shape ``(hi - lo + 2, ...)``."""
    s = [np.sin(np.pi * np.arange(1, n + 1, dtype=np.float64) / (n + 1))[lo:hi]
         for n, (lo, hi) in zip(shape, bounds)]
    u = np.zeros(tuple(hi - lo + 2 for lo, hi in bounds))
    u[1:-1, 1:-1, 1:-1] = np.multiply.outer(np.multiply.outer(s[0], s[1]), s[2])
    hot = (shape[0] // 3, shape[1] // 5, shape[2] // 7)
    if all(lo <= h < hi for h, (lo, hi) in zip(hot, bounds)):
        u[tuple(h - lo + 1 for h, (lo, _) in zip(hot, bounds))] += 1.0
    return u


def face(u: np.ndarray, axis: int, k: int) -> np.ndarray:
    """Layer ``k`` of ``u`` along ``axis``, without the ghost points of the other axes: a
    strided view of ``u`` (every face skips ghost points; along the last axis every
    point is a row apart)."""
    return u[tuple(k if d == axis else slice(1, -1) for d in range(u.ndim))]
