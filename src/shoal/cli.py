"""The ``shoal`` command: ``run``, ``info``, ``cache``, ``trace``, and ``shoal prog.py`` under any launcher.

``shoal run -n N prog.py`` starts N PEs itself (``mpiexec`` for the MPI transport, or
one process for ``--transport inproc``); ``python -m shoal prog.py`` is what each PE
runs, and what to put after ``mpiexec``/``srun`` on a cluster.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import jobwatch
from .errors import exit_code
from .settings import MAX_PES, SettingsError, load_settings
from ._transport import TRANSPORTS, ask_thread_level

if TYPE_CHECKING:
    from .launcher import JobOutcome, find_mpiexec, launch_mpi

__all__ = ["main", "run_program", "find_mpiexec", "launch_mpi", "OptionParser"]


def __getattr__(name: str) -> Any:
    """``find_mpiexec`` and ``launch_mpi`` (PEP 562): the launcher module is loaded by the
    commands that start jobs, not by every PE that runs ``python -m shoal prog.py``."""
    if name in ("find_mpiexec", "launch_mpi"):
        from . import launcher

        return getattr(launcher, name)
    raise AttributeError(f"module 'shoal.cli' has no attribute {name!r}")

_COMMANDS = ("run", "serve", "info", "bench", "cache", "trace", "checkpoint")


class OptionParser(argparse.ArgumentParser):
    """argparse that lists the valid options when it rejects one."""

    def error(self, message: str) -> None:  # type: ignore[override]
        options = sorted({o for a in self._actions for o in a.option_strings})
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nvalid options: {', '.join(options)}\n")


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command``, only that subcommand gets its options
    (``shoal run`` starts its PEs sooner for not building the others)."""
    p = OptionParser(prog="shoal", description="Run shoal programs and inspect the installation.")
    sub = p.add_subparsers(dest="command", metavar="{run,serve,info,bench,cache,trace,checkpoint} | PROGRAM.py",
                           parser_class=OptionParser)
    for name, (text, options) in _SUBCOMMANDS.items():
        parser = sub.add_parser(name, help=text)
        if command in (None, name):
            options(parser)
    return p


def _run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("-n", "--pes", type=int, default=2, help="number of PEs (default 2)")
    run.add_argument("--transport", choices=TRANSPORTS, default="mpi", help="machine layer (default mpi)")
    run.add_argument("--mpiexec", default=None, help="launcher to use (default: $SHOAL_MPIEXEC, then PATH)")
    run.add_argument("--trace", metavar="PATH", default=None,
                     help="write the job's timeline to PATH (Chrome trace JSON for Perfetto; sets SHOAL_TRACE)")
    run.add_argument("--lb", metavar="NAME", default=None, help="load-balancing strategy (sets SHOAL_LB)")
    run.add_argument("--compat", metavar="LAYER", choices=("charm4py",), default=None,
                     help="run a program written for another system unchanged: charm4py (sets SHOAL_COMPAT)")
    run.add_argument("--lb-period", metavar="N", type=int, default=None,
                     help="balance at every N-th at_sync call; 0: only when asked (sets SHOAL_LB_PERIOD)")
    run.add_argument("--restart", metavar="PATH", default=None,
                     help="resume from checkpoint PATH, on any number of PEs; 'auto': from the newest in "
                          "--checkpoint-dir if there is one, else start fresh (sets SHOAL_RESTART)")
    run.add_argument("--checkpoint-every", metavar="SECONDS", type=_seconds, default=None,
                     help="let shoal.checkpoint_point() checkpoint this often, e.g. 60s or 5m "
                          "(sets SHOAL_CHECKPOINT_EVERY)")
    run.add_argument("--checkpoint-dir", metavar="DIR", default=None,
                     help="where checkpoint_point() writes (default shoal.ckpt; sets SHOAL_CHECKPOINT_DIR)")
    run.add_argument("--devices", metavar="LIST", default=None,
                     help="the GPU of each PE on a node: a device number, or a comma list that the node's "
                          "PE k takes entry k (mod its length) of (sets SHOAL_DEVICE; default: local rank "
                          "modulo the GPUs seen)")
    run.add_argument("--max-restarts", metavar="N", type=int, default=0,
                     help="when a PE dies, run the job again from the last checkpoint, up to N times (MPI)")
    run.add_argument("program", help="the Python program to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the program")


