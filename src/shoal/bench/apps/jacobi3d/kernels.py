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

``--device cuda`` runs :data:`CUDA_SOURCE` instead, the same update as a CUDA kernel
(compiled by CuPy in :class:`.arrays.CudaArrays`), written so that it gives the CPU
kernel's bits: see the comment above :data:`CUDA_SOURCE`.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ..jacobi2d.kernels import compile_kernel, exact_sum, to_float

__all__ = ["NUMBA", "SIXTH", "jacobi_step", "warm", "initial_block", "face", "exact_sum", "to_float",
           "CUDA_SOURCE", "CUDA_KERNEL", "CUDA_OPTIONS", "CUDA_BLOCK", "launch_shape"]

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


# Why the CUDA kernel gives the CPU kernel's bits:
# * Every operation is one IEEE-754 binary64 add or multiply, correctly rounded to nearest
#   even, on the CPU (SSE2/AVX) and on the GPU (PTX add.rn.f64 / mul.rn.f64) alike; the
#   kernel below evaluates the CPU kernel's expression in the CPU kernel's order, so each
#   intermediate, and the result, is the same double.
# * No fused multiply-add: nvcc and NVRTC contract a multiply followed by an add into one
#   FMA by default (one rounding instead of two, so other bits). ``--fmad=false`` turns that
#   off: the adds and the multiply come out as add.rn/mul.rn, which ptxas never fuses. This
#   expression has no multiply-then-add today; the flag keeps the guarantee when someone
#   edits it (a weighted stencil would have one). Numba compiles the CPU kernel without
#   fastmath, so it neither contracts nor reassociates either.
# * SIXTH is passed in, the very double the CPU kernel multiplies by.
# * Double precision on a GPU never flushes subnormals to zero (ftz is single-precision only).
# * A Jacobi sweep reads u and writes v only, so the order in which threads run does not matter.
# tests/bench/test_app_jacobi3d.py compiles this source with g++ (indices emulated) and compares it
# with jacobi_step bit for bit, and asks nvcc for its PTX and checks there is no FMA in it.

#: the kernel's name in :data:`CUDA_SOURCE`
CUDA_KERNEL = "jacobi7"
#: NVRTC options: no contraction into fused multiply-adds (see above)
CUDA_OPTIONS = ("--fmad=false",)
#: threads per CUDA block (x along the last axis, so a warp reads consecutive doubles)
CUDA_BLOCK = (32, 8, 1)
#: u and v: C-contiguous float64 arrays of n1 x n2 x n3 points (ghost layers included);
#: one thread per (j, k) interior column, looping over i in steps of the grid's z size
CUDA_SOURCE = r"""
extern "C" __global__
void jacobi7(const double* __restrict__ u, double* __restrict__ v,
             const long long n1, const long long n2, const long long n3, const double sixth)
{
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x + 1;
    const long long j = (long long)blockIdx.y * blockDim.y + threadIdx.y + 1;
    if (j >= n2 - 1 || k >= n3 - 1) return;
    const long long s1 = n2 * n3, s2 = n3;
    for (long long i = (long long)blockIdx.z + 1; i < n1 - 1; i += gridDim.z) {
        const long long c = i * s1 + j * s2 + k;
        v[c] = (((((u[c - s1] + u[c + s1]) + u[c - s2]) + u[c + s2]) + u[c - 1]) + u[c + 1]) * sixth;
    }
}
"""


def launch_shape(shape: Sequence[int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(grid, block)`` of :data:`CUDA_SOURCE` for arrays of ``shape`` (ghosts included):
    enough blocks to cover every interior (j, k), and up to 65535 (CUDA's limit) along i."""
    n1, n2, n3 = (int(n) for n in shape)
    bx, by, bz = CUDA_BLOCK
    grid = (max(1, math.ceil((n3 - 2) / bx)), max(1, math.ceil((n2 - 2) / by)), max(1, min(n1 - 2, 65535)))
    return grid, (bx, by, bz)
