"""3-D Laplace equation (7-point Jacobi) in the shoal spelling, checked against NumPy.

    python examples/stencil_laplace3d.py [n] [steps]
    shoal run -n 2 examples/stencil_laplace3d.py [n] [steps]

The grid is n x (n+3) x (n+5) — sizes that no tile count divides evenly — with one
hot face. The whole time loop goes to the backend once (``solve(steps=...)``).
"""

import sys

import numpy as np

from shoal.stencil import Stencil

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
nsteps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
SHAPE = (n, n + 3, n + 5)


class Laplace3D(Stencil):
    fields = ("a", "b")

    def step(self):
        a, b = self.a, self.b
        b[1:-1, 1:-1, 1:-1] = (
            a[:-2, 1:-1, 1:-1] + a[2:, 1:-1, 1:-1]
            + a[1:-1, :-2, 1:-1] + a[1:-1, 2:, 1:-1]
            + a[1:-1, 1:-1, :-2] + a[1:-1, 1:-1, 2:]
        ) / 6.0
        self.a, self.b = b, a


def numpy_run(shape, steps):
    a, b = np.zeros(shape), np.zeros(shape)
    a[0, :, :] = b[0, :, :] = 1.0
    for _ in range(steps):
        b[1:-1, 1:-1, 1:-1] = (
            a[:-2, 1:-1, 1:-1] + a[2:, 1:-1, 1:-1]
            + a[1:-1, :-2, 1:-1] + a[1:-1, 2:, 1:-1]
            + a[1:-1, 1:-1, :-2] + a[1:-1, 1:-1, 2:]
        ) / 6.0
        a, b = b, a
    return a


grid = Laplace3D(SHAPE, odf=2)
grid.a[0, :, :] = grid.b[0, :, :] = 1.0  # the hot face, in global coordinates
grid.solve(steps=nsteps)
result = grid.a.to_numpy()
want = numpy_run(SHAPE, nsteps)
print(f"laplace3d {SHAPE}, {nsteps} steps: {grid.describe()} (sent as one {grid.solve_mode})")
print(f"  mean value {result.mean():.12f}")
if not np.array_equal(result, want):
    print(f"stencil_laplace3d: FAIL: max difference {np.max(np.abs(result - want)):.3e}")
    sys.exit(1)
print("stencil_laplace3d: OK: equal to NumPy bit for bit")
