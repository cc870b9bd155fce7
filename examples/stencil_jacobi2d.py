"""The 2-D Laplace solver of the CharmStencil paper (its Fig. 4), run on shoal.

    python examples/stencil_jacobi2d.py [n] [steps]          # 1 PE, in this process
    shoal run -n 2 examples/stencil_jacobi2d.py [n] [steps]  # 2 MPI processes

The class is the paper's program unchanged but for the import and the backend handle
(``interface = None``: the PEs of this job). Afterwards the same statements run with
NumPy on whole arrays, and the results must be equal bit for bit.
"""

import sys

import numpy as np

from shoal.stencil import Stencil

n = int(sys.argv[1]) if len(sys.argv) > 1 else 66
nsteps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
interface = None  # the PEs of this job


class Jacobi2D(Stencil):
    def __init__(self, n, interface):
        self.x, self.y = self.initialize(
            n, interface=interface, backend_freq=100, odf=2,
            num_fields=2)
        self.itercount = 0
        self.boundary_iter = True

    def iterate(self, nsteps):
        if self.boundary_iter:
            self.boundary(100.)
            self.boundary_iter = False
            return True
        self.exchange_ghosts(self.x)
        self.y[1:-1, 1:-1] = 0.25 * (self.x[:-2, 1:-1] + self.x[2:, 1:-1] +
                                     self.x[1:-1, :-2] + self.x[1:-1, 2:])
        self.x, self.y = self.y, self.x
        self.itercount += 1
        return self.itercount != nsteps

    def boundary(self, bc):
        self.x[0, :] = self.y[0, :] = bc
        self.x[-1, :] = self.y[-1, :] = bc
        self.x[:, 0] = self.y[:, 0] = bc
        self.x[:, -1] = self.y[:, -1] = bc


grid = Jacobi2D(n, interface)
grid.solve(nsteps)
result = grid.x.to_numpy()

# The same statements with NumPy on whole arrays.
x, y = np.zeros((n, n)), np.zeros((n, n))
for a in (x, y):
    a[0, :] = a[-1, :] = a[:, 0] = a[:, -1] = 100.0
for _ in range(nsteps):
    y[1:-1, 1:-1] = 0.25 * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:])
    x, y = y, x

print(f"{n}x{n} grid, {nsteps} steps: {grid.describe()}")
print(f"  centre value {result[n // 2, n // 2]:.12f}")
if not np.array_equal(result, x):
    print(f"stencil_jacobi2d: FAIL: max difference from NumPy {np.max(np.abs(result - x)):.3e}")
    sys.exit(1)
print("stencil_jacobi2d: OK: equal to NumPy bit for bit")
