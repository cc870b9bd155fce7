"""The ``shoal`` command: ``run``, ``info``, ``cache``, and ``shoal prog.py`` under any launcher.

``shoal run -n N prog.py`` starts N PEs itself (``mpiexec`` for the MPI transport, or
one process for ``--transport inproc``); ``python -m shoal prog.py`` is what each PE
runs, and what to put after ``mpiexec``/``srun`` on a cluster.
"""

from __future__ import annotations

import argparse
import os
import runpy
import shutil
import subprocess
import sys
from typing import Sequence

from .transport import TRANSPORTS

__all__ = ["main", "find_mpiexec", "launch_mpi", "OptionParser"]

_COMMANDS = ("run", "info", "bench", "cache")


class OptionParser(argparse.ArgumentParser):
    """argparse that lists the valid options when it rejects one."""

    def error(self, message: str) -> None:  # type: ignore[override]
        options = sorted({o for a in self._actions for o in a.option_strings})
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nvalid options: {', '.join(options)}\n")


def _parser() -> argparse.ArgumentParser:
    p = OptionParser(prog="shoal", description="Run shoal programs and inspect the installation.")
    sub = p.add_subparsers(dest="command", metavar="{run,info,bench,cache} | PROGRAM.py", parser_class=OptionParser)
    run = sub.add_parser("run", help="start a job of N PEs running a program")
    run.add_argument("-n", "--pes", type=int, default=2, help="number of PEs (default 2)")
    run.add_argument("--transport", choices=TRANSPORTS, default="mpi", help="machine layer (default mpi)")
    run.add_argument("--mpiexec", default=None, help="launcher to use (default: $SHOAL_MPIEXEC, then PATH)")
    run.add_argument("program", help="the Python program to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the program")
    sub.add_parser("bench", help="benchmarks: `shoal bench --help` lists them")
    info = sub.add_parser("info", help="versions, MPI library, transport settings")
    info.add_argument("--transport", choices=TRANSPORTS, default="mpi")
    cache = sub.add_parser("cache", help="the stencil kernel cache: info, prune, clear")
    cache.add_argument("action", choices=("info", "prune", "clear"), nargs="?", default="info")
    cache.add_argument("--max-mb", type=float, default=None, help="prune: keep at most this many MB (default 512)")
    return p


def find_mpiexec(explicit: str | None = None) -> str:
    """The MPI launcher: ``--mpiexec``, ``$SHOAL_MPIEXEC``, PATH, then beside this Python."""
    for candidate in (explicit, os.environ.get("SHOAL_MPIEXEC")):
        if candidate:
            found = shutil.which(candidate)
            if found is None:
                raise SystemExit(f"shoal: mpiexec {candidate!r} was not found or is not executable")
            return found
    for name in ("mpiexec", "mpirun"):
        found = shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))
        if found:
            return found
    raise SystemExit(
        "shoal: no mpiexec found; install one (`pip install mpich`), pass --mpiexec PATH, "
        "or use --transport inproc"
    )


def run_program(path: str, args: Sequence[str]) -> int:
    """Run ``path`` as ``__main__`` in this process (each PE does this)."""
    if not os.path.isfile(path):
        print(f"shoal: program {path!r} not found", file=sys.stderr)
        return 2
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def _run(ns: argparse.Namespace) -> int:
    if ns.pes < 1:
        print(f"shoal run: -n must be at least 1, not {ns.pes}", file=sys.stderr)
        return 2
    if ns.transport == "inproc":
        os.environ["SHOAL_TRANSPORT"] = "inproc"
        os.environ["SHOAL_PES"] = str(ns.pes)
        return run_program(ns.program, ns.args)
    return launch_mpi([ns.program, *ns.args], ns.pes, ns.mpiexec)


def launch_mpi(args: Sequence[str], pes: int, mpiexec: str | None = None) -> int:
    """Run ``python -m shoal *args`` as an MPI job of ``pes`` processes; its exit code."""
    env = {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}
    env["SHOAL_TRANSPORT"] = "mpi"
    cmd = [find_mpiexec(mpiexec), "-n", str(pes), sys.executable, "-m", "shoal", *args]
    return subprocess.call(cmd, env=env)


def _info(ns: argparse.Namespace) -> int:
    import platform

    import numpy

    from . import __version__
    from .settings import load_settings

    settings = load_settings()
    rows = {
        "shoal": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }
    if ns.transport == "mpi":
        try:
            from .transport.mpi import describe_library
        except ImportError as exc:
            rows["mpi"] = f"unavailable ({exc}); install with `pip install mpi4py mpich`"
        else:
            rows.update(describe_library())
    rows.update({f"setting {k}": v for k, v in vars(settings).items()})
    width = max(map(len, rows))
    for k, v in rows.items():
        print(f"{k:<{width}}  {v}")
    return 0


def _cache(ns: argparse.Namespace) -> int:
    from .native import cache_dir
    from .stencil.build import CACHE_LIMIT, cache_usage, clear_cache, prune_cache

    if ns.action == "clear":
        n, freed = clear_cache()
        print(f"removed {n} kernels ({freed / 2**20:.1f} MB)")
    elif ns.action == "prune":
        limit = CACHE_LIMIT if ns.max_mb is None else int(ns.max_mb * 2**20)
        n, freed = prune_cache(limit, keep_recent=0)
        print(f"removed {n} least recently used kernels ({freed / 2**20:.1f} MB)")
    n, size = cache_usage()
    print(f"{cache_dir() / 'stencil'}: {n} kernels, {size / 2**20:.1f} MB (bound {CACHE_LIMIT / 2**20:.0f} MB)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":
        from .bench.cli import main as bench_main

        return bench_main(argv[1:])
    if argv and argv[0] not in _COMMANDS and not argv[0].startswith("-"):
        return run_program(argv[0], argv[1:])  # `python -m shoal prog.py args…`
    parser = _parser()
    ns, extra = parser.parse_known_args(argv)
    if extra:
        sub = parser._subparsers._group_actions[0].choices.get(ns.command, parser)  # type: ignore[union-attr]
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if ns.command == "run":
        return _run(ns)
    if ns.command == "info":
        return _info(ns)
    if ns.command == "cache":
        return _cache(ns)
    _parser().print_help()
    return 2
