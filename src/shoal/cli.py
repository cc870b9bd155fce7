"""The ``shoal`` command, and ``shoal prog.py`` under any launcher.

``shoal run -n N prog.py`` starts N PEs itself (``mpiexec`` for the MPI transport, or
one process for ``--transport inproc``); ``python -m shoal prog.py`` is what each PE
runs, and what to put after ``mpiexec``/``srun`` on a cluster. This module reads the
command line: a program runs here (:mod:`shoal.program`), and any other command line goes
to :mod:`shoal.commands` (argparse and the subcommands), which a PE's start-up never imports.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is for type checkers: the launcher and a PE's start-up skip its import

from . import jobwatch
from .options import duration, launcher_only, launching, restart_path
from .program import run_program
from .settings import MAX_PES

if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["command", "main"]


_COMMANDS = ("run", "serve", "info", "bench", "cache", "trace", "checkpoint")


def _plain_run(argv: list[str]) -> tuple[int, list[str]] | None:
    """``run -n N PROGRAM ARGS…`` or ``run PROGRAM ARGS…``, no other option: ``(N,
    [PROGRAM, *ARGS])``, to launch without building the argparse parser (a few
    milliseconds of every job's start); None for any other command line, which
    :mod:`shoal.commands` parses, to the same job for these forms."""
    if argv[:1] != ["run"]:
        return None
    from .launchers import default_pes

    rest, pes = argv[1:], default_pes()
    if rest[:1] == ["-n"] and len(rest) > 1 and rest[1].isdecimal():  # what int() takes
        rest, pes = rest[2:], int(rest[1])
    if not rest or rest[0].startswith("-") or "--" in rest or not 1 <= pes <= MAX_PES:
        return None  # ("--": argparse drops it from the program's arguments)
    return pes, rest


def command() -> int:
    """The ``shoal`` executable and ``python -m shoal``: :func:`main`; then, where this
    process only launched and watched an MPI job (none of the program ran here), an exit
    without Python's teardown, which would add milliseconds to every job's end. Output
    cut short by its reader (``shoal info | head``) ends it quietly, as SIGPIPE would."""
    try:
        code = main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush at exit
        return 128 + 13
    if launcher_only():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code & 0xFF)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """The ``shoal`` command; under ``shoal run`` each PE also records how it ends (``shoal.jobwatch``)."""
    joined = jobwatch.join_job()
    try:
        code = _main(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        if joined:
            jobwatch.note_exit(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
        raise
    except BaseException as exc:
        if joined:
            jobwatch.note_fatal(f"unhandled exception in the shoal command: {jobwatch.describe(exc)}")
        raise
    if joined:
        jobwatch.note_exit(code)
    return code


#: ``python -m shoal OPTION VALUE … prog.py``: the options a PE takes before its program, and what each sets
_PE_OPTIONS = {"--restart": "SHOAL_RESTART", "--checkpoint-dir": "SHOAL_CHECKPOINT_DIR",
               "--checkpoint-every": "SHOAL_CHECKPOINT_EVERY", "--compat": "SHOAL_COMPAT"}


def _pe_option(option: str, value: str) -> str:
    """The variable's value for ``option value``, as ``shoal run`` sets it."""
    if option == "--restart":
        return restart_path(value)
    if option == "--checkpoint-every":
        return repr(duration(value))
    return os.path.abspath(value) if option == "--checkpoint-dir" else value


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "bench":
        from .bench.cli import main as bench_main

        return bench_main(argv[1:])
    while len(argv) >= 3 and argv[0] in _PE_OPTIONS:  # `python -m shoal --restart PATH … prog.py args…`
        try:
            os.environ[_PE_OPTIONS[argv[0]]] = _pe_option(argv[0], argv[1])
        except ValueError as exc:
            print(f"shoal: {argv[0]} {argv[1]}: {exc}", file=sys.stderr)
            return 2
        argv = argv[2:]
    if argv and argv[0] not in _COMMANDS and not argv[0].startswith("-"):
        return run_program(argv[0], argv[1:])  # `python -m shoal prog.py args…`
    plain = _plain_run(argv)
    if plain is not None:  # `shoal run -n N prog.py args…`
        if not launching(plain[1][0]):
            return 2
        from .launcher import launch_mpi

        return launch_mpi(plain[1], plain[0])
    from .commands import run_command

    return run_command(argv)
