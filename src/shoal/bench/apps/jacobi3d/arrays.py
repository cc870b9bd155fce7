"""Where jacobi3d's blocks live: host memory (NumPy) or a CUDA GPU (CuPy), behind one interface.

Every target writes its loop once against :class:`BlockArrays` (``--device`` picks the
class, :func:`arrays_for`): make a block's arrays, run the 7-point update, pack faces into
contiguous buffers and unpack them into ghost layers (plain slicing, which NumPy and CuPy
share), copy buffers between the device and host memory, and wait for queued device work.

* :class:`HostArrays` (``--device cpu``): NumPy arrays and the Numba kernel of
  :mod:`.kernels`. Copies happen at once and there is nothing to wait for. Channels take
  strided views of NumPy arrays, so the shoal target sends faces and receives ghost
  layers in place.
* :class:`CudaArrays` (``--device cuda``): CuPy arrays on one GPU and the CUDA kernel of
  :mod:`.kernels`. Kernels and copies are queued on the current stream and run later:
  :meth:`~BlockArrays.sync` waits for them, so a target calls it before it times a
  kernel's end, and before anything outside the stream (MPI, shoal's runtime, which copies
  on a stream of its own) reads what the stream wrote. Messages carry only contiguous
  device arrays, so faces go through contiguous buffers.

The class attributes say what a target has to do differently; nothing else does. The
CPU tests run the targets' device code path (contiguous buffers, both staging branches)
on a :class:`HostArrays` subclass that declares itself unable to message views.
"""

from __future__ import annotations

import ctypes
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from .kernels import CUDA_KERNEL, CUDA_OPTIONS, CUDA_SOURCE, NUMBA, SIXTH, jacobi_step, launch_shape
from .kernels import warm as warm_kernel

__all__ = ["BlockArrays", "HostArrays", "CudaArrays", "ARRAYS", "arrays_for"]


class BlockArrays(ABC):
    """The arrays of one process's blocks, on one device, and the operations on them."""

    #: the device, as the report names it (``--device``)
    name: ClassVar[str]
    #: the kernel, as the report names it
    kernels: ClassVar[str]
    #: the arrays are on a GPU: each PE chooses its device before making any
    gpu: ClassVar[bool] = False
    #: channels send strided views of these arrays and receive into them (NumPy); else
    #: faces go through contiguous buffers
    views_in_messages: ClassVar[bool] = True
    #: handing these arrays to MPI as they are needs a CUDA-aware MPI library
    needs_aware_mpi: ClassVar[bool] = False

    #: the array module (``numpy`` or ``cupy``): slicing and copies between arrays
    xp: Any
    #: the device's number (0 in host memory)
    device: int = 0

    @abstractmethod
    def __init__(self, device: int = 0) -> None:
        """The arrays of device ``device`` (made current, for a GPU)."""

    def __reduce__(self) -> tuple:
        """Pickled as its class and device (a block that moves takes its arrays' kind along)."""
        return type(self), (self.device,)

    @classmethod
    def count(cls) -> int:
        """How many devices of this kind this process sees."""
        return 1

    @abstractmethod
    def put(self, host: np.ndarray) -> Any:
        """An array on the device holding ``host``'s values (``host`` itself in host memory)."""

    @abstractmethod
    def get(self, arr: Any) -> np.ndarray:
        """A host copy of ``arr`` (any view); waits for the work queued before."""

    @abstractmethod
    def empty(self, shape: tuple[int, ...]) -> Any:
        """A C-contiguous float64 array on the device (values undefined)."""

    @abstractmethod
    def staging_buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        """A C-contiguous float64 host array that device copies reach fastest (page-locked on a GPU)."""

    @abstractmethod
    def to_host(self, src: Any, dst: np.ndarray) -> None:
        """Queue the copy of contiguous device array ``src`` into host array ``dst`` (same shape)."""

    @abstractmethod
    def to_device(self, src: np.ndarray, dst: Any) -> None:
        """Queue the copy of host array ``src`` into contiguous device array ``dst`` (same shape)."""

    @abstractmethod
    def sync(self) -> None:
        """Wait until every kernel and copy queued so far is done."""

    @abstractmethod
    def step(self, u: Any, v: Any) -> None:
        """Queue one sweep: ``v``'s interior from ``u`` (both a block with its ghost layers)."""

    @abstractmethod
    def warm(self) -> None:
        """Compile the kernel (or load it from a cache) and run it once, outside any timing."""

    def message(self, arr: Any) -> Any:
        """What a message carries, or a receive posts, to move contiguous buffer ``arr`` as it is."""
        return arr


def _same_shape(src: Any, dst: Any, what: str) -> None:
    if tuple(src.shape) != tuple(dst.shape) or not src.flags.c_contiguous or not dst.flags.c_contiguous:
        raise ValueError(f"jacobi3d: {what} needs two C-contiguous arrays of one shape, not {tuple(src.shape)} "
                         f"(contiguous: {src.flags.c_contiguous}) and {tuple(dst.shape)} "
                         f"(contiguous: {dst.flags.c_contiguous})")


