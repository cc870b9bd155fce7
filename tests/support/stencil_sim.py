"""A simulated GPU for stencil tiles: the device-resident path of the backend, on a CPU.

Importing this module registers the stencil device ``"sim"``: its tiles are resident
(``Memory.resident``), so the backend takes the path it takes for ``device="cuda"``:
faces of inner axes packed into separate "device" buffers and unpacked from them,
every face sent as one device array of ``gpu_sim``'s kind (so it travels by the
runtime's device protocol: a lent buffer and its ack, over IPC through shared memory
between processes, or staged), received into posted device buffers, a
synchronization before each phase's sends, NumPy-only statements and reductions run on
host copies, fields gathered and scattered through host copies. Its memory is host
memory and its kernels are the C ones, standing in for CUDA's: what this cannot test
is the CUDA calls themselves (``shoal.stencil.cuda``, ``printer_cuda``), which run on a
GPU only (tests/stencil/test_stencil_cuda.py).

``CALLS`` counts what the backend asked of the memory on this process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from support import gpu_sim  # registers the device-array kind "sim"

from shoal.stencil.devices import Device, register
from shoal.stencil.memory import HostMemory

__all__ = ["SimMemory", "CALLS", "DEVICE"]

CALLS: dict[str, int] = {}


def _count(what: str) -> None:
    CALLS[what] = CALLS.get(what, 0) + 1


class SimMemory(HostMemory):
    """Host memory posing as one PE's GPU memory; its messages are ``gpu_sim`` arrays."""

    resident = True

    def __init__(self, device: int):
        self.device = device

    def copy(self, dst: Any, src: Any) -> None:
        _count("copy")
        super().copy(dst, src)

    def to_host(self, arr: Any) -> np.ndarray:
        _count("to_host")
        return super().to_host(arr)

    def from_host(self, dst: Any, host: np.ndarray) -> None:
        _count("from_host")
        super().from_host(dst, host)

    def sync(self) -> None:
        _count("sync")

    def message(self, arr: Any) -> Any:
        _count("message")
        return gpu_sim.SimArray(arr, self.device)


def _memory() -> SimMemory:
    from shoal._runtime.devices import transfers

    return SimMemory(transfers().state(gpu_sim.OPS).device)  # the PE's simulated GPU


DEVICE = register(Device("sim", "cpu", _memory, lambda: None))
