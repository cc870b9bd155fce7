"""A user's program on a PE: ``python -m shoal prog.py`` checks that the file is a Python
program shoal can run, then runs it as ``__main__``, so that an error escaping it before its
job ended is printed with the PE's number and ends the whole job rather than hang the others.
"""

from __future__ import annotations

import gc
import os
import sys

TYPE_CHECKING = False  # typing is for type checkers: a PE's start-up skips its import

from . import jobwatch
from .errors import exit_code
from .settings import SettingsError

if TYPE_CHECKING:
    from typing import Sequence

__all__ = ["run_program", "program_problem", "compat_problem", "check_program"]


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
        # What is imported so far (the interpreter's modules, shoal's runtime) lives as
        # long as the process: no collection need traverse it again, and the exit of the
        # interpreter does not (5 ms of every PE's CPU). The program's own objects are not
        # frozen: their cycles are collected as usual.
        gc.freeze()
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