def _serve_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("-n", "--pes", type=int, default=2, help="number of PEs (default 2)")
    serve.add_argument("--transport", choices=TRANSPORTS, default="mpi", help="machine layer (default mpi)")
    serve.add_argument("--mpiexec", default=None, help="launcher to use (default: $SHOAL_MPIEXEC, then PATH)")
    serve.add_argument("--stop", action="store_true",
                       help="stop the server of --connection-file (default: the one this user started last)")
    from .remote.options import add_options

    add_options(serve)


def _info_options(info: argparse.ArgumentParser) -> None:
    info.add_argument("--transport", choices=TRANSPORTS, default="mpi")


def _checkpoint_options(ckpt: argparse.ArgumentParser) -> None:
    ckpt.add_argument("action", choices=("inspect",))
    ckpt.add_argument("path", help="a checkpoint directory")


def _cache_options(cache: argparse.ArgumentParser) -> None:
    cache.add_argument("action", choices=("info", "prune", "clear"), nargs="?", default="info")
    cache.add_argument("--max-mb", type=float, default=None, help="prune: keep at most this many MB (default 512)")


def _trace_options(trace: argparse.ArgumentParser) -> None:
    actions = trace.add_subparsers(dest="action", metavar="{summary,plot}", parser_class=OptionParser, required=True)
    summary = actions.add_parser("summary", help="where each PE's time went, and the costliest entry methods")
    summary.add_argument("file", help="a trace written by shoal run --trace (or SHOAL_TRACE)")
    summary.add_argument("--top", type=int, default=10, help="entry methods to list (default 10)")
    plot = actions.add_parser("plot", help="draw the timeline to an image, one row per PE")
    plot.add_argument("file", help="a trace written by shoal run --trace (or SHOAL_TRACE)")
    plot.add_argument("-o", "--out", required=True, help="the image to write (.png, .svg or .pdf)")
    plot.add_argument("--from", dest="start", type=float, default=None, help="seconds from the start (default 0)")
    plot.add_argument("--to", dest="end", type=float, default=None, help="seconds from the start (default: the end)")


#: subcommand -> (its help line, what adds its options)
_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ("start a job of N PEs running a program", _run_options),
    "serve": ("start a job that frontends (notebooks, scripts) connect to: shoal.connect()", _serve_options),
    "bench": ("benchmarks: `shoal bench --help` lists them", lambda parser: None),
    "info": ("versions, MPI library, transport settings", _info_options),
    "checkpoint": ("checkpoints (shoal.checkpoint): inspect", _checkpoint_options),
    "cache": ("the stencil kernel cache: info, prune, clear", _cache_options),
    "trace": ("timeline traces (shoal run --trace): summary, plot", _trace_options),
}


def run_program(path: str, args: Sequence[str]) -> int:
    """Run ``path`` as ``__main__`` in this process (each PE does this); its exit code.

    Under an MPI launcher, an exception or a failing ``sys.exit`` that escapes the program
    before its job ended on every PE (one PE failing before ``shoal.start``, say) is
    printed with the PE's number and ends the whole job: the other PEs would otherwise
    wait for this one in MPI's start-up forever.
    """
    if not os.path.isfile(path):
        print(f"shoal: program {path!r} not found", file=sys.stderr)
        return 2
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    layer = os.environ.get("SHOAL_COMPAT")
    if layer:  # `--compat charm4py`: the program imports shoal's layer under that name
        from .compat import install

        try:
            install(layer)
        except ValueError as exc:
            print(f"shoal: {exc}", file=sys.stderr)
            return 2
    from ._runtime.engine import under_mpi_launcher

    mpi = under_mpi_launcher()
    if mpi:
        _whole_lines()
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exit_code(exc)
        if mpi and code != 0 and not _job_finished():
            how = "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"
            jobwatch.end_job(jobwatch.launcher_rank(), f"{path} called {how} before its job ended", code=code)
        return code
    except BaseException as exc:  # noqa: BLE001 - reported here; under MPI the job ends
        if isinstance(exc, KeyboardInterrupt) and not mpi:
            raise
        text = jobwatch.format_exception(exc, path)
        if isinstance(exc, SettingsError):  # the message says it all; the stack is shoal's
            text = f"{type(exc).__name__}: {exc}\n"
        if not mpi:
            sys.stderr.write(text)
            return 1
        interrupted = isinstance(exc, KeyboardInterrupt)
        what = "interrupted" if interrupted else "unhandled exception"
        jobwatch.end_job(jobwatch.launcher_rank(), f"{what} in {path}, outside the main program", text,
                         code=130 if interrupted else 1)
    return 0


