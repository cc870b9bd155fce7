"""``shoal run`` and ``python -m shoal`` refuse a file that is not a Python program (issue 41):
Charm4py's test wrapper ``exec.sh`` parses as Python and ran as a program that did nothing,
ending the job with 0. A shell script is now refused, naming the file and why, before MPI
starts; Python files of every kind shoal runs still run.

A program that imports ``charm4py`` and runs without ``--compat charm4py`` is refused
too (issue 38): with the real Charm4py installed, each PE started a one-PE Charm++ job of
its own and the job ended with "no error from Python", with no hint."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import zipapp
from pathlib import Path

import pytest

from shoal.program import compat_problem, program_problem

SHELL_SCRIPT = '#!/bin/sh\n# Just execute the given command\n"$@"\n'  # Charm4py's tests/exec.sh, in sh
PROGRAM = "import shoal\n\ndef main(args):\n    print('ran on', shoal.num_pes(), 'PEs')\n\nshoal.start(main)\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_") or k == "SHOAL_MPIEXEC"}
    env["SHOAL_DEADLOCK_TIMEOUT"] = "0.5"
    return env


def _shoal(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True, timeout=120,
                          env=_env(), cwd=cwd)


def _no_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in mpiexec (``$SHOAL_MPIEXEC``) that leaves a mark if anything starts a job; the mark's path."""
    mark = tmp_path / "mpiexec-ran"
    stub = _write(tmp_path / "mpiexec-stub", f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    stub.chmod(0o755)
    monkeypatch.setenv("SHOAL_MPIEXEC", str(stub))
    return mark


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- what is judged a Python program -------------------------------------------------------------


@pytest.mark.parametrize(("name", "text", "interpreter"), [
    ("exec.sh", SHELL_SCRIPT, "sh"),
    ("exec.sh", '#!/bin/bash\n# Just execute the given command\n"$@"\n', "bash"),
    ("run", "#!/usr/bin/env bash\necho hi\n", "bash"),
    ("tool.pl", "#!/usr/bin/perl -w\nprint 1;\n", "perl"),
    ("wrapper.py", "#!/bin/sh\n'$@'\n", "sh"),  # a .py name does not make a shell script Python
    ("s", "#!/usr/bin/env -i FOO=1 node\n1\n", "node"),
])
def test_a_script_for_another_interpreter_is_refused(tmp_path, name, text, interpreter):
    problem = program_problem(str(_write(tmp_path / name, text)))
    assert problem is not None and problem.startswith(f"{name} is not a Python program"), problem
    assert f"runs it with {interpreter}" in problem, problem


@pytest.mark.parametrize(("name", "text"), [
    ("prog.py", "print(1)\n"),
    ("prog.pyw", "print(1)\n"),
    ("prog.py", "#!/usr/bin/env python3\nprint(1)\n"),
    ("prog", "#!/usr/bin/env python3\nprint(1)\n"),
    ("prog", "#!/usr/bin/python3.11 -u\nprint(1)\n"),
    ("prog", "#!/opt/pypy/bin/pypy3\nprint(1)\n"),
    ("prog", '#!/usr/bin/env -S "python3 -u"\nprint(1)\n'),
    ("prog", "#!/usr/bin/env -S uv run --script\nprint(1)\n"),
    ("prog", "#!/usr/bin/env -S mpiexec -n 4 python3\nprint(1)\n"),
    ("prog", "#!/usr/bin/env shoal\nprint(1)\n"),
    ("poly.py", '#!/bin/sh\n""""exec python3 "$0" "$@" # """\nprint(1)\n'),  # sh runs it again under Python
])
def test_python_programs_are_accepted(tmp_path, name, text):
    assert program_problem(str(_write(tmp_path / name, text))) is None


def test_compiled_code_and_zip_applications_are_accepted(tmp_path):
    source = _write(tmp_path / "p.py", "print(1)\n")
    assert program_problem(py_compile.compile(str(source), cfile=str(tmp_path / "p.pyc"))) is None
    (tmp_path / "compiled").write_bytes((tmp_path / "p.pyc").read_bytes())  # by its magic number, any name
    assert program_problem(str(tmp_path / "compiled")) is None
    app = tmp_path / "app"
    app.mkdir()
    _write(app / "__main__.py", "print(1)\n")
    zipapp.create_archive(app, tmp_path / "app.pyz", interpreter="/usr/bin/env python3")
    zipapp.create_archive(app, tmp_path / "app_without_line")
    assert program_problem(str(tmp_path / "app.pyz")) is None
    assert program_problem(str(tmp_path / "app_without_line")) is None


def test_a_file_without_a_python_name_or_line_is_refused_with_the_fix(tmp_path):
    problem = program_problem(str(_write(tmp_path / "notes.txt", "print(1)\n")))
    assert problem is not None and "notes.txt is not a Python program" in problem
    assert "end in .py" in problem and "#!/usr/bin/env python3" in problem, problem


# -- the commands --------------------------------------------------------------------------------


def test_shoal_run_refuses_a_shell_script_before_starting_mpi(tmp_path, monkeypatch):
    _write(tmp_path / "exec.sh", SHELL_SCRIPT)
    mark = _no_launch(tmp_path, monkeypatch)
    proc = _shoal("run", "-n", "2", "exec.sh", "python", "prog.py", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stderr.count("is not a Python program") == 1, proc.stderr  # the launcher's word, once
    assert proc.stderr.startswith("shoal run: exec.sh is not a Python program: its #! line (#!/bin/sh) runs it "
                                  "with sh"), proc.stderr
    assert proc.stdout == ""
    assert not mark.exists(), "a job was started"


def test_python_m_shoal_refuses_a_shell_script(tmp_path):
    _write(tmp_path / "exec.sh", SHELL_SCRIPT)
    proc = _shoal("exec.sh", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "shoal: exec.sh is not a Python program" in proc.stderr and "runs it with sh" in proc.stderr, proc.stderr


def test_shoal_run_inproc_refuses_a_shell_script(tmp_path):
    _write(tmp_path / "exec.sh", SHELL_SCRIPT)
    proc = _shoal("run", "-n", "2", "--transport", "inproc", "exec.sh", cwd=tmp_path)
    assert proc.returncode == 2 and "exec.sh is not a Python program" in proc.stderr, proc


@pytest.mark.mpi
def test_shoal_run_with_options_refuses_a_shell_script_once(tmp_path):
    """``shoal run`` with options other than -n parses them in shoal.commands; the job's PEs
    refuse the file there (PE 0 says why), when the launcher has not already."""
    _write(tmp_path / "exec.sh", SHELL_SCRIPT)
    proc = _shoal("run", "-n", "2", "--compat", "charm4py", "exec.sh", cwd=tmp_path)
    assert proc.returncode != 0, proc
    assert proc.stderr.count("exec.sh is not a Python program") == 1, proc.stderr


def test_python_m_shoal_runs_a_file_without_extension_whose_line_names_python(tmp_path):
    _write(tmp_path / "prog", "#!/usr/bin/env python3\n" + PROGRAM)
    proc = _shoal("prog", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "ran on 1 PEs" in proc.stdout


@pytest.mark.mpi
def test_shoal_run_runs_a_file_without_extension_whose_line_names_python(tmp_path):
    _write(tmp_path / "prog", "#!/usr/bin/env python3\n" + PROGRAM)
    proc = _shoal("run", "-n", "2", "prog", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "ran on 2 PEs" in proc.stdout


@pytest.mark.mpi
def test_shoal_run_runs_a_py_file(tmp_path):
    _write(tmp_path / "prog.py", PROGRAM)
    proc = _shoal("run", "-n", "2", "prog.py", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "ran on 2 PEs" in proc.stdout


def test_python_m_shoal_runs_a_py_file_compiled_code_and_a_zip_application(tmp_path):
    _write(tmp_path / "prog.py", PROGRAM)
    py_compile.compile(str(tmp_path / "prog.py"), cfile=str(tmp_path / "prog.pyc"))
    app = tmp_path / "app"
    app.mkdir()
    _write(app / "__main__.py", PROGRAM)
    zipapp.create_archive(app, tmp_path / "app.pyz")
    for program in ("prog.py", "prog.pyc", "app.pyz"):
        proc = _shoal(program, cwd=tmp_path)
        assert proc.returncode == 0 and "ran on 1 PEs" in proc.stdout, (program, proc)


# -- a Charm4py program without --compat charm4py --------------------------------------------------

CHARM4PY_PROGRAM = ("from charm4py import charm\n\ndef main(args):\n    print('ran on', charm.numPes(), 'PEs')\n"
                    "    charm.exit()\n\ncharm.start(main)\n")


@pytest.mark.parametrize(("text", "line"), [
    (CHARM4PY_PROGRAM, 1),
    ("import os\nimport charm4py\n", 2),
    ("import numpy as np, charm4py.threads as t\n", 1),
    ("def main():\n    from charm4py import Chare\n", 2),  # in a function
    ("try:\n    import charm4py\nexcept ImportError:\n    pass\n", 2),
])
def test_a_program_that_imports_charm4py_needs_the_layer(tmp_path, monkeypatch, text, line):
    monkeypatch.delenv("SHOAL_COMPAT", raising=False)
    path = str(_write(tmp_path / "prog.py", text))
    problem = compat_problem(path)
    assert problem is not None and problem.startswith(f"prog.py imports charm4py (line {line}) but runs without "
                                                      f"--compat charm4py: add it before the program"), problem
    monkeypatch.setenv("SHOAL_COMPAT", "charm4py")
    assert compat_problem(path) is None


@pytest.mark.parametrize("text", [
    "# runs the same as a charm4py program\nprint('charm4py')\n",  # a comment and a string
    '"""import charm4py"""\n',
    "import charm4py_tools\nfrom charm4pyx import y\n",  # other modules
    "from .charm4py import x\n",  # the program's own package's module
    "import importlib\nimportlib.import_module('charm4py')\n",  # not an import statement
    "import charm4py(\n",  # does not parse: the run says why
    PROGRAM,
])
def test_a_program_that_only_mentions_charm4py_runs_without_the_layer(tmp_path, monkeypatch, text):
    monkeypatch.delenv("SHOAL_COMPAT", raising=False)
    assert compat_problem(str(_write(tmp_path / "prog.py", text))) is None


@pytest.mark.parametrize("argv", [
    ("run", "-n", "2", "prog.py"),  # the launcher, before MPI starts
    ("run", "-n", "2", "--transport", "inproc", "prog.py"),
    ("run", "-n", "2", "--lb", "greedy", "prog.py"),  # the options' path
    ("prog.py",),  # python -m shoal, as each PE runs it
])
def test_each_command_refuses_a_charm4py_program_without_compat_in_one_line(tmp_path, argv, monkeypatch):
    _write(tmp_path / "prog.py", CHARM4PY_PROGRAM)
    mark = _no_launch(tmp_path, monkeypatch)
    proc = _shoal(*argv, cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "prog.py imports charm4py (line 1) but runs without --compat charm4py" in proc.stderr, proc.stderr
    assert not mark.exists(), "a job was started"


@pytest.mark.parametrize("transport", [pytest.param("mpi", marks=pytest.mark.mpi), "inproc"])
def test_the_same_program_runs_with_compat(tmp_path, transport):
    _write(tmp_path / "prog.py", CHARM4PY_PROGRAM)
    proc = _shoal("run", "-n", "2", "--transport", transport, "--compat", "charm4py", "prog.py", cwd=tmp_path)
    assert proc.returncode == 0, proc
    assert "ran on 2 PEs" in proc.stdout
