"""shoal bench app jacobi3d: every target gives the same checksum (==) as a plain NumPy run.

On the CPU, and on a GPU (``--device cuda``; the ``gpu`` tests, skipped with the reason
elsewhere). Without a GPU the GPU code path of the targets still runs, on host-memory
arrays that take it (``jacobi3d_standin.py``), and the CUDA kernel's source is checked
by compiling it for the CPU (g++) and to PTX (nvcc) where those compilers are.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shoal.bench.apps.blocks import BlockGrid, Placement, split
from shoal.bench.apps.jacobi3d.app import Config, cuda_missing, parse_size

from support import TESTS as _TESTS
from support.jacobi3d_standin import ContiguousHostArrays  # registers gpu_sim's kind "sim"

TESTS = str(_TESTS)

SHAPE, STEPS = (10, 9, 11), 12  # uneven: the block counts do not divide the sizes
SIZE = "x".join(map(str, SHAPE))
KEYS = {"app", "target", "pes", "shape", "steps", "time_per_step", "compute_per_step", "comm_per_step", "checksum",
        "device", "staging"}
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
@pytest.mark.parametrize("target", [("--target", "sequential"), ("--target", "shoal", "-n", "2", "--staging", "direct"),
                                    ("--target", "mpi4py", "-n", "2", "--staging", "host")])
def test_cuda_without_gpu_fails_at_once(target: tuple[str, ...]) -> None:
    p = _run(*target, "--size", "8", "--steps", "2", "--device", "cuda", timeout=20)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--device cuda" in p.stderr and "CuPy" in p.stderr and "CUDA" in p.stderr, p.stderr


@pytest.mark.parametrize("args, words", [
    (("--target", "charm4py", "-n", "2", "--device", "cuda"), "Charm4py program keeps its blocks in host memory"),
    (("--target", "sequential", "--device", "cuda", "--staging", "host"), "no halos to stage"),
])
def test_cuda_options_that_do_not_apply_are_refused(args: tuple[str, ...], words: str) -> None:
    p = _run(*args, "--size", "8", "--steps", "2", timeout=20)  # refused before CuPy is looked for
    assert p.returncode == 2 and words in p.stderr, p.stdout + p.stderr


# -- the GPU code path on the CPU: host-memory arrays that take it (jacobi3d_standin.py) ------

def _json_line(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def _check_device_path_run(out: dict, expected: float, staging: str) -> None:
    assert KEYS <= set(out), out
    assert out["halo_buffers"] == "contiguous" and out["staging"] == staging, out  # the GPU's code path ran
    assert out["device"] != "cuda", out  # and it says it was not a GPU
    assert out["verified"] is True and float(out["checksum"]) == expected, out
    assert out["compute_per_step"] > 0 and out["comm_per_step"] >= 0, out


@pytest.mark.parametrize("staging", ["host", "direct"])
def test_shoal_device_code_path_on_host_arrays(staging: str, expected: float, capsys: pytest.CaptureFixture) -> None:
    """The shoal target's GPU code (packs, landing buffers, one receive set, --staging
    branches, syncs) on NumPy arrays: 2 in-process PEs, 2 blocks each."""
    from shoal.bench.apps.jacobi3d.shoal_target import run

    cfg = Config(SHAPE, STEPS, "shoal", 2, True, None, "inproc", 2, "cpu", staging)
    assert run(cfg, ContiguousHostArrays) == 0
    _check_device_path_run(_json_line(capsys.readouterr().out), expected, staging)


SHOAL_SIM = f"""
import sys
sys.path.insert(0, {TESTS!r})
from support import gpu_sim
import shoal
from support.jacobi3d_standin import SimDeviceArrays
from shoal.bench.apps.jacobi3d.app import Config
from shoal.bench.apps.jacobi3d.shoal_target import program

main = program(Config({SHAPE!r}, {STEPS}, "shoal", 2, True, None, "mpi", 2, "cpu", "direct"), SimDeviceArrays)


def run_and_count(args):
    main(args)
    print("device calls on PE 0:", sorted(gpu_sim.OPS.calls))


sys.exit(shoal.run(run_and_count, []))
"""


@pytest.mark.mpi
@pytest.mark.parametrize("path", ["", "staged"])
@pytest.mark.one_node  # the direct path is CUDA IPC, within a node
def test_shoal_direct_halos_go_through_the_device_protocol(mpi_job, path: str, expected: float) -> None:
    """--staging direct on 2 MPI processes, the faces sent and posted as (simulated) device
    arrays: shoal's device path moves them (IPC handles by default, host staging when forced)."""
    job = mpi_job(SHOAL_SIM, n=2, env={"SHOAL_GPU_PATH": path} if path else {}, timeout=120)
    assert job.returncode == 0, job
    out = _json_line(job.stdout)
    _check_device_path_run(out, expected, "direct")
    assert out["device"] == "sim" and out["gpu_path"] == (path or "auto"), out
    calls = job.stdout.split("device calls on PE 0:")[1]
    if path == "staged":
        assert "'from_host'" in calls and "'shareable'" not in calls, calls
    else:
        assert "'shareable'" in calls and "'open'" in calls, calls  # lent to, and opened from, the other PE


