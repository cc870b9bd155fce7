"""``device="cuda"`` stencils on a real GPU: the programs of stencil_device_checks (every
operation, statement groups, a convergence loop, reductions) in device memory with
CUDA kernels, compared bit for bit with NumPy, on 1 PE and on 2 PEs sharing the GPU
(halos device to device over CUDA IPC, or staged), with one and several tiles per PE.
Skipped, with the reason, where CuPy, a CUDA GPU or nvcc is missing (the same
programs run on the CPU with a simulated device in test_stencil_device.py)."""

from __future__ import annotations


import pytest

from shoal.stencil.cuda import cuda_status
from support.stencil_device_checks import checks_program, run_checks
from support.stencil_support import run_on

WHY = cuda_status()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(WHY is not None, reason=f"needs CuPy, a CUDA GPU and nvcc: {WHY}")]


@pytest.mark.parametrize("odf", [1, 3])
def test_cuda_stencils_on_one_pe_are_bit_for_bit_numpy(odf):
    import cupy

    from shoal.stencil import cuda

    pool = cupy.get_default_memory_pool()

    def body():
        problems = run_checks("cuda", odf)
        return problems, pool.total_bytes(), sorted(cuda._MEMORY)

    problems, held, gpus = run_on(1, body)
    assert problems == []
    assert held > 0 and len(gpus) == 1  # the tiles were in device memory, on one GPU


CHECKS = checks_program("cuda")


@pytest.mark.mpi
@pytest.mark.parametrize("odf, path", [(1, "ipc"), (2, "ipc"), (1, "staged")])
def test_cuda_stencils_on_two_pes_are_bit_for_bit_numpy(mpi_job, odf, path):
    job = mpi_job(CHECKS, n=2, args=(str(odf),), env={"SHOAL_GPU_PATH": path}, timeout=400)
    assert job.returncode == 0 and "checks: OK" in job.stdout, job
