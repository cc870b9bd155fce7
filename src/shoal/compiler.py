"""One compile-and-cache service for every piece of C that shoal builds at run time.

The compiled per-message path (first use, :mod:`shoal.native`), the stencil DSL's kernels,
Task Bench's kernels and the C baseline of the micro-benchmarks all go through
:func:`cached_build`: the compilers are found one way (:func:`find_cc`, :func:`find_nvcc`),
each build is kept under ``<cache>/<area>`` (``$SHOAL_CACHE_DIR``, else ``~/.cache/shoal``)
keyed by everything that shapes its output, the processes of a job that need the same build
at once wait on one file lock instead of all compiling, the output appears by an atomic
rename (never half written), and a failure is a :class:`BuildError` carrying the command
and the compiler's words.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is for type checkers: every PE imports this module's users at start-up
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Callable, Sequence

__all__ = ["BuildError", "find_cc", "find_nvcc", "compiler_version", "cpu_identity", "cache_dir", "run_compiler",
           "cached_build", "COMPILE_TIMEOUT"]

#: seconds a compiler may run before the build is given up (the processes that need the
#: build wait on its lock meanwhile)
COMPILE_TIMEOUT = 600.0


class BuildError(RuntimeError):
    """A build failed: no compiler, a compiler that could not run, or one that failed.
    ``command`` is what ran, ``output`` what the compiler said, ``kept`` where the failed
    generated source was saved (or None)."""

    def __init__(self, message: str, command: Sequence[str] = (), output: str = "", kept: Path | None = None,
                 returncode: int | None = None) -> None:
        super().__init__(message)
        self.command, self.output, self.kept, self.returncode = list(command), output, kept, returncode


_found: dict[str, str | None] = {}


def find_cc() -> str | None:
    """The C compiler: ``$CC``, else cc, gcc or clang on PATH (None where there is none); looked up once."""
    if "cc" not in _found:
        _found["cc"] = _which(os.environ.get("CC"), "cc", "gcc", "clang")
    return _found["cc"]


def find_nvcc() -> str | None:
    """The CUDA compiler: ``$NVCC``, else nvcc on PATH or in /usr/local/cuda/bin."""
    return _which(os.environ.get("NVCC"), "nvcc", "/usr/local/cuda/bin/nvcc")


def _which(*names: str | None) -> str | None:
    import shutil

    for name in names:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


_versions: dict[str, str] = {}


def compiler_version(cc: str) -> str:
    """What ``cc --version`` says (part of a build's key: an upgraded compiler rebuilds)."""
    if cc not in _versions:
        import subprocess

        try:
            _versions[cc] = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            _versions[cc] = ""
    return _versions[cc]


_cpu: list[str] = []


def cpu_identity() -> str:
    """The CPU model and its flags: what ``-march=native`` compiles for (a cache shared by
    nodes of different CPUs must not hand one node another's objects)."""
    if not _cpu:
        try:
            with open("/proc/cpuinfo") as f:
                lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features", "CPU part"))]
            _cpu.append("".join(sorted(set(lines))))
        except OSError:
            import platform

            _cpu.append(platform.machine() + platform.processor())
    return _cpu[0]


def cache_dir() -> Path:
    """Where builds are kept: ``$SHOAL_CACHE_DIR``, else ``~/.cache/shoal``."""
    from pathlib import Path

    from .settings import cache_root

    return Path(cache_root())


def run_compiler(command: Sequence[str], output: Path, timeout: float = COMPILE_TIMEOUT) -> None:
    """Run ``command``, which writes ``output``; a :class:`BuildError` with the compiler's
    words if it cannot run, fails, or exits with 0 having written nothing."""
    import subprocess

    try:
        proc = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        output.unlink(missing_ok=True)
        raise BuildError(f"{command[0]} could not be run: {exc}", command) from None
    said = (proc.stderr or proc.stdout).strip()
    if proc.returncode != 0:
        output.unlink(missing_ok=True)
        raise BuildError(f"{' '.join(command)} failed (exit code {proc.returncode}):\n{said}", command, said,
                         returncode=proc.returncode)
    if not output.is_file() or output.stat().st_size == 0:
        raise BuildError(f"{command[0]} exited with 0 but wrote nothing ({output}); command: {' '.join(command)}",
                         command, said, returncode=0)


def cached_build(area: str, key: Sequence[str | bytes], command: Callable[[Path, Path | None], Sequence[str]], *,
                 name: str | None = None, source: tuple[str, str] | None = None, suffix: str = ".so",
                 timeout: float = COMPILE_TIMEOUT, failure_stands: float = 0.0, mode: int | None = None) -> Path:
    """The output of a build, built now unless the cache holds it.

    ``key``: everything that shapes the output (sources, compiler, its version, flags,
    libraries); ``command(output, source_path)`` is the compiler's command line writing
    ``output`` (it may raise :class:`BuildError` first, such as for a missing compiler).
    Two layouts: with ``name``, ``<area>/<key>/<name>`` beside ``build.lock`` (a library or
    program with a fixed name); without, ``<area>/<key><suffix>`` beside ``<key>.lock``, one
    folder of files the owner may prune by key (generated kernels). ``source``, as
    ``(text, extension)``, is written beside the output and kept as ``<key>.failed.<ext>``
    when the build fails. With ``failure_stands`` seconds, a failure is remembered for that
    long and the processes that queued behind it take its word instead of each failing in turn.
    """
    import fcntl
    import hashlib

    digest = hashlib.sha256()
    for part in key:
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    tag = digest.hexdigest()[:20]
    folder = cache_dir() / area
    if name is not None:
        folder, stem = folder / tag, "build"
        target = folder / name
    else:
        stem, target = tag, folder / f"{tag}{suffix}"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():
            return target
        failed = folder / f"{stem}.failed"
        if failure_stands:
            _standing_failure(failed, failure_stands)
        src = None
        if source is not None:
            src = folder / f"{tag}.{source[1]}"
            src.write_text(source[0])
        tmp = target.with_name(f"{target.stem}.{os.getpid()}.tmp{target.suffix}")
        try:
            run_compiler(command(tmp, src), tmp, timeout)
        except BuildError as exc:
            tmp.unlink(missing_ok=True)
            if src is not None and exc.command:  # the compiler ran on it: keep what it failed on
                exc.kept = folder / f"{tag}.failed.{source[1]}"  # type: ignore[index]
                os.replace(src, exc.kept)
            if failure_stands:
                failed.write_text(str(exc))
            raise
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
        if failure_stands:
            failed.unlink(missing_ok=True)
    return target


def _standing_failure(failed: Path, stands: float) -> None:
    """Raise the failure another process recorded at ``failed`` less than ``stands`` seconds ago."""
    import time

    try:
        said, when = failed.read_text(), failed.stat().st_mtime
    except OSError:
        return
    if when > time.time() - stands:
        raise BuildError(f"{said} (the build failed for another PE {time.time() - when:.0f} s ago; {failed})")
