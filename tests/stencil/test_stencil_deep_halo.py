"""Deep passes (communication-avoiding stencils across tiles): with several tiles a
backend loop exchanges ghost layers k deep once per k steps and computes the overlap
with each neighbour redundantly. Results must equal NumPy's bit for bit (2-D, 3-D,
several fields, 2 and 3 tiles, odf 1 and more, convergence checks, reductions), the
deep path must be taken (the per-tile blocking report says so) and must not be taken
where it would not be exact.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from support.commands import clean_env

from shoal.bench.stencil.problems import burgers_numpy, jacobi_numpy, laplace3d_numpy
from shoal.stencil import GhostDepthError, Stencil, maximum_of, norm, total
from shoal.stencil.deep_halo import Use, applies, ghost_depths, plan_pass
from shoal.stencil.interface import GridSpec
from support.stencil_support import blocking_report, burgers_stencil, fourth_order, run_on, same

LAYOUTS = [(2, 1), (1, 2), (3, 1), (1, 3)]  # (PEs, tiles per PE): 2 and 3 tiles, odf 1 and more


@pytest.fixture(params=["whole", "bands"])
def budget(request, monkeypatch):
    """Both ways a pass runs on a tile: in one band (the test tiles fit the cache) and
    as a wavefront of 4-layer bands (an 8 KiB budget, as on a large grid: Burgers runs
    wavefronts of 2 steps, 3-D Laplace fits none and runs each statement whole)."""
    if request.param == "bands":
        import shoal.stencil.backend as backend

        monkeypatch.setattr(backend, "cache_budget", lambda: 8 << 10)
    return request.param


def assert_deep(report, steps):
    """Every tile ran deep passes over at least half the steps, with a ghost deeper
    than one step needs and redundant points (the overlap with its neighbours)."""
    for b in report:
        assert b["passes"] > 0 and 2 * b["steps"] >= steps, b
        assert b["k"] >= 2 and b["ghost"] >= 2 and b["redundant"] > 0, b


def assert_plain(report):
    for b in report:
        assert (b["passes"], b["steps"], b["k"], b["redundant"]) == (0, 0, 0, 0), b


# -- the analysis ---------------------------------------------------------------------------
def test_plan_pass_margins_shrink_by_the_reach_per_step():
    """Jacobi's two steps (y from x, x from y, a swap), split along axis 0: the last
    statement runs on the owned box, each one before it one layer further out."""
    star = tuple((f, off) for f in (0,) for off in ((-1, 0), (1, 0), (0, -1), (0, 1)))
    uses = {0: Use((1,), star, ((1, 1, 30), (1, 1, 30))),
            1: Use((0,), tuple((1, off) for _, off in star), ((1, 1, 30), (1, 1, 30)))}
    body = [(("x", ((0, (1, 1), (1, 1)),), False), ("s", 0)), (("x", ((1, (1, 1), (1, 1)),), False), ("s", 1))]
    ops = [op for _ in range(2) for step in body for op in step]  # 4 steps
    p = plan_pass(ops, uses, (True, False), (8, 8))
    assert p is not None
    assert p.margins == tuple(((m, m), (0, 0)) for m in (3, 2, 1, 0))
    # x is read 4 deep; y must be valid 1 deep at the end (the plain order exchanged it)
    assert p.exchange == ((0, (4, 0), (4, 0)), (1, (3, 0), (3, 0))) and p.depth == 4
    assert plan_pass(ops, uses, (True, False), (3, 8)) is None  # more than the tiles hold


def test_ghost_depths_and_where_deep_passes_apply():
    spec = GridSpec((64, 20), ("u",), ("float64",), 1, 2)
    assert applies(spec, (4, 1)) and ghost_depths((64, 20), (4, 1), 1, True) == (4, 1)
    assert ghost_depths((1000, 20), (2, 1), 1, True) == (8, 1)  # MAX_DEPTH per ghost_depth layer
    assert ghost_depths((1000, 20), (2, 1), 2, True) == (16, 2)
    assert ghost_depths((12, 20), (2, 1), 2, True) == (2, 2)  # never under ghost_depth
    assert ghost_depths((64, 20), (4, 1), 1, False) == (1, 1)
    assert not applies(spec, (1, 1))  # one tile: plain temporal blocking, no exchanges
    assert not applies(spec._replace(shape=(64,)), (4,))  # 1-d
    assert not applies(spec._replace(device="cuda"), (4, 1))
    assert not applies(spec._replace(time_blocking=False), (4, 1))
    assert not applies(spec._replace(backend="numpy"), (4, 1))


# -- bit for bit NumPy ----------------------------------------------------------------------
class Jacobi(Stencil):
    fields = ("x", "y")

    def step(self):
        jacobi_numpy(self.x, self.y)
        self.x, self.y = self.y, self.x


def jacobi_start(shape):
    x0 = np.zeros(shape)
    x0[0, :] = x0[-1, :] = x0[:, 0] = x0[:, -1] = 100.0
    x0[shape[0] // 3, 1:-1] = np.linspace(-3.0, 7.0, shape[1] - 2)
    return x0


def jacobi_reference(x0, steps, until=None, every=1):
    """NumPy's x after ``steps`` steps, or at the first checked step where ``until(x, y)``."""
    a, b = x0.copy(), x0.copy()
    for i in range(1, steps + 1):
        jacobi_numpy(a, b)
        a, b = b, a
        if until is not None and i % every == 0 and until(a, b):
            return i, a
    return steps, a


