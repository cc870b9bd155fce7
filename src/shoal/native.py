"""Compiled parts of shoal, built on first use with the MPI's own compiler wrapper.

The extension is compiled once per (source, Python, mpi4py, MPI library) into a cache
directory and loaded from there; PEs starting together wait on a file lock instead of
all compiling. Where no compiler is found the pure-Python path runs, and
``shoal info`` says why.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

__all__ = ["load_frames", "frames_status", "cache_dir", "find_mpicc"]

_SOURCE = Path(__file__).parent / "_native" / "frames.c"
_status = "not loaded"


def cache_dir() -> Path:
    """Where compiled parts are kept: ``$SHOAL_CACHE_DIR``, else ``~/.cache/shoal``."""
    root = os.environ.get("SHOAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "shoal"
    )
    return Path(root)


def find_mpicc() -> str | None:
    """The MPI C compiler wrapper: ``$MPICC``, beside this Python, then on PATH."""
    for candidate in (os.environ.get("MPICC"), os.path.join(os.path.dirname(sys.executable), "mpicc"), "mpicc"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _key() -> str:
    import mpi4py
    from mpi4py import MPI

    h = hashlib.sha256(_SOURCE.read_bytes())
    for part in (sys.version, mpi4py.__version__, MPI.Get_library_version(), MPI.__file__):
        h.update(part.encode())
    return h.hexdigest()[:16]


def _build(target: Path) -> None:
    import mpi4py

    mpicc = find_mpicc()
    if mpicc is None:
        raise RuntimeError("no mpicc found (set MPICC or install the mpich wheel)")
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [
        mpicc, "-O2", "-shared", "-fPIC", "-Wall",
        f"-I{sysconfig.get_paths()['include']}", f"-I{mpi4py.get_include()}",
        str(_SOURCE), "-o", str(tmp),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    os.replace(tmp, target)


def load_frames() -> ModuleType | None:
    """The compiled eager-frame module, or None (the reason is in :func:`frames_status`)."""
    global _status
    try:
        folder = cache_dir() / _key()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / ("_native_frames" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not target.exists():
            with open(folder / "build.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not target.exists():
                    _build(target)
        spec = importlib.util.spec_from_file_location("shoal._native_frames", target)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure means: use the Python path
        _status = f"unavailable, using the Python path ({exc})"
        return None
    _status = f"compiled ({target})"
    return module


def frames_status() -> str:
    """What :func:`load_frames` did, for ``shoal info``."""
    return _status
