"""The one validated table of runtime options, read from ``SHOAL_*`` variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Mapping

__all__ = ["Settings", "load_settings"]


@dataclass(frozen=True)
class Settings:
    """Runtime options; each can be set by the environment variable ``SHOAL_<NAME>``."""

    #: ``mpi`` or ``inproc``; empty means: ``mpi`` under an MPI launcher, else ``inproc``.
    transport: str = ""
    #: Number of PEs of an in-process job.
    pes: int = 1
    #: Segments of at least this many bytes move by rendezvous (zero-copy).
    rendezvous_threshold: int = 64 * 1024
    #: Largest eager frame, bytes.
    frame_capacity: int = 256 * 1024
    #: Seconds of busy polling before an idle PE starts to sleep.
    idle_spin: float = 0.002
    #: Longest sleep of an idle PE, seconds.
    idle_sleep_max: float = 0.001
    #: Yield the core while busy-polling: 1 always, 0 never, -1 when this node has more
    #: PEs than cores (so polling PEs do not starve the ones with work).
    idle_yield: int = -1
    #: Seconds the main program may wait idle before shoal checks for a deadlock.
    deadlock_timeout: float = 1.0
    #: Fan-out of the spanning trees used by broadcasts and reductions.
    tree_fanout: int = 4
    #: 1: use the compiled per-message path (C) with the MPI transport when it builds; 0: pure Python.
    native: int = 1
    #: MPI transport: let the C allocator serve blocks below this many bytes from its heap
    #: and keep freed ones, so large messages land in memory already mapped instead of
    #: fresh pages (page faults halve rendezvous bandwidth); 0 leaves malloc alone.
    heap_reuse: int = 32 << 20


_ENV_ONLY = {"SHOAL_MPIEXEC", "SHOAL_CACHE_DIR", "SHOAL_CACHE_MAX_MB"}  # read by the launcher and the builders


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from ``SHOAL_*`` variables; an unknown name or bad value is an error."""
    env = os.environ if environ is None else environ
    known = {f.name: f for f in fields(Settings)}
    values: dict[str, object] = {}
    for key, raw in env.items():
        if not key.startswith("SHOAL_") or key in _ENV_ONLY:
            continue
        name = key[len("SHOAL_") :].lower()
        if name not in known:
            valid = ", ".join("SHOAL_" + n.upper() for n in known)
            raise ValueError(f"unknown setting {key}={raw!r}; valid settings: {valid}")
        values[name] = _convert(key, raw, known[name].type)
    for name, value in overrides.items():
        if name not in known:
            raise ValueError(f"unknown setting {name!r}; valid settings: {', '.join(known)}")
        values[name] = _convert(name, value, known[name].type) if isinstance(value, str) else value
        kind = _KINDS[_type_name(known[name].type)]
        if not isinstance(values[name], kind) or isinstance(values[name], bool):
            raise ValueError(f"setting {name}={value!r} must be a {_type_name(known[name].type)}")
    settings = Settings(**values)  # type: ignore[arg-type]
    for name in ("rendezvous_threshold", "frame_capacity"):
        if getattr(settings, name) < 0:
            raise ValueError(f"SHOAL_{name.upper()}={getattr(settings, name)} must not be negative")
    for name in ("idle_spin", "idle_sleep_max", "deadlock_timeout"):
        if getattr(settings, name) < 0:
            raise ValueError(f"SHOAL_{name.upper()}={getattr(settings, name)} must not be negative (seconds)")
    if settings.tree_fanout < 2:
        raise ValueError(f"SHOAL_TREE_FANOUT={settings.tree_fanout} must be at least 2")
    if settings.transport not in ("", "mpi", "inproc"):
        raise ValueError(f"SHOAL_TRANSPORT={settings.transport!r}: valid transports are mpi, inproc")
    if settings.pes < 1:
        raise ValueError(f"SHOAL_PES={settings.pes}: an in-process job needs at least 1 PE")
    return settings


_KINDS: dict[str, type] = {"int": int, "float": (float, int), "str": str}  # type: ignore[dict-item]


def _type_name(typ: object) -> str:
    return typ if isinstance(typ, str) else getattr(typ, "__name__", "str")


def _convert(key: str, raw: str, typ: object) -> object:
    kind = {"int": int, "float": float, "str": str}[_type_name(typ)]
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not a valid {kind.__name__}") from None
