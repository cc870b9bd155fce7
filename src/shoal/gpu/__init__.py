"""Device arrays in shoal's messages: kinds of array, device operations, paths, staging.

A CuPy array, Numba device array or PyTorch CUDA tensor passed to an entry method, sent
on a channel or returned through a future arrives as the same kind of array on the
receiver's GPU (docs/gpu.md). This package holds the parts that do not need a running
job: :mod:`.kinds` (recognising and rebuilding arrays; :func:`register` adds a kind),
:mod:`.ops` (the CUDA calls, through CuPy), :mod:`.paths` (which device and path) and
:mod:`.staging` (pipelined copies through pinned memory). The runtime's side is
``shoal/_runtime/devices.py``; ``shoal.my_device()`` tells a PE its GPU.
"""

from __future__ import annotations

from .kinds import ArrayKind, kind_of, register
from .ops import CupyOps, DeviceOps, cupy_missing
from .paths import PATHS, choose_device, choose_path
from .staging import DEFAULT_CHUNK, Stager, chunks

__all__ = [
    "ArrayKind", "register", "kind_of",
    "DeviceOps", "CupyOps", "cupy_missing",
    "PATHS", "choose_path", "choose_device",
    "DEFAULT_CHUNK", "Stager", "chunks",
]
