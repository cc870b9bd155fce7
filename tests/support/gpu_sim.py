"""A simulated device for testing shoal's device messaging on machines without a GPU.

:class:`SimArray` is a "device array" whose memory is host memory tagged with a device
number; :class:`SimOps` implements :class:`shoal.gpu.DeviceOps` on it, with CUDA IPC
played by files in shared memory that another process maps, and a CUDA-aware MPI
(``SIM_MPI_AWARE=1``) by the host MPI, which takes the arrays through DLPack. Registered as the kind
``sim``, it drives the runtime's real protocol (metadata, lending and acks, pipelined
staging, posted buffers, device checks) across real MPI processes. It tests shoal's
side only: the CUDA calls themselves (``shoal.gpu.ops.CupyOps``) run on a GPU alone.

A program imports this module on every PE (``import gpu_sim``) to register the kind.
"""

from __future__ import annotations

import atexit
import mmap
import os
import tempfile
from typing import Any

import numpy as np

from shoal.gpu import ArrayKind, DeviceOps, register

__all__ = ["SimArray", "SimOps", "OPS", "KIND", "array"]


class SimArray:
    """Host memory posing as memory of device ``device``."""

    __cuda_array_interface__ = None  # what a device array class has; never read here

    def __init__(self, data: np.ndarray, device: int):
        self.data = data
        self.device = device

    shape = property(lambda self: self.data.shape)
    dtype = property(lambda self: self.data.dtype)
    nbytes = property(lambda self: self.data.nbytes)
    flags = property(lambda self: self.data.flags)

    def __getitem__(self, key: Any) -> "SimArray":
        return SimArray(self.data[key], self.device)

    # MPI (mpi4py) takes the array through DLPack, as it takes a CuPy array through
    # __cuda_array_interface__: the simulated "CUDA-aware MPI" is the host MPI
    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple:
        return self.data.__dlpack_device__()

    def get(self) -> np.ndarray:
        """A host copy (CuPy's name for it)."""
        return self.data.copy()

    def __repr__(self) -> str:
        return f"SimArray(device={self.device}, shape={self.shape}, dtype={self.dtype})"


class SimOps(DeviceOps):
    """:class:`DeviceOps` over :class:`SimArray`; counts what it is asked to do."""

    name = "sim"

    def __init__(self) -> None:
        self.current = 0
        self.calls: dict[str, int] = {}
        self._opened: dict[bytes, Any] = {}
        self._mine: list[str] = []
        atexit.register(self._remove)

    def _count(self, what: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1

    def device_count(self) -> int:
        return int(os.environ.get("SIM_DEVICES", "2"))

    def select(self, device: int) -> None:
        self.current = device

    def device_of(self, arr: Any) -> int:
        return arr.device

    def contiguous(self, arr: Any) -> Any:
        return arr if arr.data.flags.c_contiguous else SimArray(np.ascontiguousarray(arr.data), arr.device)

    def empty(self, shape: tuple, dtype: np.dtype) -> Any:
        return SimArray(np.empty(shape, dtype), self.current)

    def flat(self, arr: Any) -> Any:
        return SimArray(arr.data.reshape(-1).view(np.uint8), arr.device)

    def view(self, flat: Any, dtype: np.dtype, shape: tuple) -> Any:
        return SimArray(flat.data.view(dtype).reshape(shape), flat.device)

    def copy(self, dst: Any, src: Any) -> None:
        self._count("copy")
        dst.data[:] = src.data

    def to_host(self, host: np.ndarray, src: Any) -> None:
        self._count("to_host")
        host[:] = src.data

    def from_host(self, dst: Any, host: np.ndarray) -> None:
        self._count("from_host")
        dst.data[:] = host

    def record(self) -> Any:
        return None

    def wait(self, event: Any) -> None:
        self._count("wait")

    def sync(self) -> None:
        self._count("sync")

    def pinned(self, nbytes: int) -> np.ndarray:
        self._count("pinned")
        return np.empty(nbytes, np.uint8)

    def shareable(self, nbytes: int) -> tuple[Any, bytes]:
        self._count("shareable")
        fd, path = tempfile.mkstemp(prefix="shoal-sim-ipc-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        os.ftruncate(fd, nbytes)
        mem = mmap.mmap(fd, nbytes)
        os.close(fd)
        self._mine.append(path)
        return SimArray(np.frombuffer(mem, np.uint8), self.current), path.encode()

    def open(self, handle: bytes, nbytes: int) -> Any:
        arr = self._opened.get(handle)
        if arr is None:
            self._count("open")
            with open(handle.decode(), "r+b") as f:
                mem = mmap.mmap(f.fileno(), 0)
            arr = self._opened[handle] = SimArray(np.frombuffer(mem, np.uint8), self.current)
        return arr[:nbytes]

    def mpi_aware(self) -> bool | None:
        """``SIM_MPI_AWARE=1`` plays a CUDA-aware MPI (the ``mpi`` path), else none."""
        return os.environ.get("SIM_MPI_AWARE") == "1"

    def _remove(self) -> None:
        for path in self._mine:
            try:
                os.unlink(path)
            except OSError:
                pass


OPS = SimOps()
KIND = register(ArrayKind("sim", lambda cls: cls is SimArray, lambda: OPS, lambda a: a, lambda a: a))


def array(values: Any, device: int | None = None) -> SimArray:
    """A simulated device array holding ``values`` (on the current device by default)."""
    return SimArray(np.array(values), OPS.current if device is None else device)
