"""Device-resident stencil tiles on the CPU: the backend's device path (tiles in device
memory, halos as device arrays over the runtime's device protocol, NumPy-only
statements on host copies) run with the simulated device of ``stencil_sim`` and C
kernels, compared bit for bit with NumPy on 1-3 PEs, in-process and under mpiexec; the
device registry; and the errors of ``device="cuda"`` where CuPy or a GPU is missing.
The same programs on a real GPU: test_stencil_cuda.py."""

from __future__ import annotations


import numpy as np
import pytest

from support import gpu_sim
from support import stencil_sim
from shoal.stencil import DeviceError, Stencil
from shoal.stencil import devices
from support.stencil_device_checks import checks_program, run_checks
from support.stencil_support import Grid, run_on, same

#: device-resident tiles and their halos between PEs of one node (CUDA IPC among them)
pytestmark = pytest.mark.one_node


@pytest.mark.parametrize("pes, odf", [(1, 1), (1, 3), (2, 1), (3, 2)])
def test_device_resident_tiles_are_bit_for_bit_numpy(pes, odf):
    stencil_sim.CALLS.clear()
    gpu_sim.OPS.calls.clear()
    assert run_on(pes, lambda: run_checks("sim", odf)) == []
    calls = dict(stencil_sim.CALLS)
    assert calls["to_host"] and calls["from_host"]  # gathers, scatters, NumPy-only statements
    if pes * odf > 1:  # halos went as device arrays, lent through the runtime's device protocol
        assert calls["message"] > 0 and calls["sync"] > 0
        assert gpu_sim.OPS.calls.get("copy", 0) >= calls["message"] // 2
    else:
        assert "message" not in calls  # one tile: no halo, and no wait for the device per step
    if pes * odf >= 4:  # (6, 40) splits along both axes: inner-axis faces packed on the device
        assert calls["copy"] > 0


def test_device_tiles_pack_on_the_device_not_with_generated_c(monkeypatch):
    import shoal.stencil.halo as halo

    loaded = []
    monkeypatch.setattr(halo, "load_copy", lambda *a: loaded.append(a))

    def body():
        return run_checks("sim", 3, shapes=[(6, 40)], loop_n=0)

    stencil_sim.CALLS.clear()
    assert run_on(2, body) == []
    assert not loaded and stencil_sim.CALLS["copy"] > 0


def test_one_tile_waits_for_the_device_only_at_the_end_of_a_batch():
    """Kernels of a lone tile are queued without waiting: a loop of 50 steps is one
    batch and one wait."""

    class Heat(Stencil):
        fields = ("u", "v")

        def step(self):
            self.v[1:-1, 1:-1] = 0.5 * self.u[1:-1, 1:-1] + 0.125 * (self.u[:-2, 1:-1] + self.u[2:, 1:-1])
            self.u, self.v = self.v, self.u

    def body():
        h = Heat((20, 9), device="sim")
        h.u.from_numpy(np.arange(180.0).reshape(20, 9))
        h.v.to_numpy()  # runs after the scatter
        stencil_sim.CALLS.clear()
        h.solve(steps=50)
        h.sync()
        return dict(stencil_sim.CALLS), h.u.to_numpy()

    calls, u = run_on(1, body)
    assert calls == {"sync": 1}
    want = np.arange(180.0).reshape(20, 9)
    other = np.zeros_like(want)  # v starts as zeros
    for _ in range(50):
        other[1:-1, 1:-1] = 0.5 * want[1:-1, 1:-1] + 0.125 * (want[:-2, 1:-1] + want[2:, 1:-1])
        want, other = other, want
    assert same(u, want)


CHECKS = checks_program("sim", "from support import stencil_sim  # every PE: the device 'sim'")


