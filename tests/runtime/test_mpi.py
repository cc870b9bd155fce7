"""Integration: the whole programming model under real mpiexec, on 2 and 3 PEs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import clean_env
from support import PROGRAMS

FEATURES = PROGRAMS / "features.py"


def _shoal_run(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = clean_env()
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
    env = clean_env()
    proc = subprocess.run(
        [str(mpiexec), "-n", "2", sys.executable, "-m", "shoal", str(FEATURES)],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("ALL OK")


@pytest.mark.mpi
def test_idle_pes_back_off(mpi_job):
    """While PE 0's main program sleeps, the other PEs must not burn a core polling."""
    job = mpi_job(
        """
        import time
        import shoal

        class Clock(shoal.Chare):
            def cpu(self):
                return time.process_time()

        def main(args):
            g = shoal.Group(Clock)
            before = g.cpu(ret=True).get()
            time.sleep(1.5)
            after = g.cpu(ret=True).get()
            print("idle cpu", [round(a - b, 3) for a, b in zip(after, before)][1:])

        shoal.start(main)
        """,
        n=3,
    )
    assert job.returncode == 0, job
    used = eval(job.stdout.split("idle cpu", 1)[1])
    assert len(used) == 2 and max(used) < 0.5, used  # a busy-polling PE would use ~1.5 s


@pytest.mark.mpi
@pytest.mark.parametrize("env,first,level", [
    ({}, "", "THREAD_SERIALIZED"),  # shoal calls MPI from one thread at a time: no lock per call
    ({"SHOAL_MPI_THREADS": "multiple"}, "", "THREAD_MULTIPLE"),
    ({"MPI4PY_RC_THREAD_LEVEL": "funneled"}, "", "THREAD_FUNNELED"),  # mpi4py's own choice stands
    ({}, "from mpi4py import MPI", "THREAD_MULTIPLE"),  # MPI started before shoal: its level stays
])
def test_mpi_thread_level(mpi_job, env, first, level):
    job = mpi_job(
        f"""
        {first}
        import shoal

        def main(args):
            from mpi4py import MPI
            names = {{getattr(MPI, n): n for n in ("THREAD_FUNNELED", "THREAD_SERIALIZED", "THREAD_MULTIPLE")}}
            print("level", names[MPI.Query_thread()])

        shoal.start(main)
        """,
        env=env,
    )
    assert job.returncode == 0, job
    assert f"level {level}\n" in job.stdout, job
