"""``shoal bench app <name> --target T -n P [options] [--json]``: run a proxy application.

Every app takes the same common options (``--target``, ``-n/--pes``, ``--steps``,
``--json``, ``--mpiexec``, ``--transport``) and adds its own. Like ``shoal bench
micro``, the command starts its own job: a target that runs under MPI (shoal, mpi4py)
is relaunched outside an MPI launcher as ``mpiexec -n P python -m shoal bench app …``
with the same arguments, and inside one (every process of that job, or a job started
with ``mpiexec``/``srun``) the target runs directly, with the job's size as ``-n``. The
sequential target runs in this process. ``--target shoal --transport inproc`` runs
every PE in this process, without MPI.

An app is a module (see :data:`APPS`) with ``TARGETS`` (target -> (module with
``run(config) -> int``, ``"mpi"`` or ``"local"``)), ``DEFAULT_STEPS``,
``add_options(parser)`` and ``configure(namespace)``, which returns a config with
``target``, ``pes``, ``mpiexec``, ``transport`` and ``with_pes(n)``, or raises
ValueError naming the bad option.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType
from typing import Any, Sequence

__all__ = ["APPS", "main", "build_parser"]

_PROG = "shoal bench app"

#: app -> (its module, one-line help)
APPS: dict[str, tuple[str, str]] = {
    "pic": ("shoal.bench.apps.pic", "particle-in-cell (the Parallel Research Kernels' PIC)"),
    "jacobi2d": ("shoal.bench.apps.jacobi2d", "2-D Jacobi 5-point stencil with halo exchange"),
    "jacobi3d": ("shoal.bench.apps.jacobi3d", "3-D Jacobi 7-point stencil with halo exchange"),
}


def _usage(out: Any) -> None:
    print(f"usage: {_PROG} {{{','.join(APPS)}}} --target TARGET -n PES [options] [--json]", file=out)
    for name, (_, text) in APPS.items():
        print(f"  {name:<10} {text}", file=out)
    print(f"`{_PROG} NAME --help` lists an app's options", file=out)


def build_parser(name: str, app: ModuleType) -> argparse.ArgumentParser:
    """The command line of app ``name``: the common options, then the app's own."""
    p = argparse.ArgumentParser(prog=f"{_PROG} {name}", description=APPS[name][1])
    targets = list(app.TARGETS)
    p.add_argument("--target", choices=targets, default=targets[0], help=f"system under test ({targets[0]})")
    p.add_argument("-n", "--pes", type=int, default=2, help="PEs (MPI processes) of the job (2)")
    p.add_argument("--steps", type=int, default=app.DEFAULT_STEPS, help=f"timed steps ({app.DEFAULT_STEPS})")
    p.add_argument("--json", action="store_true", help="end the output with one line of JSON")
    p.add_argument("--mpiexec", default=None, help="launcher to use (default: $SHOAL_MPIEXEC, then PATH)")
    p.add_argument("--transport", choices=("mpi", "inproc"), default="mpi",
                   help="shoal target: inproc runs every PE in this process, without MPI (mpi)")
    app.add_options(p)
    return p


def main(argv: Sequence[str]) -> int:
    """Entry point of ``shoal bench app``; returns the exit code."""
    from ...lowlevel import launch_mpi, launcher_size, under_mpi_launcher

    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        _usage(sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name = argv[0]
    if name not in APPS:
        print(f"{_PROG}: unknown app {name!r}; apps: {', '.join(APPS)}", file=sys.stderr)
        return 2
    app = importlib.import_module(APPS[name][0])
    try:
        ns = build_parser(name, app).parse_args(argv[1:])
    except SystemExit as exc:  # --help, or argparse's own usage error (it printed why)
        return exc.code if isinstance(exc.code, int) else 2
    inside = under_mpi_launcher()
    size = launcher_size() if inside else None
    if size is not None:
        ns.pes = size  # the job's size wins over -n
    try:
        cfg = app.configure(ns)
    except ValueError as exc:
        print(f"{_PROG} {name}: {exc}", file=sys.stderr)
        return 2
    module, launcher = app.TARGETS[cfg.target]
    in_process = cfg.target == "shoal" and cfg.transport == "inproc"
    if launcher == "mpi" and not inside and not in_process:
        return launch_mpi(["bench", "app", *argv], cfg.pes, cfg.mpiexec)
    if launcher == "local" and size not in (None, 1):
        print(f"{_PROG} {name}: --target {cfg.target} runs in one process; run it without mpiexec/srun",
              file=sys.stderr)
        return 2
    return int(importlib.import_module(module).run(cfg) or 0)
