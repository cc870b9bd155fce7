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

__all__ = ["load_native", "native_status", "cache_dir", "find_mpicc"]

_FOLDER = Path(__file__).parent / "_native"
_SOURCES = [_FOLDER / name for name in ("frames.c", "core.c", "send.c", "receive.c", "sets.c", "proxies.c")]
_HEADERS = [_FOLDER / name for name in ("native.h", "core.h")]
#: seconds the compiler may take before the build is given up (and the Python path used)
BUILD_TIMEOUT = 600.0
_status = "not loaded"
_module: ModuleType | None = None


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

    import numpy

    h = hashlib.sha256()
    for path in _SOURCES + _HEADERS:
        h.update(path.read_bytes())
    for part in (sys.version, mpi4py.__version__, MPI.Get_library_version(), MPI.__file__, numpy.__version__):
        h.update(part.encode())
    return h.hexdigest()[:16]


def _build(target: Path) -> None:
    import mpi4py
    import numpy

    mpicc = find_mpicc()
    if mpicc is None:
        raise RuntimeError("no mpicc found (set MPICC or install the mpich wheel)")
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [
        mpicc, "-O2", "-shared", "-fPIC", "-Wall",
        f"-I{sysconfig.get_paths()['include']}", f"-I{mpi4py.get_include()}", f"-I{numpy.get_include()}",
        *map(str, _SOURCES), "-o", str(tmp),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"{mpicc} could not be run: {exc}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit code {proc.returncode}):\n{proc.stderr.strip()}")
    if not tmp.is_file() or tmp.stat().st_size == 0:
        raise RuntimeError(f"{mpicc} exited with 0 but wrote no shared object ({tmp}); command: {' '.join(cmd)}")
    os.replace(tmp, target)


def load_native() -> ModuleType | None:
    """The compiled module, or None (the reason is in :func:`native_status`)."""
    global _status, _module
    if _module is not None:
        return _module
    try:
        folder = cache_dir() / _key()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / ("_shoal_native" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not target.exists():
            with open(folder / "build.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not target.exists():
                    _build(target)
        spec = importlib.util.spec_from_file_location("_shoal_native", target)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure means: use the Python path
        _status = f"unavailable, using the Python path ({exc})"
        return None
    _status = f"compiled ({target})"
    _module = module
    return module


def native_status() -> str:
    """What :func:`load_native` did, for ``shoal info``."""
    return _status
