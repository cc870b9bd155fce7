"""Whether Python's bytecode cache of shoal's own modules is current: a PE that finds it
stale compiles every module it imports, at every start (about 40 ms of CPU per PE here,
so 16 PEs on 2 cores start 1.4x slower). It goes stale where sources change after the
cache was written and ``PYTHONDONTWRITEBYTECODE`` keeps Python from rewriting it (an
editable install in a container that sets it, say). ``shoal info`` says so, and
``shoal run`` compiles the stale modules once before its PEs start (:func:`refresh`)."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

__all__ = ["stale_modules", "bytecode_status", "refresh"]

_HEADER = struct.Struct("<4sIII")  # magic, flags, source mtime, source size


def stale_modules(package: str) -> list[str]:
    """The modules under folder ``package`` whose cached bytecode is missing or older than
    their source, for the running Python."""
    magic = importlib.util.MAGIC_NUMBER
    stale = []
    for folder, dirs, files in os.walk(package):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if not name.endswith(".py"):
                continue
            source = os.path.join(folder, name)
            try:
                with open(importlib.util.cache_from_source(source), "rb") as cached:
                    found, flags, mtime, size = _HEADER.unpack(cached.read(_HEADER.size))
                st = os.stat(source)
                current = found == magic and (flags != 0 or (mtime == int(st.st_mtime) & 0xFFFFFFFF
                                                               and size == st.st_size & 0xFFFFFFFF))
            except (OSError, struct.error):
                current = False
            if not current:
                stale.append(os.path.relpath(source, package))
    return sorted(stale)


def _newest_source(folder: str) -> int:
    """The latest modification time (ns) of a ``.py`` file under ``folder``: one stat each."""
    newest = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    newest = max(newest, _newest_source(entry.path))
            elif entry.name.endswith(".py"):
                newest = max(newest, entry.stat().st_mtime_ns)
    return newest


def refresh(package: str | None = None) -> list[str]:
    """Compile the stale modules of ``package`` (shoal's own folder by default) once, where
    PEs would otherwise compile them at every start: ``PYTHONDONTWRITEBYTECODE`` is set and
    the folder may be written. Returns the modules compiled (none in the common case).

    A stamp in ``__pycache__`` records when the cache was last found current, so that a
    launch costs one stat per source file, not a read of each module's cache."""
    if not sys.dont_write_bytecode:
        return []  # Python rewrites what is stale itself, at the first import
    package = package or os.path.dirname(os.path.abspath(__file__))
    stamp = os.path.join(package, "__pycache__", f"current.{sys.implementation.cache_tag}")
    try:
        if os.stat(stamp).st_mtime_ns >= _newest_source(package):
            return []
    except OSError:
        pass
    if not os.access(package, os.W_OK):
        return []  # a read-only install: pip compiled it; shoal info says if not
    import py_compile

    stale = stale_modules(package)
    for name in stale:
        try:
            py_compile.compile(os.path.join(package, name), doraise=True)
        except (OSError, py_compile.PyCompileError):
            return stale  # a module that does not compile fails the PE that imports it, with its error
    try:
        with open(stamp, "w"):
            pass
    except OSError:
        pass
    return stale


def bytecode_status() -> str:
    """One line for ``shoal info``: current, or what is stale, why, and the fix."""
    package = os.path.dirname(os.path.abspath(__file__))
    stale = stale_modules(package)
    if not stale:
        return f"current ({package})"
    why = ("PYTHONDONTWRITEBYTECODE is set, so Python does not rewrite it" if sys.dont_write_bytecode
           else "Python rewrites it at the next import where it may write there")
    some = f"{len(stale)} module{'s' if len(stale) > 1 else ''} (such as {stale[0]})"
    return (f"stale for {some}: a PE that imports one compiles it at every start; {why}. "
            f"Fix: `{sys.executable} -m compileall -q {package}` once after installing or changing shoal")