def _whole_lines() -> None:
    """Each PE writes its output a line at a time, even under PYTHONUNBUFFERED=1 (which
    writes every piece of a print() at once), so that the launcher never interleaves
    two PEs' lines in the middle."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True, write_through=False)  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass


def _job_finished() -> bool:
    """Whether this process's MPI job already ended on every PE (its exit code is the job's)."""
    if "shoal._transport.mpi_library" not in sys.modules:
        return False
    from ._transport.mpi_library import job_finished

    return job_finished()


def _check_settings(command: str, environ: dict[str, str] | None = None, **overrides: object) -> bool:
    """Refuse bad ``SHOAL_*`` values once, here, before any PE starts."""
    try:
        load_settings(environ, **overrides)
    except SettingsError as exc:
        print(f"shoal {command}: {exc}", file=sys.stderr)
        return False
    return True


def _run_environment(ns: argparse.Namespace) -> dict[str, str]:
    """The ``SHOAL_*`` variables that ``shoal run``'s options set for every PE (those given)."""
    env = {}
    if ns.trace is not None:
        env["SHOAL_TRACE"] = os.path.abspath(ns.trace) if ns.trace else ""  # the PEs' folder may differ
    if ns.lb is not None:
        env["SHOAL_LB"] = ns.lb
    if ns.compat is not None:
        env["SHOAL_COMPAT"] = ns.compat
    if ns.lb_period is not None:
        env["SHOAL_LB_PERIOD"] = str(ns.lb_period)
    if ns.restart is not None:
        env["SHOAL_RESTART"] = _restart_path(ns.restart)
    if ns.checkpoint_every is not None:
        env["SHOAL_CHECKPOINT_EVERY"] = repr(ns.checkpoint_every)
    if ns.checkpoint_dir is not None:
        env["SHOAL_CHECKPOINT_DIR"] = os.path.abspath(ns.checkpoint_dir)
    if ns.devices is not None:
        env["SHOAL_DEVICE"] = ns.devices
    return env


def _restart_path(text: str) -> str:
    """``--restart``'s value for the PEs: ``auto`` as it is, a path made absolute."""
    from ._runtime.checkpoint import AUTO

    return text if text == AUTO else os.path.abspath(text)


def _seconds(text: str) -> float:
    """``90``, ``90s``, ``5m`` or ``2h`` as seconds."""
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], 0)
    try:
        value = float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 60, 60s, 5m or 2h") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a period must be more than 0 seconds")
    return value


def _check_trace_path(path: str) -> bool:
    """Refuse a trace file that cannot be written before the job runs, not after."""
    folder = os.path.dirname(path) or "."
    why = ("it is a folder; name a file such as " + os.path.join(path, "trace.json") if os.path.isdir(path) else
           f"its folder {folder} does not exist" if not os.path.isdir(folder) else
           f"its folder {folder} is not writable" if not os.access(folder, os.W_OK | os.X_OK) else "")
    if why:
        print(f"shoal run: --trace {path}: cannot write the trace there: {why}", file=sys.stderr)
    return not why


