"""``shoal bench micro <test> [options]``: check the options, then run or launch the job.

Like ``shoal run``, the command starts its own job: outside an MPI launcher it runs
``mpiexec -n N python -m shoal bench micro …`` (the same arguments), and inside one
(every PE of that job, or a job you started with ``mpiexec``/``srun``) it runs the
benchmark directly. ``--target charm4py`` starts its job with Charm4py's own
launcher, and ``--target c`` compiles the C baseline and runs it.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Sequence

from .options import Config, UsageError, parse
from .targets import TARGETS

__all__ = ["main", "launcher_size"]

_PROG = "shoal bench micro"


def launcher_size() -> int | None:
    """The number of processes of the MPI job this process belongs to, from its launcher."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return None


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


def _relaunch(cfg: Config, argv: Sequence[str]) -> int:
    from ...cli import find_mpiexec

    cmd = [find_mpiexec(cfg.mpiexec), "-n", str(cfg.pes), sys.executable, "-m", "shoal", "bench", "micro", *argv]
    env = {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}
    env["SHOAL_TRANSPORT"] = "mpi"
    return subprocess.call(cmd, env=env)


def main(argv: Sequence[str]) -> int:
    """Entry point of ``shoal bench micro``; returns the exit code."""
    from ...runtime.engine import under_mpi_launcher

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
        return _relaunch(cfg, argv)
    module = importlib.import_module(target.module)
    if target.launcher == "mpi":
        return int(module.run(cfg))
    return int(module.launch(cfg, inside))