@pytest.mark.parametrize("pes, odf", LAYOUTS)
def test_jacobi_2d_deep_passes_are_bit_for_bit_numpy(pes, odf, budget):
    shape, steps = (62, 23), 29
    x0 = jacobi_start(shape)

    def body():
        g = Jacobi(shape, odf=odf)
        g.x.from_numpy(x0)
        g.y.from_numpy(x0)
        g.solve(steps=steps)
        return g.x.to_numpy(), g.y.to_numpy(), blocking_report(g)

    x, y, report = run_on(pes, body)
    _, want = jacobi_reference(x0, steps)
    _, want_y = jacobi_reference(x0, steps - 1)
    assert same(x, want) and same(y, want_y)
    assert len(report) == pes * odf
    assert_deep(report, steps)
    if budget == "bands":
        assert all(b["band"] == 4 for b in report)


@pytest.mark.parametrize("pes, odf", LAYOUTS)
def test_burgers_two_fields_deep_passes_are_bit_for_bit_numpy(pes, odf, budget):
    shape, steps = (57, 19), 23
    rng = np.random.default_rng(11)
    init = [1.0 + 0.5 * rng.random(shape) for _ in range(4)]
    n = max(shape)

    Burgers = burgers_stencil(n)

    def body():
        g = Burgers(shape, odf=odf)
        for f, a in zip((g.u, g.v, g.un, g.vn), init):
            f.from_numpy(a)
        g.solve(steps=steps)
        return [f.to_numpy() for f in (g.u, g.v, g.un, g.vn)], blocking_report(g)

    out, report = run_on(pes, body)
    want = [a.copy() for a in init]
    for _ in range(steps):
        burgers_numpy(want[0], want[1], want[2], want[3], n)
        want[0], want[2] = want[2], want[0]
        want[1], want[3] = want[3], want[1]
    assert all(np.isfinite(a).all() for a in want)
    assert all(same(a, b) for a, b in zip(out, want))
    assert_deep(report, steps)


class Laplace3D(Stencil):
    fields = ("a", "b")

    def step(self):
        laplace3d_numpy(self.a, self.b)
        self.a, self.b = self.b, self.a


@pytest.mark.parametrize("pes, odf", LAYOUTS)
def test_laplace_3d_deep_passes_are_bit_for_bit_numpy(pes, odf, budget):
    shape, steps = (44, 9, 11), 17
    rng = np.random.default_rng(5)
    a0 = rng.standard_normal(shape)

    def body():
        g = Laplace3D(shape, odf=odf)
        g.a.from_numpy(a0)
        g.b.from_numpy(a0)
        g.solve(steps=steps)
        return g.a.to_numpy(), blocking_report(g)

    a, report = run_on(pes, body)
    want, other = a0.copy(), a0.copy()
    for _ in range(steps):
        laplace3d_numpy(want, other)
        want, other = other, want
    assert same(a, want)
    assert_deep(report, steps)


