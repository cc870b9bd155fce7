"""The compiled half of Task Bench: kernels, task validation and SipHash, through ctypes.

``kernels.c`` is compiled on first use with the system C compiler (``$CC``, else
``cc``/``gcc``/``clang`` on PATH) into shoal's cache directory, once per source and
compiler; processes starting together wait on a file lock instead of all compiling
(the pattern of :mod:`shoal.native`). There is no pure-Python fallback: a kernel
timed in Python would measure Python, so a missing compiler is an error that says
how to get one.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...native import cache_dir

__all__ = ["NativeError", "PointStruct", "KernelStruct", "library", "find_cc", "siphash24", "random_uniform"]

_SOURCE = Path(__file__).with_name("kernels.c")


class NativeError(RuntimeError):
    """The Task Bench kernels could not be compiled or loaded."""


class KernelStruct(ctypes.Structure):
    """``tb_kernel_t``: a kernel's parameters."""

    _fields_ = [
        ("type", ctypes.c_int64),
        ("iterations", ctypes.c_int64),
        ("samples", ctypes.c_int64),
        ("imbalance", ctypes.c_double),
        ("graph_index", ctypes.c_int64),
    ]


class PointStruct(ctypes.Structure):
    """``tb_point_t``: one point's buffers, and where a failed check is reported."""

    _fields_ = [
        ("kernel", KernelStruct),
        ("output", ctypes.c_void_p),
        ("output_bytes", ctypes.c_int64),
        ("inputs", ctypes.c_void_p),
        ("input_stride", ctypes.c_int64),
        ("input_bytes", ctypes.c_void_p),
        ("scratch", ctypes.c_void_p),
        ("scratch_bytes", ctypes.c_int64),
        ("err_input", ctypes.c_int64),
        ("err_position", ctypes.c_int64),
        ("err_timestep", ctypes.c_int64),
        ("err_point", ctypes.c_int64),
    ]


def find_cc() -> str | None:
    """The C compiler: ``$CC``, then ``cc``, ``gcc``, ``clang`` on PATH."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def _build(cc: str, target: Path) -> None:
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, "-O3", "-shared", "-fPIC", "-Wall", str(_SOURCE), "-o", str(tmp), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NativeError(f"compiling the Task Bench kernels failed: {' '.join(cmd)}\n{proc.stderr.strip()}")
    os.replace(tmp, target)


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The compiled kernels (built on first use); raises :class:`NativeError` if impossible."""
    cc = find_cc()
    if cc is None:
        raise NativeError(
            "shoal bench taskbench needs a C compiler for its kernels and found none; "
            "install one (`apt-get install gcc`) or set CC"
        )
    key = hashlib.sha256(_SOURCE.read_bytes())
    key.update(f"{cc}|{platform.machine()}".encode())
    folder = cache_dir() / "taskbench" / key.hexdigest()[:16]
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "libtaskbench.so"
    if not target.exists():
        with open(folder / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                _build(cc, target)
    lib = ctypes.CDLL(str(target))
    i64, vp, dbl = ctypes.c_int64, ctypes.c_void_p, ctypes.c_double
    lib.tb_siphash24.argtypes = [vp, i64, vp]
    lib.tb_siphash24.restype = ctypes.c_uint64
    lib.tb_random_uniform.argtypes = [vp, i64]
    lib.tb_random_uniform.restype = dbl
    lib.tb_imbalance_iterations.argtypes = [ctypes.POINTER(KernelStruct), i64, i64]
    lib.tb_imbalance_iterations.restype = i64
    lib.tb_prepare_scratch.argtypes = [vp, i64]
    lib.tb_prepare_scratch.restype = None
    lib.tb_execute_point.argtypes = [ctypes.POINTER(PointStruct), i64, i64, vp, i64]
    lib.tb_execute_point.restype = i64
    lib.tb_run_kernel.argtypes = [ctypes.POINTER(KernelStruct), i64]
    lib.tb_run_kernel.restype = None
    return lib


def siphash24(data: bytes, key: bytes) -> int:
    """SipHash-2-4 of ``data`` under a 16-byte ``key``, computed by the compiled code."""
    if len(key) != 16:
        raise ValueError(f"SipHash needs a 16-byte key, got {len(key)} bytes")
    buf = np.frombuffer(bytes(data) or b"\0", dtype=np.uint8)
    k = np.frombuffer(bytes(key), dtype=np.uint8)
    return int(library().tb_siphash24(buf.ctypes.data, len(data), k.ctypes.data))


def random_uniform(values: tuple[int, ...] | list[int]) -> float:
    """Task Bench's ``random_uniform`` of a tuple of C longs, computed by the compiled code."""
    arr = np.ascontiguousarray(values, dtype=np.int64)
    return float(library().tb_random_uniform(arr.ctypes.data, arr.size))