class HostArrays(BlockArrays):
    """NumPy arrays in this process's memory, swept by the Numba kernel (``--device cpu``)."""

    name = "cpu"
    kernels = "numba" if NUMBA else "numpy"

    def __init__(self, device: int = 0) -> None:
        self.xp = np
        self.device = device

    def put(self, host: np.ndarray) -> np.ndarray:
        return host

    def get(self, arr: Any) -> np.ndarray:
        return np.array(arr)

    def empty(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.empty(shape)

    def staging_buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.empty(shape)

    def to_host(self, src: Any, dst: np.ndarray) -> None:
        _same_shape(src, dst, "a copy to the host")
        dst[...] = src

    def to_device(self, src: np.ndarray, dst: Any) -> None:
        _same_shape(src, dst, "a copy to the device")
        dst[...] = src

    def sync(self) -> None:
        pass

    def step(self, u: Any, v: Any) -> None:
        jacobi_step(u, v)

    def warm(self) -> None:
        warm_kernel()


class CudaArrays(BlockArrays):
    """CuPy arrays on one CUDA GPU, swept by the CUDA kernel of :mod:`.kernels` (``--device cuda``).

    Everything is queued on CuPy's current stream of the chosen device."""

    name = "cuda"
    kernels = "cuda"
    gpu = True
    views_in_messages = False  # shoal's channels move contiguous device arrays only
    needs_aware_mpi = True

    #: device -> the compiled kernel: one per process and device, whatever the number of blocks
    _kernels: ClassVar[dict[int, Any]] = {}

    def __init__(self, device: int = 0) -> None:
        import cupy

        self.xp = cupy
        self.device = device
        cupy.cuda.Device(device).use()
        kernel = self._kernels.get(device)
        if kernel is None:
            kernel = self._kernels[device] = cupy.RawKernel(CUDA_SOURCE, CUDA_KERNEL, options=CUDA_OPTIONS)
        self._kernel = kernel
        self._sixth = np.float64(SIXTH)

    @classmethod
    def count(cls) -> int:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())

    def _stream(self) -> Any:
        return self.xp.cuda.get_current_stream()

    def put(self, host: np.ndarray) -> Any:
        out = self.xp.empty(host.shape, np.float64)
        out.set(np.ascontiguousarray(host, dtype=np.float64))
        self.sync()
        return out

    def get(self, arr: Any) -> np.ndarray:
        self.sync()
        return np.asarray(self.xp.asnumpy(arr))

    def empty(self, shape: tuple[int, ...]) -> Any:
        return self.xp.empty(shape, np.float64)

    def staging_buffer(self, shape: tuple[int, ...]) -> np.ndarray:
        count = int(np.prod(shape, dtype=np.int64))
        mem = self.xp.cuda.alloc_pinned_memory(max(count, 1) * 8)
        return np.frombuffer(mem, np.float64, count).reshape(shape)  # the array keeps `mem` alive

    def to_host(self, src: Any, dst: np.ndarray) -> None:
        _same_shape(src, dst, "a copy to the host")
        src.data.copy_to_host_async(ctypes.c_void_p(dst.ctypes.data), src.nbytes, self._stream())

    def to_device(self, src: np.ndarray, dst: Any) -> None:
        _same_shape(src, dst, "a copy to the device")
        dst.data.copy_from_host_async(ctypes.c_void_p(src.ctypes.data), src.nbytes, self._stream())

    def sync(self) -> None:
        self._stream().synchronize()

    def step(self, u: Any, v: Any) -> None:
        if u.shape != v.shape or not (u.flags.c_contiguous and v.flags.c_contiguous) or u.dtype != np.float64:
            raise ValueError(f"jacobi3d: the CUDA kernel sweeps two C-contiguous float64 arrays of one shape, "
                             f"not {u.dtype} {u.shape} and {v.dtype} {v.shape}")
        n1, n2, n3 = u.shape
        grid, block = launch_shape(u.shape)
        self._kernel(grid, block, (u, v, np.int64(n1), np.int64(n2), np.int64(n3), self._sixth))

    def warm(self) -> None:
        a = self.empty((3, 3, 3))
        a.fill(0.0)
        self.step(a, a.copy())
        self.sync()


#: ``--device`` -> the class of its arrays
ARRAYS: dict[str, type[BlockArrays]] = {"cpu": HostArrays, "cuda": CudaArrays}


def arrays_for(device: str) -> type[BlockArrays]:
    """The arrays of ``--device device``; ValueError naming the valid ones otherwise."""
    try:
        return ARRAYS[device]
    except KeyError:
        raise ValueError(f"--device {device!r}: valid devices are {', '.join(ARRAYS)}") from None