MPI4PY_STANDIN = f"""
import sys
sys.path.insert(0, {TESTS!r})
from mpi4py import MPI
from support import jacobi3d_standin
from shoal.bench.apps.jacobi3d.app import Config
from shoal.bench.apps.jacobi3d.mpi4py_target import cuda_awareness, run

arrays = getattr(jacobi3d_standin, sys.argv[1])
if MPI.COMM_WORLD.Get_rank() == 0:
    print("awareness", cuda_awareness(MPI), flush=True)
sys.exit(run(Config({SHAPE!r}, {STEPS}, "mpi4py", 2, True, None, "mpi", 1, "cpu", sys.argv[2]), arrays))
"""


@pytest.mark.mpi
def test_mpi4py_device_code_path_on_host_arrays(mpi_job, expected: float) -> None:
    """The mpi4py target's --staging host branch (copies out to and in from staging buffers) on NumPy arrays."""
    job = mpi_job(MPI4PY_STANDIN, n=2, args=("ContiguousHostArrays", "host"))
    assert job.returncode == 0, job
    _check_device_path_run(_json_line(job.stdout), expected, "host")


@pytest.mark.mpi
def test_mpi4py_direct_needs_a_cuda_aware_mpi(mpi_job, expected: float) -> None:
    """Arrays that only a CUDA-aware MPI may take, --staging direct: the target asks the MPI
    library, and runs if it says yes, else stops with exit code 2 and the library's answer."""
    job = mpi_job(MPI4PY_STANDIN, n=2, args=("AwareMpiArrays", "direct"))
    m = re.search(r"awareness \((True|False|None), '([^']*)'\)", job.stdout)
    assert m is not None, job
    if m.group(1) == "True":
        assert job.returncode == 0, job
        _check_device_path_run(_json_line(job.stdout), expected, "direct")
    else:
        assert job.returncode == 2, job
        assert "--staging direct hands GPU buffers to MPI, which needs a CUDA-aware MPI library" in job.stderr, job
        assert m.group(2) in job.stderr and "--staging host" in job.stderr, job


def test_direct_refusal_names_the_answer() -> None:
    from shoal.bench.apps.jacobi3d.mpi4py_target import direct_refusal

    assert direct_refusal(True, "q()", "MPICH 5") is None
    assert "MPICH 5 says it is not CUDA-aware (q())" in (direct_refusal(False, "q()", "MPICH 5") or "")
    assert "cannot be asked whether it is CUDA-aware (no query)" in (direct_refusal(None, "no query", "X") or "")


# -- the CUDA kernel's source, checked without a GPU ---------------------------------------

