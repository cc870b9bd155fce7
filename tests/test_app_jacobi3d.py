"""shoal bench app jacobi3d: every target gives the same checksum (==) as a plain NumPy run."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from shoal.bench.apps.blocks import BlockGrid, Placement, split
from shoal.bench.apps.jacobi3d.app import cuda_missing, parse_size

SHAPE, STEPS = (10, 9, 11), 12  # uneven: the block counts do not divide the sizes
SIZE = "x".join(map(str, SHAPE))
KEYS = {"app", "target", "pes", "shape", "steps", "time_per_step", "compute_per_step", "comm_per_step", "checksum"}
NO_GPU = cuda_missing()


def numpy_reference(shape: tuple[int, int, int], steps: int) -> float:
    """The problem in plain NumPy: zero boundary, sine mode plus a hot spot, 7-point Jacobi sweeps."""
    s = [np.sin(np.pi * np.arange(1, n + 1, dtype=np.float64) / (n + 1)) for n in shape]
    u = np.zeros(tuple(n + 2 for n in shape))
    u[1:-1, 1:-1, 1:-1] = np.multiply.outer(np.multiply.outer(s[0], s[1]), s[2])
    u[shape[0] // 3 + 1, shape[1] // 5 + 1, shape[2] // 7 + 1] += 1.0
    c = (slice(1, -1),) * 3
    for _ in range(steps):
        w = u.copy()
        w[c] = (((((u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1]) + u[1:-1, :-2, 1:-1]) + u[1:-1, 2:, 1:-1])
                 + u[1:-1, 1:-1, :-2]) + u[1:-1, 1:-1, 2:]) * (1.0 / 6.0)
        u = w
    return math.fsum(u[c].ravel().tolist())


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "shoal", "bench", "app", "jacobi3d", *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def expected() -> float:
    return numpy_reference(SHAPE, STEPS)


@pytest.mark.parametrize("args", [
    ("--target", "sequential"),
    ("--target", "shoal", "-n", "1", "--transport", "inproc"),
    ("--target", "shoal", "-n", "2", "--transport", "inproc", "--odf", "4"),
    ("--target", "shoal", "-n", "3", "--transport", "inproc", "--odf", "3"),
    ("--target", "shoal", "-n", "2", "--odf", "2"),
    ("--target", "shoal", "-n", "3"),
    ("--target", "mpi4py", "-n", "2"),
    ("--target", "mpi4py", "-n", "3"),
], ids=["sequential", "inproc-1", "inproc-2-odf4", "inproc-3-odf3", "shoal-2-odf2", "shoal-3", "mpi4py-2",
        "mpi4py-3"])
def test_checksum_matches_numpy(args: tuple[str, ...], expected: float) -> None:
    p = _run(*args, "--size", SIZE, "--steps", str(STEPS), "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert KEYS <= set(out), out
    assert out["app"] == "jacobi3d" and out["shape"] == list(SHAPE) and out["steps"] == STEPS
    assert out["verified"] is True and out["time_per_step"] > 0
    assert out["compute_per_step"] >= 0 and out["comm_per_step"] >= 0
    assert float(out["checksum"]) == expected
    assert "time per step" in p.stdout and "compute" in p.stdout


@pytest.mark.parametrize("size", ["0", "abc", "12x13", "4x4x0", "4x4x4x4"])
def test_bad_size(size: str) -> None:
    p = _run("--target", "sequential", "--size", size)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--size" in p.stderr and ("NxMxK" in p.stderr or "at least" in p.stderr), p.stderr


@pytest.mark.parametrize("args", [
    ("--target", "shoal", "--transport", "inproc", "-n", "2", "--odf", "4", "--size", "1x1x3"),
    ("--target", "mpi4py", "-n", "3", "--size", "2"),  # refused before mpiexec starts
])
def test_too_many_blocks(args: tuple[str, ...]) -> None:
    p = _run(*args)
    assert p.returncode == 2 and "non-empty blocks" in p.stderr, p.stdout + p.stderr


def test_unknown_option() -> None:
    p = _run("--target", "sequential", "--size", "8", "--bogus")
    assert p.returncode == 2 and "--bogus" in p.stderr, p.stderr
    p = _run("--target", "sequential", "--size", "8", "--staging", "direct")
    assert p.returncode == 2 and "--device cuda" in p.stderr, p.stderr


@pytest.mark.skipif(NO_GPU is None, reason="CuPy and a CUDA device are present: the no-GPU error cannot be seen")
@pytest.mark.parametrize("target", [("--target", "sequential"), ("--target", "shoal", "-n", "2")])
def test_cuda_without_gpu_fails_at_once(target: tuple[str, ...]) -> None:
    p = _run(*target, "--size", "8", "--steps", "2", "--device", "cuda", "--staging", "direct", timeout=20)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--device cuda" in p.stderr and "CuPy" in p.stderr and "CUDA" in p.stderr, p.stderr


@pytest.mark.skipif(NO_GPU is not None, reason=f"no GPU: {NO_GPU}")
def test_cuda_with_gpu() -> None:  # pragma: no cover - this machine has no GPU
    p = _run("--target", "sequential", "--size", "8", "--steps", "2", "--device", "cuda", timeout=60)
    assert p.returncode == 2 and "not implemented" in p.stderr, p.stdout + p.stderr


def test_parse_size() -> None:
    assert parse_size("64") == (64, 64, 64)
    assert parse_size("32x48X8") == (32, 48, 8)
    for bad in ("-3", "2x3", "1x2x3x4"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_split_3d() -> None:
    assert split(8, (64, 64, 64)) == (2, 2, 2)
    assert split(2, SHAPE) == (1, 1, 2)  # cut across the longest axis
    assert split(4, (100, 100, 1)) == (2, 2, 1)
    assert split(2, (8, 8, 8)) == (2, 1, 1)  # a tie: more blocks along the first axes
    with pytest.raises(ValueError, match="non-empty blocks"):
        split(5, (2, 2, 2))


def test_block_grid_and_placement() -> None:
    grid = BlockGrid((10, 7, 5), (3, 2, 1))
    assert [grid.bounds((i, 0, 0))[0] for i in range(3)] == [(0, 4), (4, 7), (7, 10)]
    assert grid.bounds((2, 1, 0)) == ((7, 10), (4, 7), (0, 5)) and grid.blocks == 6
    # 2 x 3 x 1 PEs, each holding 2 x 1 x 2 blocks: every PE gets 4 blocks, its own share
    place = Placement((2, 1, 2), (2, 3, 1))
    pes = [place(b, 6) for b in itertools.product(range(4), range(3), range(2))]
    assert sorted(pes) == sorted(list(range(6)) * 4)
    assert place((3, 2, 1), 6) == 5 and place((1, 0, 1), 6) == 0
