"""The PRK particle-in-cell kernel's physics, in NumPy: the problem, the mesh of charges,
the initial particle distributions and the analytic verification.

The kernel (Parallel Research Kernels, "PIC", Georganas and Van der Wijngaart): an
``L x L`` periodic mesh of cells whose vertices hold fixed charges, ``+Q`` on even
columns and ``-Q`` on odd ones. Particles start at cell centres; each is given the
charge that makes the four charges at its cell's corners push it exactly ``2k+1`` cells
in x per step (``+`` charge on even columns, ``-`` on odd, so the push always points to
+x), and a vertical velocity of ``m`` cells per step (the y forces cancel at mid-cell).
After ``s`` moves a particle starting at ``(x0, y0)`` is at
``((x0 + s(2k+1)) mod L, (y0 + s m) mod L)``, which the verification checks to 1e-6.

Particles are kept as one ``(NFIELDS, n)`` float64 array, a structure of arrays (one
row per field): :data:`X`, :data:`Y`, :data:`VX`, :data:`VY`, :data:`QQ`, :data:`X0`,
:data:`Y0`, :data:`ID`. How many particles a cell starts with is drawn from a counter
based generator keyed by the cell, so every decomposition of the mesh places the same
particles, and particle IDs (1..N, column-major over cells as the PRK numbers them on
one rank) do not depend on it either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Problem", "DISTRIBUTIONS", "Q", "DT", "MASS_INV", "EPSILON", "REL_X", "REL_Y",
    "NFIELDS", "X", "Y", "VX", "VY", "QQ", "X0", "Y0", "ID",
    "expected_per_cell", "cell_counts", "column_totals", "column_prefix", "init_particles",
    "mesh_charges", "reference_accel", "Verification", "verify", "expected_id_sum",
]

#: the PRK's constants: mesh charge, time step, inverse mass, verification tolerance
Q = 1.0
DT = 1.0
MASS_INV = 1.0
EPSILON = 1e-6
#: where in its cell a particle starts (the cell centre)
REL_X = 0.5
REL_Y = 0.5

#: rows of a particle array
NFIELDS = 8
X, Y, VX, VY, QQ, X0, Y0, ID = range(NFIELDS)

DISTRIBUTIONS = ("geometric", "sinusoidal", "linear", "patch")

_SEED = 27182818285  # any fixed value: it keys the per-cell draws
_CHUNK_CELLS = 1 << 22  # cells drawn at once when summing whole columns


@dataclass(frozen=True, slots=True)
class Problem:
    """One PIC problem: mesh, particles, steps, initial distribution, velocities.

    ``steps`` is the number of timed steps; as in the PRK the run makes one more move
    first (step 0, a warm-up outside the timing), so particles move ``steps + 1`` times.
    ``patch`` holds inclusive cell bounds ``(x0, x1, y0, y1)``.
    """

    size: int = 1000
    particles: int = 1_000_000
    steps: int = 100
    dist: str = "geometric"
    r: float = 0.999
    alpha: float = 1.0
    beta: float = 1.0
    patch: tuple[int, int, int, int] | None = None
    k: int = 1
    m: int = 1

    @property
    def moves(self) -> int:
        """How many times every particle moves: the warm-up step plus the timed ones."""
        return self.steps + 1

    @property
    def patch_box(self) -> tuple[int, int, int, int]:
        """The patch's inclusive cell bounds; the lower-left quadrant unless given."""
        if self.patch is not None:
            return self.patch
        h = self.size // 2
        return (0, h - 1, 0, h - 1)

    def check(self) -> None:
        """Raise ValueError naming a bad value and what it must be."""
        L = self.size
        if L < 2 or L % 2:
            raise ValueError(f"--size {L}: the mesh must have a positive, even number of cells per side "
                             "(charges alternate by column and the mesh is periodic)")
        if self.particles < 1:
            raise ValueError(f"--particles {self.particles}: need at least 1 particle")
        if self.steps < 1:
            raise ValueError(f"--steps {self.steps}: need at least 1 timed step")
        if self.k < 0:
            raise ValueError(f"--k {self.k}: k must be >= 0 (particles move 2k+1 cells in x per step)")
        if 2 * self.k + 1 > L or abs(self.m) > L:
            raise ValueError(f"--k {self.k} --m {self.m}: a particle may not cross the whole {L}-cell mesh in one "
                             "step; need 2k+1 <= --size and |m| <= --size")
        if self.dist not in DISTRIBUTIONS:
            raise ValueError(f"--dist {self.dist!r}: valid distributions are {', '.join(DISTRIBUTIONS)}")
        if self.dist == "geometric" and not (self.r > 0 and math.isfinite(self.r)):
            raise ValueError(f"--r {self.r}: the geometric attenuation factor must be a positive number")
        if self.dist == "linear":
            if self.beta < 0 or self.beta < self.alpha:
                raise ValueError(f"--alpha {self.alpha} --beta {self.beta}: the linear profile "
                                 "beta - alpha*x/(L-1) would be negative; need beta >= 0 and beta >= alpha")
            if _linear_total(self) <= 0:
                raise ValueError(f"--alpha {self.alpha} --beta {self.beta}: the linear profile has no weight")
        if self.dist == "patch":
            x0, x1, y0, y1 = self.patch_box
            if not (0 <= x0 <= x1 < L and 0 <= y0 <= y1 < L):
                raise ValueError(f"--patch {x0},{x1},{y0},{y1}: need 0 <= x0 <= x1 < {L} and 0 <= y0 <= y1 < {L} "
                                 "(inclusive cell bounds inside the mesh)")


