"""The compiled half of Task Bench: kernels, task validation and SipHash, through ctypes.

``kernels.c`` is compiled on first use with the system C compiler (``$CC``, else
``cc``/``gcc``/``clang`` on PATH) into shoal's cache directory, once per source and
compiler, by shoal's compile-and-cache service (:mod:`shoal.compiler`): processes
starting together wait on a file lock instead of all compiling. There is no pure-Python fallback: a kernel
timed in Python would measure Python, so a missing compiler is an error that says
how to get one.
"""

from __future__ import annotations

import ctypes
import platform
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...compiler import BuildError, cached_build, compiler_version, find_cc

__all__ = ["NativeError", "PointStruct", "KernelStruct", "library", "siphash24", "random_uniform"]

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


_FLAGS = ("-O3", "-shared", "-fPIC", "-Wall")


@lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The compiled kernels (built on first use); raises :class:`NativeError` if impossible."""
    cc = find_cc()
    if cc is None:
        raise NativeError(
            "shoal bench taskbench needs a C compiler for its kernels and found none; "
            "install one (`apt-get install gcc`) or set CC"
        )
    try:
        target = cached_build("taskbench", [_SOURCE.read_bytes(), cc, compiler_version(cc), platform.machine(), *_FLAGS],
                              lambda out, _: [cc, *_FLAGS, str(_SOURCE), "-o", str(out), "-lm"], name="libtaskbench.so")
    except BuildError as exc:
        raise NativeError(f"compiling the Task Bench kernels failed: {exc}") from None
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
