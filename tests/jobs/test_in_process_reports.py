"""An in-process job that an error ends is reported as under MPI (issue 35, item 3): the
``shoal: PE n: …; ending the job`` header, the traceback without shoal's frames, and under
``shoal run`` the summary line; what one process cannot report is said in the docs."""

from __future__ import annotations

import pytest
from support.commands import clean_env, last_line, run_shoal

MAIN_ERROR = """
import shoal
class W(shoal.Chare):
    def f(self):
        return 1
def main(args):
    a = shoal.Array(W, 4)
    a[7].f()
shoal.start(main)
"""

ENTRY_ERROR = """
import shoal
class W(shoal.Chare):
    def f(self):
        return {}["missing"]
def main(args):
    shoal.Array(W, 4)[3].f()
    shoal.quiescence().get()
shoal.start(main)
"""


@pytest.mark.parametrize("how", ["shoal run", "python"])
def test_an_error_in_main_is_reported_as_under_mpi(tmp_path, how):
    prog = tmp_path / "p.py"
    prog.write_text(MAIN_ERROR)
    if how == "shoal run":
        proc = run_shoal("run", "-n", "2", "--transport", "inproc", str(prog))
    else:  # a plain python prog.py: in one process, without any launcher
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, str(prog)], capture_output=True, text=True, timeout=120,
                              env=clean_env(SHOAL_PES="2"))
    assert proc.returncode == 1, proc
    err = proc.stderr
    assert err.startswith("shoal: PE 0: unhandled exception in the main program (main); ending the job\n"), err
    assert "engine.py" not in err and "proxy.py" not in err and "frame(s) of shoal's internals hidden" in err, err
    said = "PE 0: unhandled exception in the main program (main): IndexError: index 7 is outside the dense array"
    if how == "shoal run":
        assert last_line(err).startswith(f"shoal run: the job failed (exit code 1): {said}"), err
    else:
        assert "shoal run:" not in err, err


def test_an_error_in_an_entry_method_names_its_pe_and_element(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(ENTRY_ERROR)
    proc = run_shoal("run", "-n", "2", "--transport", "inproc", str(prog))
    assert proc.returncode == 1, proc
    assert "shoal: PE 1: unhandled exception in W.f of element (3,); ending the job" in proc.stderr, proc
    assert last_line(proc.stderr) == (
        "shoal run: the job failed (exit code 1): PE 1: unhandled exception in W.f of element (3,): KeyError: 'missing'")


def test_a_crash_in_one_process_shows_its_stack(tmp_path):
    """One process cannot outlive a PE's SIGSEGV (docs/tutorial.md says so): its stack is shown."""
    prog = tmp_path / "p.py"
    prog.write_text("import os, signal, shoal\nclass W(shoal.Chare):\n    def f(self):\n"
                    "        os.kill(os.getpid(), signal.SIGSEGV)\n"
                    "def main(args):\n    shoal.Array(W, 4)[3].f()\n    shoal.quiescence().get()\nshoal.start(main)\n")
    proc = run_shoal("run", "-n", "2", "--transport", "inproc", str(prog))
    assert proc.returncode == -11 or proc.returncode == 139, proc
    assert "Fatal Python error: Segmentation fault" in proc.stderr and f'File "{prog}", line 4 in f' in proc.stderr, proc
