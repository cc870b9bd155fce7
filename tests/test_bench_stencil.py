"""``shoal bench stencil`` and ``shoal bench stencil-pipeline``: each driver starts its
worker in a process of its own, and both run end to end at tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shoal.bench.stencil import cli, jobs, pipeline_cli, problems

ROOT = Path(__file__).resolve().parent.parent


def test_drivers_start_their_workers_as_separate_programs():
    for driver, worker in ((cli, "worker.py"), (pipeline_cli, "pipeline_worker.py")):
        assert driver.WORKER.name == worker and driver.WORKER.is_file()
        assert Path(driver.__file__).resolve() != driver.WORKER.resolve()
    assert jobs.worker_command(cli.WORKER, ["a"], 1) == [sys.executable, str(cli.WORKER), "a"]
    assert jobs.worker_command(cli.WORKER, ["a"], 2) == [
        sys.executable, "-m", "shoal", "run", "-n", "2", str(cli.WORKER), "a"]


def test_every_system_is_one_timed_run_of_the_worker():
    got = dict(cli.systems("burgers", 64, 10, [1, 2], odf=1, threads=2, numba=False))
    assert list(got) == ["numpy", "c", "c-omp2", "shoal-1pe", "shoal-2pe"]
    assert got["numpy"][-6:] == ["numpy", "burgers", "64", "2", "1", "0"]  # NumPy Burgers: steps / 5
    assert got["c-omp2"][-6:] == ["c", "burgers", "64", "10", "1", "2"]
    assert got["shoal-2pe"][:6] == [sys.executable, "-m", "shoal", "run", "-n", "2"]


def test_worker_prints_one_result_line_and_rejects_bad_arguments():
    out = jobs.run_worker(jobs.worker_command(cli.WORKER, ["numpy", "jacobi", "16", "2", "2", "0"]), 120)
    assert isinstance(out, list) and len(out) == 2 and all(t > 0 for t in out)
    bad = jobs.run_worker(jobs.worker_command(cli.WORKER, ["fortran", "jacobi", "16", "2", "2", "0"]), 120)
    assert isinstance(bad, str) and bad.startswith("failed: usage: worker.py")


def test_problems_are_written_once_for_arrays():
    x = problems.initial("jacobi", 8)[0]
    y = np.zeros_like(x)
    problems.jacobi_numpy(x, y)
    assert y[1, 1] == 50.0 and y[3, 3] == 0.0
    a = problems.line_aligned(x)
    assert np.array_equal(a, x) and (a[0, 1:].ctypes.data % 64) == 0


def test_bench_stencil_runs(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "stencil", "--n", "64", "--steps", "3", "--trials", "1",
         "--pes", "1", "--systems", "numpy,c,shoal-1pe", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "shoal-1pe" in proc.stdout and "vs numpy" in proc.stdout
    data = json.loads(out.read_text())
    assert {"numpy", "c", "shoal-1pe"} <= set(data["results"]["jacobi"])
    assert all("median_s" in r for r in data["results"]["burgers"].values())


def test_bench_stencil_pipeline_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "stencil-pipeline", "--n", "12", "--steps", "20", "--trials", "1",
         "--pes", "1", "--freqs", "1,5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "one backend loop" in proc.stdout and "backend_freq=5" in proc.stdout and "failed" not in proc.stdout


@pytest.mark.mpi
def test_bench_stencil_pipeline_runs_its_worker_as_a_shoal_job():
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "bench", "stencil-pipeline", "--problem", "jacobi2d", "--n", "16",
         "--steps", "10", "--trials", "1", "--pes", "2", "--freqs", "5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "2 PE(s)" in proc.stdout and "backend_freq=5" in proc.stdout and "failed" not in proc.stdout
