"""The ``shoal`` subcommands (``run``, ``serve``, ``info``, ``cache``, ``trace``,
``checkpoint``): their options and what each does.

:mod:`shoal.cli` hands a command line here unless it names a program: a PE running
``python -m shoal prog.py`` never imports argparse or any of this.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False  # typing is for type checkers: the launcher and a PE's start-up skip its import

from .options import check_settings, duration, launching, restart_path
from .program import run_program
from .settings import MAX_PES, TRANSPORTS, SettingsError, load_settings

if TYPE_CHECKING:
    from typing import Any, Callable
    from .launcher import JobOutcome

__all__ = ["OptionParser", "run_command"]


class OptionParser(argparse.ArgumentParser):
    """argparse that lists the valid options when it rejects one."""

    def error(self, message: str) -> None:  # type: ignore[override]
        options = sorted({o for a in self._actions for o in a.option_strings})
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nvalid options: {', '.join(options)}\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument, each asking shutil (imported
        # for it: 3 ms of every `shoal run`) for the terminal's width; ask once, here
        return self.formatter_class(prog=self.prog, width=_help_width())  # type: ignore[call-arg]


def _help_width() -> int:
    """What ``argparse.HelpFormatter`` takes for its width: ``shutil.get_terminal_size()``'s
    columns less 2 (``$COLUMNS``, else the terminal of stdout, else 80), read once."""
    global _width
    if _width is None:
        try:
            columns = int(os.environ.get("COLUMNS", "0"))
        except ValueError:
            columns = 0
        if columns <= 0:
            try:
                columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
            except (AttributeError, ValueError, OSError):
                columns = 0
        _width = (columns or 80) - 2
    return _width


_width: int | None = None


def _parser() -> argparse.ArgumentParser:
    """The whole command line's parser: every subcommand, with its options."""
    p = OptionParser(prog="shoal", description="Run shoal programs and inspect the installation.")
    sub = p.add_subparsers(dest="command", metavar="{run,serve,info,bench,cache,trace,checkpoint} | PROGRAM.py",
                           parser_class=OptionParser)
    for name, (text, options) in _SUBCOMMANDS.items():
        options(sub.add_parser(name, help=text))
    return p


def _command_parser(name: str) -> argparse.ArgumentParser:
    """Subcommand ``name``'s parser alone, as :func:`_parser` makes it: ``shoal run``
    starts its PEs sooner for not building the others."""
    parser = OptionParser(prog=f"shoal {name}")
    _SUBCOMMANDS[name][1](parser)
    return parser


def _run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("-n", "--pes", type=int, default=None,
                     help="number of PEs (default: the Slurm allocation's tasks inside one, else 2)")
    run.add_argument("--transport", choices=TRANSPORTS, default="mpi", help="machine layer (default mpi)")
    run.add_argument("--mpiexec", default=None, help="launcher to use (default: $SHOAL_MPIEXEC, then PATH)")
    run.add_argument("--trace", metavar="PATH", default=None,
                     help="write the job's timeline to PATH (Chrome trace JSON for Perfetto; sets SHOAL_TRACE)")
    run.add_argument("--trace-summary", metavar="BIN", type=_bin_width, default=None,
                     help="with --trace: keep time bins of BIN (e.g. 10ms) per PE and entry method instead of "
                          "every event, a trace of bounded size however long the job (sets SHOAL_TRACE_SUMMARY)")
    run.add_argument("--lb", metavar="NAME", default=None, help="load-balancing strategy (sets SHOAL_LB)")
    run.add_argument("--compat", metavar="LAYER", choices=("charm4py",), default=None,
                     help="run a program written for another system unchanged: charm4py (sets SHOAL_COMPAT)")
    run.add_argument("--lb-period", metavar="N|auto", default=None,
                     help="balance at every N-th at_sync call; 0: at every one; auto: as often as the load's "
                          "drift makes it pay (sets SHOAL_LB_PERIOD)")
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
    actions = trace.add_subparsers(dest="action", metavar="{summary,plot,report}", parser_class=OptionParser,
                                   required=True)
    summary = actions.add_parser("summary", help="where each PE's time went, and the costliest entry methods")
    summary.add_argument("file", help="a trace written by shoal run --trace (or SHOAL_TRACE)")
    summary.add_argument("--top", type=int, default=10, help="entry methods to list (default 10)")
    plot = actions.add_parser("plot", help="draw the timeline to an image, one row per PE")
    plot.add_argument("file", help="a trace written by shoal run --trace (or SHOAL_TRACE)")
    plot.add_argument("-o", "--out", required=True, help="the image to write (.png, .svg or .pdf)")
    plot.add_argument("--from", dest="start", type=float, default=None, help="seconds from the start (default 0)")
    plot.add_argument("--to", dest="end", type=float, default=None, help="seconds from the start (default: the end)")
    report = actions.add_parser("report", help="every view (timeline, usage, overview, time profile, "
                                "communication, histograms, outliers) in one self-contained HTML page")
    report.add_argument("file", help="a trace written by shoal run --trace (or SHOAL_TRACE)")
    report.add_argument("-o", "--out", default=None, help="the page to write (default: the trace's name with .html)")
    report.add_argument("--max-mb", type=float, default=None,
                        help="refuse a trace larger than this many MiB (default 512; memory is about ten times it)")
    report.add_argument("--views", default=None, metavar="LIST",
                        help="a comma list of the parts to show (default all): words, methods, timeline, usage, "
                             "overview, profile, comm, queue, hist, outliers, balance, rounds")


