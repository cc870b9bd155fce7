"""``shoal bench app pic``: the PRK PIC physics, its kernels, and every target.

Unit tests run in this process (the shoal target on the in-process transport); the
``mpi`` ones launch ``shoal bench app pic`` under real mpiexec with 2 PEs and check that
the run verifies and ends where the sequential reference ends.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
from support.commands import clean_env

import shoal
from shoal.bench.apps import cli as apps_cli
from shoal.bench.apps.pic import kernels, layout, physics, sequential, shoal_target
from shoal.bench.apps.pic.app import Config, make_report
from shoal.bench.apps.pic.physics import ID, QQ, X, Y, Problem, verify

SMALL = dict(size=48, particles=6000, steps=12)
CASE = ["--size", "64", "--particles", "20000", "--steps", "10", "--dist", "geometric", "--r", "0.97", "--json"]


def _seq(**kw) -> tuple[np.ndarray, int, Problem]:
    p = Problem(**{**SMALL, **kw})
    p.check()
    parts, placed, _ = sequential.simulate(p)
    return parts, placed, p


# -- physics -----------------------------------------------------------------------
@pytest.mark.parametrize("kw", [dict(dist="geometric", r=0.95, k=1, m=1), dict(dist="patch", k=0, m=2),
                                dict(dist="patch", patch=(5, 20, 30, 40), k=2, m=-1),
                                dict(dist="sinusoidal"), dict(dist="linear", alpha=0.5, beta=1.0)],
                         ids=["geometric", "patch-quadrant", "patch-box", "sinusoidal", "linear"])
def test_sequential_run_verifies(kw):
    parts, placed, p = _seq(**kw)
    v = verify(parts, p)
    assert placed > 0.9 * p.particles
    assert (v.particles, v.correct, v.id_sum) == (placed, placed, physics.expected_id_sum(placed))
    assert make_report(Config(p, target="sequential"), 1, 1.0, [1.0], v, placed, "1 x 1").verified


def test_a_corrupted_particle_fails_verification():
    parts, placed, p = _seq(dist="geometric", r=0.95)
    good = verify(parts, p)
    bad = parts.copy()
    bad[X, 17] = np.fmod(bad[X, 17] + 1.0, p.size)  # one cell off
    v = verify(bad, p)
    assert v.correct == placed - 1 and v.checksum != good.checksum
    report = make_report(Config(p, target="sequential"), 1, 1.0, [1.0], v, placed, "1 x 1")
    assert not report.verified and report.exit_code == 1 and "1 of" in report.verdict
    lost = verify(parts[:, 1:], p)  # a particle lost: positions right, count and IDs not
    assert not make_report(Config(p), 1, 1.0, [1.0], lost, placed, "").verified
    dup = parts.copy()
    dup[ID, 3] = dup[ID, 4]  # a duplicated ID: count right, ID sum not
    assert not make_report(Config(p), 1, 1.0, [1.0], verify(dup, p), placed, "").verified


def test_distributions_have_their_shape():
    p = Problem(size=64, particles=200_000, dist="geometric", r=0.95)
    cols = physics.column_totals(p)
    assert abs(cols.sum() - p.particles) < 0.02 * p.particles
    assert cols[0] > 10 * cols[-1] and cols[:8].mean() > cols[8:16].mean()
    patch = Problem(size=64, particles=5000, dist="patch", patch=(3, 9, 40, 50))
    init = physics.init_particles(patch, 0, 64, 0, 64, physics.column_prefix(patch))
    cx, cy = np.floor(init[X]), np.floor(init[Y])
    assert ((cx >= 3) & (cx <= 9) & (cy >= 40) & (cy <= 50)).all()
    assert Problem(size=64).patch_box == (0, 31, 0, 31)  # default: one quadrant


def test_kernel_force_is_the_reference_coulomb_sum_and_moves_2k_plus_1():
    p = Problem(size=32, particles=3000, dist="sinusoidal", k=2, m=3)
    init = physics.init_particles(p, 0, 32, 0, 32, physics.column_prefix(p))
    ax, ay = physics.reference_accel(init[X], init[Y], init[QQ], physics.mesh_charges(32))
    assert np.allclose(ax, 2 * (2 * p.k + 1)) and np.allclose(ay, 0.0)  # half of it moves 2k+1 cells in a step
    grid = layout.Layout.grid(32, 1, 1)
    one = init.copy()
    kernels.move_split(one, one.shape[1], 32, grid.owner_x, grid.owner_y, 1, np.zeros(1, np.int64), 1)
    assert np.allclose(one[X], np.fmod(init[X] + 2 * p.k + 1, 32), atol=1e-9)
    assert np.allclose(one[Y], np.fmod(init[Y] + p.m, 32), atol=1e-12)


def test_numpy_fallback_matches_the_compiled_kernel_bit_for_bit():
    p = Problem(size=40, particles=5000, dist="geometric", r=0.9, k=2, m=-3)
    grid, prefix = layout.Layout.grid(40, 3, 2), physics.column_prefix(p)
    for bx in range(3):
        for by in range(2):
            init = physics.init_particles(p, *grid.bounds(bx, by), prefix)
            nbrs = grid.neighbours(bx, by)
            table = grid.slot_table(bx, by, nbrs)
            a, b = init.copy(), init.copy()
            ra = kernels.move_split(a, a.shape[1], 40, grid.owner_x, grid.owner_y, grid.ny, table, len(nbrs) + 1)
            rb = kernels._move_split_numpy(b, b.shape[1], 40, grid.owner_x, grid.owner_y, grid.ny, table,
                                           len(nbrs) + 1)
            assert ra[0] == rb[0] and ra[4] == rb[4] == -1
            for x, y in zip(ra[1:4], rb[1:4]):
                assert np.array_equal(x, y)
            assert np.array_equal(a[:, : ra[0]], b[:, : rb[0]])


def test_particles_and_ids_do_not_depend_on_the_decomposition():
    p = Problem(size=30, particles=4000, dist="linear")
    prefix = physics.column_prefix(p)
    whole = physics.init_particles(p, 0, 30, 0, 30, prefix)
    grid = layout.Layout.grid(30, 4, 3)
    pieces = np.concatenate([physics.init_particles(p, *grid.bounds(bx, by), prefix)
                             for bx in range(4) for by in range(3)], axis=1)
    order = np.argsort(pieces[ID])
    assert np.array_equal(pieces[:, order], whole)
    assert np.array_equal(whole[ID], np.arange(1, whole.shape[1] + 1))


def test_layout_grid_neighbours_and_limits():
    assert [layout.prk_grid(p) for p in (1, 2, 4, 6, 8)] == [(1, 1), (1, 2), (2, 2), (2, 3), (2, 4)]
    assert list(layout.block_bounds(10, 3)) == [0, 4, 7, 10]
    grid = layout.Layout.grid(16, 1, 2)
    assert grid.neighbours(0, 0) == [(0, 1)]  # up and down are the same block, left/right itself
    assert len(layout.Layout.grid(16, 4, 4).neighbours(1, 1)) == 8
    with pytest.raises(ValueError, match="--k 4"):
        layout.Layout.grid(16, 4, 1).check(4, 1, "the grid")
    with pytest.raises(ValueError, match="even"):
        Problem(size=15).check()
    placement = shoal_target.TilePlacement(ax=2, ay=2, px=2)
    assert [placement((tx, ty), 4) for tx, ty in ((0, 0), (1, 1), (2, 0), (0, 2), (3, 3))] == [0, 0, 1, 2, 3]


def test_particles_grow_and_pickle_compactly():
    parts = kernels.Particles(np.arange(16.0).reshape(8, 2))
    parts.extend([np.ones((8, 30)), np.zeros((8, 0))])
    assert parts.n == 32 and parts.buf.shape[1] >= 32
    back = pickle.loads(pickle.dumps(parts))
    assert back.n == 32 and np.array_equal(back.live, parts.live)


def _json_line(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


@pytest.mark.parametrize("lb", ["", "rotate", "greedy"])
def test_shoal_tiles_in_process_match_the_sequential_run(lb, capsys):
    """Tiles that balance (rotate moves every tile every round) end where the sequential run does."""
    p = Problem(**{**SMALL, "dist": "patch", "k": 1, "m": 2})
    want, placed = sequential.result(p)
    cfg = Config(p, target="shoal", pes=2, json=True, transport="inproc", odf=4, lb_period=3, lb=lb or "greedy")
    code = shoal.run(shoal_target.program(cfg), [], transport="inproc", pes=2, lb=lb)
    out = _json_line(capsys.readouterr().out)
    assert code == 0 and out["verified"] and out["particles"] == placed
    assert out["checksum"] == want.checksum and out["tiles"] == 8
    assert out["syncs"] == 3  # after timed steps 3, 6 and 9, not after the last
    if lb == "rotate":
        assert out["tiles_per_pe"] == [4, 4]


def _corrupting(verify_fn):
    def corrupted(parts, p):
        parts = parts.copy()
        if parts.shape[1]:
            parts[Y, 0] = np.fmod(parts[Y, 0] + 3.0, p.size)
        return verify_fn(parts, p)
    return corrupted


def test_a_run_that_does_not_verify_exits_non_zero(monkeypatch, capsys):
    monkeypatch.setattr(sequential, "verify", _corrupting(physics.verify))
    assert apps_cli.main(["pic", "--target", "sequential", *CASE]) == 1
    assert _json_line(capsys.readouterr().out)["verified"] is False
    monkeypatch.setattr(shoal_target, "verify", _corrupting(physics.verify))
    p = Problem(**SMALL)
    cfg = Config(p, target="shoal", pes=2, json=True, transport="inproc", odf=2)
    assert shoal.run(shoal_target.program(cfg), [], transport="inproc", pes=2) == 1
    out = capsys.readouterr().out
    assert _json_line(out)["verified"] is False and "FAIL" in out


# -- the command line ----------------------------------------------------------------
def _app(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = clean_env()
    env["SHOAL_DEADLOCK_TIMEOUT"] = "5"
    return subprocess.run([sys.executable, "-m", "shoal", "bench", "app", "pic", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_cli_sequential_json_and_bad_options(capsys):
    assert apps_cli.main(["pic", "--target", "sequential", *CASE]) == 0
    out = _json_line(capsys.readouterr().out)
    want, placed = sequential.result(Problem(size=64, particles=20000, steps=10, dist="geometric", r=0.97))
    for key in ("app", "target", "pes", "size", "particles", "steps", "time_per_step", "compute_per_step",
                "comm_per_step", "verified", "checksum", "odf", "lb_period"):
        assert key in out
    assert out["verified"] and out["checksum"] == want.checksum and out["particles"] == placed
    assert apps_cli.main(["pic", "--target", "shoal", "-n", "2", "--size", "16", "--k", "3"]) == 2
    assert "--k 3" in capsys.readouterr().err
    assert apps_cli.main(["nope"]) == 2


@pytest.mark.mpi
@pytest.mark.parametrize("target", [["--target", "mpi4py"], ["--target", "shoal", "--odf", "4", "--lb-period", "3"],
                                    ["--target", "shoal", "--odf", "4", "--lb-period", "auto", "--lb", "auto"]],
                         ids=["mpi4py", "shoal", "shoal-auto-period"])
def test_target_under_mpiexec_verifies_and_ends_where_the_sequential_run_does(target):
    proc = _app("-n", "2", *target, *CASE)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    out = _json_line(proc.stdout)
    want, placed = sequential.result(Problem(size=64, particles=20000, steps=10, dist="geometric", r=0.97))
    assert out["verified"] and out["pes"] == 2 and out["particles"] == placed
    assert out["checksum"] == want.checksum and out["id_sum"] == physics.expected_id_sum(placed)
    assert out["compute_per_step"] > 0 and out["comm_per_step"] >= 0
    if target[1] == "shoal":
        assert out["tiles"] == 8 and out["lb_period"] == (-1 if "auto" in target else 3) and out["balanced"]
