"""Host-memory arrays that take jacobi3d's GPU code path, for tests on machines without a GPU.

jacobi3d's targets branch on what their :class:`~shoal.bench.apps.jacobi3d.arrays.BlockArrays`
class declares, never on which device it is. These subclasses of ``HostArrays`` declare
what ``CudaArrays`` declares, so a run with them executes the very code a GPU run does:
faces packed into contiguous buffers, landing buffers unpacked into the ghost layers, the
``--staging host`` copies, the synchronisation points and the timing split. The arrays
are NumPy arrays and the kernel is the CPU's, so these runs test the targets' logic, not
CUDA: the device calls themselves run only on a GPU (the ``gpu`` tests).

* :class:`ContiguousHostArrays`: faces through contiguous buffers, as a GPU's.
* :class:`SimDeviceArrays`: also sends and posts its buffers as ``gpu_sim`` device
  arrays, so ``--staging direct`` moves them through shoal's device-array protocol
  (lending, IPC handles or staging, posted device buffers) across real processes.
* :class:`AwareMpiArrays`: says that handing it to MPI needs a CUDA-aware MPI, so the
  mpi4py target's ``--staging direct`` asks the MPI library and refuses when it says no.

Every PE imports this module (a program puts ``tests/`` on ``sys.path``), which registers
the ``sim`` kind.
"""

from __future__ import annotations

from typing import Any

from support import gpu_sim
from shoal.bench.apps.jacobi3d.arrays import HostArrays

__all__ = ["ContiguousHostArrays", "SimDeviceArrays", "AwareMpiArrays"]


class ContiguousHostArrays(HostArrays):
    """NumPy arrays whose faces travel through contiguous buffers, as CuPy arrays' do."""

    views_in_messages = False


class SimDeviceArrays(ContiguousHostArrays):
    """:class:`ContiguousHostArrays` whose direct messages are simulated device arrays."""

    name = "sim"

    def message(self, arr: Any) -> Any:
        from shoal._runtime.devices import transfers

        return gpu_sim.SimArray(arr, transfers().state(gpu_sim.OPS).device)  # the same memory as `arr`


class AwareMpiArrays(ContiguousHostArrays):
    """:class:`ContiguousHostArrays` that MPI may take only if it is CUDA-aware."""

    needs_aware_mpi = True