#: subcommand -> (its help line, what adds its options)
_SUBCOMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ("start a job of N PEs running a program", _run_options),
    "serve": ("start a job that frontends (notebooks, scripts) connect to: shoal.connect()", _serve_options),
    "bench": ("benchmarks: `shoal bench --help` lists them", lambda parser: None),
    "info": ("versions, MPI library, transport settings", _info_options),
    "checkpoint": ("checkpoints (shoal.checkpoint): inspect", _checkpoint_options),
    "cache": ("the stencil kernel cache: info, prune, clear", _cache_options),
    "trace": ("timeline traces (shoal run --trace): summary, plot, report", _trace_options),
}


def _run_environment(ns: argparse.Namespace) -> dict[str, str]:
    """The ``SHOAL_*`` variables that ``shoal run``'s options set for every PE (those given)."""
    env = {}
    if ns.trace is not None:
        env["SHOAL_TRACE"] = os.path.abspath(ns.trace) if ns.trace else ""  # the PEs' folder may differ
    if ns.trace_summary is not None:
        env["SHOAL_TRACE_SUMMARY"] = repr(ns.trace_summary)
    if ns.lb is not None:
        env["SHOAL_LB"] = ns.lb
    if ns.compat is not None:
        env["SHOAL_COMPAT"] = ns.compat
    if ns.lb_period is not None:
        env["SHOAL_LB_PERIOD"] = str(ns.lb_period)
    if ns.restart is not None:
        env["SHOAL_RESTART"] = restart_path(ns.restart)
    if ns.checkpoint_every is not None:
        env["SHOAL_CHECKPOINT_EVERY"] = repr(ns.checkpoint_every)
    if ns.checkpoint_dir is not None:
        env["SHOAL_CHECKPOINT_DIR"] = os.path.abspath(ns.checkpoint_dir)
    if ns.devices is not None:
        env["SHOAL_DEVICE"] = ns.devices
    return env


def _seconds(text: str) -> float:
    """``--checkpoint-every``'s value: :func:`shoal.options.duration`, for argparse."""
    try:
        return duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bin_width(text: str) -> float:
    """``--trace-summary``'s value in seconds: ``10ms``, ``500us``, ``0.5s``, ``1m`` or a number of seconds."""
    import re

    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(us|µs|ms|s|m)?\s*", text)
    scale = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}
    seconds = float(found.group(1)) * scale[found.group(2)] if found else 0.0
    if not 1e-6 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a bin width such as 10ms, 500us or 1s "
                                         "(from 1 µs to 1 hour)")
    return seconds


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
    if ns.pes is None:
        from .launchers import default_pes

        ns.pes = default_pes()
    if not 1 <= ns.pes <= MAX_PES:
        print(f"shoal run: -n {ns.pes} is not valid: a job has from 1 to {MAX_PES} PEs "
              "(each is a process on this machine, or a PE in this one with --transport inproc)", file=sys.stderr)
        return 2
    options = _run_environment(ns)
    if options.get("SHOAL_TRACE") and not _check_trace_path(options["SHOAL_TRACE"]):
        return 2
    if ns.trace_summary is not None and not (options.get("SHOAL_TRACE") or os.environ.get("SHOAL_TRACE")):
        print(f"shoal run: --trace-summary {ns.trace_summary:g}s needs a trace file: add --trace PATH",
              file=sys.stderr)
        return 2
    environ = {**os.environ, **options}
    if ns.transport == "inproc":
        if not check_settings("run", environ, pes=ns.pes, transport="inproc"):
            return 2
        os.environ.update(options)
        os.environ["SHOAL_TRANSPORT"] = "inproc"
        os.environ["SHOAL_PES"] = str(ns.pes)
        try:
            return run_program(ns.program, ns.args, summary=True)
        except KeyboardInterrupt:  # the launcher is the job here: one line, not a traceback
            print("shoal run: stopped by SIGINT (KeyboardInterrupt)", file=sys.stderr)
            return 128 + 2
    os.environ.update(options)  # launch_mpi hands this environment to every PE
    if not launching(ns.program):
        return 2
    from .launcher import launch_mpi

    return _run_recovering(ns) if ns.max_restarts > 0 else launch_mpi([ns.program, *ns.args], ns.pes, ns.mpiexec)


