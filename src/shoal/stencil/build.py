"""The build step: compile a kernel's C source once into a shared object, load it.

This is the one place the stencil DSL runs a compiler. Objects are cached on disk
under ``<cache>/stencil/<hash>.so`` (``$SHOAL_CACHE_DIR``, else ``~/.cache/shoal``),
keyed by the source, the compiler and its flags; PEs that need the same kernel at
once wait on a file lock instead of all compiling. A failed compile raises
:class:`~shoal.stencil.errors.CompilerError` with the compiler's message and the path
where the generated source was saved.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Sequence

from ..native import cache_dir
from .errors import CompilerError
from .printer_c import print_copy

__all__ = ["find_compiler", "compile_kernel", "load_kernel", "load_copy", "BASE_FLAGS", "compiler_status"]

#: exact IEEE arithmetic in NumPy's order: no contraction into FMA, no fast-math;
#: -fno-math-errno only lets sqrt vectorize (it changes no result)
BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=c99", "-ffp-contract=off", "-fno-math-errno")
FAST_FLAGS = ("-ffast-math",)

_loaded: dict[str, Callable] = {}
_compiler: list[str | None] = []


def find_compiler() -> str | None:
    """The C compiler: ``$CC``, else cc, gcc or clang on PATH (None if there is none)."""
    if not _compiler:
        found = None
        for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
            if name and shutil.which(name):
                found = shutil.which(name)
                break
        _compiler.append(found)
    return _compiler[0]


def compiler_status() -> str:
    cc = find_compiler()
    return f"C kernels compiled with {cc}" if cc else "no C compiler found (set CC): statements run with NumPy"


_versions: dict[str, str] = {}


def _version(cc: str) -> str:
    if cc in _versions:
        return _versions[cc]
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    _versions[cc] = out
    return out


@functools.lru_cache(maxsize=None)
def _cpu() -> str:
    """What -march=native compiles for: the CPU model and its flags (a cache directory
    shared by nodes of different CPUs must not hand one node another's objects)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features", "CPU part"))]
        return "".join(sorted(set(lines)))
    except OSError:
        import platform

        return platform.machine() + platform.processor()


def _object_key(source: str, cc: str, flags: Sequence[str]) -> str:
    h = hashlib.sha256(source.encode())
    h.update("\0".join([cc, _version(cc), _cpu(), *flags]).encode())
    return h.hexdigest()[:20]


def compile_kernel(source: str, fast_math: bool = False, extra_flags: Sequence[str] = (), where: str = "") -> Path:
    """The path of the shared object built from ``source`` (compiled now if not cached)."""
    cc = find_compiler()
    if cc is None:
        raise CompilerError("no C compiler found: set CC or install gcc; or pass backend='numpy'")
    flags = [*BASE_FLAGS, *(FAST_FLAGS if fast_math else ()), *extra_flags]
    folder = cache_dir() / "stencil"
    folder.mkdir(parents=True, exist_ok=True)
    key = _object_key(source, cc, flags)
    target = folder / f"{key}.so"
    if target.exists():
        return target
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        src = folder / f"{key}.c"
        src.write_text(source)
        tmp = folder / f"{key}.{os.getpid()}.tmp.so"
        cmd = [cc, *flags, str(src), "-o", str(tmp), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            kept = folder / f"{key}.failed.c"
            os.replace(src, kept)
            raise CompilerError(
                f"{where}the C compiler failed on the kernel generated for this statement "
                f"(exit code {proc.returncode}):\n  $ {' '.join(cmd)}\n{(proc.stderr or proc.stdout).strip()}\n"
                f"generated source saved in {kept}"
            )
        os.replace(tmp, target)
    return target


def load_kernel(source: str, reduce: bool, fast_math: bool = False, extra_flags: Sequence[str] = (), where: str = "") -> Callable:
    """The kernel function of ``source`` (built and loaded once per process)."""
    memo = source if not extra_flags else source + "\0" + "\0".join(extra_flags)
    fn = _loaded.get(memo)
    if fn is None:
        path = compile_kernel(source, fast_math, extra_flags, where)
        lib = ctypes.CDLL(str(path))
        fn = lib.shoal_reduce if reduce else lib.shoal_kernel
        long_p = ctypes.POINTER(ctypes.c_long)
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), long_p, long_p, long_p]
        fn.restype = ctypes.c_double if reduce else None
        _loaded[memo] = fn
    return fn


_copies: dict[tuple, tuple[Callable, Callable]] = {}


def load_copy(ndim: int, dtype: str, extra_flags: Sequence[str] = ()) -> tuple[Callable, Callable]:
    """The generated halo ``(pack, unpack)`` functions for ``ndim``-axis ``dtype`` arrays
    (built, cached and loaded like kernels): ``f(array_ptr, buffer_ptr, b, n, s)``."""
    key = (ndim, dtype, tuple(extra_flags))
    pair = _copies.get(key)
    if pair is None:
        lib = ctypes.CDLL(str(compile_kernel(print_copy(ndim, dtype), False, extra_flags)))
        long_p = ctypes.POINTER(ctypes.c_long)
        for fn in (lib.shoal_pack, lib.shoal_unpack):
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, long_p, long_p, long_p]
            fn.restype = None
        pair = _copies[key] = (lib.shoal_pack, lib.shoal_unpack)
    return pair