@pytest.mark.mpi
@pytest.mark.parametrize("pes, odf, path", [(2, 1, "ipc"), (2, 2, "ipc"), (3, 1, "staged")])
def test_device_resident_tiles_under_mpiexec(mpi_job, pes, odf, path):
    """Real processes: halos cross PEs as device arrays, lent over (simulated) CUDA IPC
    or staged through host memory."""
    job = mpi_job(CHECKS, n=pes, args=(str(odf),), env={"SHOAL_GPU_PATH": path}, timeout=240)
    assert job.returncode == 0 and "checks: OK" in job.stdout, job


# -- the device registry and its errors ------------------------------------------------------
def test_an_unknown_device_names_the_known_ones():
    def body():
        with pytest.raises(ValueError) as info:
            Grid((8, 8), device="gpu")
        return str(info.value)

    text = run_on(1, body)
    assert "device='gpu': use 'cpu' or 'cuda'" in text and "test_stencil_device.py:" in text


def test_a_device_must_be_registered_with_a_known_target():
    with pytest.raises(ValueError, match="target 'rocm' is not 'cpu' or 'cuda'"):
        devices.register(devices.Device("amd", "rocm", lambda: None, lambda: None))  # type: ignore[arg-type,return-value]
    assert "amd" not in devices.names()


def _cuda_passes_the_frontend_check(monkeypatch):
    """The frontend's check passed by hand, so tiles get made (and fail) on this machine."""
    cuda = devices.named("cuda")
    monkeypatch.setitem(devices._DEVICES, "cuda", cuda._replace(missing=lambda: None))


def test_a_pe_without_cupy_or_a_gpu_fails_naming_the_pe(monkeypatch):
    from shoal.stencil.cuda import cuda_status

    why = cuda_status()
    if why is None:
        pytest.skip("CuPy, a GPU and nvcc are present: the real path runs instead")
    _cuda_passes_the_frontend_check(monkeypatch)

    def body():
        Grid((8, 8), device="cuda").u.to_numpy()

    with pytest.raises(DeviceError) as info:
        run_on(1, body)
    text = str(info.value)
    assert text.startswith("PE 0: device='cuda' needs CuPy, a CUDA GPU and nvcc on every PE that holds tiles: ")
    assert why in text


MISSING = """
import sys
from shoal.stencil import Stencil, devices

cuda = devices.named("cuda")
devices.register(cuda._replace(missing=lambda: None))  # past the frontend's check: tiles fail on their PEs


class Grid(Stencil):
    fields = ("u",)


Grid((16, 16), odf=2, device="cuda").u.to_numpy()
print("unreachable")
"""


@pytest.mark.mpi
def test_a_job_without_cupy_or_a_gpu_ends_naming_the_pe(mpi_job):
    from shoal.stencil.cuda import cuda_status

    if cuda_status() is None:
        pytest.skip("CuPy, a GPU and nvcc are present")
    job = mpi_job(MISSING, n=2, timeout=120)
    assert job.returncode != 0 and "unreachable" not in job.stdout, job
    text = job.stdout + job.stderr
    assert "device='cuda' needs CuPy, a CUDA GPU and nvcc on every PE that holds tiles" in text, job
    assert "PE 0: device='cuda'" in text or "PE 1: device='cuda'" in text, job


ONE_PE_KNOWS = """
import shoal
from shoal.stencil import Stencil, devices

shoal.attach()  # from here on, PE 0 alone runs the script: only it registers the device
devices.register(devices.named("cpu")._replace(name="mine"))


class Grid(Stencil):
    fields = ("u",)


Grid((16, 16), device="mine").u.to_numpy()
print("unreachable")
"""


@pytest.mark.mpi
def test_a_device_registered_on_one_pe_only_fails_naming_the_other(mpi_job):
    job = mpi_job(ONE_PE_KNOWS, n=2, timeout=120)
    assert job.returncode != 0 and "unreachable" not in job.stdout, job
    assert "PE 1: device='mine': use 'cpu' or 'cuda': register the device on every PE" in job.stderr, job
