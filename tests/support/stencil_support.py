"""Helpers of the stencil tests: a job to run a program in, a grid of three fields,
equality, the blocking report, and two programs written once for stencil fields and NumPy arrays."""

from __future__ import annotations

import numpy as np

import shoal
from shoal.stencil import Stencil, maximum, minimum, sqrt, where

__all__ = ["run_on", "same", "blocking_report", "Grid", "start", "finish", "program", "grouped", "burgers_stencil", "fourth_order"]


def run_on(pes, body):
    """Run ``body()`` as the main program of an in-process job; return its value."""
    out = {}

    def main(args):
        out["value"] = body()

    code = shoal.run(main, [], transport="inproc", pes=pes, deadlock_timeout=5.0)
    assert code == 0
    return out["value"]


def blocking_report(g):
    """Per tile, what temporal blocking did (``Tile.blocking``: passes, steps, k, ghost,
    redundant points, the ghost layers held, ...), in tile order."""
    return sorted(g._handle.tiles.blocking(ret=True).get(), key=lambda b: b["index"])


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


class Grid(Stencil):
    fields = {"u": "float64", "v": "float64", "w": "float32"}


def start(shape, rng, **options):
    g = Grid(shape, **options)
    arrays = {"u": rng.standard_normal(shape), "v": rng.standard_normal(shape),
              "w": rng.standard_normal(shape).astype(np.float32)}
    for name, a in arrays.items():
        getattr(g, name).from_numpy(a)
    return g, arrays


def finish(g):
    return {name: getattr(g, name).to_numpy() for name in ("u", "v", "w")}


def program(u, v, w, d):
    """Every operation, reads at offsets 1 and 2, aliasing, strides, integer indices."""
    inner = (slice(2, -2),) * d

    def sh(k):
        return tuple(slice(2 + k, (-2 + k) or None) for _ in range(d))

    v[inner] = 0.5 * u[sh(1)] + u[sh(-2)] ** 2 - abs(u[inner]) / 3
    w[inner] = where(v[inner] > 0.1, w[sh(1)] * 0.3, -w[inner]) + np.float32(1.5)
    u[inner] = minimum(u[sh(1)], v[inner]) + maximum(u[sh(-1)], 0.0) + sqrt(abs(w[inner]))  # reads u at offsets
    u[(0,) * d] = 7.0
    v[(slice(None, None, -3),) * d] = u[(slice(None, None, -3),) * d] * 2
    v[(slice(1, None, 2),) * d] = v[(slice(0, -1, 2),) * d] ** 0.5 - 1 / v[(slice(1, None, 2),) * d]
    if d >= 2:
        w[1:-1, 0] = w[:-2, 1] + w[2:, 0]  # a diagonal read: corners
        u[..., 1:-1] = u[..., :-2] * np.float64(0.25) - u[..., 2:] ** -1
    u[...] = u + np.exp(v) * 1e-3 + np.sin(u) - np.cos(w)  # exp: NumPy's own, kept exact
    u[sh(0)] = v[sh(1)] ** 3


def grouped(u, v, w, d):
    """Three statements that share one loop nest: later ones read, at the same point, the
    values earlier ones wrote (v twice; w is float32)."""
    c = (slice(1, -1),) * d
    up = (slice(2, None),) + (slice(1, -1),) * (d - 1)
    down = (slice(None, -2),) + (slice(1, -1),) * (d - 1)
    v[c] = u[up] * 0.5 + u[down]
    w[c] = v[c] * 2 + u[c]
    v[c] = v[c] + w[c] / 3


def burgers_stencil(n: int) -> type:
    """A Stencil of the benchmark's Burgers step (fields u, v, un, vn; ``n`` sets dx, dt)."""
    from shoal.bench.stencil.problems import burgers_numpy

    class Burgers(Stencil):
        fields = ("u", "v", "un", "vn")

        def step(self):
            burgers_numpy(self.u, self.v, self.un, self.vn, n)
            self.u, self.un = self.un, self.u
            self.v, self.vn = self.vn, self.v

    return Burgers


def fourth_order(u, v, w):
    """Reads two layers away along the outer axis (lag 2) in consecutive statements, a
    strided box, a boundary row."""
    v[2:-2, 1:-1] = u[2:-2, 1:-1] + 0.1 * (-u[4:, 1:-1] + 16 * u[3:-1, 1:-1] - 30 * u[2:-2, 1:-1]
                                            + 16 * u[1:-3, 1:-1] - u[:-4, 1:-1]) + 0.05 * u[2:-2, 2:]
    u[2:-2, 1:-1] = v[2:-2, 1:-1] - 0.01 * v[4:, 1:-1] + 0.02 * v[:-4, :-2] + 0.01 * w[3:-1, :-2]
    w[1:-1:2, 1:-1] = 0.5 * (v[:-2:2, 1:-1] + v[2::2, 1:-1])
    u[0, :] = w[1, :] * 0.5 + v[2, :]
