"""``--target c``: build the C baseline on first use, then run it under MPI.

``native/micro.c`` runs the OSU loops in C on the MPI library that mpi4py uses, so
every Python figure can be set against the native floor of the same library. It is
compiled with that MPI's ``mpicc`` (:func:`shoal.native.find_mpicc`) by shoal's
compile-and-cache service (:mod:`shoal.compiler`), keyed by the source and the
compiler, so it is built once per change. Python decides the sizes, counts and output
text; the program prints the rows.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ...compiler import BuildError, cached_build
from ...native import find_mpicc
from . import osu
from .catalog import TESTS
from .options import Config

__all__ = ["BuildError", "SOURCE", "build", "command_args", "launch"]

SOURCE = Path(__file__).with_name("native") / "micro.c"
PROGRAM = "shoal-micro"


def build(source: Path = SOURCE, mpicc: str | None = None) -> Path:
    """The compiled program for ``source``, compiling it if this source/compiler is new
    (every PE of a job may ask at once: one compiles, the others wait for it)."""
    compiler = mpicc or find_mpicc()
    if compiler is None:
        raise BuildError("no mpicc found to build the C baseline; install one (`pip install mpich`) or set $MPICC")
    try:
        text = source.read_bytes()
    except OSError as exc:
        raise BuildError(f"the C baseline's source is missing ({exc}); reinstall shoal with its package data") from None
    try:
        return cached_build("micro", [text, os.path.realpath(compiler)],
                            lambda out, _: [compiler, "-O2", "-o", str(out), str(source)], name=PROGRAM, mode=0o755)
    except BuildError as exc:
        raise BuildError(f"compiling the C baseline failed ({exc})", exc.command, exc.output) from None


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
