"""The ``shoal`` command, and ``shoal prog.py`` under any launcher.

``shoal run -n N prog.py`` starts N PEs itself (``mpiexec`` for the MPI transport, or
one process for ``--transport inproc``); ``python -m shoal prog.py`` is what each PE
runs, and what to put after ``mpiexec``/``srun`` on a cluster. This module is each PE's
entry: it runs the program, and hands any other command line to :mod:`shoal.commands`
(argparse and the subcommands), which a PE's start-up then never imports.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is for type checkers: the launcher and a PE's start-up skip its import

from . import jobwatch
from .errors import exit_code
from .settings import MAX_PES, SettingsError, load_settings

if TYPE_CHECKING:
    from typing import Any, Sequence
    from .commands import OptionParser
    from .launcher import find_mpiexec, launch_mpi

__all__ = ["command", "main", "run_program", "program_problem", "compat_problem", "check_program", "launching", "check_settings", "duration",
           "restart_path", "find_mpiexec", "launch_mpi", "OptionParser"]


def __getattr__(name: str) -> Any:
    """``find_mpiexec``, ``launch_mpi`` and ``OptionParser`` (PEP 562): the launcher and
    the subcommands are loaded by the commands that use them, not by every PE that runs
    ``python -m shoal prog.py``."""
    if name in ("find_mpiexec", "launch_mpi"):
        from . import launcher

        return getattr(launcher, name)
    if name == "OptionParser":
        from .commands import OptionParser

        return OptionParser
    raise AttributeError(f"module 'shoal.cli' has no attribute {name!r}")


_COMMANDS = ("run", "serve", "info", "bench", "cache", "trace", "checkpoint")


def run_program(path: str, args: Sequence[str], summary: bool = False) -> int:
    """Run ``path`` as ``__main__`` in this process (each PE does this); its exit code.

    Under an MPI launcher, an exception or a failing ``sys.exit`` that escapes the program
    before its job ended on every PE (one PE failing before ``shoal.start``, say) is
    printed with the PE's number and ends the whole job: the other PEs would otherwise
    wait for this one in MPI's start-up forever. With ``summary`` (``shoal run --transport
    inproc``), an in-process job that an error ended ends its report with ``shoal run``'s
    summary line (:func:`shoal.start`).
    """
    if not os.path.isfile(path):
        print(f"shoal: program {path!r} not found", file=sys.stderr)
        return 2
    if not check_program("shoal", path, quiet=jobwatch.launcher_rank() not in (None, 0)):
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
    from ._runtime import engine

    engine.in_process_summary = summary
    mpi = engine.under_mpi_launcher()
    if not mpi:  # in one process a crash (SIGSEGV, SIGABRT) ends every PE: at least its stack is shown
        import faulthandler

        faulthandler.enable()
    if mpi:
        _whole_lines()
    try:
        _run_main(path)
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


#: what a ``#!`` line may name to run a Python program: an interpreter (``python3.12``,
#: ``pypy3``, ``ipython``, ``graalpy``), shoal itself, or a tool that runs a script under one
#: (``uv run --script``, ``pipx run``); a word after the command counts too (``conda run
#: python``, ``mpiexec -n 4 python3``)
_PYTHON_PREFIXES = ("python", "pypy", "ipython", "graalpy", "jython")
_PYTHON_RUNNERS = ("shoal", "uv", "uvx", "pipx")
#: ``env``'s options that take a value (``env -u NAME python3``)
_ENV_VALUE_OPTIONS = ("-u", "--unset", "-C", "--chdir")


def program_problem(path: str) -> str | None:
    """Why the file ``path`` is not a Python program that shoal can run, or None.

    A file that ends in ``.py``/``.pyw`` is Python unless its ``#!`` line names another
    interpreter (``#!/bin/sh``: a shell script whose lines may happen to parse as Python,
    such as Charm4py's ``tests/exec.sh``, would run as a program that does nothing). Any
    other file must be compiled Python (``.pyc``), a zip application, or have a ``#!`` line
    that names Python (``#!/usr/bin/env python3``). A file that cannot be read is not
    judged here (running it says why)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError:
        return None
    name = os.path.basename(path)
    line = head.split(b"\n", 1)[0].rstrip(b"\r").decode(errors="replace") if head.startswith(b"#!") else ""
    command = _shebang_command(line)
    python_source = path.endswith((".py", ".pyw"))
    if not python_source:
        if path.endswith((".pyc", ".pyo")) or _compiled(head) or _zip_application(path):
            return None
    if command:
        if _names_python(line) or _reexecutes_as_python(head):
            return None
        return (f"{name} is not a Python program: its #! line ({line.strip()}) runs it with {command}, and shoal "
                f"would run it as Python instead. Give shoal the Python program itself (a .py file, compiled "
                f".pyc, a zip application, or a file whose #! line names python)")
    if python_source:
        return None
    return (f"{name} is not a Python program: its name does not end in .py, it has no #! line naming python, and it "
            f"is neither compiled Python (.pyc) nor a zip application. Rename it to end in .py, or make its first "
            f"line #!/usr/bin/env python3")


def compat_problem(path: str) -> str | None:
    """Why the program ``path`` needs ``--compat charm4py`` and runs without it, or None.

    A program that imports ``charm4py`` and runs without the layer gets the real Charm4py
    (which starts a separate one-PE Charm++ job on every PE, and the job ends with "no
    error from Python") or no module at all. Only import statements count (parsed with
    :mod:`ast`, in the module, its functions and classes), not the word in a comment or a
    string; a file that does not parse is left for the run to report."""
    if os.environ.get("SHOAL_COMPAT") == "charm4py":
        return None
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError:
        return None
    if b"charm4py" not in source:  # most programs: no parse
        return None
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # compiled code, a zip application, a syntax error
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            continue
        if any(m == "charm4py" or m.startswith("charm4py.") for m in modules):
            name = os.path.basename(path)
            return (f"{name} imports charm4py (line {node.lineno}) but runs without --compat charm4py: add it before "
                    f"the program (shoal run -n N --compat charm4py {name}) to run it on shoal's Charm4py layer; the "
                    f"real Charm4py would start a separate one-PE Charm++ job on every PE")
    return None


def check_program(command: str, path: str, quiet: bool = False) -> bool:
    """Refuse ``path`` where it is not a Python program (:func:`program_problem`) or needs
    ``--compat charm4py`` (:func:`compat_problem`), saying why (unless ``quiet``: another
    PE says it); True where it may run."""
    problem = program_problem(path) or compat_problem(path)
    if problem is not None and not quiet:
        print(f"{command}: {problem}", file=sys.stderr)
    return problem is None


def _shebang_command(line: str) -> str:
    """The command a ``#!`` line runs (the word after ``env`` and its options); "" without one."""
    words = [w.strip("'\"") for w in line[2:].split()]  # env -S "python3 -u"
    if not words:
        return ""
    command, rest = os.path.basename(words[0]), words[1:]
    if command == "env":
        while rest and (rest[0].startswith("-") or "=" in rest[0]):  # options, NAME=value
            rest = rest[2:] if rest[0] in _ENV_VALUE_OPTIONS else rest[1:]
        command = os.path.basename(rest[0]) if rest else "env"
    return command


def _names_python(line: str) -> bool:
    """Whether a ``#!`` line names a Python interpreter (or shoal, or a runner of Python scripts)."""
    for word in line[2:].split():
        base = os.path.basename(word.strip("'\"")).lower()
        if base.startswith(_PYTHON_PREFIXES) or base in _PYTHON_RUNNERS:
            return True
    return False


def _reexecutes_as_python(head: bytes) -> bool:
    """The shell-and-Python trick: a ``#!/bin/sh`` file whose next lines ``exec python … "$0"``
    (the shell runs the file itself under Python, which reads the exec line as a string)."""
    for raw in head.split(b"\n")[1:6]:
        text = raw.decode(errors="replace")
        if "exec" in text and "python" in text and "$0" in text:
            return True
    return False


def _compiled(head: bytes) -> bool:
    """Whether ``head`` starts with this interpreter's magic number of compiled code."""
    from importlib.util import MAGIC_NUMBER

    return head.startswith(MAGIC_NUMBER)


def _zip_application(path: str) -> bool:
    """Whether ``path`` is a zip file (a zip application: runpy runs its ``__main__.py``)."""
    import zipfile

    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _run_main(path: str) -> None:
    """Run the file ``path`` as ``__main__``, as ``runpy.run_path(path, run_name="__main__")``
    does: a ``.py`` file here, without the imports runpy makes (pkgutil: milliseconds of
    every PE's start-up); anything else (a zip application, compiled code) by runpy."""
    if not path.endswith(".py"):
        import runpy

        runpy.run_path(path, run_name="__main__")
        return
    import io

    with io.open_code(os.path.abspath(path)) as f:
        code = compile(f.read(), path, "exec", dont_inherit=True)  # not this module's __future__ flags
    module = type(sys)("__main__")
    module.__dict__.update(__file__=path, __cached__=None, __loader__=None, __package__="", __spec__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module  # the program's classes pickle as __main__.Name
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


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


def restart_path(text: str) -> str:
    """``--restart``'s value for the PEs: ``auto`` as it is, a path made absolute."""
    from ._runtime.checkpoint import AUTO

    return text if text == AUTO else os.path.abspath(text)


def launching(program: str | None = None) -> bool:
    """This process is about to launch an MPI job (``shoal run``) and will run none of its
    program: check the ``SHOAL_*`` variables every PE will read, and that ``program`` (where
    given) is a Python program, once, here, and let :func:`command` end the process
    without Python's teardown afterwards. False, having said why, where a variable is not
    valid or the program is not Python."""
    global _launcher_only
    if program is not None and os.path.isfile(program) and not check_program("shoal run", program):
        return False
    if not check_settings("run", {k: v for k, v in os.environ.items() if k != "SHOAL_PES"}, transport="mpi"):
        return False
    _launcher_only = True
    return True


def check_settings(command: str, environ: dict[str, str] | None = None, **overrides: object) -> bool:
    """Refuse bad ``SHOAL_*`` values once, in the command that starts the PEs, before any
    PE starts (each would refuse them again); False, having said why."""
    try:
        load_settings(environ, **overrides)
    except SettingsError as exc:
        print(f"shoal {command}: {exc}", file=sys.stderr)
        return False
    return True


_launcher_only = False


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


def duration(text: str) -> float:
    """``90``, ``90s``, ``5m`` or ``2h`` as seconds (ValueError saying what is wrong)."""
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], 0)
    try:
        value = float(text[:-1] if scale else text) * (scale or 1)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration such as 60, 60s, 5m or 2h") from None
    if value <= 0:
        raise ValueError(f"{text!r}: a period must be more than 0 seconds")
    return value


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
    if _launcher_only:
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
