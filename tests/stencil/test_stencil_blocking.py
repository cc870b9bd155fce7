"""Temporal blocking in the stencil backend: several steps per pass over a tile with no
neighbours must give NumPy's results bit for bit, take the blocked path where it
applies (checked by the per-tile counts), and fall back to plain steps elsewhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from shoal.stencil import Stencil, norm
from shoal.bench.stencil.problems import burgers_numpy, jacobi_numpy
from support.stencil_support import burgers_stencil, fourth_order, run_on, same


@pytest.fixture
def thin_bands(monkeypatch):
    """A 64 KiB cache budget: the test grids no longer fit in it whole, so passes run as
    wavefronts of 4-layer bands (as an 8192² grid does), not one band per tile."""
    import shoal.stencil.backend as backend

    monkeypatch.setattr(backend, "cache_budget", lambda: 64 << 10)


def burgers_init(shape, seed):
    rng = np.random.default_rng(seed)
    return [1.0 + 0.5 * rng.random(shape) for _ in range(4)]


def burgers_steps(arrays, n, steps):
    a = [x.copy() for x in arrays]
    for _ in range(steps):
        burgers_numpy(a[0], a[1], a[2], a[3], n)
        a[0], a[2] = a[2], a[0]
        a[1], a[3] = a[3], a[1]
    return a


def blocked_stats(g):
    """Per tile: the passes and steps temporal blocking ran, and its last depth and band."""
    return [(b["passes"], b["steps"], b["depth"], b["band"]) for b in g._handle.tiles.blocking(ret=True).get()]


def run_burgers(shape, steps, pes=1, odf=1, time_blocking=True):
    n = max(shape)  # sets dx and dt: stable on every test grid
    init = burgers_init(shape, 3)

    Burgers = burgers_stencil(n)

    def body():
        g = Burgers(shape, odf=odf, time_blocking=time_blocking)
        for f, a in zip((g.u, g.v, g.un, g.vn), init):
            f.from_numpy(a)
        g.solve(steps=steps)
        return [f.to_numpy() for f in (g.u, g.v, g.un, g.vn)], blocked_stats(g), g.solve_mode

    out, stats, mode = run_on(pes, body)
    return out, stats, mode, burgers_steps(init, n, steps)


@pytest.mark.parametrize("shape, steps, band", [((37, 53), 13, 4), ((61, 130), 21, 4), ((130, 11), 6, 4),
                                               ((6, 6), 9, 8), ((9, 130), 21, 11)])
def test_burgers_time_blocked_is_bit_for_bit_numpy(shape, steps, band, thin_bands):
    out, stats, mode, want = run_burgers(shape, steps)
    assert all(np.isfinite(a).all() for a in want)
    assert mode == "loop" and all(same(a, b) for a, b in zip(out, want))
    [(passes, done, depth, used)] = stats
    assert depth == 8 and done == steps and passes == -(-steps // depth)  # every step ran blocked
    assert used == band  # 4-layer bands, or the whole tile (ghosts included) where it fits the budget
    plain, stats, _, _ = run_burgers(shape, steps, time_blocking=False)
    assert stats == [(0, 0, 0, 0)] and all(same(a, b) for a, b in zip(plain, want))


@pytest.mark.parametrize("pes, odf", [(1, 2), (2, 1), (3, 2)])
def test_tiles_with_neighbours_run_deep_passes_exactly(pes, odf):
    """Tiles with neighbours block in time too, with deep ghost exchanges
    (tests/stencil/test_stencil_deep_halo.py has the details); off, they run plain steps."""
    out, stats, mode, want = run_burgers((70, 27), 11, pes, odf)  # tiles of 11 rows or more
    assert mode == "loop" and all(same(a, b) for a, b in zip(out, want))
    assert len(stats) == pes * odf and all(s[0] > 0 and s[1] >= 6 for s in stats)
    plain, stats, _, _ = run_burgers((70, 27), 11, pes, odf, time_blocking=False)
    assert all(same(a, b) for a, b in zip(plain, want)) and all(s == (0, 0, 0, 0) for s in stats)


class Jacobi(Stencil):
    fields = ("x", "y")

    def step(self):
        jacobi_numpy(self.x, self.y)
        self.x, self.y = self.y, self.x


@pytest.mark.parametrize("steps, tol, every", [(17, None, 1), (3000, 1e-4, 5), (3000, 1e-4, 1)])
def test_jacobi_time_blocked_with_convergence_checks(steps, tol, every, thin_bands):
    shape = (150, 31)
    x0 = np.zeros(shape)
    x0[0, :] = x0[-1, :] = x0[:, 0] = x0[:, -1] = 100.0

    def body():
        g = Jacobi(shape)
        g.x.from_numpy(x0)
        g.y.from_numpy(x0)
        until = (lambda: norm(g.x - g.y, np.inf) < tol) if tol else None
        k = g.solve(steps=steps, until=until, check_every=every)
        return k, g.x.to_numpy(), blocked_stats(g)

    k, x, stats = run_on(1, body)
    a, b = x0.copy(), x0.copy()
    want = steps
    for i in range(1, steps + 1):
        jacobi_numpy(a, b)
        a, b = b, a
        if tol and i % every == 0 and np.max(np.abs(a - b)) < tol:
            want = i
            break
    assert k == want and same(x, a)
    [(passes, done, depth, band)] = stats
    assert done == k and depth == 8 and band == 4  # every step ran through the blocked path
    # passes end at checks: one step per pass when every step is checked
    assert passes == (k if tol and every == 1 else -(-k // depth) if not tol else -(-k // every))


@pytest.mark.parametrize("freq, nsteps", [(10, 37), (3, 8), (1, 5)])
def test_streamed_batches_are_time_blocked_too(freq, nsteps, thin_bands):
    """The CharmStencil spelling: the frontend records every step and sends
    ``backend_freq`` of them per batch; on a tile with no neighbours each batch's run of
    steps is blocked in time like a backend loop, and stays bit for bit NumPy's."""
    shape = (90, 23)
    x0 = np.zeros(shape)
    x0[0, :] = x0[-1, :] = x0[:, 0] = x0[:, -1] = 100.0

    class Streamed(Stencil):
        def __init__(self):
            self.x, self.y = self.initialize(shape, backend_freq=freq, num_fields=2)
            self.count = 0

        def iterate(self, n):
            jacobi_numpy(self.x, self.y)
            self.x, self.y = self.y, self.x
            self.count += 1
            return self.count < n

    def body():
        g = Streamed()
        g.x.from_numpy(x0)
        g.y.from_numpy(x0)
        g.solve(nsteps)
        return g.x.to_numpy(), blocked_stats(g)

    x, stats = run_on(1, body)
    a, b = x0.copy(), x0.copy()
    for _ in range(nsteps):
        jacobi_numpy(a, b)
        a, b = b, a
    assert same(x, a)
    [(passes, done, depth, band)] = stats
    if freq == 1:  # one step per batch: nothing to block
        assert (passes, done) == (0, 0)
    else:  # every full batch, and the last partial one, ran blocked
        batches = [min(freq, nsteps - k) for k in range(0, nsteps, freq)]
        assert done == sum(n for n in batches if n >= 2) and depth >= 2
        assert passes == sum(-(-n // depth) for n in batches if n >= 2)


@pytest.mark.parametrize("shape", [(200, 17), (13, 9, 11)])
def test_deep_reads_strided_boxes_and_3d_time_blocked(shape, thin_bands):
    rng = np.random.default_rng(7)
    init = {"u": rng.standard_normal(shape), "v": rng.standard_normal(shape), "w": rng.standard_normal(shape)}

    class Deep(Stencil):
        fields = ("u", "v", "w")

        def step(self):
            if len(shape) == 2:
                fourth_order(self.u, self.v, self.w)
            else:
                c = (slice(1, -1),) * 3
                self.v[c] = self.u[c] + 0.1 * (self.u[2:, 1:-1, 1:-1] + self.u[:-2, 1:-1, 1:-1]
                                                + self.u[1:-1, 1:-1, 2:] - 3 * self.u[c])
                self.u[c] = self.v[c] * 0.9 + self.w[1:-1, :-2, 1:-1] * 0.1

    steps = 19

    def body():
        g = Deep(shape, ghost_depth=2)
        for k, a in init.items():
            getattr(g, k).from_numpy(a)
        g.solve(steps=steps)
        return {k: getattr(g, k).to_numpy() for k in init}, blocked_stats(g)

    out, stats = run_on(1, body)
    want = {k: a.copy() for k, a in init.items()}
    for _ in range(steps):
        if len(shape) == 2:
            fourth_order(want["u"], want["v"], want["w"])
        else:
            u, v, w = want["u"], want["v"], want["w"]
            c = (slice(1, -1),) * 3
            v[c] = u[c] + 0.1 * (u[2:, 1:-1, 1:-1] + u[:-2, 1:-1, 1:-1] + u[1:-1, 1:-1, 2:] - 3 * u[c])
            u[c] = v[c] * 0.9 + w[1:-1, :-2, 1:-1] * 0.1
    assert all(same(out[k], want[k]) for k in init)
    [(passes, done, depth, band)] = stats
    assert passes > 0 and done == steps and depth >= 2 and band == 4


def test_a_statement_through_scratch_keeps_the_loop_plain():
    shape = (19, 23)
    rng = np.random.default_rng(2)
    u0 = rng.standard_normal(shape)

    class Smooth(Stencil):
        fields = ("u",)

        def step(self):
            self.u[1:-1, 1:-1] = 0.5 * self.u[1:-1, 1:-1] + 0.125 * (self.u[:-2, 1:-1] + self.u[2:, 1:-1]
                                                                     + self.u[1:-1, :-2] + self.u[1:-1, 2:])

    def body():
        g = Smooth(shape)
        g.u.from_numpy(u0)
        g.solve(steps=9)
        return g.u.to_numpy(), blocked_stats(g)

    u, stats = run_on(1, body)
    want = u0.copy()
    for _ in range(9):
        want[1:-1, 1:-1] = 0.5 * want[1:-1, 1:-1] + 0.125 * (want[:-2, 1:-1] + want[2:, 1:-1]
                                                             + want[1:-1, :-2] + want[1:-1, 2:])
    assert same(u, want) and stats == [(0, 0, 0, 0)]
