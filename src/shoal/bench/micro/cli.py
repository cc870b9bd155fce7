"""``shoal bench micro <test> [options]``: check the options, then run or launch the job.

Like ``shoal run``, the command starts its own job: outside an MPI launcher it runs
``mpiexec -n N python -m shoal bench micro …`` (the same arguments), and inside one
(every PE of that job, or a job you started with ``mpiexec``/``srun``) it runs the
benchmark directly. ``--target charm4py`` starts its job with Charm4py's own
launcher, and ``--target c`` compiles the C baseline and runs it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from ...lowlevel import launcher_size
from .options import Config, UsageError, parse
from .targets import TARGETS

__all__ = ["main"]

_PROG = "shoal bench micro"


def _config(argv: Sequence[str], inside: bool) -> Config:
    cfg = parse(argv)
    size = launcher_size() if inside else None
    if size is not None and size != cfg.pes:
        cfg = parse([*argv, "-n", str(size)])  # the job's size wins over -n
    return cfg


def _check_available(cfg: Config) -> str | None:
    from . import buffers

    target = TARGETS[cfg.target]
    missing = target.missing()
    if missing:
        return missing
    if cfg.buffer in buffers.KINDS:
        return buffers.unavailable(cfg.buffer)
    return None


def main(argv: Sequence[str]) -> int:
    """Entry point of ``shoal bench micro``; returns the exit code."""
    from ...lowlevel import launch_mpi, under_mpi_launcher

    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        from .options import build_parser

        build_parser().print_help(sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    inside = under_mpi_launcher()
    try:
        cfg = _config(argv, inside)
    except UsageError as exc:
        print(f"{_PROG}: {exc}", file=sys.stderr)
        return 2
    problem = _check_available(cfg)
    if problem:
        print(f"{_PROG}: {problem}", file=sys.stderr)
        return 2
    target = TARGETS[cfg.target]
    if target.launcher == "mpi" and not inside:
        return launch_mpi(["bench", "micro", *argv], cfg.pes, cfg.mpiexec)
    module = importlib.import_module(target.module)
    if target.launcher == "mpi":
        return int(module.run(cfg))
    return int(module.launch(cfg, inside))