def test_a_field_read_only_at_the_point_is_exchanged_too():
    """A coefficient field read at the written point only (the plain order never
    exchanges it) is read in the margins too, so a deep pass must exchange it."""
    shape, steps = (40, 15), 12
    rng = np.random.default_rng(8)
    x0, k0 = rng.standard_normal(shape), 0.1 + 0.1 * rng.random(shape)

    def diffuse(x, y, k):
        c = (slice(1, -1), slice(1, -1))
        y[c] = x[c] + k[c] * (x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:] - 4.0 * x[c])

    class Variable(Stencil):
        fields = ("x", "y", "k")

        def step(self):
            diffuse(self.x, self.y, self.k)
            self.x, self.y = self.y, self.x

    def body():
        g = Variable(shape, odf=2)
        for f, a in ((g.x, x0), (g.y, x0), (g.k, k0)):
            f.from_numpy(a)
        g.solve(steps=steps)
        return g.x.to_numpy(), blocking_report(g)

    x, report = run_on(1, body)
    want, other = x0.copy(), x0.copy()
    for _ in range(steps):
        diffuse(want, other, k0)
        want, other = other, want
    assert same(x, want)
    assert_deep(report, steps)


@pytest.mark.parametrize("pes, odf", [(1, 1), (2, 1), (1, 2)])
@pytest.mark.parametrize("prog", ["laplace", "two statements"])
def test_3d_passes_in_strips_of_axis_1(pes, odf, prog, monkeypatch):
    """A 3-D grid whose planes do not fit the cache budget (as 512³ does not) runs its
    passes in strips of axis 1, each skewed by the statements' axis-1 reach: on one
    tile and in deep passes, bit for bit NumPy's."""
    import shoal.stencil.backend as backend

    # a plane of the fields the loop touches takes 26 KiB (laplace) or 39 KiB
    monkeypatch.setattr(backend, "cache_budget", lambda: (64 if prog == "laplace" else 256) << 10)
    shape, steps = (32, 100, 9), 11
    rng = np.random.default_rng(6)
    init = {k: rng.standard_normal(shape) for k in "abw"}
    c = (slice(1, -1),) * 3

    def step(a, b, w):
        if prog == "laplace":
            laplace3d_numpy(a, b)
        else:  # reads 1 back along axis 1 from a field the statement before wrote
            b[c] = a[c] + 0.1 * (a[2:, 1:-1, 1:-1] + a[:-2, 1:-1, 1:-1] + a[1:-1, 2:, 1:-1] - 3 * a[c])
            a[c] = b[c] * 0.9 + w[1:-1, :-2, 1:-1] * 0.05 + b[1:-1, :-2, 1:-1] * 0.05

    class Prog(Stencil):
        fields = ("a", "b", "w")

        def step(self):
            step(self.a, self.b, self.w)
            if prog == "laplace":
                self.a, self.b = self.b, self.a

    def body():
        g = Prog(shape, odf=odf)
        for k, a in init.items():
            getattr(g, k).from_numpy(a)
        g.solve(steps=steps)
        return {k: getattr(g, k).to_numpy() for k in init}, blocking_report(g)

    out, report = run_on(pes, body)
    want = {k: a.copy() for k, a in init.items()}
    for _ in range(steps):
        step(want["a"], want["b"], want["w"])
        if prog == "laplace":
            want["a"], want["b"] = want["b"], want["a"]
    assert all(same(out[k], want[k]) for k in init)
    assert all(b["width"] >= 8 and b["steps"] >= steps // 2 for b in report), report
    if pes * odf > 1:
        assert_deep(report, steps)


@pytest.mark.parametrize("shape", [(7, 60), (7, 30, 9)])
def test_tiles_split_along_two_axes_get_their_corners(shape):
    """ghost_depth=3 on 7 rows: 4 tiles split 2 x 2, so statements read across corners
    of the deep ghost region (filled axis by axis)."""
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal(shape)
    steps = 13
    c = (slice(1, -1),) * len(shape)

    def smooth(a, b):  # reads diagonally: corners matter
        up_left = (slice(None, -2), slice(None, -2)) + (slice(1, -1),) * (len(shape) - 2)
        down_right = (slice(2, None), slice(2, None)) + (slice(1, -1),) * (len(shape) - 2)
        b[c] = 0.5 * a[c] + 0.25 * a[up_left] + 0.25 * a[down_right]

    class Diagonal(Stencil):
        fields = ("a", "b")

        def step(self):
            smooth(self.a, self.b)
            self.a, self.b = self.b, self.a

    def body():
        g = Diagonal(shape, odf=2, ghost_depth=3)
        g.a.from_numpy(a0)
        g.b.from_numpy(a0)
        g.solve(steps=steps)
        return g.a.to_numpy(), blocking_report(g), g.describe()

    a, report, text = run_on(2, body)
    want, other = a0.copy(), a0.copy()
    for _ in range(steps):
        smooth(want, other)
        want, other = other, want
    assert "(2 x 2" in text and same(a, want)
    assert_deep(report, steps)


# -- checks and reductions ------------------------------------------------------------------
@pytest.mark.parametrize("every", [1, 4, 7])
def test_convergence_checks_end_passes(every):
    shape = (50, 21)
    x0 = jacobi_start(shape)
    tol = 0.5

    def body():
        g = Jacobi(shape, odf=2)
        g.x.from_numpy(x0)
        g.y.from_numpy(x0)
        k = g.solve(steps=3000, until=lambda: norm(g.x - g.y, np.inf) < tol, check_every=every)
        return k, g.x.to_numpy(), blocking_report(g)

    k, x, report = run_on(1, body)
    want_k, want = jacobi_reference(x0, 3000, lambda a, b: np.max(np.abs(a - b)) < tol, every)
    assert k == want_k < 3000 and same(x, want)
    if every == 1:  # every step checked: passes of one step, which run plainly
        assert_plain(report)
    else:
        assert_deep(report, k)
        assert all(b["passes"] >= k // every for b in report)  # a pass never runs past a check


class Weighted(Stencil):
    fields = ("x", "y", "w")

    def step(self):
        jacobi_numpy(self.x, self.y)
        self.x, self.y = self.y, self.x


def test_reductions_in_checks_count_each_owned_point_once():
    """Checks on 3 tiles of 16 rows: a sum stopping where NumPy's does (points computed
    redundantly must not count twice), a max of jumps between rows, and a max that reads
    exactly the row below a tile's edge, from its ghost: the check's exchange comes
    after the step's statements, so the pass must leave that ghost row valid."""
    shape, every, steps = (48, 19), 3, 60
    x0 = jacobi_start(shape)
    w0 = np.zeros(shape)
    w0[16, :] = 1.0  # the first row of the second tile

    checked, a, b = [], x0.copy(), x0.copy()
    for i in range(1, steps + 1):
        jacobi_numpy(a, b)
        a, b = b, a
        if i % every == 0:
            checked.append((i, a.sum(), np.max(np.abs(a[1:, 1:-1] - a[:-1, 1:-1])),
                            np.max(w0[1:, 1:-1] * a[:-1, 1:-1])))
    # thresholds: midway between the 7th and 8th checks' values (steps 21 and 24), and the 8th exactly
    s_limit, j_limit = ((checked[6][c] + checked[7][c]) / 2 for c in (1, 2))
    e_limit = checked[7][3]
    want = (next(c[0] for c in checked if c[1] > s_limit), next(c[0] for c in checked if c[2] < j_limit),
            next(c[0] for c in checked if c[3] >= e_limit))
    assert want[2] == 24 and all(abs(c[1] - s_limit) > 1e-9 * abs(c[1]) for c in checked)

    def body():
        out = []
        for until in (lambda g: total(g.x) > s_limit,
                      lambda g: maximum_of(abs(g.x[1:, 1:-1] - g.x[:-1, 1:-1])) < j_limit,
                      lambda g: maximum_of(g.w[1:, 1:-1] * g.x[:-1, 1:-1]) >= e_limit):
            g = Weighted(shape, odf=3)
            g.x.from_numpy(x0)
            g.y.from_numpy(x0)
            g.w.from_numpy(w0)
            k = g.solve(steps=steps, until=lambda: until(g), check_every=every)
            out.append((k, g.x.to_numpy(), total(g.x).get(), maximum_of(g.x - g.y).get(), blocking_report(g)))
        return out

    for (k, x, s, m, report), want_k in zip(run_on(1, body), want):
        _, x_want = jacobi_reference(x0, want_k)
        _, before = jacobi_reference(x0, want_k - 1)
        assert k == want_k < steps and same(x, x_want)
        assert s == pytest.approx(x_want.sum(), rel=1e-12) and m == np.max(x_want - before)
        assert_deep(report, k)


@pytest.mark.parametrize("freq, nsteps", [(5, 21), (12, 23), (4, 13)])
def test_streamed_batches_with_deep_reads_and_strided_boxes(freq, nsteps):
    """The CharmStencil spelling on 3 tiles: steps streamed ``backend_freq`` at a time,
    where the frontend counts on ghosts staying valid across steps and batches (a
    batch's last single step runs plainly after deep passes); three fields, reads 2
    deep, a strided box and a boundary row (ghost_depth=2)."""

    shape = (200, 17)
    rng = np.random.default_rng(9)
    init = {k: rng.standard_normal(shape) for k in "uvw"}

    class Streamed(Stencil):
        def __init__(self):
            self.u, self.v, self.w = self.initialize(shape, backend_freq=freq, num_fields=3, ghost_depth=2, odf=3)
            self.count = 0

        def iterate(self, n):
            fourth_order(self.u, self.v, self.w)
            self.count += 1
            return self.count < n

    def body():
        g = Streamed()
        for k, a in init.items():
            getattr(g, k).from_numpy(a)
        g.solve(nsteps)
        return {k: getattr(g, k).to_numpy() for k in init}, blocking_report(g)

    out, report = run_on(1, body)
    want = {k: a.copy() for k, a in init.items()}
    for _ in range(nsteps):
        fourth_order(want["u"], want["v"], want["w"])
    assert all(same(out[k], want[k]) for k in init)
    assert all(b["passes"] > 0 and b["ghost"] >= 4 and b["redundant"] > 0 for b in report), report


def test_ghost_depth_still_bounds_reads_and_values_round_trip():
    """Tiles hold deeper ghosts than ghost_depth, but a statement still may not read
    further than it, and to_numpy/from_numpy see the owned points only."""
    def body():
        g = Jacobi((64, 12), odf=2)
        report = blocking_report(g)
        a = np.arange(64 * 12, dtype=float).reshape(64, 12)
        g.x.from_numpy(a)
        back = g.x.to_numpy()
        with pytest.raises(GhostDepthError):
            g.y[2:-2, 1:-1] = g.x[:-4, 1:-1]
        return report, same(back, a)

    report, ok = run_on(1, body)
    assert ok and [b["ghosts"] for b in report] == [(8, 1), (8, 1)]


# -- fallbacks --------------------------------------------------------------------------------
def _fallback(kind):
    shape = (48, 13)
    rng = np.random.default_rng(4)
    u0 = rng.standard_normal(shape)

    def numpy_step(u, v):
        if kind == "numpy function":  # exp: NumPy's own, run with NumPy on each tile
            v[1:-1, 1:-1] = np.exp(0.1 * u[1:-1, 1:-1]) + 0.2 * (u[:-2, 1:-1] + u[2:, 1:-1])
        else:
            v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        if kind == "scratch":  # reads its own target at an offset
            u[1:-1, 1:-1] = 0.5 * v[1:-1, 1:-1] + 0.5 * u[2:, 1:-1]

    class Prog(Stencil):
        fields = ("u", "v")

        def step(self):
            numpy_step(self.u, self.v)
            self.u, self.v = self.v, self.u

    options = {"time_blocking": False} if kind == "time_blocking=False" else {}
    if kind == "backend='numpy'":
        options = {"backend": "numpy"}

    def body():
        g = Prog(shape, odf=2, **options)
        g.u.from_numpy(u0)
        g.solve(steps=11)
        return g.u.to_numpy(), blocking_report(g)

    u, report = run_on(1, body)
    a, b = u0.copy(), np.zeros(shape)
    for _ in range(11):
        numpy_step(a, b)
        a, b = b, a
    return same(u, a), report


@pytest.mark.parametrize("kind", ["numpy function", "scratch", "time_blocking=False", "backend='numpy'", "none"])
def test_fallbacks_run_plain_steps(kind):
    ok, report = _fallback(kind)
    assert ok
    if kind == "none":  # the same program without the obstacle runs deep passes
        assert_deep(report, 11)
    else:
        assert_plain(report)
    if kind in ("time_blocking=False", "backend='numpy'"):  # tiles as before: ghost_depth layers
        assert all(b["ghosts"] == (1, 1) for b in report)


def test_one_dimensional_grids_run_plain_steps():
    shape, steps = (80,), 9
    u0 = np.random.default_rng(1).standard_normal(shape)

    class Heat(Stencil):
        fields = ("u", "v")

        def step(self):
            self.v[1:-1] = self.u[1:-1] + 0.3 * (self.u[:-2] - 2 * self.u[1:-1] + self.u[2:])
            self.u, self.v = self.v, self.u

    def body():
        g = Heat(shape, odf=2)
        g.u.from_numpy(u0)
        g.v.from_numpy(u0)
        g.solve(steps=steps)
        return g.u.to_numpy(), blocking_report(g)

    u, report = run_on(1, body)
    a, b = u0.copy(), u0.copy()
    for _ in range(steps):
        b[1:-1] = a[1:-1] + 0.3 * (a[:-2] - 2 * a[1:-1] + a[2:])
        a, b = b, a
    assert same(u, a)
    assert_plain(report)
    assert all(b["ghosts"] == (1,) for b in report)


# -- real MPI -----------------------------------------------------------------------------------
@pytest.mark.mpi
def test_deep_passes_under_mpiexec(tmp_path):
    """Burgers and Jacobi with a convergence check on 2 MPI processes (odf 2: 4 tiles)."""
    prog = tmp_path / "deep.py"
    prog.write_text(textwrap.dedent("""\
        import sys
        import numpy as np
        from shoal.bench.stencil.problems import burgers_numpy, jacobi_numpy
        from shoal.stencil import Stencil, norm

        shape, n, steps = (64, 23), 64, 21
        rng = np.random.default_rng(2)
        init = [1.0 + 0.5 * rng.random(shape) for _ in range(4)]

        class Burgers(Stencil):
            fields = ("u", "v", "un", "vn")

            def step(self):
                burgers_numpy(self.u, self.v, self.un, self.vn, n)
                self.u, self.un = self.un, self.u
                self.v, self.vn = self.vn, self.v

        class Jacobi(Stencil):
            fields = ("x", "y")

            def step(self):
                jacobi_numpy(self.x, self.y)
                self.x, self.y = self.y, self.x

        g = Burgers(shape, odf=2)
        for f, a in zip((g.u, g.v, g.un, g.vn), init):
            f.from_numpy(a)
        g.solve(steps=steps)
        want = [a.copy() for a in init]
        for _ in range(steps):
            burgers_numpy(*want, n)
            want = [want[2], want[3], want[0], want[1]]
        ok = all(np.array_equal(f.to_numpy(), a) for f, a in zip((g.u, g.v, g.un, g.vn), want))
        deep = all(b["passes"] > 0 and b["k"] >= 2 for b in g._handle.tiles.blocking(ret=True).get())

        x0 = np.zeros(shape)
        x0[0, :] = 100.0
        j = Jacobi(shape, odf=2)
        j.x.from_numpy(x0)
        j.y.from_numpy(x0)
        k = j.solve(steps=5000, until=lambda: norm(j.x - j.y, np.inf) < 0.3, check_every=5)
        a, b = x0.copy(), x0.copy()
        for i in range(1, 5001):
            jacobi_numpy(a, b)
            a, b = b, a
            if i % 5 == 0 and np.max(np.abs(a - b)) < 0.3:
                break
        ok = ok and k == i < 5000 and np.array_equal(j.x.to_numpy(), a)
        deep = deep and all(b["passes"] > 0 for b in j._handle.tiles.blocking(ret=True).get())
        print("deep: OK" if ok and deep else f"deep: FAIL ok={ok} deep={deep}")
        sys.exit(0 if ok and deep else 1)
        """))
    env = clean_env()
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(prog)],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0 and "deep: OK" in proc.stdout, proc.stdout + proc.stderr
