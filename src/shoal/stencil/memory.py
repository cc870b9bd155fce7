"""Where a tile's arrays live, and the few operations the backend does on that memory.

A :class:`Memory` allocates a tile's fields, gives the addresses its kernels take, and
copies between its arrays and host NumPy arrays. :class:`HostMemory` is NumPy (the CPU
backend). A *resident* memory is device memory (CUDA through CuPy: :mod:`.cuda`): its
work is queued on one stream, so the backend synchronizes before it hands an array to
the host or to a channel, and its halos travel as device arrays (``docs/gpu.md``). The
backend is written once against this interface; the tests run the device-resident
path on a CPU with a simulated device (``tests/support/stencil_sim.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["Memory", "HostMemory"]


class Memory(ABC):
    """One PE's memory for stencil tiles of one device."""

    #: device memory: halos travel as device arrays, NumPy-only statements run on host copies
    resident: bool = False
    #: trailing arguments of every statement kernel call (CUDA: the stream)
    kernel_args: tuple = ()
    #: trailing arguments of every reduction kernel call (CUDA: the stream, the partials buffer)
    reduce_args: tuple = ()

    @abstractmethod
    def zeros(self, count: int, dtype: str) -> Any:
        """``count`` zeros of ``dtype``, a 1-D array (a tile's field is laid out in one)."""

    @abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A C-contiguous array (contents undefined): scratch boxes, halo buffers."""

    @abstractmethod
    def address(self, arr: Any) -> int:
        """The address of ``arr``'s first element, as kernels take it."""

    @abstractmethod
    def copy(self, dst: Any, src: Any) -> None:
        """Copy ``src`` into ``dst`` (same shape; either may be strided), in order with kernels."""

    @abstractmethod
    def to_host(self, arr: Any) -> np.ndarray:
        """A C-contiguous host copy of ``arr``, once every queued kernel has finished."""

    @abstractmethod
    def from_host(self, dst: Any, host: np.ndarray) -> None:
        """Copy host array ``host`` into ``dst`` (same shape); done when this returns."""

    def sync(self) -> None:
        """Wait until everything queued (kernels, copies) is done; raise the error of one
        that failed. Host memory queues nothing."""

    def message(self, arr: Any) -> Any:
        """What a channel sends for ``arr``, or receives into (``recv(into=...)``): the
        array itself, or a device array viewing it."""
        return arr

    def note(self, where: str) -> None:
        """Record the statement launched last (named by errors found at a later sync)."""


class HostMemory(Memory):
    """Tiles in host memory, as NumPy arrays (the CPU backend)."""

    def zeros(self, count: int, dtype: str) -> np.ndarray:
        return np.zeros(count, dtype)

    def empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype)

    def address(self, arr: Any) -> int:
        return int(arr.ctypes.data)

    def copy(self, dst: Any, src: Any) -> None:
        dst[...] = src

    def to_host(self, arr: Any) -> np.ndarray:
        return np.array(arr, order="C", copy=True)

    def from_host(self, dst: Any, host: np.ndarray) -> None:
        dst[...] = host


#: the one HostMemory (it holds no state)
HOST = HostMemory()
