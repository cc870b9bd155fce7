"""shoal bench app jacobi2d/jacobi3d --target charm4py: real Charm4py jobs (charmrun) give
the sequential run's checksum (==), report the same JSON keys as every target, and bad
input or a missing Charm4py give a clear error and a non-zero exit."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from shoal.bench.apps import cli
from shoal.bench.apps.jacobi2d.sequential import simulate as simulate2d
from shoal.bench.apps.jacobi3d.sequential import simulate as simulate3d

HAVE_CHARM4PY = importlib.util.find_spec("charm4py") is not None
NEEDS_CHARM4PY = pytest.mark.skipif(not HAVE_CHARM4PY, reason="charm4py is not installed (pip install charm4py)")
KEYS = {"app", "target", "pes", "shape", "steps", "time_per_step", "compute_per_step", "comm_per_step", "checksum"}

N, M, STEPS = 37, 29, 15  # uneven: no block count divides the sizes
SHAPE3, STEPS3 = (13, 11, 9), 7


def _run(app: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shoal", "bench", "app", app, "--target", "charm4py", *args],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))


def _result(app: str, *args: str) -> dict:
    p = _run(app, *args, "--json")
    assert p.returncode == 0, p.stdout + p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert KEYS <= set(out), out
    assert out["app"] == app and out["target"] == "charm4py" and out["verified"] is True
    assert out["time_per_step"] > 0 and out["compute_per_step"] > 0 and out["comm_per_step"] >= 0
    return out


@NEEDS_CHARM4PY
@pytest.mark.parametrize("pes, odf", [(1, 1), (2, 1), (2, 2)], ids=["1pe", "2pe", "2pe-odf2"])
def test_jacobi2d_checksum_equals_sequential(pes: int, odf: int) -> None:
    out = _result("jacobi2d", "-n", str(pes), "--odf", str(odf), "--size", f"{N}x{M}", "--steps", str(STEPS))
    assert out["checksum"] == simulate2d(N, M, STEPS)[0]
    assert out["pes"] == pes and out["shape"] == [N, M] and out["steps"] == STEPS
    assert out["odf"] == odf and out["blocks"] == pes * odf and out["blocks_per_pe"] == [odf] * pes


@NEEDS_CHARM4PY
@pytest.mark.parametrize("pes", [1, 2], ids=["1pe", "2pe"])
def test_jacobi3d_checksum_equals_sequential(pes: int) -> None:
    out = _result("jacobi3d", "-n", str(pes), "--size", "x".join(map(str, SHAPE3)), "--steps", str(STEPS3))
    assert out["checksum"] == simulate3d(SHAPE3, STEPS3)[0]
    assert out["pes"] == pes and out["shape"] == list(SHAPE3) and out["blocks_per_pe"] == [1] * pes


@pytest.mark.parametrize("app, args, words", [
    ("jacobi2d", ["-n", "2", "--odf", "4", "--size", "1x3"], ["--odf 4", "non-empty blocks"]),
    ("jacobi2d", ["--steps", "0"], ["--steps 0"]),
    ("jacobi2d", ["--size", "12x"], ["--size", "NxM"]),
    ("jacobi3d", ["-n", "2", "--odf", "8", "--size", "2x2x1"], ["--odf 8", "non-empty blocks"]),
], ids=["too-many-blocks", "no-steps", "bad-size", "too-many-blocks-3d"])
def test_bad_input(app: str, args: list[str], words: list[str]) -> None:
    p = _run(app, *args)
    assert p.returncode == 2, p.stdout + p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


def test_refuses_to_run_under_mpiexec() -> None:
    p = _run("jacobi2d", env={"PMI_SIZE": "2", "PMI_RANK": "0"})
    assert p.returncode == 2 and "without mpiexec" in p.stderr, p.stderr


def test_missing_charm4py_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "charm4py" else real(name, *a))
    code = cli.main(["jacobi2d", "--target", "charm4py", "--size", "8", "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "Charm4py" in err and "pip install charm4py" in err, err
