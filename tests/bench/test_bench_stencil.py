"""``shoal bench stencil`` and ``shoal bench stencil-pipeline``: each driver starts its
worker in a process of its own, and both run end to end at tiny sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import ROOT

from shoal.bench.stencil import cli, jobs, pipeline_cli, problems


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


# -- --device cuda ------------------------------------------------------------------------------
def test_cuda_systems_are_the_gpu_peers_then_the_cpu_backend():
    got = dict(cli.systems("burgers", 64, 10, [1, 2], odf=2, threads=2, numba=True, device="cuda", cpu_pes=[2]))
    assert list(got) == ["cupy", "cupy-raw", "shoal-cuda-1pe", "shoal-cuda-2pe", "shoal-2pe"]
    assert got["cupy-raw"][-6:] == ["cupy-raw", "burgers", "64", "10", "1", "0"]  # Burgers: every step on a GPU
    assert got["shoal-cuda-2pe"][:6] == [sys.executable, "-m", "shoal", "run", "-n", "2"]
    assert got["shoal-cuda-2pe"][-6:] == ["shoal-cuda", "burgers", "64", "10", "1", "2"]
    assert got["shoal-2pe"][-6:] == ["shoal", "burgers", "64", "10", "1", "2"]


def test_cuda_table_compares_with_the_cpu_backend_and_hand_cupy(capsys):
    ns = cli.build_parser().parse_args(["--device", "cuda", "--n", "64", "--steps", "3", "--trials", "1"])
    rows = {"cupy-raw": {"median_s": 0.001, "identical": True, "check": "131x131, 10 steps"},
            "shoal-cuda-1pe": {"median_s": 0.002, "identical": False, "check": "131x131, 10 steps"},
            "shoal-1pe": {"median_s": 0.05}, "shoal-2pe": {"median_s": 0.04}, "cupy": {"error": "failed: x"}}
    cli._cuda_table({"jacobi": rows}, ns)
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "shoal-cuda-1pe" in ln)
    assert "20.0x shoal-2pe" in line and "2.00x" in line and "NO (131x131, 10 steps)" in line
    assert "yes (131x131" in next(ln for ln in out.splitlines() if ln.split()[1:2] == ["cupy-raw"])
    assert "failed: x" in out


def test_bench_stencil_on_cuda_without_a_gpu_exits_2_with_the_reason():
    from shoal.stencil.cuda import cuda_status

    why = cuda_status()
    if why is None:
        pytest.skip("a GPU is present: .ci/gpu-check runs the benchmark")
    proc = subprocess.run([sys.executable, "-m", "shoal", "bench", "stencil", "--device", "cuda", "--n", "64"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"shoal bench stencil --device cuda: needs a CUDA GPU, CuPy and nvcc: {why}" in proc.stderr
    out = jobs.run_worker_record(jobs.worker_command(cli.WORKER, ["cupy-raw", "jacobi", "16", "2", "1", "0"]), 120)
    assert isinstance(out, str) and "worker.py cupy-raw: needs a CUDA GPU" in out


def test_the_device_worker_checks_its_bits_against_numpy():
    """What the shoal-cuda worker runs, on the simulated device (C kernels standing in
    for CUDA): a small grid's fields after the check's steps equal NumPy's."""
    from support import stencil_sim  # noqa: F401 - registers the device "sim"
    from shoal.bench.stencil import worker
    from support.stencil_support import run_on

    for problem in ("jacobi", "burgers"):
        times, same = run_on(2, lambda: worker._shoal(problem, 24, 2, 1, 2, device="sim"))
        assert same and len(times) == 1 and times[0] > 0
    zeros = [np.zeros((worker.CHECK_N, worker.CHECK_N))] * 2
    assert not worker._identical("jacobi", zeros)


def test_result_records_carry_facts_beside_the_times(capsys):
    jobs.emit([0.5, 0.25], identical=True, check="131x131, 10 steps")
    line = capsys.readouterr().out.strip()
    assert json.loads(line[len("RESULT "):]) == {"identical": True, "check": "131x131, 10 steps", "times": [0.5, 0.25]}
    jobs.emit([1.0])
    assert capsys.readouterr().out.strip() == "RESULT [1.0]"


def test_hand_written_cupy_kernels_compile_without_fused_multiply_add(tmp_path):
    from shoal.bench.stencil.cupy_peers import KERNELS
    from shoal.compiler import find_nvcc
    from shoal.stencil.build import CUDA_FLAGS

    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    src = tmp_path / "peers.cu"
    src.write_text(KERNELS)
    flags = [f for f in CUDA_FLAGS if f not in ("-Xcompiler", "-fPIC", "-shared", "-cudart", "shared")]
    proc = subprocess.run([nvcc, *flags, "--ptx", str(src), "-o", str(tmp_path / "peers.ptx")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    ptx = (tmp_path / "peers.ptx").read_text()
    assert ".entry jacobi" in ptx and ".entry burgers" in ptx
    assert "mul.rn.f64" in ptx and "fma." not in ptx and "mad." not in ptx
