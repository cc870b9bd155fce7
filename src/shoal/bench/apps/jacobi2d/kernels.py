"""The per-step work of every jacobi2d target, and the problem's initial state and checksum.

Why Numba: every target (sequential, mpi4py, shoal) calls the *same* compiled kernel
:func:`jacobi_step`, so the targets differ only in how they decompose and communicate,
and they compute the same numbers bit for bit (as seed 000's PIC kernels do). The update
is a plain loop, ``0.25 * (((n + s) + w) + e)`` in that order, with no fast-math, so the
NumPy fallback (used if Numba cannot be imported; ``NUMBA`` says which) evaluates the
identical expression and gives identical results.

The problem: an ``N x M`` grid of interior points with a fixed boundary ring held at
zero (Dirichlet). The initial state is ``sin(pi (i+1)/(N+1)) * sin(pi (j+1)/(M+1))``
plus a unit hot spot at ``(N // 3, M // 5)``; the two sine vectors are computed over the
whole grid by every block (then sliced), so every decomposition starts from the same bits.

The checksum (:func:`exact_sum`) is the exact sum of the final interior, rounded once to
a float: each block turns its values into an exact integer (scaled by ``2**SHIFT``), the
integers are added (exactly, in any order) and the total is rounded to the nearest
float. So it is bit-identical across targets, PE counts and decompositions, and equals
``math.fsum`` of the whole final array.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

__all__ = ["NUMBA", "jacobi_step", "warm", "initial_block", "exact_sum", "to_float", "SHIFT", "compile_kernel"]

#: scale of the exact sums: every float64 (subnormals too) is an integer multiple of 2**-SHIFT
SHIFT = 1126


def _jacobi_source(u: np.ndarray, out: np.ndarray) -> None:
    """``out[1:-1, 1:-1] = 0.25 * (north + south + west + east)`` of ``u`` (ghosts included)."""
    n, m = u.shape
    for i in range(1, n - 1):
        for j in range(1, m - 1):
            out[i, j] = 0.25 * (((u[i - 1, j] + u[i + 1, j]) + u[i, j - 1]) + u[i, j + 1])


def _jacobi_numpy(u: np.ndarray, out: np.ndarray) -> None:
    out[1:-1, 1:-1] = 0.25 * (((u[:-2, 1:-1] + u[2:, 1:-1]) + u[1:-1, :-2]) + u[1:-1, 2:])


def compile_kernel(source: Callable[..., Any], fallback: Callable[..., Any]) -> tuple[Callable[..., Any], bool]:
    """``source`` compiled by Numba (cached, no fast-math), else ``fallback``; and
    whether it was compiled. The block apps' kernels are made here."""
    try:
        import numba
    except Exception:  # pragma: no cover - Numba is a dependency, but stay usable without it
        return fallback, False
    return numba.njit(cache=True, nogil=True, error_model="numpy")(source), True


jacobi_step: Callable[[np.ndarray, np.ndarray], None]
jacobi_step, NUMBA = compile_kernel(_jacobi_source, _jacobi_numpy)


def warm() -> None:
    """Compile (or load from Numba's cache) the kernel, outside any timed region."""
    a = np.zeros((3, 3))
    jacobi_step(a, a.copy())


def initial_block(N: int, M: int, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """Rows ``r0:r1`` and columns ``c0:c1`` of the initial state, with a ghost ring of zeros:
    shape ``(r1 - r0 + 2, c1 - c0 + 2)``."""
    sx = np.sin(np.pi * np.arange(1, N + 1, dtype=np.float64) / (N + 1))
    sy = np.sin(np.pi * np.arange(1, M + 1, dtype=np.float64) / (M + 1))
    u = np.zeros((r1 - r0 + 2, c1 - c0 + 2))
    u[1:-1, 1:-1] = np.multiply.outer(sx[r0:r1], sy[c0:c1])
    hi, hj = N // 3, M // 5
    if r0 <= hi < r1 and c0 <= hj < c1:
        u[hi - r0 + 1, hj - c0 + 1] += 1.0
    return u


def exact_sum(a: np.ndarray) -> int:
    """The exact sum of the float64 values of ``a``, times ``2**SHIFT`` (an integer)."""
    flat = np.ascontiguousarray(a, dtype=np.float64).ravel()
    total = 0
    chunk = 1 << 25  # hi parts < 2**27: sums of 2**25 of them stay exact in float64 (bincount)
    for s in range(0, flat.size, chunk):
        mant, exp = np.frexp(flat[s:s + chunk])
        mi = np.ldexp(mant, 53).astype(np.int64)  # exact: a = mi * 2**(exp - 53)
        e = exp.astype(np.int64) - 53 + SHIFT  # >= 0 for every float64
        hi, lo = mi >> 26, mi & ((1 << 26) - 1)  # mi == hi * 2**26 + lo
        emin = int(e.min()) if e.size else 0
        k = e - emin
        his = np.bincount(k, weights=hi.astype(np.float64))
        los = np.bincount(k, weights=lo.astype(np.float64))
        for off in np.nonzero((his != 0) | (los != 0))[0]:
            total += ((int(his[off]) << 26) + int(los[off])) << (int(off) + emin)
    return total


def to_float(total: int) -> float:
    """The sum :func:`exact_sum` stands for, rounded once to the nearest float."""
    return total / (1 << SHIFT)  # int / int is correctly rounded


def fsum(a: np.ndarray) -> float:
    """The same number by :func:`math.fsum` (for checks)."""
    return math.fsum(np.asarray(a, dtype=np.float64).ravel().tolist())
