"""The build step: compile a kernel's C (or CUDA) source once into a shared object, load it.

This is the one place the stencil DSL runs a compiler (C, or nvcc for CUDA kernels;
the CUDA calls themselves are in the generated code and, for tile memory, in
:mod:`.cuda`), through shoal's compile-and-cache service (:mod:`shoal.compiler`). Objects
are cached on disk under ``<cache>/stencil/<hash>.so`` (``$SHOAL_CACHE_DIR``, else
``~/.cache/shoal``), keyed by the source, the compiler, its version, the CPU and the
flags; PEs that need the same kernel at once wait on a file lock instead of all
compiling. The cache is bounded: least recently used kernels go first. A failed compile raises
:class:`~shoal.stencil.errors.CompilerError` with the compiler's message and the path
where the generated source was saved.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
from pathlib import Path
from typing import Callable, Sequence

from ..compiler import BuildError, cache_dir, cached_build, compiler_version, cpu_identity, find_cc, find_nvcc
from .errors import CompilerError, DeviceError
from .printer_c import print_copy, print_wavefront

__all__ = ["compile_kernel", "load_kernel", "load_copy", "BASE_FLAGS", "compiler_status",
           "CUDA_FLAGS", "find_nvcc", "cache_limit", "cache_usage", "prune_cache", "clear_cache", "load_wavefront"]

#: exact IEEE arithmetic in NumPy's order: no contraction into FMA, no fast-math;
#: -fno-math-errno only lets sqrt vectorize (it changes no result)
BASE_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=c99", "-ffp-contract=off", "-fno-math-errno")
FAST_FLAGS = ("-ffast-math",)

_loaded: dict[str, Callable] = {}


def compiler_status() -> str:
    cc = find_cc()
    return f"C kernels compiled with {cc}" if cc else "no C compiler found (set CC): statements run with NumPy"


def compile_kernel(source: str, fast_math: bool = False, extra_flags: Sequence[str] = (), where: str = "",
                   device: str = "cpu") -> Path:
    """The path of the shared object built from ``source`` (compiled now if not cached);
    ``device="cuda"``: ``source`` is CUDA, built with nvcc."""
    if device == "cuda":
        cc = find_nvcc()
        if cc is None:
            raise CompilerError("device='cuda' needs nvcc: set NVCC or put nvcc on PATH")
        flags = [*CUDA_FLAGS, *_cuda_rpath(cc), *(CUDA_FAST_FLAGS if fast_math else ()), *extra_flags]
        suffix = "cu"
    else:
        found = find_cc()
        if found is None:
            raise CompilerError("no C compiler found: set CC or install gcc; or pass backend='numpy'")
        cc = found
        flags = [*BASE_FLAGS, *(FAST_FLAGS if fast_math else ()), *extra_flags]
        suffix = "c"

    def command(output: Path, src: Path | None) -> list[str]:
        return [cc, *flags, str(src), "-o", str(output), "-lm"]

    try:  # the key: the source, the compiler (and its version), what -march=native means here, the flags
        target = cached_build("stencil", [source, cc, compiler_version(cc), cpu_identity(), *flags], command,
                              source=(source, suffix))
    except BuildError as exc:
        if not exc.command:
            raise CompilerError(f"{where}{exc}") from None
        if exc.returncode is None:  # the compiler could not run
            raise CompilerError(f"{where}the compiler {cc} could not be run: {exc}\n  $ {' '.join(exc.command)}") from None
        saved = f"generated source saved in {exc.kept}"
        if exc.returncode == 0:
            raise CompilerError(
                f"{where}the compiler {cc} exited with 0 but wrote no object file:\n  $ {' '.join(exc.command)}\n"
                f"{exc.output + chr(10) if exc.output else ''}{saved}") from None
        raise CompilerError(
            f"{where}the {'CUDA' if device == 'cuda' else 'C'} compiler failed on the kernel generated for this statement "
            f"(exit code {exc.returncode}):\n  $ {' '.join(exc.command)}\n{exc.output}\n{saved}") from None
    _prune_once()
    return target


def _open(source: str, fast_math: bool, extra_flags: Sequence[str], where: str, device: str) -> ctypes.CDLL:
    """Build (or find) and load the object of ``source``; mark it used (the cache
    evicts the least recently used). An object evicted between the two is rebuilt."""
    path = compile_kernel(source, fast_math, extra_flags, where, device)
    try:
        os.utime(path)
        return ctypes.CDLL(str(path))
    except OSError:
        if path.exists():
            raise
        return ctypes.CDLL(str(compile_kernel(source, fast_math, extra_flags, where, device)))


def load_kernel(source: str, reduce: bool, fast_math: bool = False, extra_flags: Sequence[str] = (), where: str = "",
                device: str = "cpu") -> Callable:
    """The kernel function of ``source`` (built and loaded once per process):
    ``f(ptrs, b, n, s)`` for C; for CUDA (``device="cuda"``) ``f(ptrs, b, n, s, stream)``,
    a reduction ``f(ptrs, b, n, s, stream, partials)`` (see :mod:`.printer_cuda`).

    A CUDA kernel's function checks the CUDA error after each call and raises
    :class:`DeviceError` with it, naming the PE and ``where`` (the statement)."""
    memo = source if not extra_flags else source + "\0" + "\0".join(extra_flags)
    fn = _loaded.get(memo)
    if fn is None:
        lib = _open(source, fast_math, extra_flags, where, device)
        raw = lib.shoal_reduce if reduce else lib.shoal_kernel
        long_p = ctypes.POINTER(ctypes.c_long)
        args: list = [ctypes.POINTER(ctypes.c_void_p), long_p, long_p, long_p]
        if device == "cuda":  # the stream; a reduction's partials buffer
            args += [ctypes.c_void_p, ctypes.c_void_p] if reduce else [ctypes.c_void_p]
        raw.argtypes = args
        raw.restype = ctypes.c_double if reduce else None
        fn = raw
        if device == "cuda":
            fn = _checked(raw, lib, where)
        _loaded[memo] = fn
    return fn


def _checked(raw: Callable, lib: ctypes.CDLL, where: str) -> Callable:
    error = lib.shoal_error
    error.argtypes = []
    error.restype = ctypes.c_char_p

    def call(*args: object) -> object:
        out = raw(*args)
        text = error()
        if text:
            import shoal

            raise DeviceError(f"PE {shoal.my_pe()}: {where}CUDA error in a generated kernel: {text.decode()}")
        return out

    return call


# -- CUDA -----------------------------------------------------------------------------------
#: no fused multiply-add; IEEE division and square root (nvcc's defaults, spelled out)
CUDA_FLAGS = ("-O3", "--fmad=false", "-prec-div=true", "-prec-sqrt=true", "-ftz=false",
              "-Xcompiler", "-fPIC", "-shared", "-cudart", "shared", "-diag-suppress", "177")
CUDA_FAST_FLAGS = ("--use_fast_math",)


@functools.lru_cache(maxsize=None)
def _cuda_rpath(nvcc: str) -> tuple[str, ...]:
    """Linker flags that let a kernel's object find the CUDA runtime library it links
    (``-cudart shared``) where nvcc's own toolkit keeps it, whether or not the loader's
    search path has that folder (nvcc --dryrun names it)."""
    try:
        out = subprocess.run([nvcc, "--dryrun", "-x", "cu", os.devnull, "-o", os.devnull], capture_output=True,
                             text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return ()
    folders = [part.strip('"')[2:] for line in out.splitlines() if "LIBRARIES=" in line
               for part in line.split() if part.strip('"').startswith("-L")]
    return tuple(f"-Xlinker=-rpath={os.path.normpath(f)}" for f in folders
                 if not f.rstrip("/").endswith("stubs") and os.path.isdir(f))


_copies: dict[tuple, tuple[Callable, Callable]] = {}


def load_copy(ndim: int, dtype: str, extra_flags: Sequence[str] = ()) -> tuple[Callable, Callable]:
    """The generated halo ``(pack, unpack)`` functions for ``ndim``-axis ``dtype`` arrays
    (built, cached and loaded like kernels): ``f(array_ptr, buffer_ptr, b, n, s)``."""
    key = (ndim, dtype, tuple(extra_flags))
    pair = _copies.get(key)
    if pair is None:
        lib = _open(print_copy(ndim, dtype), False, extra_flags, "", "cpu")
        long_p = ctypes.POINTER(ctypes.c_long)
        for fn in (lib.shoal_pack, lib.shoal_unpack):
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, long_p, long_p, long_p]
            fn.restype = None
        pair = _copies[key] = (lib.shoal_pack, lib.shoal_unpack)
    return pair


_wavefronts: dict[tuple, Callable] = {}


def load_wavefront(extra_flags: Sequence[str] = ()) -> Callable:
    """The temporal-blocking driver ``shoal_wavefront`` (built, cached and loaded like
    kernels); see :func:`~shoal.stencil.printer_c.print_wavefront` for its arguments."""
    key = tuple(extra_flags)
    fn = _wavefronts.get(key)
    if fn is None:
        lib = _open(print_wavefront(), False, extra_flags, "", "cpu")
        fn = lib.shoal_wavefront
        long_p = ctypes.POINTER(ctypes.c_long)
        fn.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p, long_p, long_p, long_p,
                       long_p, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long]
        fn.restype = ctypes.c_long
        _wavefronts[key] = fn
    return fn


# -- the cache's size --------------------------------------------------------------------------
def cache_limit() -> int:
    """The bound of the kernel cache (objects and their sources), in bytes, read when
    needed (``SHOAL_CACHE_MAX_MB``, :func:`shoal.settings.cache_limit`)."""
    from ..settings import cache_limit as limit

    return limit()

#: objects used this recently (seconds) are never evicted by the automatic bound: another
#: process of a job may be about to load them
KEEP_RECENT = 600.0
_pruned: list[bool] = []


def cache_usage() -> tuple[int, int]:
    """``(kernels, bytes)`` in the kernel cache."""
    entries = _entries()
    return len(entries), sum(size for _, size, _ in entries.values())


def prune_cache(limit: int | None = None, keep_recent: float = KEEP_RECENT) -> tuple[int, int]:
    """Evict the least recently used kernels until the cache holds at most ``limit``
    bytes, sparing those used in the last ``keep_recent`` seconds; returns ``(kernels
    removed, bytes freed)``; ``limit`` None is :func:`cache_limit`. Every load marks its
    object used."""
    import time

    if limit is None:
        limit = cache_limit()
    entries = _entries()
    total = sum(size for _, size, _ in entries.values())
    removed = freed = 0
    cutoff = time.time() - keep_recent
    for used, size, files in sorted(entries.values(), key=lambda e: e[0]):
        if total <= limit or used > cutoff:
            break
        for f in files:
            try:
                f.unlink()
            except FileNotFoundError:
                pass
        total -= size
        freed += size
        removed += 1
    return removed, freed


def clear_cache() -> tuple[int, int]:
    """Remove every kernel from the cache (running jobs rebuild what they need)."""
    return prune_cache(0, keep_recent=-1e9)


def _entries() -> dict[str, tuple[float, int, list[Path]]]:
    """Per kernel key: last use (its object's mtime, touched at each load; without an
    object, its newest file's), total size, and its files (object, source, lock, a
    failed source, leftovers of a killed compile)."""
    folder = cache_dir() / "stencil"
    found: dict[str, list[tuple[Path, float, int]]] = {}
    try:
        listing = list(os.scandir(folder))
    except FileNotFoundError:
        return {}
    for item in listing:
        try:
            st = item.stat()
        except FileNotFoundError:
            continue
        found.setdefault(item.name.split(".", 1)[0], []).append((Path(item.path), st.st_mtime, st.st_size))
    out = {}
    for key, files in found.items():
        objects = [m for p, m, _ in files if p.name == f"{key}.so"]
        used = objects[0] if objects else max(m for _, m, _ in files)
        out[key] = (used, sum(n for _, _, n in files), [p for p, _, _ in files])
    return out


def _prune_once() -> None:
    """Keep the cache bounded: prune after this process's first compile."""
    if not _pruned:
        _pruned.append(True)
        prune_cache()
