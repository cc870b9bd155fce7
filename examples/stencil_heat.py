"""Heat equation in the shoal spelling: fields by name, a loop and a convergence test
run on the backend.

    python examples/stencil_heat.py
    shoal run -n 3 examples/stencil_heat.py

``solve(steps=..., until=...)`` records ``step()`` once (twice, to see the fields'
swap repeat), sends the time loop to the backend as one loop, and the backend stops
it when the largest change falls below the tolerance — no round trip per step.
"""

import sys

import numpy as np

from shoal.stencil import Stencil, norm

SHAPE = (48, 61)  # any sizes: the tiles need not be equal
TOL = 1e-4
MAX_STEPS = 5000


class Heat(Stencil):
    fields = {"u": "float64", "v": "float64"}

    def step(self):
        u, v = self.u, self.v
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (
            u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
        )
        self.u, self.v = v, u

    def converged(self):
        return norm(self.u - self.v, np.inf) < TOL


def initial(shape):
    i, j = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    return np.exp(-((i - shape[0] / 3) ** 2 + (j - shape[1] / 2) ** 2) / 40.0)


heat = Heat(SHAPE, odf=2)
u0 = initial(SHAPE)
heat.u.from_numpy(u0)
heat.v.from_numpy(u0)
steps = heat.solve(steps=MAX_STEPS, until=heat.converged)
result = heat.u.to_numpy()

# NumPy, whole arrays, the same statements and the same test after every step.
u, v = u0.copy(), u0.copy()
want = 0
for k in range(1, MAX_STEPS + 1):
    v[1:-1, 1:-1] = u[1:-1, 1:-1] + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
    u, v = v, u
    want = k
    if np.max(np.abs(u - v)) < TOL:
        break

print(f"heat {SHAPE}: {heat.describe()}; converged after {steps} steps (NumPy: {want})")
if steps != want or not np.array_equal(result, u):
    print("stencil_heat: FAIL")
    sys.exit(1)
print("stencil_heat: OK: same step count and bit-for-bit equal to NumPy")
