"""2-D Burgers' equation: two coupled fields, upwind advection plus diffusion.

    python examples/stencil_burgers.py [n] [steps]
    shoal run -n 2 examples/stencil_burgers.py [n] [steps]

The usual NumPy formulation (a hat of velocity 2 in a field of 1, boundaries held at
1), written once as ``burgers_step`` and run on stencil fields and on NumPy arrays.
"""

import sys

import numpy as np

from shoal.stencil import Stencil

n = int(sys.argv[1]) if len(sys.argv) > 1 else 41
nsteps = int(sys.argv[2]) if len(sys.argv) > 2 else 120
NU = 0.01
DX = DY = 2.0 / (n - 1)
DT = 0.2 * DX * DY / NU / 10


def burgers_step(u, v, un, vn):
    """New u, v into un, vn from u, v (either stencil fields or NumPy arrays)."""
    c = (slice(1, -1), slice(1, -1))
    w = (slice(1, -1), slice(0, -2))
    e = (slice(1, -1), slice(2, None))
    s = (slice(0, -2), slice(1, -1))
    nth = (slice(2, None), slice(1, -1))
    un[c] = (
        u[c]
        - DT / DX * u[c] * (u[c] - u[w])
        - DT / DY * v[c] * (u[c] - u[s])
        + NU * DT / DX**2 * (u[e] - 2 * u[c] + u[w])
        + NU * DT / DY**2 * (u[nth] - 2 * u[c] + u[s])
    )
    vn[c] = (
        v[c]
        - DT / DX * u[c] * (v[c] - v[w])
        - DT / DY * v[c] * (v[c] - v[s])
        + NU * DT / DX**2 * (v[e] - 2 * v[c] + v[w])
        + NU * DT / DY**2 * (v[nth] - 2 * v[c] + v[s])
    )


def initial(n):
    u = np.ones((n, n))
    lo, hi = int(0.5 / DY), int(1 / DY + 1)
    u[lo:hi, lo:hi] = 2.0
    return u


class Burgers(Stencil):
    fields = ("u", "v", "un", "vn")

    def step(self):
        burgers_step(self.u, self.v, self.un, self.vn)
        self.u, self.un = self.un, self.u
        self.v, self.vn = self.vn, self.v


grid = Burgers((n, n), odf=2)
for f in (grid.u, grid.v, grid.un, grid.vn):
    f.from_numpy(initial(n))
grid.solve(steps=nsteps)
got_u, got_v = grid.u.to_numpy(), grid.v.to_numpy()

u, v = initial(n), initial(n)
un, vn = u.copy(), v.copy()
for _ in range(nsteps):
    burgers_step(u, v, un, vn)
    u, un = un, u
    v, vn = vn, v

print(f"burgers {n}x{n}, {nsteps} steps: {grid.describe()}")
print(f"  max u {got_u.max():.12f}, max v {got_v.max():.12f}")
if not (np.array_equal(got_u, u) and np.array_equal(got_v, v)):
    print("stencil_burgers: FAIL")
    sys.exit(1)
print("stencil_burgers: OK: equal to NumPy bit for bit")
