"""The command line: info, run, and running a program file under any launcher."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import shoal
from shoal.settings import MAX_PES, SettingsError, load_settings
from support.commands import clean_env, last_line, run_shoal


def _shoal(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "shoal", *argv], capture_output=True, text=True, timeout=120)


def test_info_reports_versions_library_settings_and_compiled_path():
    proc = _shoal("info")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for field in ("shoal", "numpy", "mpi4py", "mpi library", "mpi abi", "setting rendezvous_threshold", "setting tree_fanout"):
        assert field in out, out
    assert re.search(r"^compiled path +(installed extension|built on first use in) ", out, re.M), out


def test_info_inproc_needs_no_mpi():
    proc = _shoal("info", "--transport", "inproc")
    assert proc.returncode == 0 and "mpi library" not in proc.stdout


def test_missing_program_is_reported(tmp_path):
    proc = _shoal("run", "-n", "1", "--transport", "inproc", str(tmp_path / "nope.py"))
    assert proc.returncode == 2 and "not found" in proc.stderr


def test_run_inproc_passes_arguments(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import shoal\n\ndef main(args):\n    print('args', args[1:], shoal.num_pes())\n\nshoal.start(main)\n")
    proc = _shoal("run", "-n", "3", "--transport", "inproc", str(prog), "a", "--b")
    assert proc.returncode == 0, proc.stderr
    assert "args ['a', '--b'] 3" in proc.stdout


def test_bench_lists_benchmarks():
    proc = _shoal("bench", "--help")
    assert proc.returncode == 0 and "micro" in proc.stdout and "compare" in proc.stdout
    proc = _shoal("bench", "nope")
    assert proc.returncode == 2 and "unknown benchmark 'nope'" in proc.stderr


# -- absurd PE counts, settings and compilers are refused with the reason ------------------------
@pytest.mark.parametrize("pes", ["99999999999", "0", str(MAX_PES + 1)])
@pytest.mark.parametrize("transport", ["inproc", "mpi"])
def test_pe_count_out_of_range_is_refused(tmp_path, pes, transport):
    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    proc = run_shoal("run", "-n", pes, "--transport", transport, str(prog))
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert f"-n {pes} is not valid: a job has from 1 to {MAX_PES} PEs" in proc.stderr


def test_pes_setting_out_of_range_is_refused(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import shoal\nshoal.start(lambda args: print('ran'))\n")
    proc = run_shoal(str(prog), env=clean_env(SHOAL_PES="9999999999"))
    assert proc.returncode == 1 and "ran" not in proc.stdout, proc
    assert proc.stderr.strip() == (
        f"SettingsError: SHOAL_PES='9999999999' is not valid: SHOAL_PES must be from 1 to {MAX_PES}; an in-process "
        f"job needs at least 1 PE, and more than {MAX_PES} is a mistake: each costs about 12 KiB and one thread steps them all"
    )


@pytest.mark.mpi
def test_mpiexec_failing_to_start_the_pes_is_explained(tmp_path):
    import resource

    prog = tmp_path / "p.py"
    prog.write_text("print('ran')\n")
    low = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))  # noqa: E731 - mpiexec needs ~4 per PE
    proc = run_shoal("run", "-n", "100", str(prog), preexec_fn=low)
    assert proc.returncode not in (0, None), proc
    last = last_line(proc.stderr)
    assert "shoal run: mpiexec failed (exit code" in last and "before every PE started" in last, proc
    assert "the limit is 200 (ulimit -n)" in last


BAD_SETTINGS = [
    ("SHOAL_DEADLOCK_TIMEOUT", "nan"), ("SHOAL_DEADLOCK_TIMEOUT", "inf"), ("SHOAL_DEADLOCK_TIMEOUT", "-1"),
    ("SHOAL_IDLE_SPIN", "nan"), ("SHOAL_IDLE_SPIN", "inf"), ("SHOAL_IDLE_SLEEP_MAX", "nan"),
    ("SHOAL_IDLE_SLEEP_MAX", "-inf"), ("SHOAL_IDLE_SLEEP_MAX", "5"), ("SHOAL_NATIVE", "2"), ("SHOAL_NATIVE", "-1"),
    ("SHOAL_IDLE_YIELD", "7"), ("SHOAL_HEAP_REUSE", "-5"), ("SHOAL_HEAP_REUSE", str(2**31)),
    ("SHOAL_TREE_FANOUT", "1"), ("SHOAL_TREE_FANOUT", str(10**18)), ("SHOAL_FRAME_CAPACITY", "16"),
    ("SHOAL_FRAME_CAPACITY", str(2**31)), ("SHOAL_RENDEZVOUS_THRESHOLD", "-1"),
    ("SHOAL_RENDEZVOUS_THRESHOLD", str(2**40)), ("SHOAL_PES", "9999999999"), ("SHOAL_TRANSPORT", "tcp"),
    ("SHOAL_MPI_THREADS", "single"), ("SHOAL_MPI_THREADS", "MULTIPLE"),
]


@pytest.mark.parametrize("var,value", BAD_SETTINGS)
def test_bad_setting_is_refused_with_name_value_and_range(var, value):
    with pytest.raises(SettingsError) as info:
        load_settings(environ={var: value})
    text = str(info.value)
    assert text.startswith(f"{var}={value!r} is not valid: {var} must be "), text
    assert " from " in text or " one of " in text


@pytest.mark.parametrize("name,value", [("deadlock_timeout", float("nan")), ("idle_sleep_max", float("inf")),
                                        ("native", 2), ("idle_yield", 7), ("heap_reuse", -5), ("pes", 10**10)])
def test_bad_option_to_run_is_refused(name, value):
    with pytest.raises(SettingsError, match=rf"^{name}={re.escape(repr(value))} is not valid: SHOAL_{name.upper()}"):
        shoal.run(lambda args: None, [], transport="inproc", **{name: value})


@pytest.mark.parametrize("command", [("info",), ("info", "--transport", "inproc"), ("run", "-n", "2", "p.py"),
                                     ("run", "--transport", "inproc", "p.py")])
def test_bad_setting_stops_commands_before_anything_runs(tmp_path, command):
    (tmp_path / "p.py").write_text("print('ran')\n")
    proc = run_shoal(*command, env=clean_env(SHOAL_IDLE_SLEEP_MAX="nan"), cwd=tmp_path)
    assert proc.returncode == 2 and "ran" not in proc.stdout, proc
    assert proc.stderr == (f"shoal {command[0]}: SHOAL_IDLE_SLEEP_MAX='nan' is not valid: SHOAL_IDLE_SLEEP_MAX must be "
                           "from 0 to 1; seconds: an idle PE answers a message at most this late\n")


def test_defaults_are_valid():
    assert load_settings(environ={}) == shoal.settings.Settings()


def test_stencil_build_with_silent_compiler_names_the_command(tmp_path, silent_compiler, monkeypatch):
    from shoal import compiler
    from shoal.stencil import build
    from shoal.stencil.errors import CompilerError

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(compiler._found, "cc", str(silent_compiler))
    with pytest.raises(CompilerError) as info:
        build.compile_kernel("double shoal_x;\n", where="prog.py:3: ")
    text = str(info.value)
    assert text.startswith(f"prog.py:3: the compiler {silent_compiler} exited with 0 but wrote no object file"), text
    assert f"$ {silent_compiler} -O3" in text and "generated source saved in" in text


_PLAIN = [["run", "-n", "3", "prog.py", "a", "-x"], ["run", "prog.py"], ["run", "-n", "1", "p.py", "-n", "4"],
          ["run", "-n", "05", "p.py"], ["run", "p.py", "--trace", "x", "-h"]]


@pytest.mark.parametrize("argv", _PLAIN, ids=lambda a: " ".join(a))
def test_a_plain_shoal_run_launches_the_job_argparse_would(monkeypatch, argv):
    """`shoal run -n N prog.py args…` skips building argparse's parser (start-up): the job
    it launches is the one the full command line parser makes of the same words."""
    from shoal import cli, commands, launcher, options

    calls: list = []
    monkeypatch.setattr(launcher, "launch_mpi", lambda args, pes, mpiexec=None: calls.append((list(args), pes, mpiexec)) or 0)
    monkeypatch.setattr(options, "_launcher_only", False)
    for name in [k for k in os.environ if k.startswith("SHOAL_")]:
        monkeypatch.delenv(name)
    assert cli._plain_run(argv) is not None
    assert cli.main(argv) == 0 and "shoal.commands" in sys.modules  # this test imported it; main need not
    assert commands.run_command(argv) == 0
    assert len(calls) == 2 and calls[0] == calls[1], calls
    assert options.launcher_only()  # shoal run ends without Python's teardown


@pytest.mark.parametrize("argv", [["run", "-n", "2", "--trace", "t.json", "p.py"], ["run", "--pes", "2", "p.py"],
                                  ["run", "-n2", "p.py"], ["run", "-n", "0", "p.py"], ["run", "-n", str(MAX_PES + 1), "p.py"],
                                  ["run"], ["run", "-h"], ["run", "-n", "2"], ["run", "p.py", "--", "-x"],
                                  ["run", "-n", "\u00b2", "p.py"], ["info"],
                                  ["prog.py"]])
def test_every_other_command_line_goes_to_the_full_parser(argv):
    from shoal import cli

    assert cli._plain_run(argv) is None


def test_a_plain_shoal_run_checks_the_settings_once_and_refuses_a_bad_one(tmp_path):
    env = {**clean_env(), "SHOAL_TREE_FANOUT": "1"}
    proc = subprocess.run([sys.executable, "-m", "shoal", "run", "-n", "2", str(tmp_path / "p.py")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.startswith("shoal run: SHOAL_TREE_FANOUT='1' is not valid"), proc.stderr


def test_output_cut_short_by_its_reader_ends_quietly():
    """`shoal info | head -1`: the command stops without a BrokenPipeError traceback (here
    the reader is gone before the first line)."""
    proc = subprocess.Popen([sys.executable, "-m", "shoal", "info"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + 13 and err == "", err


_AS_MAIN = '''"""the program's docstring"""
import pickle, sys
import shoal