def _run(ns: argparse.Namespace) -> int:
    if not 1 <= ns.pes <= MAX_PES:
        print(f"shoal run: -n {ns.pes} is not valid: a job has from 1 to {MAX_PES} PEs "
              "(each is a process on this machine, or a PE in this one with --transport inproc)", file=sys.stderr)
        return 2
    options = _run_environment(ns)
    if options.get("SHOAL_TRACE") and not _check_trace_path(options["SHOAL_TRACE"]):
        return 2
    environ = {**os.environ, **options}
    if ns.transport == "inproc":
        if not _check_settings("run", environ, pes=ns.pes, transport="inproc"):
            return 2
        os.environ.update(options)
        os.environ["SHOAL_TRANSPORT"] = "inproc"
        os.environ["SHOAL_PES"] = str(ns.pes)
        try:
            return run_program(ns.program, ns.args)
        except KeyboardInterrupt:  # the launcher is the job here: one line, not a traceback
            print("shoal run: stopped by SIGINT (KeyboardInterrupt)", file=sys.stderr)
            return 128 + 2
    if not _check_settings("run", {k: v for k, v in environ.items() if k != "SHOAL_PES"}, transport="mpi"):
        return 2
    os.environ.update(options)  # launch_mpi hands this environment to every PE
    from .launcher import launch_mpi

    return _run_recovering(ns) if ns.max_restarts > 0 else launch_mpi([ns.program, *ns.args], ns.pes, ns.mpiexec)


def _run_recovering(ns: argparse.Namespace) -> int:
    """Run the job; when a PE dies, run it again from the last checkpoint, ``--max-restarts``
    times, on as many PEs as mpiexec can start (:func:`_relaunch`)."""
    from ._runtime.checkpoint import latest, read_manifest
    from .errors import CheckpointError
    from .jobreport import pe_list
    from .launcher import run_job

    folder = os.environ.get("SHOAL_CHECKPOINT_DIR") or os.path.abspath("shoal.ckpt")
    args = [ns.program, *ns.args]
    job = run_job(args, ns.pes, ns.mpiexec)
    for restart in range(1, ns.max_restarts + 1):
        if job.code == 0 or not job.died:
            return job.code
        try:
            found = latest(folder)
            if found is None:
                raise CheckpointError(f"{folder} holds none")
            manifest = read_manifest(found)
        except CheckpointError as exc:
            print(f"shoal run: {pe_list(job.died)} died and there is no checkpoint to restart from: {exc}",
                  file=sys.stderr)
            return job.code
        print(f"shoal run: {pe_list(job.died)} died; restarting from the checkpoint in {found} "
              f"(written {manifest['time']}), restart {restart} of {ns.max_restarts}", file=sys.stderr, flush=True)
        os.environ["SHOAL_RESTART"] = found
        job = _relaunch(args, ns, len(job.died))
    if job.code != 0 and job.died:
        print(f"shoal run: {pe_list(job.died)} died; no restarts left (--max-restarts {ns.max_restarts})",
              file=sys.stderr)
    return job.code


def _relaunch(args: list[str], ns: argparse.Namespace, lost: int) -> JobOutcome:
    """Run the job again on ``-n`` PEs or, while mpiexec cannot start that many (a node is
    gone, say), on ``lost`` fewer, then one fewer at a time down to 1."""
    from .launcher import run_job

    counts = sorted({ns.pes, *range(1, ns.pes - lost + 1)}, reverse=True)
    job = run_job(args, counts[0], ns.mpiexec)
    for tried, fewer in zip(counts, counts[1:]):
        if not job.never_started:
            break
        print(f"shoal run: mpiexec could not start {tried} PEs (exit code {job.code}, none started); "
              f"relaunching on {fewer} PE{'s' if fewer > 1 else ''} instead", file=sys.stderr, flush=True)
        job = run_job(args, fewer, ns.mpiexec)
    return job


def _serve(ns: argparse.Namespace, argv: list[str]) -> int:
    """``shoal serve``: start the server job (or, under a launcher, be one of its PEs), or ``--stop`` one."""
    from .remote import options, server

    if ns.stop:
        return _stop_server(ns.connection_file)
    if not 1 <= ns.pes <= MAX_PES:
        print(f"shoal serve: -n {ns.pes} is not valid: a job has from 1 to {MAX_PES} PEs", file=sys.stderr)
        return 2
    options.options_from(ns)  # refuse bad options here, before any PE starts
    program = os.path.join(os.path.dirname(server.__file__), "_program.py")
    args = _server_args(argv)
    from ._runtime.engine import under_mpi_launcher

    if under_mpi_launcher() or ns.transport == "inproc":  # `mpiexec -n N python -m shoal serve`: a PE
        if ns.transport == "inproc":
            os.environ["SHOAL_TRANSPORT"], os.environ["SHOAL_PES"] = "inproc", str(ns.pes)
        return run_program(program, args)
    if not _check_settings("serve", {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}, transport="mpi"):
        return 2
    from .launcher import launch_mpi

    return launch_mpi([program, *args], ns.pes, ns.mpiexec)


