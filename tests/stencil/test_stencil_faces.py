"""Halo faces of inner axes on every tile layout: 2-D and 3-D grids split along axis 0,
axis 1, both, and the last axis too, on 1-3 PEs with over-decomposition, with
statements that read diagonal neighbours (edges and corners), plain steps and deep
passes, bit for bit NumPy.

The case these guard: a tile spanning the whole last axis keeps only its owned points
in each row (``layout.whole_rows``), and its ghost columns alias the ends of the
adjacent rows. A face of axis 1 of a 3-D tile is a strided copy; had it spanned those
ghost columns, unpacking it would write the sender's stale copy of the boundary
columns over the receiver's first and last owned rows (rows a multiple of 16 points
long have no padding to absorb it).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from shoal.stencil import Stencil
from shoal.stencil.layout import whole_rows
from support.stencil_support import blocking_report, run_on, same


def diagonal(u, v, r):
    """``v`` from ``u``: its interior from reads ``r`` away across edges and corners of
    the first two axes and the last one, and its first and last columns (the grid's
    boundary along the last axis, which a stale face would overwrite) from diagonal
    reads too, so they change every step."""
    d = u.ndim

    def sh(k):
        return slice(r + k, (-r + k) or None)

    def at(*ks):
        return tuple(sh(k) for k in ks) + (sh(0),) * (d - len(ks))

    c = at(0)
    if d == 3:
        v[c] = 0.125 * (u[sh(-r), sh(-r), sh(0)] + u[sh(r), sh(r), sh(0)] + u[sh(0), sh(-r), sh(-r)]
                        + u[sh(0), sh(r), sh(r)] + u[sh(-1), sh(1), sh(-r)] + u[sh(r), sh(-1), sh(1)]) + 0.25 * u[c]
        v[sh(0), sh(0), 0] = 0.5 * u[sh(-1), sh(1), 1] + 0.25 * u[sh(1), sh(-r), 0]
        v[sh(0), sh(0), -1] = 0.5 * u[sh(1), sh(-1), -2] - 0.25 * u[sh(-r), sh(r), -1]
    else:
        v[c] = 0.125 * (u[sh(-r), sh(-r)] + u[sh(r), sh(r)] + u[sh(-1), sh(r)] + u[sh(r), sh(-1)]) + 0.5 * u[c]
        v[sh(0), 0] = 0.5 * u[sh(-1), 1] + 0.25 * u[sh(r), 0]
        v[sh(0), -1] = 0.5 * u[sh(1), -2] - 0.25 * u[sh(-r), -1]


def diagonal_stencil(r: int) -> type:
    class Diagonal(Stencil):
        fields = ("u", "v")

        def step(self):
            diagonal(self.u, self.v, r)
            self.u, self.v = self.v, self.u

    return Diagonal


def reference(u0, v0, r, steps):
    u, v = u0.copy(), v0.copy()
    for _ in range(steps):
        diagonal(u, v, r)
        u, v = v, u
    return u, v


def run_diagonal(shape, r, pes, odf, steps, time_blocking, backend="auto"):
    """Both fields after ``steps`` steps on ``pes`` PEs, the tiles per axis, the report."""
    rng = np.random.default_rng(sum(shape) + 10 * r)
    u0, v0 = rng.standard_normal(shape), rng.standard_normal(shape)
    Diagonal = diagonal_stencil(r)

    def body():
        g = Diagonal(shape, odf=odf, ghost_depth=r, time_blocking=time_blocking, backend=backend)
        g.u.from_numpy(u0)
        g.v.from_numpy(v0)
        g.solve(steps=steps)
        return g.u.to_numpy(), g.v.to_numpy(), g._handle.dims, blocking_report(g)

    u, v, dims, report = run_on(pes, body)
    want_u, want_v = reference(u0, v0, r, steps)
    return (u, v), (want_u, want_v), dims, report


# (shape, reach, PEs, tiles per PE, the tiles per axis this makes)
CASES = [
    # 3-D, whole rows, split along axes 0 and 1: rows of 16, 32, 48 points have no padding
    ((3, 10, 16), 1, 2, 2, (2, 2, 1)),
    ((4, 9, 32), 1, 3, 2, (3, 2, 1)),
    ((5, 7, 48), 1, 1, 6, (3, 2, 1)),
    ((6, 12, 32), 2, 2, 2, (2, 2, 1)),
    ((3, 10, 17), 1, 2, 2, (2, 2, 1)),  # padded rows: 15 points of padding
    # split along axis 1 only (axis 0 takes no tile count that divides the rest)
    ((3, 10, 16), 1, 1, 5, (1, 5, 1)),
    ((5, 12, 32), 2, 3, 1, (1, 3, 1)),
    ((5, 12, 31), 2, 1, 3, (1, 3, 1)),  # one point of padding, two ghost columns
    # split along axis 0 only (faces are whole rows), and along the last axis too
    ((12, 6, 32), 1, 3, 1, (3, 1, 1)),
    ((3, 3, 40), 1, 3, 4, (3, 2, 2)),
    # 2-D: whole rows split along axis 0; split along the last axis too
    ((12, 32), 1, 3, 2, (6, 1)),
    ((20, 30), 2, 2, 1, (2, 1)),
    ((3, 48), 1, 2, 3, (3, 2)),
]


@pytest.mark.parametrize("time_blocking", [True, False], ids=["blocking", "plain"])
@pytest.mark.parametrize("shape, r, pes, odf, dims", CASES, ids=[f"{c[0]}-r{c[1]}-{c[2]}pe-odf{c[3]}" for c in CASES])
def test_diagonal_reads_across_tiles_are_bit_for_bit_numpy(shape, r, pes, odf, dims, time_blocking):
    steps = 6
    got, want, tiled, _ = run_diagonal(shape, r, pes, odf, steps, time_blocking)
    assert tiled == dims
    assert all(np.isfinite(a).all() for a in want)
    assert same(got[0], want[0]) and same(got[1], want[1]), np.argwhere(got[0] != want[0])[:8].tolist()


@pytest.mark.parametrize("shape, r, pes, odf, dims",
                         [((3, 60, 32), 1, 1, 5, (1, 5, 1)), ((5, 48, 16), 2, 3, 1, (1, 3, 1))])
def test_deep_passes_along_axis_1_of_whole_rows_are_bit_for_bit_numpy(shape, r, pes, odf, dims):
    """Deep ghosts along axis 1 (several layers, exchanged once per pass) of tiles
    spanning the whole last axis: the deep faces are the widest inner-axis copies.
    (Tiles split along axis 0 as well are too thin there for deep passes.)"""
    steps = 11
    got, want, tiled, report = run_diagonal(shape, r, pes, odf, steps, True)
    assert tiled == dims
    assert same(got[0], want[0]) and same(got[1], want[1]), np.argwhere(got[0] != want[0])[:8].tolist()
    for b in report:
        assert b["ghosts"][1] >= 2 * r and b["ghosts"][2] == r, b  # deep along axis 1, not the last
        assert b["passes"] > 0 and b["k"] >= 2 and b["redundant"] > 0, b


@pytest.mark.parametrize("shape, r, pes, odf, dims",
                         [((3, 10, 16), 1, 2, 2, (2, 2, 1)), ((5, 12, 32), 2, 3, 1, (1, 3, 1))])
def test_faces_copied_by_numpy_are_bit_for_bit_numpy(shape, r, pes, odf, dims):
    """``backend="numpy"``: NumPy copies the faces of axis 1 (no generated pack/unpack)."""
    got, want, tiled, _ = run_diagonal(shape, r, pes, odf, 5, True, backend="numpy")
    assert tiled == dims
    assert same(got[0], want[0]) and same(got[1], want[1]), np.argwhere(got[0] != want[0])[:8].tolist()


def test_whole_rows_ghost_columns_alias_the_adjacent_rows():
    """The premise: with no padding, a row's ghost columns are the adjacent rows' ends,
    so nothing may write them (the faces above span the owned columns only)."""
    raw, view = whole_rows((3, 4, 16 + 2), "float64", 1, 1)
    raw[...] = np.arange(raw.size).reshape(raw.shape)
    assert raw.shape == (3, 4, 16)
    assert view[1, 1, -1] == raw[1, 2, 0] and view[1, 2, 0] == raw[1, 1, -1]
    view[1, 1, -1] = -1.0
    assert raw[1, 2, 0] == -1.0


@pytest.mark.mpi
def test_diagonal_reads_on_whole_rows_under_mpiexec(mpi_job):
    """Tiles spanning the whole last axis of a 3-D grid, on three MPI ranks (faces
    between processes): split along axes 0 and 1 with plain steps, and along axis 1
    only with deep passes."""
    source = (
        "import numpy as np\nfrom shoal.stencil import Stencil\n"
        + inspect.getsource(diagonal) + inspect.getsource(diagonal_stencil) + inspect.getsource(reference)
        + "ok = True\n"
        "for shape, r, odf, tb in [((3, 10, 32), 1, 2, False), ((5, 48, 32), 2, 1, True)]:\n"
        "    rng = np.random.default_rng(7)\n"
        "    u0, v0 = rng.standard_normal(shape), rng.standard_normal(shape)\n"
        "    g = diagonal_stencil(r)(shape, odf=odf, ghost_depth=r, time_blocking=tb)\n"
        "    g.u.from_numpy(u0)\n"
        "    g.v.from_numpy(v0)\n"
        "    g.solve(steps=7)\n"
        "    want = reference(u0, v0, r, 7)\n"
        "    good = np.array_equal(g.u.to_numpy(), want[0]) and np.array_equal(g.v.to_numpy(), want[1])\n"
        "    deep = min(b['passes'] for b in g._handle.tiles.blocking(ret=True).get())\n"
        "    print('case', shape, g._handle.dims, 'deep' if deep else 'plain', good)\n"
        "    ok = ok and good\n"
        "print('all equal' if ok else 'MISMATCH')\n"
    )
    job = mpi_job(source, n=3, timeout=240)
    assert job.returncode == 0, job
    assert "case (3, 10, 32) (3, 2, 1) plain True" in job.stdout, job
    assert "case (5, 48, 32) (1, 3, 1) deep True" in job.stdout, job
    assert "all equal" in job.stdout, job
