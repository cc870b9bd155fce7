"""Whether Python's bytecode cache of shoal's own modules is current: a PE that finds it
stale compiles every module it imports, at every start (about 40 ms of CPU per PE here,
so 16 PEs on 2 cores start 1.4x slower). It goes stale where sources change after the
cache was written and ``PYTHONDONTWRITEBYTECODE`` keeps Python from rewriting it (an
editable install in a container that sets it, say); ``shoal info`` says so."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

__all__ = ["stale_modules", "bytecode_status"]

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