def _server_args(argv: list[str]) -> list[str]:
    """``shoal serve``'s arguments without the launcher's own (-n, --transport, --mpiexec)."""
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in ("-n", "--pes", "--transport", "--mpiexec"):
            skip = "=" not in a and not (name == "-n" and len(a) > 2)
            continue
        if a.startswith("-n") and a[2:].isdigit():
            continue
        out.append(a)
    return out


def _stop_server(path: str | None) -> int:
    from .remote.client import connect
    from .remote.protocol import ServerError

    try:
        conn = connect(path)
        where = conn.address
        conn.stop_server()
        conn.close()
    except ServerError as exc:
        print(f"shoal serve --stop: {exc}", file=sys.stderr)
        return 1
    print(f"shoal serve: stopped the server at {where}")
    return 0


def _info(ns: argparse.Namespace) -> int:
    import platform

    import numpy

    from . import __version__

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"shoal info: {exc}", file=sys.stderr)
        return 2
    rows = {
        "shoal": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }
    if ns.transport == "mpi":
        try:
            ask_thread_level(settings.mpi_threads)  # as a job's PE starts MPI
            from ._transport.mpi_library import describe_library
        except ImportError as exc:
            rows["mpi"] = f"unavailable ({exc}); install with `pip install mpi4py mpich`"
        except RuntimeError as exc:  # mpi4py's binary wheel found no MPI library to load
            rows["mpi"] = (f"unavailable: mpi4py {_first_line(exc)}; install one (`pip install mpich`) "
                           "or put your MPI's libmpi on LD_LIBRARY_PATH")
        else:
            rows.update(describe_library())
        if "compiled path" not in rows:
            from .native import load_native, native_status

            load_native()
            rows["compiled path"] = native_status()
    rows.update(_gpu_rows(settings, rows.get("cuda-aware mpi", "")))
    rows.update({f"setting {k}": v for k, v in settings._asdict().items()})
    width = max(map(len, rows))
    for k, v in rows.items():
        lines = str(v).splitlines() or [""]
        print(f"{k:<{width}}  {lines[0]}")
        for line in lines[1:]:  # a compiler's message, say: indented under its row
            print(f"{'':<{width}}    {line}")
    return 0


def _gpu_rows(settings: Any, mpi_aware: str) -> dict[str, str]:
    """What device arrays in messages would use on this node: CuPy and its devices, each
    PE's device, and the path a job of PEs on this one node takes (shoal/gpu/paths.py)."""
    from .gpu import choose_path, cupy_missing

    missing = cupy_missing()
    if missing is not None:
        return {"gpu": f"none: {missing}"}
    import cupy

    count = cupy.cuda.runtime.getDeviceCount()
    names = [cupy.cuda.runtime.getDeviceProperties(d)["name"].decode() for d in range(count)]
    rows = {"gpu": f"CuPy {cupy.__version__}; {count} device{'s' if count != 1 else ''}: {', '.join(names)}",
            "gpu device of a PE": f"SHOAL_DEVICE={settings.device} (entry k of the list for the node's PE k)"
            if settings.device else f"its rank on the node modulo {count}"}
    try:
        aware = True if mpi_aware.startswith("yes") else False if mpi_aware.startswith("no") else None
        path, why = choose_path(settings.gpu_path, aware, one_node=True)
    except ValueError as exc:
        rows["gpu path"] = f"error: {exc}"
    else:
        rows["gpu path"] = f"{path} ({why}; a job on several nodes without CUDA-aware MPI: staged)"
    return rows


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (mpi4py lists every path it tried after it)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _cache(ns: argparse.Namespace) -> int:
    from .native import cache_dir
    from .stencil.build import cache_limit, cache_usage, clear_cache, prune_cache

    if ns.action == "clear":
        n, freed = clear_cache()
        print(f"removed {n} kernels ({freed / 2**20:.1f} MB)")
    elif ns.action == "prune":
        limit = cache_limit() if ns.max_mb is None else int(ns.max_mb * 2**20)
        n, freed = prune_cache(limit, keep_recent=0)
        print(f"removed {n} least recently used kernels ({freed / 2**20:.1f} MB)")
    n, size = cache_usage()
    print(f"{cache_dir() / 'stencil'}: {n} kernels, {size / 2**20:.1f} MB (bound {cache_limit() / 2**20:.0f} MB)")
    return 0