_EMULATION = """
struct Dim3 { unsigned x, y, z; };
static Dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
%s
extern "C" void launch(const double* u, double* v, long long n1, long long n2, long long n3, double sixth,
                       unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
    gridDim = {gx, gy, gz};
    blockDim = {bx, by, bz};
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x)
        for (unsigned tz = 0; tz < bz; ++tz) for (unsigned ty = 0; ty < by; ++ty) for (unsigned tx = 0; tx < bx; ++tx) {
            blockIdx = {x, y, z};
            threadIdx = {tx, ty, tz};
            jacobi7(u, v, n1, n2, n3, sixth);
        }
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the CUDA source for the CPU")
def test_cuda_kernel_source_gives_the_cpu_kernels_bits(tmp_path: Path) -> None:
    """The CUDA source, compiled by g++ with CUDA's thread indices emulated (every thread of
    the launch_shape grid, one after another; no contraction), sweeps random blocks to the
    CPU kernel's bits and leaves the ghost layers alone: its index arithmetic, bounds and
    operation order. (The GPU's own arithmetic is the gpu tests' to check.)"""
    from shoal.bench.apps.jacobi3d.kernels import CUDA_SOURCE, SIXTH, jacobi_step, launch_shape

    src, lib = tmp_path / "jacobi7.cpp", tmp_path / "jacobi7.so"
    src.write_text(_EMULATION % CUDA_SOURCE)
    subprocess.run(["g++", "-O2", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC", str(src), "-o", str(lib)],
                   check=True, capture_output=True, timeout=120)
    launch = ctypes.CDLL(str(lib)).launch
    launch.restype = None
    rng = np.random.default_rng(3)
    for shape, shrink_z in (((7, 37, 70), False), ((9, 3, 3), False), ((12, 11, 34), True)):
        u = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
        want = np.full(shape, np.nan)
        jacobi_step(u, want)
        got = np.full(shape, np.nan)
        grid, block = launch_shape(shape)
        if shrink_z:  # fewer blocks along i than interior layers: each thread loops over several
            grid = (grid[0], grid[1], 3)
        ptr = ctypes.c_void_p
        launch(ptr(u.ctypes.data), ptr(got.ctypes.data), ctypes.c_longlong(shape[0]), ctypes.c_longlong(shape[1]),
               ctypes.c_longlong(shape[2]), ctypes.c_double(SIXTH), *(ctypes.c_uint(g) for g in grid),
               *(ctypes.c_uint(b) for b in block))
        inner = (slice(1, -1),) * 3
        assert got[inner].tobytes() == want[inner].tobytes(), shape  # bit for bit
        ghosts = np.ones(shape, bool)
        ghosts[inner] = False
        assert np.isnan(got[ghosts]).all(), shape  # only the interior is written


def test_launch_shape_covers_the_interior() -> None:
    from shoal.bench.apps.jacobi3d.kernels import CUDA_BLOCK, launch_shape

    grid, block = launch_shape((258, 130, 66))
    assert block == CUDA_BLOCK and grid == (2, 16, 256)
    assert launch_shape((70_000, 3, 3))[0] == (1, 1, 65535)  # CUDA's limit along z; threads loop over i


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit) to compile the kernel to PTX")
def test_cuda_kernel_compiles_without_fused_multiply_adds(tmp_path: Path) -> None:
    """nvcc with CuPy's options: every float64 add and multiply is round-to-nearest
    (add.rn / mul.rn, which ptxas never fuses) and there is no FMA, so the device
    rounds as the CPU does; without --fmad=false the same source leaves them fusable."""
    from shoal.bench.apps.jacobi3d.kernels import CUDA_OPTIONS, CUDA_SOURCE

    src = tmp_path / "jacobi7.cu"
    src.write_text(CUDA_SOURCE)

    def ptx(*options: str) -> list[str]:
        out = tmp_path / "jacobi7.ptx"
        subprocess.run(["nvcc", "-ptx", *options, str(src), "-o", str(out)], check=True, capture_output=True,
                       timeout=180)
        return re.findall(r"\b(?:add|sub|mul|fma|mad)(?:\.\w+)*\.f64\b", out.read_text())

    ops = ptx(*CUDA_OPTIONS)
    assert ops and set(ops) == {"add.rn.f64", "mul.rn.f64"}, ops
    assert ops.count("add.rn.f64") == 5 * ops.count("mul.rn.f64"), ops  # five adds, then one multiply
    assert "add.rn.f64" not in ptx("--fmad=true"), "the flag should be what makes the adds .rn"


# -- on a GPU ----------------------------------------------------------------------------

gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"needs CuPy and a CUDA GPU: {NO_GPU}")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("args, staging", [
    (("--target", "sequential"), None),
    (("--target", "shoal", "-n", "1"), "host"),
    (("--target", "shoal", "-n", "2", "--staging", "host"), "host"),
    (("--target", "shoal", "-n", "2", "--staging", "direct"), "direct"),
    (("--target", "shoal", "-n", "2", "--odf", "2", "--staging", "direct"), "direct"),
    (("--target", "shoal", "-n", "2", "--transport", "inproc", "--staging", "direct"), "direct"),
    (("--target", "mpi4py", "-n", "1", "--staging", "host"), "host"),
    (("--target", "mpi4py", "-n", "2", "--staging", "host"), "host"),
], ids=["sequential", "shoal-1", "shoal-2-host", "shoal-2-direct", "shoal-2-odf2-direct", "inproc-2-direct",
        "mpi4py-1-host", "mpi4py-2-host"])
def test_cuda_checksum_matches_numpy(args: tuple[str, ...], staging: str | None, expected: float) -> None:
    """sequential, shoal (host and direct halos, 1 and 2 PEs sharing the GPU, in-process
    PEs) and mpi4py on the GPU: the checksum equals the CPU's sequential run's and NumPy's."""
    p = _run(*args, "--device", "cuda", "--size", SIZE, "--steps", str(STEPS), "--json", timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    out = _json_line(p.stdout)
    assert KEYS <= set(out) and out["device"] == "cuda" and out["kernels"] == "cuda", out
    assert out["staging"] == staging, out
    assert out["verified"] is True and out["check"] == "sequential", out  # == the CPU's sequential checksum
    assert float(out["checksum"]) == expected, out  # == plain NumPy's
    assert out["compute_per_step"] > 0 and out["comm_per_step"] >= 0, out


@pytest.mark.gpu
@gpu
def test_cuda_mpi4py_direct_runs_or_names_why_not(expected: float) -> None:
    """mpi4py --staging direct on a GPU: the checksum where the MPI library is CUDA-aware,
    else exit code 2 with the library's answer."""
    p = _run("--target", "mpi4py", "-n", "2", "--device", "cuda", "--staging", "direct", "--size", SIZE,
             "--steps", str(STEPS), "--json", timeout=300)
    if p.returncode == 2:
        assert "needs a CUDA-aware MPI library" in p.stderr and "--staging host" in p.stderr, p.stderr
        return
    assert p.returncode == 0, p.stdout + p.stderr
    out = _json_line(p.stdout)
    assert out["staging"] == "direct" and float(out["checksum"]) == expected, out


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