class Point:
    pass

def f(x: int) -> None:
    pass

def main(args):
    assert __name__ == "__main__" and __doc__ == "the program's docstring", (__name__, __doc__)
    assert __file__ == sys.argv[0] and __spec__ is None, (__file__, sys.argv)
    assert sys.modules["__main__"].__dict__ is globals()
    assert f.__annotations__ == {"x": int, "return": None}, f.__annotations__  # no __future__ flag inherited from shoal
    assert type(pickle.loads(pickle.dumps(Point()))) is Point
    print("as __main__: OK")

shoal.start(main)
'''


def test_a_program_runs_as_main_as_python_would_run_it(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(_AS_MAIN)
    proc = subprocess.run([sys.executable, "-m", "shoal", str(prog)], capture_output=True, text=True, timeout=120,
                          env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "as __main__: OK", proc


def test_a_zip_application_runs_too(tmp_path):
    """Anything but a .py file goes through runpy, which runs zip applications (and compiled files)."""
    import zipfile

    app = tmp_path / "app.pyz"
    with zipfile.ZipFile(app, "w") as z:
        z.writestr("__main__.py", "import sys\nprint('zip app ran with', sys.argv[1:])\n")
    proc = subprocess.run([sys.executable, "-m", "shoal", str(app), "x"], capture_output=True, text=True, timeout=120,
                          env=clean_env(), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "zip app ran with ['x']", proc
