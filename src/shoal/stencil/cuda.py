"""Stencil tiles on a CUDA GPU: plain device allocations through CuPy, one stream per PE.

``device="cuda"`` keeps every tile's fields in device memory (``cudaMalloc`` through
CuPy's pool, never managed memory) on the PE's GPU (``shoal.my_device()``), and runs
its statements as the CUDA kernels of :mod:`.printer_cuda`, given raw device pointers.

**One stream.** Every kernel, halo copy and allocation of a PE's tiles is queued on
one CuPy stream (non-blocking: it waits for no other stream), so they run in the order
the backend issues them. The host waits for that stream (:meth:`CudaMemory.sync`)

* before a halo face is sent: the runtime copies a device array out on a stream of its
  own (``shoal.gpu.ops``), which must find the face complete;
* at every reduction (the kernel returns its value), when a field goes to the host,
  and at the end of every batch (so a finished batch is finished on the GPU).

A face received over a channel is complete when its receive returns (the runtime
synchronizes its own copy), before any kernel that reads it is queued.

CuPy is imported here only, and only for ``device="cuda"``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .build import find_nvcc
from .errors import DeviceError
from .memory import Memory
from .printer_cuda import PARTIALS

__all__ = ["CudaMemory", "cuda_status", "memory"]


def _pe() -> int:
    import shoal

    return shoal.my_pe()


def cuda_status() -> str | None:
    """Why CUDA stencils cannot run in this process, or None if they can: nvcc (kernels
    are compiled on each PE), CuPy and a device it can see are all needed."""
    if find_nvcc() is None:
        return "nvcc was not found (set NVCC or put it on PATH)"
    from ..gpu import cupy_missing

    return cupy_missing()


class CudaMemory(Memory):
    """Device memory of one GPU for one process's tiles, and the stream they use."""

    resident = True

    def __init__(self, device: int):
        import cupy

        self.cp = cupy
        self.device = device
        with cupy.cuda.Device(device):
            self.stream = cupy.cuda.Stream(non_blocking=True)
            self.partials = cupy.empty(PARTIALS + 1, cupy.float64)  # one reduction at a time: each waits
        self.kernel_args = (self.stream.ptr,)
        self.reduce_args = (self.stream.ptr, self.partials.data.ptr)
        self.last = ""

    def _allocate(self, shape: Any, dtype: Any, zero: bool) -> Any:
        cp = self.cp
        try:
            with self.stream:
                return cp.zeros(shape, dtype) if zero else cp.empty(shape, dtype)
        except cp.cuda.memory.OutOfMemoryError as exc:
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            raise DeviceError(f"PE {_pe()}: device='cuda': no room for {nbytes} bytes of stencil tiles on GPU "
                              f"{self.device}: {exc}; use fewer or smaller grids, or more GPUs") from None

    def zeros(self, count: int, dtype: str) -> Any:
        return self._allocate((count,), dtype, True)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self._allocate(shape, dtype, False)

    def address(self, arr: Any) -> int:
        return int(arr.data.ptr)

    def copy(self, dst: Any, src: Any) -> None:
        with self.stream:
            dst[...] = src  # one elementwise copy kernel, strides on either side

    def to_host(self, arr: Any) -> np.ndarray:
        with self.stream:
            host = self.cp.asnumpy(arr, stream=self.stream)
        self.sync()
        return np.ascontiguousarray(host)

    def from_host(self, dst: Any, host: np.ndarray) -> None:
        with self.stream:
            dst[...] = self.cp.asarray(host)
        self.sync()

    def sync(self) -> None:
        try:
            self.stream.synchronize()
        except self.cp.cuda.runtime.CUDARuntimeError as exc:
            raise DeviceError(f"PE {_pe()}: CUDA error on GPU {self.device} in work the stencil queued (the last "
                              f"statement launched: {self.last or 'none'}): {exc}") from None

    def note(self, where: str) -> None:
        self.last = where


#: this process's memory, by GPU (a process's PEs share one)
_MEMORY: dict[int, CudaMemory] = {}


def memory() -> CudaMemory:
    """This PE's :class:`CudaMemory`, made on first use on the PE's GPU; a
    :class:`DeviceError` naming the PE where CuPy, a GPU or nvcc is missing."""
    import shoal

    why = cuda_status()
    if why is not None:
        raise DeviceError(f"PE {_pe()}: device='cuda' needs CuPy, a CUDA GPU and nvcc on every PE that holds "
                          f"tiles: {why}")
    try:
        device = shoal.my_device()
    except shoal.GPUError as exc:
        raise DeviceError(f"device='cuda': {exc}") from None
    mem = _MEMORY.get(device)
    if mem is None:
        if _MEMORY:
            raise DeviceError(f"PE {_pe()}: device='cuda': the PEs of this process chose GPUs {sorted(_MEMORY)} and "
                              f"{device}; PEs that share a process share one GPU: set SHOAL_DEVICE to one number, "
                              "or start one process per PE (shoal run -n N)")
        mem = _MEMORY[device] = CudaMemory(device)
    return mem