def _linear_total(p: Problem) -> float:
    step = 1.0 / (p.size - 1)
    return p.beta * p.size - p.alpha * 0.5 * step * p.size * (p.size - 1)


# -- initial distributions ---------------------------------------------------------
def expected_per_cell(p: Problem, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The mean number of particles of cells (xs, ys) (broadcastable int arrays)."""
    L, n = p.size, float(p.particles)
    xf = xs.astype(np.float64)
    if p.dist == "geometric":
        if p.r == 1.0:
            mu = np.full_like(xf, n / (L * L))
        else:  # each cell of column x holds A r^x, A chosen so the columns sum to n
            A = n * ((1.0 - p.r) / (1.0 - p.r**L)) / L
            mu = A * np.power(p.r, xf)
    elif p.dist == "sinusoidal":  # one period of cos^2 over the columns
        mu = 2.0 * np.cos(xf * (math.pi / L)) ** 2 * n / (L * L)
    elif p.dist == "linear":  # weight beta - alpha x/(L-1) per column, normalised
        mu = n * ((p.beta - p.alpha * xf / (L - 1)) / _linear_total(p)) / L
    else:  # patch: uniform inside the inclusive box, nothing outside
        x0, x1, y0, y1 = p.patch_box
        per_cell = n / ((x1 - x0 + 1) * (y1 - y0 + 1))
        inside = (xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)
        return np.where(inside, per_cell, 0.0)
    return np.broadcast_to(mu, np.broadcast_shapes(xs.shape, ys.shape))


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-mixed 64-bit hash of each counter."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _uniform(counter: np.ndarray) -> np.ndarray:
    """A uniform draw in (0, 1] per counter."""
    return ((_mix(counter) >> np.uint64(11)).astype(np.float64) + 1.0) * (1.0 / 9007199254740992.0)


def cell_counts(p: Problem, x0: int, x1: int, y0: int, y1: int) -> np.ndarray:
    """Particles placed in cells ``[x0, x1) x [y0, y1)``, shape ``(x1-x0, y1-y0)``, int64.

    As the PRK's ``random_draw(mu)``: two uniforms per cell; a mean of at least 1 gives
    a normal draw (sigma = 0.15 mu) rounded to an integer, a smaller one a 0-or-1 draw
    with probability mu. The uniforms are a hash of the cell number ``x L + y``, so a
    cell gets the same count whichever process draws it."""
    xs = np.arange(x0, x1, dtype=np.int64)[:, None]
    ys = np.arange(y0, y1, dtype=np.int64)[None, :]
    mu = np.asarray(expected_per_cell(p, xs, ys), dtype=np.float64)
    cell = (xs * p.size + ys).astype(np.uint64) * np.uint64(2) + np.uint64(_SEED)
    u0, u1 = _uniform(cell), _uniform(cell + np.uint64(1))
    z0 = np.sqrt(-2.0 * np.log(u0)) * np.cos(2.0 * math.pi * u1)
    normal = np.maximum(np.floor(z0 * (0.15 * mu) + mu + 0.5), 0.0)
    return np.where(mu >= 1.0, normal, (u1 < mu).astype(np.float64)).astype(np.int64)


def column_totals(p: Problem) -> np.ndarray:
    """Particles placed in each column of the mesh, int64[L] (the whole mesh, in chunks)."""
    L = p.size
    out = np.empty(L, dtype=np.int64)
    step = max(1, _CHUNK_CELLS // L)
    for x in range(0, L, step):
        out[x:x + step] = cell_counts(p, x, min(L, x + step), 0, L).sum(axis=1)
    return out


def column_prefix(p: Problem) -> np.ndarray:
    """int64[L+1]: particles in all columns before each column (the last is the total)."""
    return np.concatenate(([0], np.cumsum(column_totals(p)))).astype(np.int64)


def init_particles(p: Problem, x0: int, x1: int, y0: int, y1: int, prefix: np.ndarray) -> np.ndarray:
    """The particles that start in cells ``[x0, x1) x [y0, y1)``: a ``(NFIELDS, n)`` array.

    ``prefix`` is :func:`column_prefix` (so IDs are global: column-major over cells,
    from 1). Fields as the PRK's ``finishParticlesInitialization``: at the cell centre,
    ``vx = 0``, ``vy = m/DT``, and the charge ``±(2k+1)`` times the base charge that a
    unit displacement needs, ``+`` on even columns."""
    counts = cell_counts(p, x0, x1, 0, y1)  # rows below y0 too: they number the IDs
    below = counts[:, :y0].sum(axis=1)
    counts = counts[:, y0:]
    flat = counts.ravel()
    n = int(flat.sum())
    cx = np.repeat(np.repeat(np.arange(x0, x1, dtype=np.int64), y1 - y0), flat)
    cy = np.repeat(np.tile(np.arange(y0, y1, dtype=np.int64), x1 - x0), flat)
    # the first ID of each cell: columns before, rows below in the column, cells before in the tile
    in_column = np.cumsum(counts, axis=1) - counts
    first = (prefix[x0:x1][:, None] + below[:, None] + in_column).ravel() + 1
    starts = np.cumsum(flat) - flat
    ids = np.repeat(first, flat) + (np.arange(n, dtype=np.int64) - np.repeat(starts, flat))

    out = np.empty((NFIELDS, n), dtype=np.float64)
    x = cx + REL_X
    y = cy + REL_Y
    rel_x = np.fmod(x, 1.0)
    rel_y = np.fmod(y, 1.0)
    r1_sq = rel_y * rel_y + rel_x * rel_x
    r2_sq = rel_y * rel_y + (1.0 - rel_x) * (1.0 - rel_x)
    cos_theta = rel_x / np.sqrt(r1_sq)
    cos_phi = (1.0 - rel_x) / np.sqrt(r2_sq)
    base_charge = 1.0 / ((DT * DT) * Q * (cos_theta / r1_sq + cos_phi / r2_sq))
    sign = np.where(cx % 2 == 0, 1.0, -1.0)
    out[X], out[Y] = x, y
    out[VX] = 0.0
    out[VY] = p.m / DT
    out[QQ] = sign * (2 * p.k + 1) * base_charge
    out[X0], out[Y0] = x, y
    out[ID] = ids
    return out


# -- the mesh and the force, as the reference states them ---------------------------
def mesh_charges(L: int) -> np.ndarray:
    """The charges at the mesh's vertices, ``[x, y]`` for x, y in 0..L: +Q on even columns."""
    column = np.where(np.arange(L + 1) % 2 == 0, Q, -Q)
    return np.repeat(column[:, None], L + 1, axis=1)


def _coulomb(dx: np.ndarray, dy: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r2 = dx * dx + dy * dy
    r = np.sqrt(r2)
    f = q1 * q2 / r2
    return f * dx / r, f * dy / r


def reference_accel(x: np.ndarray, y: np.ndarray, q: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Acceleration of particles at (x, y) with charges q from the four charges at their
    cell's corners, read from ``grid`` (:func:`mesh_charges`): the slow, plain statement
    of what the compiled kernel computes."""
    cx = np.floor(x).astype(np.int64)
    cy = np.floor(y).astype(np.int64)
    rx, ry = x - cx, y - cy
    fx, fy = _coulomb(rx, ry, q, grid[cx, cy])  # lower-left corner pushes along +(rx, ry)
    ax, ay = fx, fy
    fx, fy = _coulomb(rx, 1.0 - ry, q, grid[cx, cy + 1])  # upper-left
    ax, ay = ax + fx, ay - fy
    fx, fy = _coulomb(1.0 - rx, ry, q, grid[cx + 1, cy])  # lower-right
    ax, ay = ax - fx, ay + fy
    fx, fy = _coulomb(1.0 - rx, 1.0 - ry, q, grid[cx + 1, cy + 1])  # upper-right
    ax, ay = ax - fx, ay - fy
    return ax * MASS_INV, ay * MASS_INV


# -- verification --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verification:
    """What one owner's particles contribute to the verdict (sums over owners add up)."""

    particles: int
    correct: int
    id_sum: int
    checksum: int  # sum of ID * (cell + 1) modulo 2**64: where every particle ended up

    def as_array(self) -> np.ndarray:
        return np.array([self.particles, self.correct, self.id_sum, self.checksum], dtype=np.uint64)

    @classmethod
    def from_array(cls, a: Any) -> "Verification":
        return cls(*(int(v) for v in np.asarray(a, dtype=np.uint64)))

    def __add__(self, other: "Verification") -> "Verification":
        return Verification.from_array(self.as_array() + other.as_array())


def expected_id_sum(n: int) -> int:
    return n * (n + 1) // 2


def _periodic(v: np.ndarray, L: float) -> np.ndarray:
    return np.where(v >= 0.0, np.fmod(v, L), L + np.fmod(v, L))


def verify(parts: np.ndarray, p: Problem) -> Verification:
    """Check particles (a ``(NFIELDS, n)`` array) against their analytic positions after
    ``p.moves`` moves: ``x0 + moves(2k+1)`` and ``y0 + moves m``, periodic, within
    :data:`EPSILON`."""
    L = float(p.size)
    x_want = _periodic(parts[X0] + p.moves * (2.0 * p.k + 1.0), L)
    y_want = _periodic(parts[Y0] + p.moves * float(p.m), L)
    ok = (np.abs(parts[X] - x_want) <= EPSILON) & (np.abs(parts[Y] - y_want) <= EPSILON)
    ids = parts[ID].astype(np.uint64)
    cell = (np.floor(parts[X]).astype(np.int64) + p.size * np.floor(parts[Y]).astype(np.int64)).astype(np.uint64)
    with np.errstate(over="ignore"):
        checksum = int(np.sum(ids * (cell + np.uint64(1)), dtype=np.uint64))
    return Verification(parts.shape[1], int(ok.sum()), int(ids.sum(dtype=np.uint64)), checksum)