def _run_recovering(ns: argparse.Namespace) -> int:
    """Run the job; when a PE dies, run it again from the last checkpoint, ``--max-restarts``
    times, on as many PEs as mpiexec can start (:func:`_relaunch`)."""
    from .lowlevel import newest_checkpoint, read_manifest
    from .errors import CheckpointError
    from .jobreport import pe_list
    from .launcher import run_job

    folder = os.environ.get("SHOAL_CHECKPOINT_DIR") or os.path.abspath("shoal.ckpt")
    args = [ns.program, *ns.args]
    job = run_job(args, ns.pes, ns.mpiexec, hold_report=True)
    for restart in range(1, ns.max_restarts + 1):
        if job.code == 0 or not job.died:
            return job.code
        try:
            found = newest_checkpoint(folder)
            if found is None:
                raise CheckpointError(f"{folder} holds none")
            manifest = read_manifest(found)
        except CheckpointError as exc:
            _told(job)
            print(f"shoal run: {pe_list(job.died)} died and there is no checkpoint to restart from: {exc}",
                  file=sys.stderr)
            return job.code
        for line in job.report:  # how they died, not "the job failed": it goes on
            print(f"shoal run: {line.split('): ', 1)[-1] if line.startswith('the job failed (') else line}",
                  file=sys.stderr)
        print(f"shoal run: {pe_list(job.died)} died; restarting from the checkpoint in {found} "
              f"(written {manifest['time']}), restart {restart} of {ns.max_restarts}", file=sys.stderr, flush=True)
        os.environ["SHOAL_RESTART"] = found
        job = _relaunch(args, ns, len(job.died))
    if job.code != 0 and job.died:
        _told(job)
        print(f"shoal run: {pe_list(job.died)} died; no restarts left (--max-restarts {ns.max_restarts})",
              file=sys.stderr)
    return job.code


def _told(job: "JobOutcome") -> None:
    """Print the report a job held back (``run_job(hold_report=True)``): it is not restarted."""
    for line in job.report:
        print(f"shoal run: {line}", file=sys.stderr)


def _relaunch(args: list[str], ns: argparse.Namespace, lost: int) -> JobOutcome:
    """Run the job again on ``-n`` PEs or, while mpiexec cannot start that many (a node is
    gone, say), on ``lost`` fewer, then one fewer at a time down to 1."""
    from .launcher import run_job

    counts = sorted({ns.pes, *range(1, ns.pes - lost + 1)}, reverse=True)
    job = run_job(args, counts[0], ns.mpiexec, hold_report=True)
    for tried, fewer in zip(counts, counts[1:]):
        if not job.never_started:
            break
        print(f"shoal run: mpiexec could not start {tried} PEs (exit code {job.code}, none started); "
              f"relaunching on {fewer} PE{'s' if fewer > 1 else ''} instead", file=sys.stderr, flush=True)
        job = run_job(args, fewer, ns.mpiexec, hold_report=True)
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
    from .lowlevel import under_mpi_launcher

    if under_mpi_launcher() or ns.transport == "inproc":  # `mpiexec -n N python -m shoal serve`: a PE
        if ns.transport == "inproc":
            os.environ["SHOAL_TRANSPORT"], os.environ["SHOAL_PES"] = "inproc", str(ns.pes)
        return run_program(program, args)
    if not check_settings("serve", {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}, transport="mpi"):
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
        conn.stop_server(f"shoal serve --stop, process {os.getpid()}")
        conn.close()
    except ServerError as exc:
        print(f"shoal serve --stop: {exc}", file=sys.stderr)
        return 1
    print(f"shoal serve: stopped the server at {where}")
    return 0


