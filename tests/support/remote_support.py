"""A small stencil for the client–server tests: Jacobi in 2-D, and the same in NumPy."""

from __future__ import annotations

import numpy as np

from shoal.stencil import Stencil


class Jacobi2D(Stencil):
    def __init__(self, n, interface, backend_freq=10):
        self.u, self.v = self.initialize((n, n), num_fields=2, ghost_depth=1, interface=interface,
                                         backend_freq=backend_freq)

    def step(self):
        u, v = self.u, self.v
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u[1:-1, 1:-1] = v[1:-1, 1:-1]


def jacobi_numpy(a, steps):
    u = a.copy()
    v = np.zeros_like(u)
    for _ in range(steps):
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u[1:-1, 1:-1] = v[1:-1, 1:-1]
    return u
