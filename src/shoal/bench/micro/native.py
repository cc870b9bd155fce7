"""``--target c``: build the C baseline on first use, then run it under MPI.

``native/micro.c`` runs the OSU loops in C on the MPI library that mpi4py uses, so
every Python figure can be set against the native floor of the same library. It is
compiled with that MPI's ``mpicc`` (``$MPICC``, else the one beside this Python,
which the ``mpich`` wheel installs, else PATH) into a per-user cache directory keyed
by the hash of the source and the compiler, so it is built once per change. Python
decides the sizes, counts and output text; the program prints the rows.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import osu
from .catalog import TESTS
from .options import Config

__all__ = ["BuildError", "SOURCE", "find_mpicc", "cache_dir", "build", "command_args", "launch"]

SOURCE = Path(__file__).with_name("native") / "micro.c"
PROGRAM = "shoal-micro"


class BuildError(Exception):
    """The C baseline could not be compiled; the message carries the compiler's output."""


def find_mpicc() -> str:
    """The MPI C compiler wrapper: ``$MPICC``, beside this Python (mpich wheel), or PATH."""
    explicit = os.environ.get("MPICC")
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise BuildError(f"$MPICC={explicit!r} was not found or is not executable")
        return found
    found = shutil.which("mpicc", path=os.path.dirname(sys.executable)) or shutil.which("mpicc")
    if found is None:
        raise BuildError("no mpicc found to build the C baseline; install one (`pip install mpich`) or set $MPICC")
    return found


def cache_dir() -> Path:
    """Where compiled baselines live: ``$XDG_CACHE_HOME/shoal/micro`` (``~/.cache`` by default)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "shoal" / "micro"


def build(source: Path = SOURCE, mpicc: str | None = None) -> Path:
    """The compiled program for ``source``, compiling it if this source/compiler is new.

    Concurrent builds (every PE of a job) are safe: each compiles to its own temporary
    file and renames it into place atomically.
    """
    compiler = mpicc or find_mpicc()
    try:
        text = source.read_bytes()
    except OSError as exc:
        raise BuildError(f"the C baseline's source is missing ({exc}); reinstall shoal with its package data") from None
    key = hashlib.sha256(text + b"\0" + os.path.realpath(compiler).encode()).hexdigest()[:16]
    target = cache_dir() / key / PROGRAM
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    src = target.parent / source.name
    if not src.exists():
        src.write_bytes(text)
    fd, tmp = tempfile.mkstemp(prefix=PROGRAM + ".", dir=target.parent)
    os.close(fd)
    cmd = [compiler, "-O2", "-o", tmp, str(src)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        os.unlink(tmp)
        raise BuildError(f"could not run {compiler}: {exc}") from None
    if proc.returncode != 0:
        os.unlink(tmp)
        output = (proc.stderr or proc.stdout).strip()
        raise BuildError(f"compiling the C baseline failed ({' '.join(cmd)}, exit {proc.returncode}):\n{output}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    return target


def command_args(cfg: Config) -> list[str]:
    """The program's arguments for ``cfg`` (see the comment at the top of micro.c)."""
    args = [cfg.fmt, str(cfg.window), str(int(cfg.validate)), str(int(cfg.corrupt))]
    for k, name in enumerate(cfg.tests):
        test = TESTS[name]
        sizes = cfg.sizes(test)
        counts = [cfg.counts(test, s) for s in sizes]
        meta = cfg.meta(name)
        head = osu.preamble(cfg.fmt, *meta, first=k == 0)
        if cfg.fmt == "text" and k:
            head = "\n" + head
        args += [
            name,
            ",".join(map(str, sizes)),
            ",".join(f"{i}:{w}" for i, w in counts),
            head,
            osu.row_prefix(*meta),
        ]
    return args


def launch(cfg: Config, inside: bool) -> int:
    """Build, then run the program: under ``mpiexec -n N``, or in place (``exec``) when
    this process is already one PE of an MPI job."""
    try:
        program = build()
    except BuildError as exc:
        print(f"shoal bench micro: {exc}", file=sys.stderr)
        return 1
    args = command_args(cfg)
    sys.stdout.flush()
    if inside:
        os.execv(program, [str(program), *args])
    from ...lowlevel import find_mpiexec

    return subprocess.call([find_mpiexec(cfg.mpiexec), "-n", str(cfg.pes), str(program), *args])