def _checkpoint(ns: argparse.Namespace) -> int:
    from ._runtime.checkpoint import resume_command, verify
    from .errors import ShoalError

    try:
        m = verify(ns.path)
    except ShoalError as exc:
        print(f"shoal checkpoint inspect: {exc}", file=sys.stderr)
        return 2
    print(f"{ns.path}: shoal {m['shoal']}, {m['pes']} PEs, written {m['time']}, program {m['program']}")
    print(f"  {m['elements']} elements, {m['bytes'] / 1e6:.1f} MB of element state, {len(m['files'])} files, "
          "every checksum verified")
    for c in m["collections"]:
        shape = f"shape {tuple(c['shape'])}" if c["shape"] else f"{c['ndims']}-d sparse"
        print(f"  {c['class']}: {c['kind']} array, {shape}, {c['elements']} elements")
    print(f"resume with: {resume_command(os.path.abspath(ns.path), m)}")
    return 0


def _trace(ns: argparse.Namespace) -> int:
    from .errors import ShoalError
    from .trace_summary import load_trace, print_summary, summarize

    if ns.action == "plot":
        from .trace_plot import plot_trace

        try:
            drawn = plot_trace(load_trace(ns.file), ns.out, start=ns.start, end=ns.end)
        except (ShoalError, OSError, ValueError) as exc:
            print(f"shoal trace plot: {exc}", file=sys.stderr)
            return 2
        print(f"{ns.out}: {drawn} slices")
        return 0
    if ns.top < 1:
        print(f"shoal trace summary: --top {ns.top} is not valid: list at least 1 entry method", file=sys.stderr)
        return 2
    try:
        summary = summarize(load_trace(ns.file))
    except ShoalError as exc:
        print(f"shoal trace summary: {exc}", file=sys.stderr)
        return 2
    print_summary(summary, sys.stdout, top=ns.top)
    return 0


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
        return _restart_path(value)
    if option == "--checkpoint-every":
        return repr(_seconds(value))
    return os.path.abspath(value) if option == "--checkpoint-dir" else value


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "bench":
        from .bench.cli import main as bench_main

        return bench_main(argv[1:])
    while len(argv) >= 3 and argv[0] in _PE_OPTIONS:  # `python -m shoal --restart PATH … prog.py args…`
        try:
            os.environ[_PE_OPTIONS[argv[0]]] = _pe_option(argv[0], argv[1])
        except argparse.ArgumentTypeError as exc:
            print(f"shoal: {argv[0]} {argv[1]}: {exc}", file=sys.stderr)
            return 2
        argv = argv[2:]
    if argv and argv[0] not in _COMMANDS and not argv[0].startswith("-"):
        return run_program(argv[0], argv[1:])  # `python -m shoal prog.py args…`
    parser = _parser(argv[0] if argv and argv[0] in _COMMANDS else None)
    ns, extra = parser.parse_known_args(argv)
    if extra:
        sub = parser._subparsers._group_actions[0].choices.get(ns.command, parser)  # type: ignore[union-attr]
        sub.error(f"unrecognized arguments: {' '.join(extra)}")
    if ns.command == "run":
        return _run(ns)
    if ns.command == "serve":
        return _serve(ns, argv[1:])
    if ns.command == "info":
        return _info(ns)
    if ns.command == "cache":
        return _cache(ns)
    if ns.command == "trace":
        return _trace(ns)
    if ns.command == "checkpoint":
        return _checkpoint(ns)
    _parser().print_help()
    return 2
