"""shoal bench app jacobi2d: every target gives the same checksum (==) as a plain NumPy run."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from shoal.bench.apps.jacobi2d.app import parse_size
from shoal.bench.apps.jacobi2d.kernels import exact_sum, to_float
from shoal.bench.apps.jacobi2d.layout import Layout, split

N, M, STEPS = 37, 29, 15  # uneven: no block count divides the sizes
KEYS = {"app", "target", "pes", "shape", "steps", "time_per_step", "compute_per_step", "comm_per_step", "checksum"}


def numpy_reference(n: int, m: int, steps: int) -> float:
    """The problem in plain NumPy: zero boundary, sine mode plus a hot spot, Jacobi sweeps."""
    sx = np.sin(np.pi * np.arange(1, n + 1, dtype=np.float64) / (n + 1))
    sy = np.sin(np.pi * np.arange(1, m + 1, dtype=np.float64) / (m + 1))
    u = np.zeros((n + 2, m + 2))
    u[1:-1, 1:-1] = np.multiply.outer(sx, sy)
    u[n // 3 + 1, m // 5 + 1] += 1.0
    for _ in range(steps):
        w = u.copy()
        w[1:-1, 1:-1] = 0.25 * (((u[:-2, 1:-1] + u[2:, 1:-1]) + u[1:-1, :-2]) + u[1:-1, 2:])
        u = w
    return math.fsum(u[1:-1, 1:-1].ravel().tolist())


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "shoal", "bench", "app", "jacobi2d", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def _checksum(*args: str) -> float:
    p = _run(*args, "--size", f"{N}x{M}", "--steps", str(STEPS), "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert KEYS <= set(out), out
    assert out["app"] == "jacobi2d" and out["shape"] == [N, M] and out["steps"] == STEPS
    assert out["verified"] is True
    assert out["time_per_step"] > 0
    return float(out["checksum"])


@pytest.fixture(scope="module")
def expected() -> float:
    return numpy_reference(N, M, STEPS)


@pytest.mark.parametrize("args", [
    ("--target", "sequential"),
    ("--target", "mpi4py", "-n", "2"),
    ("--target", "shoal", "-n", "2"),
    ("--target", "shoal", "-n", "2", "--odf", "2"),
    ("--target", "shoal", "-n", "3", "--transport", "inproc"),
    ("--target", "shoal", "-n", "3", "--transport", "inproc", "--odf", "2"),
], ids=["sequential", "mpi4py-2", "shoal-2", "shoal-2-odf2", "inproc-3", "inproc-3-odf2"])
def test_checksum_matches_numpy(args: tuple[str, ...], expected: float) -> None:
    assert _checksum(*args) == expected


@pytest.mark.parametrize("size", ["0", "abc", "12x", "0x5"])
def test_bad_size(size: str) -> None:
    p = _run("--target", "sequential", "--size", size)
    assert p.returncode != 0
    assert "--size" in p.stderr and ("NxM" in p.stderr or "at least" in p.stderr), p.stderr


def test_too_many_blocks() -> None:
    p = _run("--target", "shoal", "--transport", "inproc", "-n", "2", "--odf", "4", "--size", "1x3")
    assert p.returncode != 0 and "non-empty blocks" in p.stderr, p.stderr


def test_parse_size() -> None:
    assert parse_size("64") == (64, 64)
    assert parse_size("32x48") == (32, 48)
    with pytest.raises(ValueError):
        parse_size("-3")


def test_split_and_layout() -> None:
    assert split(4, 100, 100) == (2, 2)
    assert split(2, 100, 1000) == (1, 2)
    assert split(6, 7, 7) in ((2, 3), (3, 2))
    lay = Layout(10, 7, 3, 2)
    rows = [lay.bounds(i, 0)[:2] for i in range(3)]
    assert rows == [(0, 4), (4, 7), (7, 10)]
    with pytest.raises(ValueError):
        split(5, 2, 2)


def test_exact_sum_is_fsum() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal(10_001) * np.exp(rng.uniform(-40, 40, 10_001))
    a[:3] = [0.0, 5e-324, -1e300]
    assert to_float(exact_sum(a)) == math.fsum(a.tolist())
    parts = np.array_split(a, 7)
    assert to_float(sum(exact_sum(p) for p in parts)) == math.fsum(a.tolist())
