"""Integration: the whole programming model under real mpiexec, on 2 and 3 PEs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FEATURES = Path(__file__).parent / "programs" / "features.py"


def _shoal_run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    return subprocess.run([sys.executable, "-m", "shoal", "run", *argv], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.mpi
@pytest.mark.parametrize("pes", [2, 3])
def test_features_under_mpiexec(pes):
    proc = _shoal_run("-n", str(pes), str(FEATURES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout
    assert proc.stdout.rstrip().endswith("ALL OK")
    assert "ok mpi phase" in proc.stdout


@pytest.mark.parametrize("pes", [1, 3])
def test_features_inproc(pes):
    proc = _shoal_run("-n", str(pes), "--transport", "inproc", str(FEATURES), "--inproc")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("ALL OK")


@pytest.mark.mpi
def test_python_m_shoal_under_plain_mpiexec():
    mpiexec = Path(sys.executable).parent / "mpiexec"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    proc = subprocess.run(
        [str(mpiexec), "-n", "2", sys.executable, "-m", "shoal", str(FEATURES)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("ALL OK")
