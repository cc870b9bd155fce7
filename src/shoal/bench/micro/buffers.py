"""Buffer kinds: how a benchmark allocates, fills, hands over and reads back its data.

Every target sees buffers only through :class:`BufferKind`, so a GPU kind slots in
beside the CPU ones: :meth:`BufferKind.sendable` and :meth:`BufferKind.receiver` are
where a device buffer either goes to the library as it is (CUDA-aware MPI, which
mpi4py accepts through ``__cuda_array_interface__``) or is staged through host memory,
with the copies inside the timed region. ``--gpu-path`` chooses; ``auto`` asks the MPI
library whether it is CUDA-aware.

The CPU kinds are ``bytearray`` and ``numpy``. The GPU kinds (``cupy``, ``numba``,
``pycuda``) need their package and a CUDA device; :func:`unavailable` says, in one
line, what is missing before any job starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .data import POISON

__all__ = ["BufferKind", "KINDS", "CPU_KINDS", "GPU_KINDS", "get", "unavailable", "resolve"]


class BufferKind:
    """Host memory as a ``bytearray``; the base of every kind."""

    name = "bytearray"
    device = "cpu"

    def from_host(self, data: np.ndarray) -> Any:
        """A new buffer of this kind holding ``data`` (written, never zero pages)."""
        return bytearray(np.ascontiguousarray(data).view(np.uint8).tobytes())

    def alloc(self, nbytes: int, dtype: str = "char") -> Any:
        """A new receive buffer of ``nbytes``, filled with the poison byte."""
        return self.from_host(np.full(nbytes, POISON, np.uint8))

    def to_host(self, buf: Any) -> np.ndarray:
        """The bytes of ``buf`` as a host uint8 array (a view when possible)."""
        if isinstance(buf, np.ndarray):
            return buf.reshape(-1).view(np.uint8)
        return np.frombuffer(buf, np.uint8)

    def typed(self, buf: Any) -> np.ndarray:
        """``buf`` seen as float32 elements, for reductions (bytes have no sum)."""
        return np.frombuffer(buf, np.float32)

    # -- the hand-over to a communication library --------------------------------
    def sendable(self, buf: Any) -> Any:
        """What to give the library to send ``buf`` (a host copy when staging)."""
        return buf

    def receiver(self, buf: Any) -> tuple[Any, Callable[[], None]]:
        """Where the library should receive into, and what to call once it has."""
        return buf, _nothing


def _nothing() -> None:
    return None


class NumpyKind(BufferKind):
    """Host memory as NumPy arrays: uint8 for byte tests, float32 for reductions."""

    name = "numpy"

    def from_host(self, data: np.ndarray) -> Any:
        return np.array(data, copy=True, order="C")

    def alloc(self, nbytes: int, dtype: str = "char") -> Any:
        buf = np.full(nbytes, POISON, np.uint8)
        return buf.view(np.float32) if dtype == "float" else buf

    def typed(self, buf: Any) -> np.ndarray:
        return buf if buf.dtype == np.float32 else buf.view(np.float32)


class DeviceKind(BufferKind):
    """A CUDA array library; ``staged`` copies through host memory around each transfer."""

    device = "cuda"
    module = ""  # what to import
    label = ""  # the package's name, for messages
    install = ""

    def __init__(self, staged: bool = False):
        self.staged = staged

    def missing(self) -> str | None:
        """Why this kind cannot run here (package or device), or None."""
        try:
            importlib.import_module(self.module)
        except ImportError:
            return f"--buffer {self.name} needs {self.label} and a CUDA GPU; {self.label} is not installed ({self.install})"
        try:
            count = self._device_count()
        except Exception as exc:  # noqa: BLE001 - any driver error means "no usable GPU"
            return f"--buffer {self.name} needs a CUDA GPU; {self.label} found none ({type(exc).__name__}: {exc})"
        if count < 1:
            return f"--buffer {self.name} needs a CUDA GPU; {self.label} found none"
        return None

    def _device_count(self) -> int:
        raise NotImplementedError

    def sendable(self, buf: Any) -> Any:
        return self.to_host(buf) if self.staged else buf

    def receiver(self, buf: Any) -> tuple[Any, Callable[[], None]]:
        if not self.staged:
            return buf, _nothing
        host = np.empty(self._nbytes(buf), np.uint8)
        return host, lambda: self._copy_in(buf, host)

    def typed(self, buf: Any) -> Any:
        return buf.view(np.float32) if hasattr(buf, "view") else buf

    def _nbytes(self, buf: Any) -> int:
        return int(buf.nbytes)

    def _copy_in(self, buf: Any, host: np.ndarray) -> None:
        raise NotImplementedError


class CupyKind(DeviceKind):
    name, module, label, install = "cupy", "cupy", "CuPy", "pip install cupy-cuda12x"

    def _device_count(self) -> int:
        cupy: Any = importlib.import_module("cupy")
        return int(cupy.cuda.runtime.getDeviceCount())

    def from_host(self, data: np.ndarray) -> Any:
        cupy: Any = importlib.import_module("cupy")
        return cupy.asarray(np.ascontiguousarray(data))

    def alloc(self, nbytes: int, dtype: str = "char") -> Any:
        buf = self.from_host(np.full(nbytes, POISON, np.uint8))
        return buf.view(np.float32) if dtype == "float" else buf

    def to_host(self, buf: Any) -> np.ndarray:
        return buf.get().reshape(-1).view(np.uint8)

    def _copy_in(self, buf: Any, host: np.ndarray) -> None:
        buf.view(np.uint8).set(host)


class NumbaKind(DeviceKind):
    name, module, label, install = "numba", "numba.cuda", "Numba-CUDA", "pip install numba numba-cuda"

    def _device_count(self) -> int:
        cuda: Any = importlib.import_module("numba.cuda")
        return len(cuda.gpus) if cuda.is_available() else 0

    def from_host(self, data: np.ndarray) -> Any:
        cuda: Any = importlib.import_module("numba.cuda")
        return cuda.to_device(np.ascontiguousarray(data))

    def alloc(self, nbytes: int, dtype: str = "char") -> Any:
        host = np.full(nbytes, POISON, np.uint8)
        return self.from_host(host.view(np.float32) if dtype == "float" else host)

    def to_host(self, buf: Any) -> np.ndarray:
        return buf.copy_to_host().reshape(-1).view(np.uint8)

    def _copy_in(self, buf: Any, host: np.ndarray) -> None:
        buf.copy_to_device(host.view(buf.dtype))


class PycudaKind(DeviceKind):
    name, module, label, install = "pycuda", "pycuda.driver", "PyCUDA", "pip install pycuda"

    def _device_count(self) -> int:
        drv: Any = importlib.import_module("pycuda.driver")
        drv.init()
        return int(drv.Device.count())

    def from_host(self, data: np.ndarray) -> Any:
        importlib.import_module("pycuda.autoinit")
        gpuarray: Any = importlib.import_module("pycuda.gpuarray")
        return gpuarray.to_gpu(np.ascontiguousarray(data))

    def alloc(self, nbytes: int, dtype: str = "char") -> Any:
        host = np.full(nbytes, POISON, np.uint8)
        return self.from_host(host.view(np.float32) if dtype == "float" else host)

    def to_host(self, buf: Any) -> np.ndarray:
        return buf.get().reshape(-1).view(np.uint8)

    def _copy_in(self, buf: Any, host: np.ndarray) -> None:
        buf.set(host.view(buf.dtype))


class TorchKind(DeviceKind):
    name, module, label, install = "torch", "torch", "PyTorch", "pip install torch"

    def _device_count(self) -> int:
        torch: Any = importlib.import_module("torch")
        return int(torch.cuda.device_count())

    def from_host(self, data: np.ndarray) -> Any:
        torch: Any = importlib.import_module("torch")
        return torch.as_tensor(np.ascontiguousarray(data), device="cuda")

    def alloc(self, nbytes: int, dtype: str = "char") -> Any:
        host = np.full(nbytes, POISON, np.uint8)
        return self.from_host(host.view(np.float32) if dtype == "float" else host)

    def to_host(self, buf: Any) -> np.ndarray:
        return buf.cpu().numpy().reshape(-1).view(np.uint8)

    def typed(self, buf: Any) -> Any:
        return buf if str(buf.dtype) == "torch.float32" else buf.view(importlib.import_module("torch").float32)

    def _copy_in(self, buf: Any, host: np.ndarray) -> None:
        buf.copy_(self.from_host(host.view(buf.cpu().numpy().dtype)))


#: name -> kind class
KINDS: dict[str, type[BufferKind]] = {
    "bytearray": BufferKind,
    "numpy": NumpyKind,
    "cupy": CupyKind,
    "numba": NumbaKind,
    "pycuda": PycudaKind,
    "torch": TorchKind,
}
CPU_KINDS = ("bytearray", "numpy")
GPU_KINDS = ("cupy", "numba", "pycuda", "torch")


def resolve(buffer: str | None, device: str | None) -> tuple[str, str]:
    """The (buffer, device) pair from the options, or ValueError saying what clashes."""
    if buffer is not None and buffer not in KINDS:
        raise ValueError(f"unknown buffer {buffer!r}; valid buffers: {', '.join(KINDS)}")
    if device is not None and device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; valid devices: cpu, cuda")
    if buffer is None:
        buffer = "cupy" if device == "cuda" else "numpy"
    kind_device = "cuda" if buffer in GPU_KINDS else "cpu"
    if device is not None and device != kind_device:
        valid = GPU_KINDS if device == "cuda" else CPU_KINDS
        raise ValueError(f"--buffer {buffer} lives on the {kind_device}, not on --device {device}; use --buffer {'|'.join(valid)}")
    return buffer, kind_device


def unavailable(buffer: str) -> str | None:
    """One line saying why ``buffer`` cannot be used on this machine, or None."""
    kind = KINDS[buffer]
    if issubclass(kind, DeviceKind):
        return kind().missing()
    return None


def get(buffer: str, staged: bool = False) -> BufferKind:
    """An instance of the buffer kind ``buffer`` (``staged`` for GPU kinds only)."""
    kind = KINDS[buffer]
    return kind(staged) if issubclass(kind, DeviceKind) else kind()
