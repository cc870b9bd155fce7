"""Device arrays on a real GPU: CuPy, Numba and PyTorch arrays across PEs by each path,
posted device buffers, the CUDA calls of ``CupyOps``. Skipped, with the reason, where
CuPy or a CUDA device is missing (test_gpu.py covers the protocol there)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from shoal.gpu import cupy_missing

WHY = cupy_missing()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(WHY is not None, reason=f"needs CuPy and a CUDA GPU: {WHY}")]


def test_cupy_ops_stage_and_share_round_trip():
    import cupy

    from shoal.gpu import Stager
    from shoal.gpu.ops import cupy_ops

    ops = cupy_ops()
    ops.select(0)
    for n in (1, 4096, (1 << 20) + 7, 5 << 20):
        data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
        dev = cupy.asarray(data)
        host = np.zeros(n, np.uint8)
        Stager(ops, chunk=1 << 20).to_host(host, ops.flat(dev))
        assert np.array_equal(host, data)
        back = cupy.zeros(n, cupy.uint8)
        Stager(ops, chunk=1 << 20).from_host(back, host)
        assert np.array_equal(back.get(), data)
        buf, handle = ops.shareable(n)
        ops.copy(buf, ops.flat(dev))
        ops.sync()
        assert len(handle) == 64 and np.array_equal(buf.get(), data)


PROGRAM = """
import sys
import numpy as np
import cupy
import shoal

KIND = sys.argv[2]


def make(values):
    a = cupy.asarray(values)
    if KIND == "numba":
        from numba import cuda
        return cuda.as_cuda_array(a)
    if KIND == "torch":
        import torch
        return torch.from_dlpack(a)
    return a


def host(a):
    return cupy.asnumpy(cupy.asarray(a))


class Peer(shoal.Chare):
    def __init__(self):
        shoal.my_device()

    def take(self, a):
        return type(a).__name__, host(a).sum().item()

    async def exchange(self, peer, n):
        ch = shoal.Channel(self, remote=peer)
        if self.index[0] == 0:
            ch.send(make(np.arange(n, dtype=np.float64)))
            return "sent"
        buf = make(np.zeros(n))
        got = await ch.recv(into=buf)
        return got is buf, host(buf).sum().item()


def main(args):
    n = int(args[1])
    shoal.my_device()
    a = shoal.Array(Peer, 2)
    x = make(np.arange(n, dtype=np.float32))
    print("p2p", a[1].take(x, ret=True).get())
    print("bcast", a.take(x, ret=True).get())
    f0, f1 = a[0].exchange(a[1], n, ret=True), a[1].exchange(a[0], n, ret=True)
    print("channel", f0.get(), f1.get())
    shoal.exit()


shoal.start(main)
"""


def _kinds() -> list:
    out = [pytest.param("cupy")]
    for name, module in (("numba", "numba"), ("torch", "torch")):
        missing = importlib.util.find_spec(module) is None
        out.append(pytest.param(name, marks=pytest.mark.skipif(missing, reason=f"{module} is not installed")))
    return out


def _not_cuda_aware() -> str | None:
    """Why the mpi path cannot run here (the MPI library does not say it is CUDA-aware), or None."""
    from shoal._transport.mpi_library import cuda_aware

    answer = cuda_aware()
    return None if answer.startswith("yes") else f"the mpi path needs a CUDA-aware MPI; this one: {answer}"


@pytest.mark.mpi
@pytest.mark.parametrize("path", ["mpi", "ipc", "staged"])
@pytest.mark.parametrize("kind", _kinds())
@pytest.mark.parametrize("n", [16, 3 << 20])
def test_device_arrays_cross_pes_on_the_gpu(mpi_job, kind, path, n):
    if path == "mpi" and (why := _not_cuda_aware()) is not None:
        pytest.skip(why)
    job = mpi_job(PROGRAM, n=2, args=(str(n), kind), env={"SHOAL_GPU_PATH": path}, timeout=240)
    assert job.returncode == 0, job
    names = {"cupy": "ndarray", "numba": "DeviceNDArray", "torch": "Tensor"}
    total = float(np.arange(n, dtype=np.float32).sum(dtype=np.float64))
    assert f"p2p ('{names[kind]}', " in job.stdout, job
    assert f"channel sent (True, {float(np.arange(n, dtype=np.float64).sum())!r})" in job.stdout, job
    assert job.stdout.count(f"'{names[kind]}'") == 3, job  # p2p, and both elements of the broadcast
    assert str(total)[:6] in job.stdout, job


def test_info_reports_the_gpu_and_the_path(capsys):
    from shoal.cli import main

    assert main(["info", "--transport", "inproc"]) == 0
    out = capsys.readouterr().out
    assert "CuPy" in out and "gpu path" in out and "ipc" in out