def _info(ns: argparse.Namespace) -> int:
    import platform

    import numpy

    from .bytecode import bytecode_status
    from .version import __version__

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
            from ._transport import ask_thread_level

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
        rows.update(_launcher_rows())
    rows.update(_gpu_rows(settings, rows.get("cuda-aware mpi", "")))
    rows["bytecode"] = bytecode_status()
    rows.update({f"setting {k}": v for k, v in settings.as_dict().items()})
    width = max(map(len, rows))
    for k, v in rows.items():
        lines = str(v).splitlines() or [""]
        print(f"{k:<{width}}  {lines[0]}")
        for line in lines[1:]:  # a compiler's message, say: indented under its row
            print(f"{'':<{width}}    {line}")
    return 0


def _launcher_rows() -> dict[str, str]:
    """What ``shoal run -n N`` would start: the launcher, its family, the options it adds."""
    from .launcher import job_launch
    from .launchers import default_pes

    pes = default_pes()
    try:
        launch = job_launch(pes, ["prog.py"])
    except SystemExit as exc:  # no launcher, or one that refuses (Open MPI as root)
        return {"launcher": str(exc.code)}
    return {
        "launcher": f"{launch.command[0]} ({launch.family})",
        f"shoal run -n {pes}": " ".join(launch.command),
        **({"launcher notes": "\n".join(launch.notes)} if launch.notes else {}),
    }


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
    from .compiler import cache_dir
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
    from .lowlevel import resume_command, verify_checkpoint
    from .errors import ShoalError

    try:
        m = verify_checkpoint(ns.path)
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
    from .trace.summary import load_trace, print_summary, summarize

    if ns.action == "report":
        return _trace_report(ns)
    if ns.action == "plot":
        from .trace.plot import plot_trace

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


def _trace_report(ns: argparse.Namespace) -> int:
    """``shoal trace report``: one line on stderr and exit 2 for a bad trace, never a traceback."""
    from .errors import ShoalError
    from .trace.read import MAX_BYTES

    out = ns.out or os.path.splitext(ns.file.removesuffix(".gz"))[0] + ".html"
    if ns.max_mb is not None and not ns.max_mb > 0:
        print(f"shoal trace report: --max-mb {ns.max_mb:g} is not valid: give a size above 0", file=sys.stderr)
        return 2
    limit = int(ns.max_mb * 2**20) if ns.max_mb is not None else MAX_BYTES
    try:
        from .trace.report import write_report

        views = [v.strip() for v in ns.views.split(",") if v.strip()] if ns.views else None
        an = write_report(ns.file, out, max_bytes=limit, **({"views": views} if views else {}))
    except ImportError as exc:
        print(f"shoal trace report: needs {exc.name or 'plotly'}: pip install plotly (or shoal[test])", file=sys.stderr)
        return 2
    except ShoalError as exc:
        print(f"shoal trace report: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"shoal trace report: {ns.file}: out of memory reading the trace; give a smaller --max-mb "
              "or record the run with --trace-summary", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a trace shoal cannot read is one line, not a traceback
        print(f"shoal trace report: cannot make a report of {ns.file!r}: {type(exc).__name__}: {exc} "
              "(a trace this shoal cannot read; please report it)", file=sys.stderr)
        return 2
    for note in an.notes:
        print(f"shoal trace report: note: {note}", file=sys.stderr)
    mode = "summary-mode trace" if an.summary_mode else f"{len(an.slice_dur):,} entry-method runs"
    print(f"{out}: {len(an.rows)} PEs, {mode}")
    return 0


def run_command(argv: list[str]) -> int:
    """Run subcommand ``argv[0]`` (or print the help); the exit code."""
    if argv and argv[0] in _SUBCOMMANDS:
        parser = _command_parser(argv[0])
        ns, extra = parser.parse_known_args(argv[1:])
        ns.command = argv[0]
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    else:
        parser = _parser()
        ns, extra = parser.parse_known_args(argv)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
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
