"""Device operations: the few CUDA calls shoal's device messaging needs, behind one interface.

:class:`DeviceOps` is what the runtime (``_runtime/devices.py``) calls; it never touches
CUDA otherwise. :class:`CupyOps` implements it with CuPy, the one GPU library shoal
requires (Numba device arrays and PyTorch tensors are viewed as CuPy arrays without a
copy). Every copy is queued on the ops' own stream; :meth:`DeviceOps.sync` waits for it.

Arrays here are the ops' *native* arrays (``cupy.ndarray`` for CuPy); ``flat`` views one
as bytes, so the messaging code is written once for every dtype and shape.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import
if TYPE_CHECKING:
    from typing import Any

    import numpy as np

__all__ = ["DeviceOps", "CupyOps", "cupy_ops", "cupy_missing"]


class DeviceOps(ABC):
    """The device calls of shoal's device messaging, for one kind of device memory."""

    name = "abstract"

    @abstractmethod
    def device_count(self) -> int:
        """How many devices this process sees."""

    @abstractmethod
    def select(self, device: int) -> None:
        """Make ``device`` current: new arrays and copies use it from now on."""

    @abstractmethod
    def device_of(self, arr: Any) -> int:
        """The device ``arr``'s memory is on."""

    @abstractmethod
    def contiguous(self, arr: Any) -> Any:
        """``arr`` itself if C-contiguous, else a C-contiguous device copy."""

    @abstractmethod
    def empty(self, shape: tuple, dtype: np.dtype) -> Any:
        """A new array on the current device (contents undefined)."""

    @abstractmethod
    def flat(self, arr: Any) -> Any:
        """A C-contiguous ``arr`` as a 1-D uint8 view of the same memory."""

    @abstractmethod
    def view(self, flat: Any, dtype: np.dtype, shape: tuple) -> Any:
        """The uint8 array ``flat`` seen as an array of ``dtype`` and ``shape`` (no copy):
        device memory MPI received into becomes the arriving array."""

    @abstractmethod
    def copy(self, dst: Any, src: Any) -> None:
        """Queue a device-to-device copy of the uint8 views ``src`` into ``dst`` (same length)."""

    @abstractmethod
    def to_host(self, host: np.ndarray, src: Any) -> None:
        """Queue a copy of device bytes ``src`` into host bytes ``host`` (pinned: asynchronous)."""

    @abstractmethod
    def from_host(self, dst: Any, host: np.ndarray) -> None:
        """Queue a copy of host bytes ``host`` into device bytes ``dst``."""

    @abstractmethod
    def record(self) -> Any:
        """An event marking the copies queued so far; :meth:`wait` blocks on it."""

    @abstractmethod
    def wait(self, event: Any) -> None:
        """Block until the copies before ``event`` are done."""

    @abstractmethod
    def sync(self) -> None:
        """Block until every queued copy is done."""

    @abstractmethod
    def pinned(self, nbytes: int) -> np.ndarray:
        """Page-locked host memory of ``nbytes`` (asynchronous copies need it), as uint8."""

    @abstractmethod
    def shareable(self, nbytes: int) -> tuple[Any, bytes]:
        """A device allocation of its own (not a pool's slice), as uint8, and the handle
        another process on this node opens it with (CUDA IPC)."""

    @abstractmethod
    def open(self, handle: bytes, nbytes: int) -> Any:
        """The allocation another process exported as ``handle``, as uint8 (opened once:
        later calls with the same handle return the same view)."""

    def ipc_supported(self) -> bool:
        """Whether processes on one node can open each other's allocations."""
        return True

    def mpi_aware(self) -> bool | None:
        """Whether MPI may be handed this memory directly (its native arrays, which mpi4py
        takes through ``__cuda_array_interface__`` or DLPack); None: ask the MPI library."""
        return None


