"""The devices a stencil may name (``device="cpu"``, ``device="cuda"``).

A device pairs the memory its tiles live in (:mod:`.memory`) with the target its
statements compile for: ``"cpu"`` (C, :mod:`.printer_c`) or ``"cuda"`` (CUDA,
:mod:`.printer_cuda`). "cpu" and "cuda" are built in; :func:`register` adds another
(on every PE: tiles look their device up by name). The tests register a simulated
device this way, to run the device-resident path (halos as device arrays over the
runtime's device protocol) on a CPU with C kernels.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from .memory import HOST, Memory

__all__ = ["Device", "register", "named", "names"]


class Device(NamedTuple):
    """One device: its name, its kernels' target, and its memory."""

    name: str
    target: str  # "cpu": C kernels; "cuda": CUDA kernels
    memory: Callable[[], Memory]  # this PE's memory for tiles (called by each tile, on the tile's PE)
    missing: Callable[[], str | None]  # why the device cannot run here, or None (asked by the frontend)


_DEVICES: dict[str, Device] = {}


def register(device: Device) -> Device:
    """Make ``device`` known on this PE (the same name replaces one)."""
    if device.target not in ("cpu", "cuda"):
        raise ValueError(f"device {device.name!r}: target {device.target!r} is not 'cpu' or 'cuda'")
    _DEVICES[device.name] = device
    return device


def named(name: str) -> Device:
    """The device called ``name``; ValueError naming the known ones otherwise."""
    try:
        return _DEVICES[name]
    except KeyError:
        known = " or ".join(repr(n) for n in _DEVICES)
        raise ValueError(f"device={name!r}: use {known}") from None


def names() -> tuple[str, ...]:
    """The names of the devices known on this PE."""
    return tuple(_DEVICES)


def _cuda_memory() -> Memory:
    from .cuda import memory

    return memory()


def _cuda_missing() -> str | None:
    from .cuda import cuda_status

    return cuda_status()


register(Device("cpu", "cpu", lambda: HOST, lambda: None))
register(Device("cuda", "cuda", _cuda_memory, _cuda_missing))