class CupyOps(DeviceOps):
    """:class:`DeviceOps` on CUDA through CuPy."""

    name = "cuda"

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        self._stream: Any = None
        self._opened: dict[bytes, Any] = {}

    @property
    def stream(self) -> Any:
        if self._stream is None:  # made on the current device, once it is selected
            self._stream = self.cp.cuda.Stream(non_blocking=True)
        return self._stream

    def device_count(self) -> int:
        return int(self.cp.cuda.runtime.getDeviceCount())

    def select(self, device: int) -> None:
        self.cp.cuda.Device(device).use()
        self._stream = None

    def device_of(self, arr: Any) -> int:
        return int(arr.device.id)

    def contiguous(self, arr: Any) -> Any:
        return arr if arr.flags.c_contiguous else self.cp.ascontiguousarray(arr)

    def empty(self, shape: tuple, dtype: np.dtype) -> Any:
        return self.cp.empty(shape, dtype)

    def flat(self, arr: Any) -> Any:
        return arr.reshape(-1).view(self.cp.uint8)

    def _after_program(self) -> Any:
        """The ops' stream, made to wait for the work queued so far on the program's
        current stream: a kernel that just wrote an array being sent, or still reads a
        buffer a message is about to land in (the ops' stream is non-blocking, so nothing
        else orders the two)."""
        stream = self.stream
        stream.wait_event(self.cp.cuda.get_current_stream().record())
        return stream

    def view(self, flat: Any, dtype: np.dtype, shape: tuple) -> Any:
        return flat.view(dtype).reshape(shape)

    def copy(self, dst: Any, src: Any) -> None:
        if src.nbytes:
            dst.data.copy_from_device_async(src.data, src.nbytes, self._after_program())

    def to_host(self, host: np.ndarray, src: Any) -> None:
        if src.nbytes:
            import ctypes

            src.data.copy_to_host_async(ctypes.c_void_p(host.ctypes.data), src.nbytes, self._after_program())

    def from_host(self, dst: Any, host: np.ndarray) -> None:
        if host.nbytes:
            import ctypes

            dst.data.copy_from_host_async(ctypes.c_void_p(host.ctypes.data), host.nbytes, self._after_program())

    def record(self) -> Any:
        return self.stream.record()

    def wait(self, event: Any) -> None:
        event.synchronize()

    def sync(self) -> None:
        self.stream.synchronize()

    def pinned(self, nbytes: int) -> np.ndarray:
        import numpy as np

        mem = self.cp.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(mem, np.uint8, nbytes)  # the array keeps `mem` alive

    def shareable(self, nbytes: int) -> tuple[Any, bytes]:
        cp = self.cp
        mem = cp.cuda.Memory(max(nbytes, 1))  # cudaMalloc of its own: a base pointer IPC can export
        arr = cp.ndarray((nbytes,), cp.uint8, cp.cuda.MemoryPointer(mem, 0))
        return arr, bytes(cp.cuda.runtime.ipcGetMemHandle(mem.ptr))

    def open(self, handle: bytes, nbytes: int) -> Any:
        arr = self._opened.get(handle)
        if arr is None or arr.nbytes < nbytes:
            cp = self.cp
            ptr = cp.cuda.runtime.ipcOpenMemHandle(handle)
            mem = cp.cuda.UnownedMemory(ptr, nbytes, self)
            arr = self._opened[handle] = cp.ndarray((nbytes,), cp.uint8, cp.cuda.MemoryPointer(mem, 0))
        return arr[:nbytes]


_OPS: CupyOps | None = None


def cupy_missing() -> str | None:
    """Why CuPy's device operations cannot run here (CuPy or a device missing), or None."""
    try:
        import cupy
    except ImportError as exc:
        return f"CuPy is not installed ({exc}); install the wheel for your CUDA, e.g. pip install cupy-cuda12x"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA's own error names the cause
        return f"CuPy finds no usable CUDA device: {exc}"
    return None if count > 0 else "CuPy finds no CUDA device"


def cupy_ops() -> CupyOps:
    """The process's :class:`CupyOps` (made on first use)."""
    global _OPS
    if _OPS is None:
        _OPS = CupyOps()
    return _OPS
